# ABI proof: Braid's include/nccl.h and libraries against NVIDIA's NCCL 2.28.
#
#   abi.layout           sizes, offsets, enumerators, macros, initializer values: Braid's
#                        header (no-CUDA path) vs NVIDIA's, line for line
#   abi.layout_cuda      the same with Braid's header on its CUDA-header path
#   abi.signatures       the mangled C++ type of every function and type, both headers
#   abi.function_list    both headers declare the same functions, all of them probed
#   abi.exports          libnccl.so.2 exports every function nccl.h declares
#   abi.relink           a program built against NVIDIA's header, linked to Braid's
#                        libnccl.so.2, runs 2 ranks on host memory
#   abi.preload          the same program linked to NVIDIA's libnccl.so.2, run with
#                        LD_PRELOAD=libbraid.so
# Tests needing NVIDIA's header or library are skipped (return code 77) when absent.
set(BRAID_NVIDIA_NCCL_INCLUDE "/usr/local/cuda/include" CACHE PATH
    "Directory holding NVIDIA's nccl.h, for the ABI comparison tests")
set(BRAID_NVIDIA_NCCL_LIBRARY "/usr/local/cuda/lib64/libnccl.so.2" CACHE FILEPATH
    "NVIDIA's libnccl.so.2, for the LD_PRELOAD test")

set(abi_dir ${CMAKE_CURRENT_SOURCE_DIR}/abi)
set(abi_braid_include ${PROJECT_SOURCE_DIR}/include)
set(abi_c_warnings -Wall -Wextra -Werror)

# A test that only reports why it cannot run.
function(abi_skipped_test name why)
  add_test(NAME ${name} COMMAND sh -c "echo 'SKIPPED: ${why}'; exit 77")
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS abi)
endfunction()

# One probe executable built against one header. `kind` is the expectation macro the probe
# checks at compile time; `incs` are the include directories, searched in order.
function(abi_probe target source kind)
  cmake_parse_arguments(P "" "" "INCLUDES;DEFINES" ${ARGN})
  add_executable(${target} ${abi_dir}/${source})
  target_include_directories(${target} BEFORE PRIVATE ${P_INCLUDES})
  target_compile_definitions(${target} PRIVATE ${kind} ${P_DEFINES})
  set_target_properties(${target} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
  # Taking the address of the deprecated ncclResetDebugInit warns; that is expected.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C>:${abi_c_warnings}> -Wno-deprecated-declarations)
endfunction()

abi_probe(abi_layout_probe_braid layout_probe.c PROBE_EXPECT_BRAID_FALLBACK
          INCLUDES ${abi_braid_include} DEFINES BRAID_NO_CUDA_HEADERS)
abi_probe(abi_signature_probe_braid signature_probe.cc PROBE_EXPECT_BRAID_FALLBACK
          INCLUDES ${abi_braid_include} DEFINES BRAID_NO_CUDA_HEADERS)

set(abi_have_nvidia_header OFF)
if(EXISTS ${BRAID_NVIDIA_NCCL_INCLUDE}/nccl.h AND EXISTS ${BRAID_NVIDIA_NCCL_INCLUDE}/cuda_runtime.h)
  set(abi_have_nvidia_header ON)
endif()

if(abi_have_nvidia_header)
  abi_probe(abi_layout_probe_nvidia layout_probe.c PROBE_EXPECT_NVIDIA_HEADER
            INCLUDES ${BRAID_NVIDIA_NCCL_INCLUDE})
  abi_probe(abi_signature_probe_nvidia signature_probe.cc PROBE_EXPECT_NVIDIA_HEADER
            INCLUDES ${BRAID_NVIDIA_NCCL_INCLUDE})
  # Braid's header again, this time finding the CUDA headers through __has_include.
  abi_probe(abi_layout_probe_braid_cuda layout_probe.c PROBE_EXPECT_BRAID_CUDA
            INCLUDES ${abi_braid_include} ${BRAID_NVIDIA_NCCL_INCLUDE})

  add_test(NAME abi.layout COMMAND ${CMAKE_COMMAND}
           -DA=$<TARGET_FILE:abi_layout_probe_braid> -DB=$<TARGET_FILE:abi_layout_probe_nvidia>
           -P ${abi_dir}/compare_outputs.cmake)
  add_test(NAME abi.layout_cuda COMMAND ${CMAKE_COMMAND}
           -DA=$<TARGET_FILE:abi_layout_probe_braid_cuda>
           -DB=$<TARGET_FILE:abi_layout_probe_nvidia> -P ${abi_dir}/compare_outputs.cmake)
  add_test(NAME abi.signatures COMMAND ${CMAKE_COMMAND}
           -DA=$<TARGET_FILE:abi_signature_probe_braid>
           -DB=$<TARGET_FILE:abi_signature_probe_nvidia> -P ${abi_dir}/compare_outputs.cmake)
  add_test(NAME abi.function_list COMMAND ${CMAKE_COMMAND}
           -DCC=${CMAKE_C_COMPILER} -DBRAID_INCLUDE=${abi_braid_include}
           -DNVIDIA_INCLUDE=${BRAID_NVIDIA_NCCL_INCLUDE}
           -DSIG=$<TARGET_FILE:abi_signature_probe_braid> -P ${abi_dir}/function_list.cmake)
  set_tests_properties(abi.layout abi.layout_cuda abi.signatures abi.function_list
                       PROPERTIES LABELS abi)
else()
  message(STATUS "ABI tests: no NVIDIA nccl.h in ${BRAID_NVIDIA_NCCL_INCLUDE}; "
                 "header comparisons will be skipped")
  set(why "no NVIDIA nccl.h + cuda_runtime.h in ${BRAID_NVIDIA_NCCL_INCLUDE}")
  foreach(t abi.layout abi.layout_cuda abi.signatures abi.function_list)
    abi_skipped_test(${t} "${why}")
  endforeach()
endif()

add_test(NAME abi.exports COMMAND ${CMAKE_COMMAND}
         -DCC=${CMAKE_C_COMPILER} -DNM=${CMAKE_NM} -DBRAID_INCLUDE=${abi_braid_include}
         -DLIB=$<TARGET_FILE:nccl> -P ${abi_dir}/exports.cmake)
set_tests_properties(abi.exports PROPERTIES LABELS abi)

# ---- the user program, built against NVIDIA's header only ---------------------------------
# Libraries are linked by file, not by target name, so that no include directory of ours
# reaches the program; the program itself #errors if it sees Braid's header.
function(abi_program target)
  cmake_parse_arguments(P "" "" "LIBS;DEPENDS" ${ARGN})
  add_executable(${target} ${abi_dir}/abi_program.c)
  target_include_directories(${target} BEFORE PRIVATE ${BRAID_NVIDIA_NCCL_INCLUDE})
  set_target_properties(${target} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
  target_compile_options(${target} PRIVATE ${abi_c_warnings})
  target_link_libraries(${target} PRIVATE ${P_LIBS} Threads::Threads ${CMAKE_DL_LIBS})
  if(P_DEPENDS)
    add_dependencies(${target} ${P_DEPENDS})
  endif()
endfunction()

if(abi_have_nvidia_header)
  abi_program(abi_program LIBS $<TARGET_LINKER_FILE:nccl> DEPENDS nccl)
  add_test(NAME abi.relink
           COMMAND abi_program $<TARGET_FILE_DIR:nccl>/libnccl.so.2)
  set_tests_properties(abi.relink PROPERTIES LABELS abi TIMEOUT 180
    ENVIRONMENT "LD_LIBRARY_PATH=$<TARGET_FILE_DIR:nccl>")

  if(EXISTS ${BRAID_NVIDIA_NCCL_LIBRARY})
    # NVIDIA's libnccl links CUDA statically and loads libcuda with dlopen, so it loads on
    # machines without a GPU driver; its lib64 directory is on the path for anything else.
    get_filename_component(abi_nvidia_libdir ${BRAID_NVIDIA_NCCL_LIBRARY} DIRECTORY)
    abi_program(abi_program_nvidia LIBS ${BRAID_NVIDIA_NCCL_LIBRARY} DEPENDS braid)
    add_test(NAME abi.preload COMMAND abi_program_nvidia libbraid.so)
    set_tests_properties(abi.preload PROPERTIES LABELS abi TIMEOUT 180
      ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:braid>;LD_LIBRARY_PATH=${abi_nvidia_libdir}")
  else()
    message(STATUS "ABI tests: no ${BRAID_NVIDIA_NCCL_LIBRARY}; abi.preload will be skipped")
    abi_skipped_test(abi.preload "NVIDIA libnccl.so.2 not found at ${BRAID_NVIDIA_NCCL_LIBRARY}")
  endif()
else()
  abi_skipped_test(abi.relink "no NVIDIA nccl.h to build the user program against")
  abi_skipped_test(abi.preload "no NVIDIA nccl.h to build the user program against")
endif()
