// Worker processes of the GPU suite (see worker.h).
#include "tests/gpu/worker.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/gpu/matrix.h"
#include "tests/gpu/mem.h"
#include "tests/gpu/scenarios.h"

namespace braid_gpu {
namespace {

struct Args {
  std::map<std::string, std::string> kv;
  std::string get(const std::string& k, const std::string& def = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? def : it->second;
  }
  int num(const std::string& k, int def) const {
    const std::string v = get(k);
    return v.empty() ? def : std::atoi(v.c_str());
  }
};

bool readAll(int fd, void* data, size_t bytes) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = read(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

/// One rank: device, buffers, communicator, the mode's work, teardown. Returns the
/// number of failures (0: passed).
int runRank(const Args& a, int rank, int nranks, const ncclUniqueId& id) {
  const bool host = a.num("host", 0) != 0;
  if (!host) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= 0) {
      std::fprintf(stderr, "rank %d: no CUDA device: %s\n", rank,
                   e != cudaSuccess ? cudaGetErrorString(e) : "none");
      return 1;
    }
    // As a NCCL program: the rank's device becomes current before ncclCommInitRank.
    const cudaError_t s = cudaSetDevice(rank % n);
    if (s != cudaSuccess) {
      std::fprintf(stderr, "rank %d: cudaSetDevice: %s\n", rank, cudaGetErrorString(s));
      return 1;
    }
  }
  Mem mem(!host);
  if (!mem.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, mem.error().c_str());
    return 1;
  }
  RankCtx r;
  r.rank = rank;
  r.nranks = nranks;
  r.mem = &mem;
  r.corrupt = a.num("corrupt", 0) != 0;
  r.threads = a.num("threads", 0) > 0;
  const std::string mode = a.get("mode");
  ncclResult_t init = ncclSuccess;
  if (mode == "abort") {
    // Nonblocking init: returns at once, then poll until the communicator is ready.
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    init = ncclCommInitRankConfig(&r.comm, nranks, id, rank, &cfg);
    ncclResult_t state = ncclInProgress;
    while ((init == ncclSuccess || init == ncclInProgress) && state == ncclInProgress) {
      init = ncclCommGetAsyncError(r.comm, &state);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (init == ncclSuccess) init = state;
  } else {
    init = ncclCommInitRank(&r.comm, nranks, id, rank);
  }
  if (init != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclCommInitRank: %s: %s\n", rank, ncclGetErrorString(init),
                 ncclGetLastError(nullptr));
    return 1;
  }
  int dev = -2;
  if (!host && (ncclCommCuDevice(r.comm, &dev) != ncclSuccess || dev < 0)) {
    std::fprintf(stderr,
                 "rank %d: ncclCommCuDevice reports %d for a communicator made on a "
                 "device\n",
                 rank, dev);
  }
  int failed = 0;
  if (mode == "matrix") {
    Coll coll;
    if (!parseColl(a.get("coll"), &coll)) {
      std::fprintf(stderr, "unknown --coll '%s'\n", a.get("coll").c_str());
      return 1;
    }
    MatrixOptions o;
    if (!host && !r.threads && nranks >= 3) {
      // Processes on one GPU share it by time slices: keep 3 and 4 ranks to one count
      // (odd, no multiple of the rank count) besides the large case and count 0.
      o.counts = {1031};
    }
    if (a.num("small", 0) != 0) {
      o.counts = {1, 1031};
      o.largeCount = 0;
      o.allTypes = false;
    }
    failed = runMatrix(r, coll, o);
  } else if (mode == "graph") {
    failed = runGraph(r);
  } else if (mode == "group") {
    failed = runGroup(r);
  } else if (mode == "mismatch") {
    failed = runMismatch(r);
  } else if (mode == "abort") {
    failed = runAbortInFlight(r);
  } else if (mode == "killed") {
    failed = runKilled(r, a.num("statusfd", -1));
  } else {
    std::fprintf(stderr, "unknown --mode '%s'\n", mode.c_str());
    failed = 1;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  if (failed != 0) {
    // The peers may be stuck in a call this rank left: abort instead of destroying.
    ncclCommAbort(r.comm);
    return failed;
  }
  const ncclResult_t d = ncclCommDestroy(r.comm);
  if (d != ncclSuccess) {
    std::fprintf(stderr, "rank %d: ncclCommDestroy: %s\n", rank, ncclGetErrorString(d));
    return 1;
  }
  return 0;
}

}  // namespace

int workerMain(int argc, char** argv) {
  Args a;
  for (int i = 0; i + 1 < argc; i += 2) {
    if (std::strncmp(argv[i], "--", 2) != 0) {
      std::fprintf(stderr, "worker: unexpected argument '%s'\n", argv[i]);
      return 2;
    }
    a.kv[argv[i] + 2] = argv[i + 1];
  }
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  const int idFd = a.num("idfd", -1);
  if (idFd >= 0) {
    if (!readAll(idFd, &id, sizeof(id))) {
      std::fprintf(stderr, "worker: could not read the unique id from fd %d\n", idFd);
      return 2;
    }
    close(idFd);
  } else if (ncclGetUniqueId(&id) != ncclSuccess) {  // run by hand: one process
    std::fprintf(stderr, "worker: ncclGetUniqueId: %s\n", ncclGetLastError(nullptr));
    return 2;
  }
  const int threads = a.num("threads", 0);
  if (threads <= 0) {
    const int rc = runRank(a, a.num("rank", 0), a.num("nranks", 1), id) == 0 ? 0 : 1;
    std::fflush(stdout);
    std::fflush(stderr);
    // Skip global destructors: a failed rank's library threads may still be blocked.
    _exit(rc);
  }
  // Ranks as threads of this process (all on this process's devices).
  std::atomic<int> failed{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] { failed += runRank(a, t, threads, id) == 0 ? 0 : 1; });
  }
  for (std::thread& t : pool) t.join();
  std::printf("%d of %d thread ranks failed\n", failed.load(), threads);
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(failed.load() == 0 ? 0 : 1);
}

}  // namespace braid_gpu
