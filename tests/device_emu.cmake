# The CUDA executor's data path, tested on the host: DevPlan compilation, the device
# reduction functors against the host Reducer, and every collective run through the
# kernel's interpreter (emulateDevBlock: a CUDA block as 4 host threads sharing its
# shared memory and barrier, BRAID_EMU_BLOCK_THREADS) over host-memory FIFOs, compared
# byte for byte with the host executor. No GPU needed.
# Run: ctest -L device   (also labelled multirank, so the sanitizer runs include it)
file(GLOB BRAID_DEVICE_EMU_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/device_emu/*.cc)
add_executable(braid_device_emu_test ${BRAID_DEVICE_EMU_SOURCES})
target_link_libraries(braid_device_emu_test PRIVATE braid_sim braid_static GTest::gtest_main Threads::Threads)
gtest_discover_tests(braid_device_emu_test DISCOVERY_TIMEOUT 60
  TEST_LIST BRAID_DEVICE_EMU_TESTS PROPERTIES LABELS device TIMEOUT 120)
# A second label (gtest_discover_tests cannot pass a list): multirank, so the
# sanitizer runs of the multi-rank suites include these threads-as-blocks tests too.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/device_emu_labels.cmake
  "foreach(t IN LISTS BRAID_DEVICE_EMU_TESTS)\n"
  "  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"device;multirank\")\n"
  "endforeach()\n")
set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES
  ${CMAKE_CURRENT_BINARY_DIR}/device_emu_labels.cmake)
