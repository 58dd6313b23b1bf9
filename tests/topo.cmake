# Topology tests: the XML reader/writer, hwloc detection, the shipped topologies in
# topologies/, ring/tree search and nodeTopology()'s NCCL_TOPO_FILE/NCCL_TOPO_DUMP_FILE.
file(GLOB BRAID_TOPO_TEST_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/topo/*.cc)
add_executable(braid_topo_test ${BRAID_TOPO_TEST_SOURCES})
target_link_libraries(braid_topo_test PRIVATE braid_static GTest::gtest_main)
target_compile_definitions(braid_topo_test PRIVATE
  BRAID_TOPOLOGIES_DIR="${PROJECT_SOURCE_DIR}/topologies")
gtest_discover_tests(braid_topo_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS topo)
