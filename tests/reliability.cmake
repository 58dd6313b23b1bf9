# Reliability (tests/reliability/): braid_fault_campaign runs short jobs of 4 ranks as
# processes over host memory, each with one injected fault (a rank SIGKILLed before,
# during or right after each collective or while it makes its connections, over shm and
# sockets; a rank stopped (SIGSTOP: alive, silent); a rank's TCP connections reset;
# the job's /dev/shm segments removed; the braid-switch killed), and checks that every
# survivor fails within 2 x BRAID_TIMEOUT_MS naming a rank, that nothing hangs (hard cap
# 4 x the timeout) and that no /dev/shm segment is left. The ctest cases are a handful
# of representative jobs; scripts/fault-campaign.sh runs all of them and prints the
# table. Run: ctest -L faults
add_executable(braid_fault_campaign
  ${CMAKE_CURRENT_LIST_DIR}/reliability/campaign.cc
  ${CMAKE_CURRENT_LIST_DIR}/reliability/fault_job.cc)
target_include_directories(braid_fault_campaign PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(braid_fault_campaign PRIVATE braid Threads::Threads)
if(TARGET braid-switch)
  add_dependencies(braid_fault_campaign braid-switch)
  target_compile_definitions(braid_fault_campaign PRIVATE
    BRAID_SWITCH_BIN="$<TARGET_FILE:braid-switch>")
endif()

foreach(job
    kill.shm.allreduce.mid.r1
    kill.shm.sendrecv.after.r1
    kill.socket.alltoall.before.r2
    kill.socket.reducescatter.mid.r1
    kill.socket.alltoall.setup.r2
    stop.shm.allreduce.mid.r0
    reset.socket.allgather.mid.r0
    unlink-setup.shm.allreduce.setup
    switch.auto.collnet_chain.mid)
  add_test(NAME faults.${job} COMMAND braid_fault_campaign --timeout-ms 5000 --only ${job})
  set_tests_properties(faults.${job} PROPERTIES LABELS faults TIMEOUT 180)
endforeach()
