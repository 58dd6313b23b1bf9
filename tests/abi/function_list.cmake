# cmake -DCC=<C compiler> -DBRAID_INCLUDE=<dir> -DNVIDIA_INCLUDE=<dir> -DCUDA_INCLUDE=<dir> \
#       -DSIG=<probe> -P function_list.cmake
# The set of functions each nccl.h declares: both headers are preprocessed (no comments,
# no macros) and every identifier p?nccl... followed by "(" is collected. Fails unless the
# two sets are equal and signature_probe (SIG) prints a signature for every one of them,
# so a function added to one header cannot slip past the signature comparison.
# NCCL_OS_LINUX is defined, as the probes do, so that ncclResetDebugInit is declared.
cmake_minimum_required(VERSION 3.22)
foreach(var CC BRAID_INCLUDE NVIDIA_INCLUDE CUDA_INCLUDE SIG)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "function_list.cmake: -D${var}=... is required")
  endif()
endforeach()

function(declared_functions out header)
  execute_process(COMMAND ${CC} -E -P -x c ${ARGN} ${header}
                  OUTPUT_VARIABLE text RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "preprocessing ${header} failed:\n${err}")
  endif()
  string(REGEX MATCHALL "p?nccl[A-Za-z0-9_]*[ \t\n]*\\(" calls "${text}")
  set(names "")
  foreach(c ${calls})
    string(REGEX REPLACE "[ \t\n]*\\($" "" c "${c}")
    list(APPEND names ${c})
  endforeach()
  list(REMOVE_DUPLICATES names)
  list(SORT names)
  set(${out} ${names} PARENT_SCOPE)
endfunction()

declared_functions(ours ${BRAID_INCLUDE}/nccl.h -DBRAID_NO_CUDA_HEADERS -DNCCL_OS_LINUX
                   -I${BRAID_INCLUDE})
declared_functions(theirs ${NVIDIA_INCLUDE}/nccl.h -DNCCL_OS_LINUX -I${NVIDIA_INCLUDE}
                   -I${CUDA_INCLUDE})
list(LENGTH ours n_ours)
list(LENGTH theirs n_theirs)
message("Braid's nccl.h declares ${n_ours} functions, NVIDIA's ${n_theirs}")

set(only_ours ${ours})
list(REMOVE_ITEM only_ours ${theirs})
set(only_theirs ${theirs})
list(REMOVE_ITEM only_theirs ${ours})
if(only_ours OR only_theirs)
  message(FATAL_ERROR "function sets differ:\n  only in Braid's : ${only_ours}\n"
                      "  only in NVIDIA's: ${only_theirs}")
endif()
if(n_ours LESS 110)
  message(FATAL_ERROR "only ${n_ours} functions found: the scan is broken")
endif()

execute_process(COMMAND ${SIG} OUTPUT_VARIABLE probed RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SIG} exited with ${rc}")
endif()
set(missing "")
foreach(f ${theirs})
  if(NOT probed MATCHES "fn ${f} ")
    list(APPEND missing ${f})
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "signature_probe does not check: ${missing}")
endif()
message("both headers declare the same ${n_ours} functions, all covered by signature_probe")
