# ABI proof: Braid's include/nccl.h and libraries against NVIDIA's NCCL 2.30 (and 2.28).
#
#   abi.layout           sizes, offsets, enumerators, macros, initializer values: Braid's
#                        header (no-CUDA path) vs NVIDIA's 2.30, line for line
#   abi.layout_cuda      the same with Braid's header on its CUDA-header path
#   abi.signatures       the mangled C++ type of every function and type, both headers
#   abi.function_list    both headers declare the same functions, all of them probed
#   abi.exports          libnccl.so.2 exports every function nccl.h declares
#   abi.relink           a program built against NVIDIA's 2.30 header, linked to Braid's
#                        libnccl.so.2, runs 2 ranks on host memory
#   abi.preload          the same program linked to NVIDIA's 2.30 libnccl.so.2, run with
#                        LD_PRELOAD=libbraid.so
#   abi.relink_2_28      the program built against NVIDIA's 2.28 header (older programs keep
#   abi.preload_2_28     working: a 2.28 config, 2.28 version checks), both ways
#
# NVIDIA's 2.30 header and library come from the PyPI wheel nvidia-nccl-cu13==2.30.7, which
# scripts/setup-python-env.sh installs into <build>/venv (with PyTorch); 2.28 comes with the
# CUDA toolkit. Tests needing a header or library that is absent are skipped (code 77).
set(BRAID_CUDA_INCLUDE "/usr/local/cuda/include" CACHE PATH
    "Directory holding cuda_runtime.h (NVIDIA's nccl.h includes it)")
set(abi_wheel_default "")
if(BRAID_VENV_OK)
  file(GLOB abi_wheel_dirs "${BRAID_PYTHON_VENV}/lib/python3*/site-packages/nvidia/nccl")
  if(abi_wheel_dirs)
    list(GET abi_wheel_dirs 0 abi_wheel_default)
  endif()
endif()
set(BRAID_NVIDIA_NCCL_ROOT "${abi_wheel_default}" CACHE PATH
    "NVIDIA NCCL 2.30 (include/nccl.h, lib/libnccl.so.2), e.g. the nvidia-nccl-cu13 wheel")
if(NOT BRAID_NVIDIA_NCCL_ROOT AND abi_wheel_default)  # the venv was finished after the first configure
  set(BRAID_NVIDIA_NCCL_ROOT "${abi_wheel_default}" CACHE PATH
      "NVIDIA NCCL 2.30 (include/nccl.h, lib/libnccl.so.2), e.g. the nvidia-nccl-cu13 wheel" FORCE)
endif()
set(BRAID_NVIDIA_NCCL228_INCLUDE "/usr/local/cuda/include" CACHE PATH
    "Directory holding NVIDIA's 2.28 nccl.h, for the backward-compatibility tests")
set(BRAID_NVIDIA_NCCL228_LIBRARY "/usr/local/cuda/lib64/libnccl.so.2" CACHE FILEPATH
    "NVIDIA's 2.28 libnccl.so.2, for the backward-compatibility LD_PRELOAD test")

set(abi_dir ${CMAKE_CURRENT_SOURCE_DIR}/abi)
set(abi_braid_include ${PROJECT_SOURCE_DIR}/include)
set(abi_c_warnings -Wall -Wextra -Werror)

# A test that only reports why it cannot run.
function(abi_skipped_test name why)
  add_test(NAME ${name} COMMAND sh -c "echo 'SKIPPED: ${why}'; exit 77")
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS abi)
endfunction()

# The version code an nccl.h declares (0 if none), in out.
function(abi_header_version out header)
  set(code 0)
  if(EXISTS ${header})
    file(STRINGS ${header} line REGEX "^#define NCCL_VERSION_CODE [0-9]+")
    string(REGEX REPLACE ".* ([0-9]+)$" "\\1" code "${line}")
  endif()
  set(${out} ${code} PARENT_SCOPE)
endfunction()

# One probe executable built against one header. `kind` is the expectation macro the probe
# checks at compile time; `incs` are the include directories, searched in order.
# NCCL_OS_LINUX makes both headers declare ncclResetDebugInit (else it is an empty macro).
function(abi_probe target source kind)
  cmake_parse_arguments(P "" "" "INCLUDES;DEFINES" ${ARGN})
  add_executable(${target} ${abi_dir}/${source})
  target_include_directories(${target} BEFORE PRIVATE ${P_INCLUDES})
  target_compile_definitions(${target} PRIVATE ${kind} NCCL_OS_LINUX ${P_DEFINES})
  set_target_properties(${target} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
  # Taking the address of the deprecated ncclResetDebugInit warns; that is expected.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:C>:${abi_c_warnings}> -Wno-deprecated-declarations)
endfunction()

abi_probe(abi_layout_probe_braid layout_probe.c PROBE_EXPECT_BRAID_FALLBACK
          INCLUDES ${abi_braid_include} DEFINES BRAID_NO_CUDA_HEADERS)
abi_probe(abi_signature_probe_braid signature_probe.cc PROBE_EXPECT_BRAID_FALLBACK
          INCLUDES ${abi_braid_include} DEFINES BRAID_NO_CUDA_HEADERS)

set(abi_nvidia_include "${BRAID_NVIDIA_NCCL_ROOT}/include")
set(abi_nvidia_library "${BRAID_NVIDIA_NCCL_ROOT}/lib/libnccl.so.2")
abi_header_version(abi_nvidia_version ${abi_nvidia_include}/nccl.h)
set(abi_have_nvidia_header OFF)
if(abi_nvidia_version EQUAL 23007 AND EXISTS ${BRAID_CUDA_INCLUDE}/cuda_runtime.h)
  set(abi_have_nvidia_header ON)
  message(STATUS "ABI tests: NVIDIA NCCL 2.30.7 header in ${abi_nvidia_include}")
else()
  set(abi_why "no NVIDIA NCCL 2.30.7 nccl.h (BRAID_NVIDIA_NCCL_ROOT='${BRAID_NVIDIA_NCCL_ROOT}', version code ${abi_nvidia_version}; scripts/setup-python-env.sh installs the nvidia-nccl-cu13==2.30.7 wheel) or no cuda_runtime.h in ${BRAID_CUDA_INCLUDE}")
  message(STATUS "ABI tests: ${abi_why}; the 2.30 comparisons will be skipped")
endif()

if(abi_have_nvidia_header)
  # NVIDIA's directory first (the toolkit's include directory holds a 2.28 nccl.h too).
  abi_probe(abi_layout_probe_nvidia layout_probe.c PROBE_EXPECT_NVIDIA_HEADER
            INCLUDES ${abi_nvidia_include} ${BRAID_CUDA_INCLUDE})
  abi_probe(abi_signature_probe_nvidia signature_probe.cc PROBE_EXPECT_NVIDIA_HEADER
            INCLUDES ${abi_nvidia_include} ${BRAID_CUDA_INCLUDE})
  # Braid's header again, this time finding the CUDA headers through __has_include.
  abi_probe(abi_layout_probe_braid_cuda layout_probe.c PROBE_EXPECT_BRAID_CUDA
            INCLUDES ${abi_braid_include} ${BRAID_CUDA_INCLUDE})

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
           -DNVIDIA_INCLUDE=${abi_nvidia_include} -DCUDA_INCLUDE=${BRAID_CUDA_INCLUDE}
           -DSIG=$<TARGET_FILE:abi_signature_probe_braid> -P ${abi_dir}/function_list.cmake)
  set_tests_properties(abi.layout abi.layout_cuda abi.signatures abi.function_list
                       PROPERTIES LABELS abi)
else()
  foreach(t abi.layout abi.layout_cuda abi.signatures abi.function_list)
    abi_skipped_test(${t} "${abi_why}")
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
  cmake_parse_arguments(P "" "" "INCLUDES;LIBS;DEPENDS" ${ARGN})
  add_executable(${target} ${abi_dir}/abi_program.c)
  target_include_directories(${target} BEFORE PRIVATE ${P_INCLUDES})
  set_target_properties(${target} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON)
  target_compile_options(${target} PRIVATE ${abi_c_warnings})
  target_link_libraries(${target} PRIVATE ${P_LIBS} Threads::Threads ${CMAKE_DL_LIBS})
  if(P_DEPENDS)
    add_dependencies(${target} ${P_DEPENDS})
  endif()
endfunction()

# abi_programs(<suffix> <include dirs> <NVIDIA's libnccl.so.2> <why skipped, or "">):
# abi.relink<suffix> and abi.preload<suffix>.
function(abi_programs suffix includes nvidia_lib why)
  if(why)
    abi_skipped_test(abi.relink${suffix} "${why}")
    abi_skipped_test(abi.preload${suffix} "${why}")
    return()
  endif()
  abi_program(abi_program${suffix} INCLUDES ${includes} LIBS $<TARGET_LINKER_FILE:nccl>
              DEPENDS nccl)
  add_test(NAME abi.relink${suffix}
           COMMAND abi_program${suffix} $<TARGET_FILE_DIR:nccl>/libnccl.so.2)
  set_tests_properties(abi.relink${suffix} PROPERTIES LABELS abi TIMEOUT 180
    ENVIRONMENT "LD_LIBRARY_PATH=$<TARGET_FILE_DIR:nccl>")
  if(NOT EXISTS ${nvidia_lib})
    abi_skipped_test(abi.preload${suffix} "NVIDIA libnccl.so.2 not found at ${nvidia_lib}")
    return()
  endif()
  # NVIDIA's libnccl links CUDA statically and loads libcuda with dlopen, so it loads on
  # machines without a GPU driver; its directory is on the path for anything else.
  get_filename_component(libdir ${nvidia_lib} DIRECTORY)
  abi_program(abi_program_nvidia${suffix} INCLUDES ${includes} LIBS ${nvidia_lib} DEPENDS braid)
  add_test(NAME abi.preload${suffix} COMMAND abi_program_nvidia${suffix} libbraid.so)
  set_tests_properties(abi.preload${suffix} PROPERTIES LABELS abi TIMEOUT 180
    ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:braid>;LD_LIBRARY_PATH=${libdir}")
endfunction()

if(abi_have_nvidia_header)
  abi_programs("" "${abi_nvidia_include};${BRAID_CUDA_INCLUDE}" ${abi_nvidia_library} "")
else()
  abi_programs("" "" "" "${abi_why}")
endif()

abi_header_version(abi_228_version ${BRAID_NVIDIA_NCCL228_INCLUDE}/nccl.h)
if(abi_228_version GREATER_EQUAL 22800 AND abi_228_version LESS 22900 AND
   EXISTS ${BRAID_CUDA_INCLUDE}/cuda_runtime.h)
  abi_programs("_2_28" "${BRAID_NVIDIA_NCCL228_INCLUDE};${BRAID_CUDA_INCLUDE}"
               ${BRAID_NVIDIA_NCCL228_LIBRARY} "")
else()
  abi_programs("_2_28" "" "" "no NVIDIA NCCL 2.28 nccl.h in ${BRAID_NVIDIA_NCCL228_INCLUDE} (found version code ${abi_228_version})")
endif()

# ---- braidGetNcclApi next to another NCCL (the PyTorch situation) -----------------------
#   abi.api_table   NVIDIA's libnccl.so.2 loaded RTLD_GLOBAL first; a library linked to
#                   libbraid.so then binds plain names to NVIDIA's, but every member of
#                   braidGetNcclApi() is Braid's and runs 2 ranks on host memory.
set(abi_table_other "")
foreach(candidate ${abi_nvidia_library} ${BRAID_NVIDIA_NCCL228_LIBRARY})
  if(NOT abi_table_other AND EXISTS ${candidate})
    set(abi_table_other ${candidate})
  endif()
endforeach()
add_library(abi_table_user SHARED ${abi_dir}/api_table_user.c)
target_link_libraries(abi_table_user PRIVATE braid Threads::Threads ${CMAKE_DL_LIBS})
target_compile_options(abi_table_user PRIVATE ${abi_c_warnings})
add_executable(abi_api_table_host ${abi_dir}/api_table_host.c)
target_link_libraries(abi_api_table_host PRIVATE ${CMAKE_DL_LIBS})
if(abi_table_other)
  get_filename_component(abi_table_other_dir ${abi_table_other} DIRECTORY)
  add_test(NAME abi.api_table COMMAND abi_api_table_host ${abi_table_other}
                                      $<TARGET_FILE:abi_table_user>)
  set_tests_properties(abi.api_table PROPERTIES LABELS abi TIMEOUT 180
    ENVIRONMENT "LD_LIBRARY_PATH=${abi_table_other_dir}")
else()
  abi_skipped_test(abi.api_table "no NVIDIA libnccl.so.2 to load beside Braid")
endif()
