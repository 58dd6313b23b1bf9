// A program that links nothing of Braid's: it dlopens the libnccl.so.2 named by argv[1],
// calls ncclGetVersion, ncclMemAlloc / ncclMemFree (device memory where CUDA is usable,
// host memory elsewhere: not touched here) and runs a 1-rank all-reduce on host memory. Run by cuda_api's DlopenProbe tests in a fresh process: it proves the library
// (with the static CUDA runtime inside) loads and works where CUDA is not usable.
// Exit code 0 on success; the reason on stderr otherwise.
#include <dlfcn.h>

#include <cstdio>
#include <cstring>

#include "nccl.h"

namespace {

template <typename F>
F sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (p == nullptr) fprintf(stderr, "probe: %s not found: %s\n", name, dlerror());
  return reinterpret_cast<F>(p);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s path/to/libnccl.so.2\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    fprintf(stderr, "probe: dlopen failed: %s\n", dlerror());
    return 3;
  }
  auto getVersion = sym<decltype(&ncclGetVersion)>(lib, "ncclGetVersion");
  auto initAll = sym<decltype(&ncclCommInitAll)>(lib, "ncclCommInitAll");
  auto allReduce = sym<decltype(&ncclAllReduce)>(lib, "ncclAllReduce");
  auto destroy = sym<decltype(&ncclCommDestroy)>(lib, "ncclCommDestroy");
  auto memAlloc = sym<decltype(&ncclMemAlloc)>(lib, "ncclMemAlloc");
  auto memFree = sym<decltype(&ncclMemFree)>(lib, "ncclMemFree");
  auto lastError = sym<decltype(&ncclGetLastError)>(lib, "ncclGetLastError");
  if (!getVersion || !initAll || !allReduce || !destroy || !memAlloc || !memFree || !lastError)
    return 4;

  int version = 0;
  if (getVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) {
    fprintf(stderr, "probe: ncclGetVersion gave %d, want %d\n", version, NCCL_VERSION_CODE);
    return 5;
  }
  printf("probe: version %d\n", version);

  const size_t count = 1000;
  void* buf = nullptr;
  if (memAlloc(&buf, count * sizeof(float)) != ncclSuccess) {
    fprintf(stderr, "probe: ncclMemAlloc: %s\n", lastError(nullptr));
    return 6;
  }
  static float f[count], out[count];
  for (size_t i = 0; i < count; ++i) f[i] = float(i);

  ncclComm_t comm = nullptr;
  int dev = 0;
  if (initAll(&comm, 1, &dev) != ncclSuccess) {
    fprintf(stderr, "probe: ncclCommInitAll: %s\n", lastError(nullptr));
    return 7;
  }
  if (allReduce(f, out, count, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess) {
    fprintf(stderr, "probe: ncclAllReduce: %s\n", lastError(comm));
    return 8;
  }
  for (size_t i = 0; i < count; ++i)
    if (out[i] != float(i)) {
      fprintf(stderr, "probe: out[%zu] = %g, want %g\n", i, double(out[i]), double(i));
      return 9;
    }
  if (destroy(comm) != ncclSuccess || memFree(buf) != ncclSuccess) return 10;
  printf("probe: 1-rank all-reduce ok\n");
  fflush(stdout);
  dlclose(lib);
  return 0;
}
