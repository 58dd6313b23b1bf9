# Tests of the parallel training layer (tests/training_parallel/): pipeline schedules
# (simulated and run on thread ranks), the DP x TP x PP mesh, parity of TP / PP / 3D
# layouts with one process, and braid-train end to end (braidrun, mpirun).
# Run: ctest -L training_parallel
if(TARGET braid_train)
  file(GLOB BRAID_TRAINING_PARALLEL_SOURCES CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_LIST_DIR}/training_parallel/*.cc)
  add_executable(braid_training_parallel_test ${BRAID_TRAINING_PARALLEL_SOURCES})
  target_include_directories(braid_training_parallel_test PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(braid_training_parallel_test PRIVATE braid_train GTest::gtest_main
                        Threads::Threads)
  gtest_discover_tests(braid_training_parallel_test DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
    TEST_PREFIX "training_parallel."
    PROPERTIES LABELS training_parallel TIMEOUT 120 ENVIRONMENT OPENBLAS_NUM_THREADS=1)
endif()

# braid-train end to end: a tiny model for a few steps under braidrun (dp=2; tp=2 x pp=2),
# a checkpoint resumed with another DP size, Open MPI's mpirun (skipped without it), a
# Slurm task environment, and clean failures. Each run takes about a second.
if(TARGET braid-train AND TARGET braidrun)
  foreach(mode braidrun braidrun-tp-pp resume mpirun slurm-env bad-layout zero3-memory)
    add_test(NAME training_parallel.braid_train.${mode}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/training_parallel/braid_train_smoke.sh
                     ${mode} $<TARGET_FILE:braid-train> $<TARGET_FILE:braidrun>)
    set_tests_properties(training_parallel.braid_train.${mode} PROPERTIES
      TIMEOUT 180 LABELS training_parallel SKIP_RETURN_CODE 77
      ENVIRONMENT OPENBLAS_NUM_THREADS=1)
  endforeach()
endif()
