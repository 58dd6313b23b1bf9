# Algorithm tests: every plan builder run in the one-thread simulator (no transports).

add_executable(braid_algorithms_test
  ${CMAKE_CURRENT_SOURCE_DIR}/algorithms/values.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/algorithms/sim_case.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/algorithms/collectives_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/algorithms/plan_test.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/algorithms/sendrecv_test.cc)
target_link_libraries(braid_algorithms_test PRIVATE braid_static GTest::gtest_main)
gtest_discover_tests(braid_algorithms_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS algorithms)
