# The CUDA executor's host-side logic, without a GPU: how a communicator's ops are
# packed into kernel launches (stages, send/recv lanes, kernel keys, limits, scratch,
# streams), and what an op on device buffers does on a machine without CUDA.
#   ctest -L device_exec
add_executable(braid_device_exec_test
  ${CMAKE_CURRENT_LIST_DIR}/device_exec/launch_plan_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/device_exec/no_device_test.cc)
target_link_libraries(braid_device_exec_test PRIVATE braid_static GTest::gtest_main)
gtest_discover_tests(braid_device_exec_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS device_exec TIMEOUT 120)
