# Algorithm tests: every plan builder run in the one-thread simulator (no transports).

# Every *.cc of tests/algorithms/ (one file per area: collectives, plans, p2p, the
# latency-optimal builders, layouts and hierarchical builders, the cost model).
file(GLOB BRAID_ALGORITHMS_TEST_SOURCES CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_SOURCE_DIR}/algorithms/*.cc)
add_executable(braid_algorithms_test ${BRAID_ALGORITHMS_TEST_SOURCES})
target_link_libraries(braid_algorithms_test PRIVATE braid_sim braid_static GTest::gtest_main)
gtest_discover_tests(braid_algorithms_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS algorithms)
