# PyTorch on Braid (tests/torch/, label "torch"), in the venv that scripts/setup-python-env.sh
# makes (the README test command: build/venv, pinned torch and nvidia-nccl-cu13):
#   torch_braid (target)    the `braid` c10d backend, pip-installed into the venv
#   torch.collectives.npN   every c10d collective on N processes, results checked
#   torch.cuda_collectives.np2  the same on CUDA tensors (skips without a GPU)
#   torch.{ddp,fsdp2,pipeline}.npN   PyTorch's DDP, FSDP2 and pipelining train a small
#                           model: same as one process, same gradients as Gloo
#   torch.symbols           every NCCL function libtorch_cuda.so imports, Braid exports
#   torch.preload           torch with Braid's libnccl.so.2 preloaded binds all of them to Braid
#   torch.compile.np2       torch.compile (inductor) of a DDP-style step and of the other
#                           functional collectives: same as eager, collectives in the graph
#   torch.install           `pip install ./python/torch_braid` (build isolation, Braid built
#                           and bundled) and its wheel, in fresh venvs; an all-reduce on each
# Without the venv (or where it says SKIPPED) one test says why and skips.
set(torch_py "${BRAID_PYTHON_VENV}/bin/python")
set(torch_dir ${CMAKE_CURRENT_LIST_DIR}/torch)

if(NOT BRAID_VENV_OK)  # tests/CMakeLists.txt says why
  string(REPLACE "'" "" torch_why "${BRAID_VENV_WHY}")
  add_test(NAME torch.skipped COMMAND sh -c "echo 'SKIP: PyTorch tests: ${torch_why}'; exit 77")
  set_tests_properties(torch.skipped PROPERTIES LABELS torch SKIP_RETURN_CODE 77)
  return()
endif()

# The backend, built against the venv's torch and this tree's libbraid.so.
file(GLOB torch_braid_sources CONFIGURE_DEPENDS
     ${PROJECT_SOURCE_DIR}/python/torch_braid/csrc/*
     ${PROJECT_SOURCE_DIR}/python/torch_braid/torch_braid/*.py
     ${PROJECT_SOURCE_DIR}/python/torch_braid/setup.py)
cmake_host_system_information(RESULT torch_jobs QUERY NUMBER_OF_LOGICAL_CORES)
set(torch_stamp ${PROJECT_BINARY_DIR}/torch_braid.stamp)
add_custom_command(
  OUTPUT ${torch_stamp}
  COMMAND ${CMAKE_COMMAND} -E env BRAID_HOME=${PROJECT_BINARY_DIR} MAX_JOBS=${torch_jobs}
          "PATH=${BRAID_PYTHON_VENV}/bin:$ENV{PATH}"
          ${torch_py} -m pip install --quiet --no-build-isolation --no-deps
          ${PROJECT_SOURCE_DIR}/python/torch_braid
  COMMAND ${CMAKE_COMMAND} -E touch ${torch_stamp}
  DEPENDS braid $<TARGET_FILE:braid> ${torch_braid_sources}
  COMMENT "torch_braid: building the PyTorch backend into ${BRAID_PYTHON_VENV}"
  VERBATIM)
add_custom_target(torch_braid ALL DEPENDS ${torch_stamp})

function(braid_torch_test name)
  add_test(NAME ${name} COMMAND ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS torch TIMEOUT 600 SKIP_RETURN_CODE 77
                       WORKING_DIRECTORY ${torch_dir} ENVIRONMENT "PYTHONUNBUFFERED=1")
endfunction()

foreach(n 2 3 4)
  braid_torch_test(torch.collectives.np${n} ${torch_py} collectives.py ${n})
endforeach()
# CUDA tensors (skips without a GPU): run by the GPU sessions (docs/gpu.md)
braid_torch_test(torch.cuda_collectives.np2 ${torch_py} cuda_collectives.py 2)
foreach(mode ddp fsdp2 pipeline)
  foreach(n 2 4)
    braid_torch_test(torch.${mode}.np${n} ${torch_py} training.py ${mode} ${n})
  endforeach()
endforeach()
braid_torch_test(torch.compile.np2 ${torch_py} compile.py 2)
braid_torch_test(torch.symbols bash symbols.sh ${torch_py} $<TARGET_FILE:nccl>)
braid_torch_test(torch.preload ${torch_py} preload.py $<TARGET_FILE:nccl>)
# Builds Braid and the backend from a copy of the tracked sources with -j2 (MAX_JOBS):
# about 4 minutes of 2 cores (231 s alone, tests/README.md); it needs the package index
# for setuptools, wheel and ninja (skips without it).
braid_torch_test(torch.install bash install.sh ${torch_py} ${PROJECT_SOURCE_DIR})
# The longest tests start first (ctest runs by COST where it has no timings of its own yet,
# as on a fresh clone). torch.install builds Braid and the backend with both cores
# (MAX_JOBS=2) for about 4 minutes: it claims both (PROCESSORS 2), so that ctest -j 2 runs
# it alone; sharing the cores with the torch tests it once ran past its 600 s in CI.
set_tests_properties(torch.install PROPERTIES COST 1000 PROCESSORS 2)
set_tests_properties(torch.compile.np2 PROPERTIES COST 500)
foreach(mode ddp fsdp2 pipeline)
  set_tests_properties(torch.${mode}.np2 torch.${mode}.np4 PROPERTIES COST 200)
endforeach()
