# braid-switch (src/tools/switch_server/: the braid_switch_server library, linked here) and
# the BraidSwitch collnet (transports/collnet_switch/, in the library):
# in-process switches with members as threads (every type/op/count, windows, a
# two-level tree), faults (wrong secret, garbage, a killed member process, another
# job going on), and the braid-switch binary as a child process (killed, SIGTERM).
#
#   build/bin: braid_<file>   one executable per tests/switch/*_test.cc   ctest -L switch

file(GLOB BRAID_SWITCH_TESTS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/switch/*_test.cc)
foreach(src ${BRAID_SWITCH_TESTS})
  get_filename_component(name ${src} NAME_WE)
  add_executable(braid_${name} ${src})
  target_link_libraries(braid_${name} PRIVATE braid_switch_server braid_static GTest::gtest_main)
  if(TARGET braid-switch)
    add_dependencies(braid_${name} braid-switch)
    target_compile_definitions(braid_${name} PRIVATE
      BRAID_SWITCH_BIN="$<TARGET_FILE:braid-switch>")
  endif()
  gtest_discover_tests(braid_${name} DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS switch TIMEOUT 180)
endforeach()
