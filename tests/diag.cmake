# Diagnosis (src/diag): the collective fingerprints of BRAID_CHECK, the flight
# recorder's JSON; the JSON reader and braid-doctor's diagnosis on made-up records
# (src/tools/doctor/: the braid_doctor_core library, linked here). The
# end-to-end cases (real hangs, dead ranks, SIGUSR1, mismatches on threads and
# processes) are in tests/multirank/diagnosis.cc.   ctest -L diag
add_executable(braid_diag_test ${CMAKE_CURRENT_LIST_DIR}/diag/diag_test.cc)
target_link_libraries(braid_diag_test PRIVATE braid_doctor_core braid_static GTest::gtest_main)
gtest_discover_tests(braid_diag_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS diag TIMEOUT 60)
