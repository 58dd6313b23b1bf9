# The plan simulator (tests/sim/): runs a plan's programs for every rank in one thread
# over in-memory FIFOs and checks the result (used by the algorithm and device-emulation
# tests). A test harness, so it lives with the tests, not in the library.
add_library(braid_sim STATIC ${CMAKE_CURRENT_LIST_DIR}/sim/simulator.cc)
target_link_libraries(braid_sim PUBLIC braid_static)
