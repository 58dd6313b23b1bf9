# Documentation that must follow the code.
#   docs.environment   docs/environment.md holds exactly the table `braid-info --markdown`
#                      prints from the parameter registry (fails when a variable is added,
#                      removed or re-described without updating the doc).
add_test(NAME docs.environment
         COMMAND ${CMAKE_COMMAND} -DINFO=$<TARGET_FILE:braid-info>
                 -DDOC=${PROJECT_SOURCE_DIR}/docs/environment.md
                 -P ${CMAKE_CURRENT_LIST_DIR}/docs/check_environment.cmake)
set_tests_properties(docs.environment PROPERTIES LABELS docs)

#   docs.layers        every include of the library (src/, algorithms/, transports/) runs
#                      down the layers of docs/architecture.md, except those listed in
#                      tests/docs/layer_exceptions.txt (the list may only shrink).
find_program(BRAID_DOCS_PYTHON NAMES python3)
add_test(NAME docs.layers
         COMMAND ${BRAID_DOCS_PYTHON} ${CMAKE_CURRENT_LIST_DIR}/docs/check_layers.py
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(docs.layers PROPERTIES LABELS docs TIMEOUT 60)
