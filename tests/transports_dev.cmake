# Device-mode transports (ConnectContext::device): the p2p rule and descriptor, setup
# failing cleanly without CUDA, the kernel's view (DevConn) of host FIFOs, and, on a
# machine with a GPU, bytes moved through p2p / shm / net device connections.
#
#   braid_transports_dev_test      threads, one process (GPU tests skip without CUDA)
#   braid_transports_dev_mp_test   forked processes on one GPU (the parent never touches
#                                  CUDA, so its children can); skips without CUDA
#   ctest -L transports_dev

file(GLOB BRAID_TRANSPORTS_DEV_TESTS CONFIGURE_DEPENDS
  ${CMAKE_CURRENT_LIST_DIR}/transports_dev/*_test.cc)
list(FILTER BRAID_TRANSPORTS_DEV_TESTS EXCLUDE REGEX "/mp_gpu_test\\.cc$")
add_executable(braid_transports_dev_test ${BRAID_TRANSPORTS_DEV_TESTS})
target_link_libraries(braid_transports_dev_test PRIVATE braid_static GTest::gtest_main)
gtest_discover_tests(braid_transports_dev_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS transports_dev TIMEOUT 120)

add_executable(braid_transports_dev_mp_test
  ${CMAKE_CURRENT_LIST_DIR}/transports_dev/mp_gpu_test.cc)
target_link_libraries(braid_transports_dev_mp_test PRIVATE braid_static GTest::gtest_main)
gtest_discover_tests(braid_transports_dev_mp_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS transports_dev TIMEOUT 120)
