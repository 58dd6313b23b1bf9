# The GPU test suite (tests/gpu/, label "gpu"): every collective on device buffers with
# 1..4 ranks as processes (and threads) on one GPU, CUDA Graph capture, one launch per
# group, a killed rank. Without a usable CUDA device every test skips and says why.
# Built when the CUDA toolkit is found (BRAID_HAVE_CUDA). See docs/gpu.md.
#
#   ctest -L gpu                              everything (skips without a GPU)
#   build/bin/braid_gpu_test --host-selfcheck the harness checked on host memory
#   scripts/run-gpu-tests.sh                  on a GPU machine: tests + perf suite
if(BRAID_HAVE_CUDA AND TARGET CUDA::cudart)
  file(GLOB BRAID_GPU_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/gpu/*.cc)
  add_executable(braid_gpu_test ${BRAID_GPU_TEST_SOURCES}
    ${PROJECT_SOURCE_DIR}/perf/datatypes.cc
    ${PROJECT_SOURCE_DIR}/perf/pattern.cc)
  # The repository root for "tests/gpu/..." and "perf/..."; nccl.h comes from `braid`.
  target_include_directories(braid_gpu_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(braid_gpu_test PRIVATE braid CUDA::cudart GTest::gtest Threads::Threads)
  gtest_discover_tests(braid_gpu_test DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
    PROPERTIES LABELS gpu TIMEOUT 300)

  # The harness itself, on host buffers (runs everywhere): the matrix passes on the host
  # executor, and a corrupted element is reported.
  add_test(NAME gpu.harness.host_selfcheck COMMAND braid_gpu_test --host-selfcheck)
  set_tests_properties(gpu.harness.host_selfcheck PROPERTIES LABELS gpu TIMEOUT 300)

  # The perf suite's device buffers (-D 1): a clean failure without a device, correct
  # results with one.
  if(TARGET all_reduce_perf AND TARGET d2d_bw)
    add_test(NAME gpu.perf.device_buffers
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/gpu/perf_device.sh
                     $<TARGET_FILE:braid_gpu_test> $<TARGET_FILE_DIR:all_reduce_perf>
                     ${CMAKE_CURRENT_LIST_DIR}/perf/run_perf.sh)
    set_tests_properties(gpu.perf.device_buffers PROPERTIES LABELS gpu TIMEOUT 120)
  endif()
endif()
