# Fuzzing (tests/fuzz/): one libFuzzer harness per input Braid parses, each with a seed
# corpus (tests/fuzz/corpus/<name>/) and the crashes it found (tests/fuzz/regressions/
# <name>/, kept forever as regression tests).
#
#   fuzz_replay.<name>   every build (gcc or clang): the harness with a plain main()
#                        (tests/fuzz/replay_main.cc) replays its corpus and regressions
#   fuzz.<name>          BRAID_FUZZ=ON (clang, BRAID_SANITIZE=address): a short libFuzzer
#                        run (15 s, fixed seed) from the seed corpus
#   fuzz_regressions.<name>  BRAID_FUZZ=ON: the libFuzzer binary on each regression input
#
# scripts/run-fuzz.sh configures build-fuzz this way, builds the harnesses only and runs
# each for a given time (the short CI run and the longer documented run).

option(BRAID_FUZZ "Build the libFuzzer harnesses (needs clang and BRAID_SANITIZE=address)" OFF)
set(BRAID_FUZZ_HARNESSES api bootstrap_wire cost_model env_params topology_xml unique_id)
set(BRAID_FUZZ_SRC ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

foreach(name ${BRAID_FUZZ_HARNESSES})
  add_executable(braid_fuzz_replay_${name} fuzz/fuzz_${name}.cc fuzz/replay_main.cc)
  target_link_libraries(braid_fuzz_replay_${name} PRIVATE braid_static)
  add_test(NAME fuzz_replay.${name}
           COMMAND braid_fuzz_replay_${name} ${BRAID_FUZZ_SRC}/corpus/${name}
                   ${BRAID_FUZZ_SRC}/regressions/${name})
  set_tests_properties(fuzz_replay.${name} PROPERTIES LABELS fuzz_replay TIMEOUT 300)
endforeach()

if(BRAID_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "BRAID_FUZZ=ON needs clang (libFuzzer): -DCMAKE_CXX_COMPILER=clang++")
  endif()
  if(NOT BRAID_SANITIZE STREQUAL "address")
    message(FATAL_ERROR "BRAID_FUZZ=ON needs -DBRAID_SANITIZE=address (ASan+UBSan)")
  endif()
  # Coverage feedback from the whole library (unless CMAKE_CXX_FLAGS already asks for
  # it); the harnesses link libFuzzer's main.
  if(NOT CMAKE_CXX_FLAGS MATCHES "fuzzer-no-link")
    target_compile_options(braid_objs PRIVATE -fsanitize=fuzzer-no-link)
  endif()
  # The library as clang 14 sees it. The AVX2/AVX-512 kernels need GCC's `#pragma GCC
  # target`, and kernel_level.cc asks __builtin_cpu_supports for "f16c", which clang 14
  # does not know: here the two SIMD files are replaced by fuzz/simd_off.cc (no SIMD
  # tables: the portable kernels run) and the CPU checks answer "no". Clang-only
  # warnings on library files that GCC builds cleanly are silenced file by file.
  get_target_property(braid_srcs braid_objs SOURCES)
  list(FILTER braid_srcs EXCLUDE REGEX "/src/reduce/reducer_avx(2|512)\\.cc$")
  set_property(TARGET braid_objs PROPERTY SOURCES ${braid_srcs} ${BRAID_FUZZ_SRC}/simd_off.cc)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/reduce/kernel_level.cc
    DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTIES COMPILE_OPTIONS "-D__builtin_cpu_supports(x)=0")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/os/cuda_rt.cc
    ${PROJECT_SOURCE_DIR}/transports/collnet_switch/wire.cc
    ${PROJECT_SOURCE_DIR}/transports/collnet/collnet_port.cc
    DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTIES COMPILE_OPTIONS "-Wno-unused-private-field")
  set_source_files_properties(${PROJECT_SOURCE_DIR}/src/reduce/reducer.cc
    DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTIES COMPILE_OPTIONS "-Wno-align-mismatch")
  set(BRAID_FUZZ_WORK ${CMAKE_CURRENT_BINARY_DIR}/fuzz-work)
  foreach(name ${BRAID_FUZZ_HARNESSES})
    add_executable(braid_fuzz_${name} fuzz/fuzz_${name}.cc)
    target_compile_options(braid_fuzz_${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(braid_fuzz_${name} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(braid_fuzz_${name} PRIVATE braid_static)
    # New inputs go to the build tree (the first corpus directory), never to the source.
    file(MAKE_DIRECTORY ${BRAID_FUZZ_WORK}/${name} ${BRAID_FUZZ_WORK}/artifacts)
    add_test(NAME fuzz.${name}
             COMMAND braid_fuzz_${name} -max_total_time=15 -seed=1 -timeout=20
                     -rss_limit_mb=4096 -print_final_stats=1
                     -artifact_prefix=${BRAID_FUZZ_WORK}/artifacts/${name}-
                     ${BRAID_FUZZ_WORK}/${name} ${BRAID_FUZZ_SRC}/corpus/${name})
    set_tests_properties(fuzz.${name} PROPERTIES LABELS fuzz TIMEOUT 120)
    file(GLOB regressions CONFIGURE_DEPENDS ${BRAID_FUZZ_SRC}/regressions/${name}/*)
    list(FILTER regressions EXCLUDE REGEX "/README[^/]*$")
    if(regressions)
      add_test(NAME fuzz_regressions.${name} COMMAND braid_fuzz_${name} ${regressions})
      set_tests_properties(fuzz_regressions.${name} PROPERTIES LABELS fuzz TIMEOUT 300)
    endif()
  endforeach()
endif()
