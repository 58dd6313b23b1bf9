# Documentation that must follow the code.
#   docs.environment   docs/environment.md holds exactly the table `braid-info --markdown`
#                      prints from the parameter registry (fails when a variable is added,
#                      removed or re-described without updating the doc).
add_test(NAME docs.environment
         COMMAND ${CMAKE_COMMAND} -DINFO=$<TARGET_FILE:braid-info>
                 -DDOC=${PROJECT_SOURCE_DIR}/docs/environment.md
                 -P ${CMAKE_CURRENT_LIST_DIR}/docs/check_environment.cmake)
set_tests_properties(docs.environment PROPERTIES LABELS docs)
