# Pure helpers checked on their own, without ranks or a GPU (tests/unit/):
#   vmm_layout   the flat window map's layout (src/device/vmm.h planFlat), and the VMM
#                calls refused cleanly where CUDA is not usable
#   cli.<prog>   the command line of every program (src/tools/cli.h over CLI11): --help,
#                an unknown option and a bad value (tests/unit/tools_cli.sh)
#   ctest -L unit
add_executable(braid_unit_test ${CMAKE_CURRENT_LIST_DIR}/unit/vmm_layout.cc)
target_link_libraries(braid_unit_test PRIVATE braid_static GTest::gtest_main)
gtest_discover_tests(braid_unit_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit TIMEOUT 60)

# unit_cli(TARGET NAMED BAD_ARGS...): TARGET's --help, an unknown option, and BAD_ARGS
# failing with one line that names NAMED (a program the build does not make is left out).
function(unit_cli target named)
  if(TARGET ${target})
    add_test(NAME unit.cli.${target}
             COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/unit/tools_cli.sh $<TARGET_FILE:${target}>
                     "${named}" -- ${ARGN})
    set_tests_properties(unit.cli.${target} PROPERTIES LABELS unit TIMEOUT 60)
  endif()
endfunction()
unit_cli(braidrun --nproc -n x -- true)
unit_cli(braid-info --dump --dump)
unit_cli(braid-sim --nodes --nodes 0)
unit_cli(braid-switch --timeout-ms --listen 127.0.0.1:0 --timeout-ms 0)
unit_cli(braid-doctor "")
unit_cli(braid-train --steps --steps x)
unit_cli(all_reduce_perf --average -a 7)
unit_cli(sendrecv_perf --minbytes -b 5Q)
unit_cli(membw -s -s 1X)
unit_cli(handoff -n -n 0)
unit_cli(d2d_bw -b -b 5Q)
unit_cli(gloo_bench -C -C allreduce)
unit_cli(mpi_bench -c -c 2)
