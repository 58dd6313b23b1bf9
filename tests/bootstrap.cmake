# Sockets (src/net) and the bootstrap network (src/bootstrap).
#
#   bootstrap_test   GoogleTest: SockAddr parsing, Socket deadlines/abort/retries,
#                    NCCL_SOCKET_IFNAME selection, unique ids, bootstrap jobs with ranks as
#                    threads (1, 2, 3, 8) and as processes (the test binary re-executes itself
#                    with --bootstrap-rank), wrong secret, NCCL_COMM_ID, timeouts, abort.

file(GLOB bootstrap_test_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/bootstrap/*.cc)
add_executable(bootstrap_test ${bootstrap_test_sources})
target_link_libraries(bootstrap_test PRIVATE braid_static)
target_link_libraries(bootstrap_test PRIVATE GTest::gtest)
gtest_discover_tests(bootstrap_test DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT 120 LABELS bootstrap)
