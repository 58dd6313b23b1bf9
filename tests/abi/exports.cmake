# cmake -DCC=<C compiler> -DNM=<nm> -DBRAID_INCLUDE=<dir> -DLIB=<libnccl.so> -P exports.cmake
# Fails unless the library exports (dynamic symbol table, defined) every function that
# Braid's nccl.h declares, so that any NCCL program links and loads against it.
cmake_minimum_required(VERSION 3.22)
foreach(var CC NM BRAID_INCLUDE LIB)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "exports.cmake: -D${var}=... is required")
  endif()
endforeach()

execute_process(COMMAND ${CC} -E -P -x c -DBRAID_NO_CUDA_HEADERS -DNCCL_OS_LINUX -I${BRAID_INCLUDE}
                        ${BRAID_INCLUDE}/nccl.h
                OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "preprocessing nccl.h failed:\n${err}")
endif()
string(REGEX MATCHALL "p?nccl[A-Za-z0-9_]*[ \t\n]*\\(" calls "${text}")
set(declared "")
foreach(c ${calls})
  string(REGEX REPLACE "[ \t\n]*\\($" "" c "${c}")
  list(APPEND declared ${c})
endforeach()
list(REMOVE_DUPLICATES declared)

execute_process(COMMAND ${NM} -D --defined-only ${LIB}
                OUTPUT_VARIABLE symbols RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${LIB} failed:\n${err}")
endif()
set(missing "")
foreach(f ${declared})
  if(NOT symbols MATCHES " [TWi] ${f}\n")
    list(APPEND missing ${f})
  endif()
endforeach()
list(LENGTH declared n)
if(missing)
  message(FATAL_ERROR "${LIB} does not export: ${missing}")
endif()
message("${LIB} exports all ${n} functions of nccl.h")
