# Multi-node tests on one machine: network namespaces joined by a bridge play the nodes
# (scripts/netns-cluster.sh), scripts/netns-run.sh launches the perf programs across them
# (NCCL_HOSTID per node: shm inside a node, sockets between nodes). Label "multinode".
# Every test skips (exit 77) with the reason where namespaces cannot be made (not root,
# no CAP_NET_ADMIN, no iproute2) or when BRAID_SKIP_NETNS=1. See docs/multinode.md.
#
# Each test owns a namespace prefix (a hash of this build folder + its number), so tests
# can run in parallel (ctest -j) and a rerun removes what a crashed run left behind.
if(TARGET all_reduce_perf AND TARGET braid-info)
  set(_mn ${CMAKE_CURRENT_LIST_DIR}/multinode)
  set(_mn_scripts ${PROJECT_SOURCE_DIR}/scripts)
  string(MD5 _mn_hash "${CMAKE_BINARY_DIR}")
  string(SUBSTRING "${_mn_hash}" 0 4 _mn_hash)
  set(_mn_index 0)
  # mn_add(NAME script args...): one test; its prefix is passed as --prefix.
  function(mn_add name script)
    math(EXPR _i "${_mn_index} + 1")
    set(_mn_index ${_i} PARENT_SCOPE)
    add_test(NAME multinode.${name}
             COMMAND bash ${_mn}/${script} --scripts ${_mn_scripts} --prefix bmn${_mn_hash}t${_i}x
                     ${ARGN})
    set_tests_properties(multinode.${name} PROPERTIES
      LABELS "multinode" SKIP_RETURN_CODE 77 TIMEOUT 300
      # One cluster at a time: concurrent namespace setup and teardown on a loaded
      # 2-core machine made the launcher test hang once in CI.
      RESOURCE_LOCK braid_netns)
  endfunction()

  set(_mn_bin --bin $<TARGET_FILE_DIR:all_reduce_perf> --info $<TARGET_FILE:braid-info>)
  # Mild shaping keeps the runs fast; it still makes the inter-node links the slow ones.
  set(_mn_shape --rate 2gbit --delay 100us)
  set(_mn_colls all_reduce all_gather reduce_scatter alltoall broadcast reduce gather scatter
      sendrecv)

  mn_add(launcher mn_launcher.sh)
  # 2x2: the default FIFO (8 x 512 KiB slots), sizes up to 2 MiB (several slots).
  # 3x2 and cyclic: small FIFOs (8 x 8 KiB) so that sizes up to 256 KiB stream through
  # many slots and loops at a fraction of the time.
  set(_mn_small_fifo --env NCCL_BUFFSIZE=65536 -- -b 8 -e 256K -f 8 -n 1 -w 0 -c 1)
  foreach(coll ${_mn_colls})
    # Every algorithm of the collective (from braid-info) and the tuner's choice.
    mn_add(${coll}.2x2 mn_perf.sh ${_mn_bin} --nodes 2 --per 2 ${_mn_shape} ${coll})
    mn_add(${coll}.3x2 mn_perf.sh ${_mn_bin} --nodes 3 --per 2 ${_mn_shape} ${coll}
           ${_mn_small_fifo})
  endforeach()
  # Ranks interleaved over the nodes (rank r on node r % 3): node-aware algorithms must
  # not assume that a node's ranks are consecutive.
  mn_add(cyclic.3x2 mn_perf.sh ${_mn_bin} --nodes 3 --per 2 --placement cyclic ${_mn_shape}
         ${_mn_colls} ${_mn_small_fifo})
  # A killed rank (node 1) makes the others fail with an error, not hang.
  mn_add(fault.kill_rank.2x2 mn_fault.sh --bin $<TARGET_FILE_DIR:all_reduce_perf>
         --nodes 2 --victim 3)
  mn_add(fault.kill_rank.3x2 mn_fault.sh --bin $<TARGET_FILE_DIR:all_reduce_perf>
         --nodes 3 --victim 2)
  # The verdict can fail: a corrupted result is caught across nodes.
  mn_add(corrupt_detected mn_corrupt.sh --bin $<TARGET_FILE_DIR:all_reduce_perf> all_reduce)

  # In-network reductions: a braid-switch in the hub namespace (10.77.0.254), the hub's
  # ports shaped like the nodes' links. Every algorithm braid-info marks [switch], forced,
  # and the tuner's choice; a run that silently falls back to a host algorithm fails.
  if(TARGET braid-switch AND TARGET all_gather_perf AND TARGET reduce_scatter_perf)
    set(_mn_sw ${_mn_bin} --switch $<TARGET_FILE:braid-switch> ${_mn_shape})
    # 2x2: every type and op at 8 B..32 KiB, then float up to 3 MiB (the default sweeps).
    mn_add(switch.2x2 mn_switch.sh ${_mn_sw} --nodes 2 --per 2)
    # 4x1: a switch group of 4 heads and nothing else per node; float, every op.
    mn_add(switch.4x1 mn_switch.sh ${_mn_sw} --nodes 4 --per 1
           --sweep "-b 8 -e 3M -f 8 -d float -o all -n 1 -w 0 -c 1")
    # 3x2: small FIFOs (as the 3x2 tests above); a group of 3, averages over 6 ranks.
    mn_add(switch.3x2 mn_switch.sh ${_mn_sw} --nodes 3 --per 2 --env NCCL_BUFFSIZE=65536
           --sweep "-b 8 -e 256K -f 8 -d float -o all -n 1 -w 0 -c 1"
           --sweep "-b 8 -e 32K -f 64 -d all -o avg -n 1 -w 0 -c 1"
           --tuner-sweep "-b 8 -e 256K -f 8 -n 1 -w 0 -c 1")
    # Faults: a killed node head fails the job within 30 s, the switch survives and
    # serves a new job; a killed switch fails every rank within 30 s.
    mn_add(switch.kill_head.2x2 mn_switch.sh ${_mn_sw} --nodes 2 --per 2 --kill-head)
    mn_add(switch.kill_switch.2x2 mn_switch.sh ${_mn_sw} --nodes 2 --per 2 --kill-switch)
  endif()
endif()
