# The installed tree (cmake/install.cmake), used as a user would:
#   install.tree   cmake --install into a scratch prefix, then: the layout; a program
#                  built with find_package(Braid) against Braid::nccl and Braid::braid; the
#                  same program built with pkg-config nccl and braid; installed programs
#                  (braid-info, all_reduce_perf) running from the prefix through RPATH.
add_test(NAME install.tree
         COMMAND ${CMAKE_CURRENT_LIST_DIR}/install/check_install.sh ${PROJECT_BINARY_DIR}
                 ${CMAKE_CURRENT_BINARY_DIR}/install-scratch ${CMAKE_COMMAND}
                 ${CMAKE_CXX_COMPILER})
set_tests_properties(install.tree PROPERTIES LABELS install TIMEOUT 600)
