# Soak (tests/soak/): braid_soak runs random collectives, sizes, types, ops, groups and
# communicator splits on 8 ranks (threads or forked processes) for a given time, checks
# every result, and requires RSS, open fds and /dev/shm segments to stay flat (median of
# the last third of the samples vs the middle third: private RSS (resident - shared) +8 MiB and fds +2 per process,
# shm +0; no segment left at the end). The ctest cases are short (20-25 s each: the first
# iteration, every collective with every root, takes 10-15 s when the suite runs beside
# them, and the verdict needs 9 samples after it);
# scripts/run-soak.sh runs the long one. Run: ctest -L soak
add_executable(braid_soak
  ${CMAKE_CURRENT_LIST_DIR}/soak/main.cc
  ${CMAKE_CURRENT_LIST_DIR}/soak/rank.cc
  ${CMAKE_CURRENT_LIST_DIR}/soak/ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/soak/elements.cc
  ${CMAKE_CURRENT_LIST_DIR}/soak/sampler.cc
  ${CMAKE_CURRENT_LIST_DIR}/multirank/data.cc)  # element codings shared with multirank
# The repository root for "tests/soak/..."; nccl.h from the `braid` target.
target_include_directories(braid_soak PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(braid_soak PRIVATE braid GTest::gtest Threads::Threads)

# The threads run holds all 8 ranks (their FIFOs, plan caches and executor scratch) in
# one process: 8 MiB per rank of room there, as for a process of one rank (its RSS swings
# by tens of MiB with the ranks' temporary buffers, with or without the flag board). A
# leak shows in the long run's slope (scripts/run-soak.sh). Its open fds are the
# bootstrap sockets of 8 ranks' communicators, which rotations, splits and lazily opened
# peer sockets move between about 69 and 147 during a run (measured): only the fds after
# destroying everything (against those before init) are judged there.
add_test(NAME soak.threads COMMAND braid_soak --mode threads --ranks 8 --seconds 25
         --seed 7 --sample-seconds 0.5 --rss-tol-mib 64 --no-fd-trend)
add_test(NAME soak.procs COMMAND braid_soak --mode procs --ranks 8 --seconds 25
         --seed 7 --sample-seconds 0.5)
set_tests_properties(soak.threads soak.procs PROPERTIES LABELS soak TIMEOUT 400)
# Processes over sockets: the net transport's connections through splits.
add_test(NAME soak.procs_socket COMMAND braid_soak --mode procs --ranks 4 --seconds 20
         --seed 11 --sample-seconds 0.5 --transport socket --max-block-bytes 1M)
set_tests_properties(soak.procs_socket PROPERTIES LABELS soak TIMEOUT 400)
# The checker itself: one result changed on purpose must be reported as one wrong op.
add_test(NAME soak.detects_corruption COMMAND braid_soak --mode threads --ranks 4
         --iterations 40 --seed 5 --sample-seconds 0.2 --corrupt-iteration 3)
set_tests_properties(soak.detects_corruption PROPERTIES LABELS soak TIMEOUT 300
                     PASS_REGULAR_EXPRESSION "wrong=1 errors=0")
