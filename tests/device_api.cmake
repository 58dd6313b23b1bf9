# NCCL's device API on Braid (tests/device_api/, label device_api). See docs/device-api.md.
#
#   device_api.layout    sizes, offsets, enumerators, initializers, host function types
#                        and the inline team arithmetic: Braid's nccl_device.h against
#                        NVIDIA's 2.30.7 (the nvidia-nccl-cu13 wheel in <build>/venv),
#                        line for line; skipped (77) without that wheel
#   DevCommPlan.*        what ncclDevCommCreate accepts and the resource window's layout
#   device_api.program   a program using the device API as nccl-tests does, built with
#                        nvcc (sm_80, sm_90) against Braid's headers alone: host checks on
#                        thread ranks everywhere; with a GPU also LSA all-reduce, barriers
#                        and device pointers on 2 thread ranks (scripts/run-gpu-tests.sh
#                        runs it with 2 and 4)
# Run: ctest -L device_api
add_executable(braid_device_api_test ${CMAKE_CURRENT_LIST_DIR}/device_api/dev_comm_plan_test.cc)
target_link_libraries(braid_device_api_test PRIVATE braid_static GTest::gtest_main)
gtest_discover_tests(braid_device_api_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS device_api)

set(device_api_probe ${CMAKE_CURRENT_LIST_DIR}/device_api/layout_probe.cc)
set(device_api_flags -Wall -Wextra -Werror -Wno-missing-field-initializers
                     -Wno-unused-function)
add_executable(device_api_probe_braid ${device_api_probe})
target_include_directories(device_api_probe_braid BEFORE PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(device_api_probe_braid PRIVATE PROBE_BRAID BRAID_NO_CUDA_HEADERS)
target_compile_options(device_api_probe_braid PRIVATE ${device_api_flags})
if(abi_have_nvidia_header)
  add_executable(device_api_probe_nvidia ${device_api_probe})
  target_include_directories(device_api_probe_nvidia BEFORE PRIVATE ${abi_nvidia_include}
                             ${BRAID_CUDA_INCLUDE})
  target_compile_definitions(device_api_probe_nvidia PRIVATE PROBE_NVIDIA)
  target_compile_options(device_api_probe_nvidia PRIVATE ${device_api_flags})
  add_test(NAME device_api.layout COMMAND ${CMAKE_COMMAND}
           -DA=$<TARGET_FILE:device_api_probe_braid> -DB=$<TARGET_FILE:device_api_probe_nvidia>
           -P ${PROJECT_SOURCE_DIR}/tests/abi/compare_outputs.cmake)
  set_tests_properties(device_api.layout PROPERTIES LABELS "device_api;abi")
else()
  add_test(NAME device_api.layout COMMAND sh -c "echo 'SKIPPED: ${abi_why}'; exit 77")
  set_tests_properties(device_api.layout PROPERTIES SKIP_RETURN_CODE 77 LABELS "device_api;abi")
endif()

if(BRAID_HAVE_CUDA AND TARGET CUDA::cudart)
  add_executable(braid_device_api_program ${CMAKE_CURRENT_LIST_DIR}/device_api/lsa_program.cu)
  # Only Braid's include/ (nccl.h, nccl_device.h); the program #errors on another header.
  target_include_directories(braid_device_api_program BEFORE PRIVATE
                             ${PROJECT_SOURCE_DIR}/include)
  set_target_properties(braid_device_api_program PROPERTIES CUDA_ARCHITECTURES "80;90")
  target_compile_options(braid_device_api_program PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra>)
  target_link_libraries(braid_device_api_program PRIVATE nccl CUDA::cudart)
  add_test(NAME device_api.program COMMAND braid_device_api_program 2)
  set_tests_properties(device_api.program PROPERTIES LABELS device_api TIMEOUT 120)
endif()
