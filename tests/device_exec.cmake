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

# The kernels' resource gate (tests/device_exec/resource_gate.py): every kernel in the
# library's fatbinary has no local memory and no stack, at most 128 registers and at
# most 4 KiB of parameters. Reads the built library with cuobjdump (the CUDA toolkit's,
# or Triton's in <build>/venv); skips, saying so, where there is none.
if(BRAID_HAVE_CUDA)
  find_program(BRAID_GATE_PYTHON NAMES python3)
  add_test(NAME device_exec.resource_gate
           COMMAND ${BRAID_GATE_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/device_exec/resource_gate.py
                   $<TARGET_FILE:braid>)
  set_tests_properties(device_exec.resource_gate PROPERTIES LABELS device_exec TIMEOUT 120
                       SKIP_RETURN_CODE 77)
endif()
