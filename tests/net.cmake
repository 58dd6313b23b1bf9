# Network tests: the nets under the net transport (socket, IB verbs, UCX), driven
# through the ncclNet_v11_t table itself (listen/connect/accept/isend/irecv/test), and
# the plugin loader with plugins of our own (tests/net/plugins/).
#
#   build/bin: braid_<file>   one executable per tests/net/*_test.cc   ctest -L net

file(GLOB BRAID_NET_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/net/*_test.cc)
foreach(src ${BRAID_NET_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(braid_${name} ${src})
  target_link_libraries(braid_${name} PRIVATE braid_static GTest::gtest_main)
  gtest_discover_tests(braid_${name} DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS net TIMEOUT 300)
endforeach()

# Plugins of our own, built as NCCL net plugins (C, only include/braid/net_plugin.h):
# libnccl-net-x.so exports ncclNetPlugin_v11, libnccl-net-x8.so the same net as
# ncclNetPlugin_v8, libnccl-net-broken.so no table at all, libnccl-net-failinit.so a
# table whose init fails. The tests point NCCL_NET_PLUGIN at them.
set(BRAID_XNET_SRC ${CMAKE_CURRENT_LIST_DIR}/net/plugins/xnet.c)
if(EXISTS ${BRAID_XNET_SRC})
  foreach(variant x x8 broken failinit)
    add_library(nccl-net-${variant} SHARED ${BRAID_XNET_SRC})
    set_target_properties(nccl-net-${variant} PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/test-plugins C_VISIBILITY_PRESET hidden)
    target_include_directories(nccl-net-${variant} PRIVATE ${PROJECT_SOURCE_DIR}/include)
    target_compile_options(nccl-net-${variant} PRIVATE -Wall -Wextra -Werror)
  endforeach()
  target_compile_definitions(nccl-net-x PRIVATE XNET_VERSION=11)
  # libnccl-net-x.so also carries a CollNet table (ncclCollNetPlugin_v11, "XColl").
  target_sources(nccl-net-x PRIVATE ${CMAKE_CURRENT_LIST_DIR}/net/plugins/xcoll.c)
  target_compile_definitions(nccl-net-x8 PRIVATE XNET_VERSION=8)
  target_compile_definitions(nccl-net-broken PRIVATE XNET_VERSION=0)
  target_compile_definitions(nccl-net-failinit PRIVATE XNET_VERSION=11 XNET_FAIL_INIT=1)
  foreach(src ${BRAID_NET_TESTS})
    get_filename_component(name ${src} NAME_WE)
    add_dependencies(braid_${name} nccl-net-x nccl-net-x8 nccl-net-broken nccl-net-failinit)
    target_compile_definitions(braid_${name} PRIVATE
      BRAID_TEST_PLUGIN_DIR="${PROJECT_BINARY_DIR}/test-plugins")
  endforeach()
endif()

if(EXISTS ${BRAID_XNET_SRC} AND TARGET braidrun AND TARGET all_reduce_perf)
  add_test(NAME net.plugin_e2e
           COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/net/plugin_e2e.sh $<TARGET_FILE:braidrun>
                   $<TARGET_FILE:all_reduce_perf> ${PROJECT_BINARY_DIR}/test-plugins
                   ${CMAKE_CURRENT_LIST_DIR}/perf/run_perf.sh)
  set_tests_properties(net.plugin_e2e PROPERTIES TIMEOUT 300 LABELS net)
endif()

# braid-info lists the networks and the one in use (here: our plugin, loaded by path).
if(EXISTS ${BRAID_XNET_SRC} AND TARGET braid-info)
  add_test(NAME net.braid_info COMMAND ${CMAKE_COMMAND} -E env
           NCCL_NET_PLUGIN=${PROJECT_BINARY_DIR}/test-plugins/libnccl-net-x.so
           $<TARGET_FILE:braid-info> --net)
  set_tests_properties(net.braid_info PROPERTIES LABELS net TIMEOUT 60
    DEPENDS nccl-net-x
    PASS_REGULAR_EXPRESSION "X +plugin .*libnccl-net-x.so \\(ncclNet v11\\)\n +dev 0: xnet0 .*Socket +built in.*in use: X\n")
endif()
