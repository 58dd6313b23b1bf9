# Reducer and narrow-float conversions (src/reduce).
add_executable(reduce_test
  ${CMAKE_CURRENT_LIST_DIR}/reduce/float_types_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduce/reducer_test.cc)
target_link_libraries(reduce_test PRIVATE braid_static GTest::gtest_main)

# With CUDA's headers installed, also compare against CUDA's host implementation of the
# fp8 conversions and of NCCL's half-precision fp8/fp16/bf16 arithmetic (no GPU needed).
find_path(BRAID_CUDA_FP8_INCLUDE cuda_fp8.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include NO_DEFAULT_PATH)
if(BRAID_CUDA_FP8_INCLUDE)
  target_sources(reduce_test PRIVATE ${CMAKE_CURRENT_LIST_DIR}/reduce/nccl_arith_test.cc)
  # SYSTEM: after our own include/ (so our nccl.h wins), and no warnings from CUDA headers.
  target_include_directories(reduce_test SYSTEM PRIVATE ${BRAID_CUDA_FP8_INCLUDE})
  target_compile_definitions(reduce_test PRIVATE BRAID_TEST_CUDA_FP8=1)
endif()

gtest_discover_tests(reduce_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS reduce)
