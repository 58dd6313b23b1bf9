# Tests of the side-by-side comparison (perf/compare/, scripts/run-compare.sh): the count
# rules against the perf suite's, the merge script on synthetic inputs, and the peer
# benchmarks with 2 ranks on tiny sizes (skipped, exit 77, when a benchmark is not built).

# ---- count rules and sweep of the peer benchmarks == the perf suite's -----------------
if(TARGET braid_compare_bench)
  add_executable(compare_counts_test
    ${CMAKE_CURRENT_LIST_DIR}/compare/counts_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/compare/options_test.cc
    ${PROJECT_SOURCE_DIR}/perf/pattern.cc
    ${PROJECT_SOURCE_DIR}/perf/table.cc)
  target_link_libraries(compare_counts_test PRIVATE braid_compare_bench GTest::gtest_main
                        Threads::Threads)
  gtest_discover_tests(compare_counts_test DISCOVERY_TIMEOUT 60 TEST_PREFIX "compare."
                       PROPERTIES LABELS "compare")
endif()

# ---- merge.py on synthetic JSON ----------------------------------------------------------
find_program(BRAID_COMPARE_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(BRAID_COMPARE_PYTHON NAMES python3)
add_test(NAME compare.merge
         COMMAND ${BRAID_COMPARE_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/compare/merge_test.py
                 ${PROJECT_SOURCE_DIR}/perf/compare/merge.py)
set_tests_properties(compare.merge PROPERTIES TIMEOUT 120 LABELS "compare" SKIP_RETURN_CODE 77)

# ---- the peer benchmarks, 2 ranks, 8 B..4 KiB, one repetition ----------------------------
set(_bench_sh ${CMAKE_CURRENT_LIST_DIR}/compare/bench_test.sh)
set(_mpirun "${MPIEXEC_EXECUTABLE}")
if(NOT _mpirun)
  find_program(_mpirun NAMES mpirun)
endif()
set(_mpi_bench "")
set(_gloo_bench "")
if(TARGET mpi_bench)
  set(_mpi_bench $<TARGET_FILE:mpi_bench>)
endif()
if(TARGET gloo_bench)
  set(_gloo_bench $<TARGET_FILE:gloo_bench>)
endif()
set(_braidrun "")
if(TARGET braidrun)
  set(_braidrun $<TARGET_FILE:braidrun>)
endif()
# bench_test.sh MODE LAUNCHER BENCH [RANKS_VIA]: MODE pass or corrupt.
foreach(mode pass corrupt)
  add_test(NAME compare.mpi_bench.np2.${mode}
           COMMAND bash ${_bench_sh} ${mode} mpi "${_mpirun}" "${_mpi_bench}" "${BRAID_COMPARE_PYTHON}")
  add_test(NAME compare.gloo_bench.np2.${mode}
           COMMAND bash ${_bench_sh} ${mode} gloo "${_braidrun}" "${_gloo_bench}" "${BRAID_COMPARE_PYTHON}")
  set_tests_properties(compare.mpi_bench.np2.${mode} compare.gloo_bench.np2.${mode}
                       PROPERTIES TIMEOUT 120 LABELS "compare" SKIP_RETURN_CODE 77)
endforeach()
add_test(NAME compare.gloo_bench.np4.zero_elements
         COMMAND bash ${_bench_sh} zero gloo "${_braidrun}" "${_gloo_bench}" "${BRAID_COMPARE_PYTHON}")
set_tests_properties(compare.gloo_bench.np4.zero_elements
                     PROPERTIES TIMEOUT 120 LABELS "compare" SKIP_RETURN_CODE 77)
