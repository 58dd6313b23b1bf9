# Pure helpers checked on their own, without ranks or a GPU (tests/unit/):
#   vmm_layout   the flat window map's layout (src/device/vmm.h planFlat), and the VMM
#                calls refused cleanly where CUDA is not usable
#   ctest -L unit
add_executable(braid_unit_test ${CMAKE_CURRENT_LIST_DIR}/unit/vmm_layout.cc)
target_link_libraries(braid_unit_test PRIVATE braid_static GTest::gtest_main)
gtest_discover_tests(braid_unit_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS unit TIMEOUT 60)
