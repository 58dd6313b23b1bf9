# Tests of the collective perf suite (perf/) and of braidrun (src/tools/braidrun.cc).

# ---- host helpers of the suite and its command line (no library needed) -----------------
if(TARGET braid_perf_options)
  add_executable(perf_helpers_test
    ${CMAKE_CURRENT_LIST_DIR}/perf/perf_helpers_test.cc
    ${CMAKE_CURRENT_LIST_DIR}/perf/options_test.cc
    ${PROJECT_SOURCE_DIR}/perf/pattern.cc
    ${PROJECT_SOURCE_DIR}/perf/table.cc)
  target_compile_definitions(perf_helpers_test PRIVATE BRAID_NO_CUDA_HEADERS)
  target_link_libraries(perf_helpers_test PRIVATE braid_perf_options GTest::gtest_main
                        Threads::Threads)
  gtest_discover_tests(perf_helpers_test DISCOVERY_TIMEOUT 60 TEST_PREFIX "perf."
                       PROPERTIES LABELS "perf")
endif()

# ---- braidrun on its own (plain shell programs as ranks) ------------------------------
if(TARGET braidrun)
  add_test(NAME perf.braidrun.behaviour
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/perf/braidrun_test.sh $<TARGET_FILE:braidrun>)
  set_tests_properties(perf.braidrun.behaviour PROPERTIES TIMEOUT 120 LABELS "perf")
endif()

# ---- the perf programs over the library -----------------------------------------------
if(TARGET all_reduce_perf)
  set(_run ${CMAKE_CURRENT_LIST_DIR}/perf/run_perf.sh)
  set(_small -b 8 -e 256K -f 8 -n 2 -w 1 -c 1)
  # perf_test(NAME MODE [json FILE] -- command...)
  function(perf_test name)
    add_test(NAME perf.${name} COMMAND bash ${_run} ${ARGN})
    set_tests_properties(perf.${name} PROPERTIES TIMEOUT 300 LABELS "perf")
  endfunction()

  perf_test(all_reduce.threads2 pass -- $<TARGET_FILE:all_reduce_perf> -t 2 ${_small})
  perf_test(all_reduce.threads3 pass -- $<TARGET_FILE:all_reduce_perf> -t 3 ${_small})
  perf_test(all_reduce.types_ops.threads3 pass --
            $<TARGET_FILE:all_reduce_perf> -t 3 -b 0 -e 4K -f 16 -n 1 -w 0 -d all -o all)
  perf_test(all_reduce.agg_cycles_min pass --
            $<TARGET_FILE:all_reduce_perf> -t 2 -b 1K -e 3K -i 1K -n 2 -w 1 -m 3 -N 2 -a 2)
  perf_test(all_reduce.group_initall pass --
            $<TARGET_FILE:all_reduce_perf> -g 2 ${_small})
  perf_test(all_reduce.threads2_group2 pass --
            $<TARGET_FILE:all_reduce_perf> -t 2 -g 2 ${_small})
  foreach(coll all_gather reduce_scatter broadcast reduce alltoall gather scatter sendrecv)
    perf_test(${coll}.threads2 pass -- $<TARGET_FILE:${coll}_perf> -t 2 ${_small})
    perf_test(${coll}.types.threads3 pass --
              $<TARGET_FILE:${coll}_perf> -t 3 -b 0 -e 2K -f 32 -n 1 -w 0 -d all -o all -r -1)
  endforeach()
  perf_test(all_gather.json json ${CMAKE_CURRENT_BINARY_DIR}/perf_all_gather.json --
            $<TARGET_FILE:all_gather_perf> -t 2 ${_small}
            -J ${CMAKE_CURRENT_BINARY_DIR}/perf_all_gather.json)
  perf_test(all_reduce.corrupt_detected corrupt -- $<TARGET_FILE:all_reduce_perf> -t 2 ${_small})
  perf_test(reduce.corrupt_detected corrupt --
            $<TARGET_FILE:reduce_perf> -t 3 -r 2 -b 64 -e 64 -n 1 -w 0)
  if(TARGET braidrun)
    perf_test(all_reduce.processes2 pass --
              $<TARGET_FILE:braidrun> -n 2 -- $<TARGET_FILE:all_reduce_perf> ${_small})
    perf_test(all_reduce.processes2_threads2 pass --
              $<TARGET_FILE:braidrun> -n 2 -- $<TARGET_FILE:all_reduce_perf> -t 2 ${_small})
    perf_test(sendrecv.processes3 pass --
              $<TARGET_FILE:braidrun> -n 3 -- $<TARGET_FILE:sendrecv_perf> ${_small})
    perf_test(all_reduce.processes2.corrupt_detected corrupt --
              $<TARGET_FILE:braidrun> -n 2 -- $<TARGET_FILE:all_reduce_perf> ${_small})
  endif()
  if(BRAID_PERF_HAVE_MPI AND MPIEXEC_EXECUTABLE)
    # mpirun without NCCL_COMM_ID: the unique id travels by MPI_Bcast.
    perf_test(all_reduce.mpirun2 pass --
              ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe -np 2
              $<TARGET_FILE:all_reduce_perf> ${_small})
  endif()
endif()
