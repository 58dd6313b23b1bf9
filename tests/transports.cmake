# Transport tests: local, shm and net (over the Socket network) connected end to end (threads and forked
# processes), streaming checked bytes through their FIFOs.
#
#   build/tests: braid_transports_test     ctest -L transports

file(GLOB BRAID_TRANSPORT_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/transports/*.cc)
add_executable(braid_transports_test ${BRAID_TRANSPORT_TESTS})
target_link_libraries(braid_transports_test PRIVATE braid_static GTest::gtest_main)
gtest_discover_tests(braid_transports_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS transports TIMEOUT 120)
