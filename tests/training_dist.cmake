# Tests of the training layer's data parallelism (tests/training_dist/): ProcessGroup,
# launch environment parsing, DDP, ZeRO-1/2/3, sharded and asynchronous checkpoints, the
# elastic membership agreement. Ranks run as threads of one process (one
# ncclCommInitRank each) except the launch test, which starts real processes with
# braidrun, and the elastic braid-train tests (processes). Run: ctest -L training_dist
if(TARGET braid_train)
  file(GLOB BRAID_TRAINING_DIST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/training_dist/*.cc)
  add_executable(braid_training_dist_test ${BRAID_TRAINING_DIST_SOURCES})
  target_include_directories(braid_training_dist_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(braid_training_dist_test PRIVATE braid_train GTest::gtest_main Threads::Threads)
  gtest_discover_tests(braid_training_dist_test DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS training_dist TIMEOUT 120 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")

  # launch.cc in real processes: braidrun sets RANK/WORLD_SIZE/.../NCCL_COMM_ID.
  add_executable(braid_training_launch_probe ${CMAKE_CURRENT_LIST_DIR}/training_dist/probe/launch_probe.cc)
  target_link_libraries(braid_training_launch_probe PRIVATE braid_train)
  if(TARGET braidrun)
    add_test(NAME training_dist.launch.braidrun
             COMMAND $<TARGET_FILE:braidrun> -n 3 -- $<TARGET_FILE:braid_training_launch_probe>)
    add_test(NAME training_dist.launch.torchrun_env_without_comm_id
             COMMAND $<TARGET_FILE:braidrun> -n 2 -- $<TARGET_FILE:braid_training_launch_probe> --unset-comm-id)
    add_test(NAME training_dist.launch.mpi_env
             COMMAND $<TARGET_FILE:braidrun> -n 2 -- $<TARGET_FILE:braid_training_launch_probe> --as-mpi)
    add_test(NAME training_dist.launch.slurm_env
             COMMAND $<TARGET_FILE:braidrun> -n 2 -- $<TARGET_FILE:braid_training_launch_probe> --as-slurm)
    set_tests_properties(training_dist.launch.braidrun training_dist.launch.torchrun_env_without_comm_id
      training_dist.launch.mpi_env training_dist.launch.slurm_env
      PROPERTIES LABELS training_dist TIMEOUT 60 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
  endif()

  # Elastic braid-train: a rank SIGKILLed mid-training, the survivors shrink and resume
  # from the last complete checkpoint (processes started by the script itself).
  if(TARGET braid-train)
    foreach(mode shrink kill9 refuse)
      add_test(NAME training_dist.elastic.${mode}
               COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/training_dist/elastic_smoke.sh ${mode}
                       $<TARGET_FILE:braid-train>)
      set_tests_properties(training_dist.elastic.${mode} PROPERTIES
        LABELS training_dist TIMEOUT 120 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
    endforeach()
  endif()
endif()
