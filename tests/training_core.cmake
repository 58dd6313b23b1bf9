# The training layer's compute core (training/{tensor,nn,model,optim,data}/ and
# training/dist/nccl_tp_group): kernels against naive references, finite-difference
# gradient checks in float64 of every module and of a whole tiny GPT, tensor-parallel
# equivalence on 2 thread ranks, AdamW, the datasets and the Markov corpus, and a short
# training run. Run: ctest -L training_core
if(TARGET braid_train)
  file(GLOB BRAID_TRAINING_CORE_SOURCES CONFIGURE_DEPENDS
       ${CMAKE_CURRENT_LIST_DIR}/training_core/*.cc)
  add_executable(braid_training_core_test ${BRAID_TRAINING_CORE_SOURCES})
  target_link_libraries(braid_training_core_test PRIVATE braid_train GTest::gtest_main
                        Threads::Threads)
  gtest_discover_tests(braid_training_core_test DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS training_core TIMEOUT 120 ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
endif()
