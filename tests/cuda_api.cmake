# The CUDA runtime door and the memory API (tests/cuda_api/): cudart's answers without a
# usable GPU (CI: the toolkit but no driver), ncclMemAlloc/ncclMemFree, ncclCommRegister
# and its registry, and a fresh process that dlopens libnccl.so.2 and runs on host memory.
# The GPU tests of the same binary skip with "no CUDA device: <reason>" here.
# Run: ctest -L cuda_api   (or build-*/bin/braid_cuda_api_test)
add_executable(braid_cuda_api_dlopen_probe ${CMAKE_CURRENT_LIST_DIR}/cuda_api/dlopen_probe.cc)
# Only the public header, on its no-CUDA path; nothing of Braid is linked.
target_include_directories(braid_cuda_api_dlopen_probe PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(braid_cuda_api_dlopen_probe PRIVATE BRAID_NO_CUDA_HEADERS)
target_link_libraries(braid_cuda_api_dlopen_probe PRIVATE ${CMAKE_DL_LIBS})

add_executable(braid_cuda_api_test
  ${CMAKE_CURRENT_LIST_DIR}/cuda_api/main.cc
  ${CMAKE_CURRENT_LIST_DIR}/cuda_api/cudart_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/cuda_api/mem_reg_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/cuda_api/dlopen_test.cc)
# White-box: braid_static brings the library's internals and, with BRAID_HAVE_CUDA, the
# one static CUDA runtime (the GPU tests call CUDA directly through the same copy) and
# its headers.
target_link_libraries(braid_cuda_api_test PRIVATE braid_static GTest::gtest Threads::Threads)
target_compile_definitions(braid_cuda_api_test PRIVATE
  CUDA_API_PROBE="$<TARGET_FILE:braid_cuda_api_dlopen_probe>"
  CUDA_API_LIBNCCL="$<TARGET_SONAME_FILE:nccl>")
add_dependencies(braid_cuda_api_test braid_cuda_api_dlopen_probe nccl)
gtest_discover_tests(braid_cuda_api_test DISCOVERY_TIMEOUT 60
  PROPERTIES LABELS cuda_api TIMEOUT 120)
