# cmake -DINFO=<braid-info> -DDOC=<docs/environment.md> -P check_environment.cmake
execute_process(COMMAND ${INFO} --markdown OUTPUT_VARIABLE table RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "braid-info --markdown failed (${rc})")
endif()
file(READ ${DOC} doc)
string(FIND "${doc}" "${table}" pos)
if(pos EQUAL -1)
  message(FATAL_ERROR "${DOC} does not contain the current variable table. Regenerate it:\n"
                      "  braid-info --markdown\nExpected table:\n${table}")
endif()
message(STATUS "docs/environment.md matches the registry")
