# Multi-rank end-to-end suites of the public API (tests/multirank/): collectives,
# types x ops, groups, communicators, host streams, API errors and faults, on N ranks as
# threads (ncclCommInitAll / ncclCommInitRank) and as forked processes, over the local,
# shm and socket transports. Linked against the shared library `braid` only, so they also
# prove the exported symbol set. Run: ctest -L multirank
file(GLOB BRAID_MULTIRANK_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/multirank/*.cc)
add_executable(braid_multirank_test ${BRAID_MULTIRANK_SOURCES})
# The repository root only for "tests/multirank/harness.h"; library headers come from
# the `braid` target's public include directory (include/).
target_include_directories(braid_multirank_test PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(braid_multirank_test PRIVATE braid GTest::gtest_main Threads::Threads)
# collnet.cc runs the aggregation switch as a child process.
add_dependencies(braid_multirank_test braid-switch braid-info braid-doctor)
target_compile_definitions(braid_multirank_test PRIVATE
  BRAID_SWITCH_BIN="$<TARGET_FILE:braid-switch>" BRAID_INFO_BIN="$<TARGET_FILE:braid-info>"
  BRAID_DOCTOR_BIN="$<TARGET_FILE:braid-doctor>")
gtest_discover_tests(braid_multirank_test DISCOVERY_TIMEOUT 60 NO_PRETTY_VALUES
  PROPERTIES LABELS multirank TIMEOUT 300)
