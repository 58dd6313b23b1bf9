# Tuner tests (tests/tuner/): NCCL_ALGO/NCCL_PROTO syntax, the cost model and its file
# format, the plan cache (LRU), the tuner's choices on described layouts, ncclGroupSimulateEnd, and the
# NCCL_DEBUG_SUBSYS=TUNING log of real runs. Run: ctest -L tuner
add_executable(braid_tuner_test ${CMAKE_CURRENT_SOURCE_DIR}/tuner/tuner_test.cc
                                ${CMAKE_CURRENT_SOURCE_DIR}/tuner/cost_test.cc
                                ${CMAKE_CURRENT_SOURCE_DIR}/tuner/plan_cache_test.cc)
target_link_libraries(braid_tuner_test PRIVATE braid_static GTest::gtest_main)
gtest_discover_tests(braid_tuner_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS tuner)

# Real runs need the perf suite (not built in the sanitizer builds).
if(TARGET all_reduce_perf AND TARGET braidrun)
  add_test(NAME tuner.tuning_log
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tuner/tuning_log_test.sh
                   $<TARGET_FILE:braidrun> $<TARGET_FILE:all_reduce_perf>)
  set_tests_properties(tuner.tuning_log PROPERTIES LABELS tuner TIMEOUT 120)
endif()

add_test(NAME tuner.calibrate COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tuner/calibrate_test.py)
set_tests_properties(tuner.calibrate PROPERTIES LABELS tuner TIMEOUT 60)
