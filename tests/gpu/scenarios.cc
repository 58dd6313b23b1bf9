// The GPU suite's scenarios beyond the matrix (see scenarios.h).
#include "tests/gpu/scenarios.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace braid_gpu {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

int cudaFail(const RankCtx& r, const char* what, cudaError_t e) {
  std::fprintf(stderr, "FAIL rank %d: %s: %s (%s)\n", r.rank, what, cudaGetErrorString(e),
               cudaGetErrorName(e));
  return 1;
}

int ncclFail(const RankCtx& r, const char* what, ncclResult_t e) {
  std::fprintf(stderr, "FAIL rank %d: %s: %s: %s\n", r.rank, what, ncclGetErrorString(e),
               ncclGetLastError(r.comm));
  return 1;
}

/// Compares n int64-convertible values with a generator; prints the first mismatch.
template <typename T>
int checkValues(const RankCtx& r, const char* what, const std::vector<T>& got,
                const std::function<double(size_t)>& want) {
  size_t wrong = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    const double w = want(k);
    if (static_cast<double>(got[k]) == w) continue;
    if (wrong++ == 0) {
      std::fprintf(stderr, "FAIL rank %d: %s: element %zu = %g, expected %g\n", r.rank, what, k,
                   static_cast<double>(got[k]), w);
    }
  }
  if (wrong > 1)
    std::fprintf(stderr, "FAIL rank %d: %s: %zu wrong elements\n", r.rank, what, wrong);
  return wrong == 0 ? 0 : 1;
}

/// Typed device buffer with a host image.
template <typename T>
struct Buf {
  T* dev = nullptr;
  std::vector<T> host;
  bool init(Mem& m, size_t n) {
    host.assign(n, T{});
    dev = static_cast<T*>(m.alloc(n * sizeof(T)));
    return dev != nullptr;
  }
  bool put(Mem& m) { return m.put(dev, host.data(), host.size() * sizeof(T)); }
  bool get(Mem& m) { return m.get(host.data(), dev, host.size() * sizeof(T)); }
  bool poison(Mem& m) {
    std::vector<unsigned char> ff(host.size() * sizeof(T), 0xff);
    return m.put(dev, ff.data(), ff.size());
  }
};

int32_t graphInput(int rank, size_t k, int launch) {
  return static_cast<int32_t>((k * 7 + static_cast<size_t>(rank) * 3 + launch * 11) % 1000);
}

/// How many kernel nodes a captured graph holds (and how many nodes in all).
bool countKernels(cudaGraph_t g, size_t* kernels, size_t* total) {
  size_t n = 0;
  if (cudaGraphGetNodes(g, nullptr, &n) != cudaSuccess) return false;
  std::vector<cudaGraphNode_t> nodes(n);
  if (n > 0 && cudaGraphGetNodes(g, nodes.data(), &n) != cudaSuccess) return false;
  *kernels = 0;
  *total = n;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t;
    if (cudaGraphNodeGetType(node, &t) != cudaSuccess) return false;
    *kernels += t == cudaGraphNodeTypeKernel;
  }
  return true;
}

/// Global mode for one rank per process (what frameworks use); thread-local when ranks
/// share the process, as other ranks' threads must keep working during a capture.
cudaStreamCaptureMode captureMode(const RankCtx& r) {
  return r.threads ? cudaStreamCaptureModeThreadLocal : cudaStreamCaptureModeGlobal;
}

}  // namespace

int runGraph(const RankCtx& r) {
  Mem& m = *r.mem;
  if (!m.device()) {
    std::fprintf(stderr, "graph: needs device buffers\n");
    return 1;
  }
  const size_t count = (size_t(1) << 16) + 5;
  Buf<int32_t> send, recv;
  if (!send.init(m, count) || !recv.init(m, count) || !recv.poison(m)) {
    std::fprintf(stderr, "FAIL rank %d: buffers: %s\n", r.rank, m.lastError().c_str());
    return 1;
  }
  const cudaStream_t s = m.stream();
  cudaError_t e = cudaStreamBeginCapture(s, captureMode(r));
  if (e != cudaSuccess) return cudaFail(r, "cudaStreamBeginCapture", e);
  const ncclResult_t res = ncclAllReduce(send.dev, recv.dev, count, ncclInt32, ncclSum, r.comm, s);
  cudaGraph_t graph = nullptr;
  e = cudaStreamEndCapture(s, &graph);
  if (res != ncclSuccess) return ncclFail(r, "ncclAllReduce during capture", res);
  if (e != cudaSuccess) return cudaFail(r, "cudaStreamEndCapture", e);
  int failed = 0;
  size_t kernels = 0, nodes = 0;
  if (countKernels(graph, &kernels, &nodes)) {
    std::printf("rank %d: captured graph: %zu nodes, %zu kernels\n", r.rank, nodes, kernels);
    if (kernels == 0 && r.nranks > 1) {
      std::fprintf(stderr, "FAIL rank %d: the captured all-reduce has no kernel node\n", r.rank);
      ++failed;
    }
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  if (e != cudaSuccess) return cudaFail(r, "cudaGraphInstantiate", e);
  // Capturing records the work: nothing may have run yet.
  if (!recv.get(m)) return cudaFail(r, "reading the output", cudaGetLastError());
  std::vector<unsigned char> bytes(count * sizeof(int32_t));
  std::memcpy(bytes.data(), recv.host.data(), bytes.size());
  for (unsigned char b : bytes) {
    if (b != 0xff) {
      std::fprintf(stderr, "FAIL rank %d: the output changed during capture\n", r.rank);
      ++failed;
      break;
    }
  }
  for (int launch = 0; launch < 3; ++launch) {
    for (size_t k = 0; k < count; ++k) send.host[k] = graphInput(r.rank, k, launch);
    if (!send.put(m) || !recv.poison(m)) {
      std::fprintf(stderr, "FAIL rank %d: staging: %s\n", r.rank, m.lastError().c_str());
      return failed + 1;
    }
    e = cudaGraphLaunch(exec, s);
    if (e != cudaSuccess) return failed + cudaFail(r, "cudaGraphLaunch", e);
    if (!m.sync()) {
      std::fprintf(stderr, "FAIL rank %d: launch %d: %s\n", r.rank, launch, m.lastError().c_str());
      return failed + 1;
    }
    if (!recv.get(m)) return failed + cudaFail(r, "reading the output", cudaGetLastError());
    const std::string what = "graph launch " + std::to_string(launch);
    failed += checkValues<int32_t>(r, what.c_str(), recv.host, [&](size_t k) {
      double sum = 0;
      for (int q = 0; q < r.nranks; ++q) sum += graphInput(q, k, launch);
      return sum;
    });
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::printf("rank %d: graph: %d failed checks\n", r.rank, failed);
  return failed;
}

int runGroup(const RankCtx& r) {
  Mem& m = *r.mem;
  const int n = r.nranks;
  const size_t un = static_cast<size_t>(n);
  const int root = n - 1, next = (r.rank + 1) % n, prev = (r.rank + n - 1) % n;
  const size_t cAr = 1000, cBc = 777, cAg = 333, cRs = 129, cP2p = 50;
  Buf<float> arS, arR;
  Buf<int32_t> bcS, bcR;
  Buf<uint8_t> agS, agR;
  Buf<double> rsS, rsR;
  Buf<int64_t> p2pS, p2pR;
  if (!arS.init(m, cAr) || !arR.init(m, cAr) || !bcS.init(m, cBc) || !bcR.init(m, cBc) ||
      !agS.init(m, cAg) || !agR.init(m, cAg * un) || !rsS.init(m, cRs * un) || !rsR.init(m, cRs) ||
      !p2pS.init(m, cP2p) || !p2pR.init(m, cP2p)) {
    std::fprintf(stderr, "FAIL rank %d: buffers: %s\n", r.rank, m.lastError().c_str());
    return 1;
  }
  auto arIn = [](int q, size_t k) { return static_cast<float>((k + 3 * q) % 50); };
  auto bcIn = [](int q, size_t k) { return static_cast<int32_t>(k * 13 + q * 1000 + 1); };
  auto agIn = [](int q, size_t k) { return static_cast<uint8_t>((k + 31 * q) % 251); };
  auto rsIn = [](int q, size_t j) { return static_cast<double>((j * 5 + q * 17) % 97) - 40; };
  auto p2pIn = [](int q, size_t k) { return static_cast<int64_t>(k) * 100000 + q; };
  for (size_t k = 0; k < cAr; ++k) arS.host[k] = arIn(r.rank, k);
  for (size_t k = 0; k < cBc; ++k) bcS.host[k] = bcIn(r.rank, k);
  for (size_t k = 0; k < cAg; ++k) agS.host[k] = agIn(r.rank, k);
  for (size_t j = 0; j < cRs * un; ++j) rsS.host[j] = rsIn(r.rank, j);
  for (size_t k = 0; k < cP2p; ++k) p2pS.host[k] = p2pIn(r.rank, k);
  if (!arS.put(m) || !bcS.put(m) || !agS.put(m) || !rsS.put(m) || !p2pS.put(m)) {
    std::fprintf(stderr, "FAIL rank %d: staging: %s\n", r.rank, m.lastError().c_str());
    return 1;
  }
  const cudaStream_t s = m.stream();
  auto enqueue = [&]() -> ncclResult_t {
    ncclResult_t res = ncclGroupStart();
    if (res != ncclSuccess) return res;
    ncclResult_t first = ncclSuccess;
    auto keep = [&](ncclResult_t x) {
      if (first == ncclSuccess) first = x;
    };
    keep(ncclAllReduce(arS.dev, arR.dev, cAr, ncclFloat32, ncclSum, r.comm, s));
    keep(ncclBroadcast(bcS.dev, bcR.dev, cBc, ncclInt32, root, r.comm, s));
    keep(ncclAllGather(agS.dev, agR.dev, cAg, ncclUint8, r.comm, s));
    keep(ncclReduceScatter(rsS.dev, rsR.dev, cRs, ncclFloat64, ncclMax, r.comm, s));
    keep(ncclSend(p2pS.dev, cP2p, ncclInt64, next, r.comm, s));
    keep(ncclRecv(p2pR.dev, cP2p, ncclInt64, prev, r.comm, s));
    res = ncclGroupEnd();
    return first != ncclSuccess ? first : res;
  };
  auto check = [&](const char* phase) {
    if (!arR.get(m) || !bcR.get(m) || !agR.get(m) || !rsR.get(m) || !p2pR.get(m)) {
      std::fprintf(stderr, "FAIL rank %d: %s: reading: %s\n", r.rank, phase, m.lastError().c_str());
      return 1;
    }
    const std::string p = phase;
    int f = 0;
    f += checkValues<float>(r, (p + " allreduce").c_str(), arR.host, [&](size_t k) {
      double sum = 0;
      for (int q = 0; q < n; ++q) sum += arIn(q, k);
      return sum;
    });
    f += checkValues<int32_t>(r, (p + " broadcast").c_str(), bcR.host,
                              [&](size_t k) { return static_cast<double>(bcIn(root, k)); });
    f += checkValues<uint8_t>(r, (p + " allgather").c_str(), agR.host, [&](size_t k) {
      return static_cast<double>(agIn(static_cast<int>(k / cAg), k % cAg));
    });
    f += checkValues<double>(r, (p + " reducescatter max").c_str(), rsR.host, [&](size_t k) {
      double best = -1e300;
      for (int q = 0; q < n; ++q) best = std::fmax(best, rsIn(q, r.rank * cRs + k));
      return best;
    });
    f += checkValues<int64_t>(r, (p + " send/recv").c_str(), p2pR.host,
                              [&](size_t k) { return static_cast<double>(p2pIn(prev, k)); });
    return f;
  };
  auto poisonAll = [&]() {
    return arR.poison(m) && bcR.poison(m) && agR.poison(m) && rsR.poison(m) && p2pR.poison(m);
  };
  // Eager.
  int failed = 0;
  if (!poisonAll()) return cudaFail(r, "poisoning outputs", cudaGetLastError());
  ncclResult_t res = enqueue();
  if (res != ncclSuccess) return ncclFail(r, "eager group", res);
  if (!m.sync()) {
    std::fprintf(stderr, "FAIL rank %d: eager group: %s\n", r.rank, m.lastError().c_str());
    return 1;
  }
  failed += check("eager group");
  // Captured: the group must be one launch per kernel.
  if (!poisonAll()) return failed + cudaFail(r, "poisoning outputs", cudaGetLastError());
  cudaError_t e = cudaStreamBeginCapture(s, captureMode(r));
  if (e != cudaSuccess) return failed + cudaFail(r, "cudaStreamBeginCapture", e);
  res = enqueue();
  cudaGraph_t graph = nullptr;
  e = cudaStreamEndCapture(s, &graph);
  if (res != ncclSuccess) return failed + ncclFail(r, "captured group", res);
  if (e != cudaSuccess) return failed + cudaFail(r, "cudaStreamEndCapture", e);
  size_t kernels = 0, nodes = 0;
  if (!countKernels(graph, &kernels, &nodes)) {
    return failed + cudaFail(r, "cudaGraphGetNodes", cudaGetLastError());
  }
  std::printf("rank %d: captured group of 6 calls: %zu graph nodes, %zu kernels\n", r.rank, nodes,
              kernels);
  // One launch per kernel: float sum (all-reduce), double max (reduce-scatter), and the
  // copy kernel (broadcast, all-gather, send/recv).
  if (kernels != 3) {
    std::fprintf(stderr,
                 "FAIL rank %d: the captured group has %zu kernel nodes, expected 3 "
                 "launches (one per kernel)\n",
                 r.rank, kernels);
    ++failed;
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  if (e != cudaSuccess) return failed + cudaFail(r, "cudaGraphInstantiate", e);
  e = cudaGraphLaunch(exec, s);
  if (e != cudaSuccess) return failed + cudaFail(r, "cudaGraphLaunch", e);
  if (!m.sync()) {
    std::fprintf(stderr, "FAIL rank %d: graph launch: %s\n", r.rank, m.lastError().c_str());
    return failed + 1;
  }
  failed += check("captured group");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  std::printf("rank %d: group: %d failed checks\n", r.rank, failed);
  return failed;
}

int runKilled(const RankCtx& r, int statusFd) {
  Mem& m = *r.mem;
  const size_t count = size_t(16) << 20;  // 64 MiB of floats
  float* send = static_cast<float*>(m.alloc(count * sizeof(float)));
  float* recv = static_cast<float*>(m.alloc(count * sizeof(float)));
  if (send == nullptr || recv == nullptr) {
    std::fprintf(stderr, "FAIL rank %d: buffers: %s\n", r.rank, m.lastError().c_str());
    return 1;
  }
  const cudaStream_t s = m.stream();
  const Clock::time_point start = Clock::now();
  constexpr double kDetectSeconds = 30, kMaxSeconds = 120;
  int completed = 0;
  bool told = false;
  while (secondsSince(start) < kMaxSeconds) {
    const ncclResult_t res = ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, r.comm, s);
    if (res != ncclSuccess) {
      std::printf("rank %d: ncclAllReduce returned %s after %d iterations: %s\n", r.rank,
                  ncclGetErrorString(res), completed, ncclGetLastError(r.comm));
    }
    // Wait for this call while watching the communicator's asynchronous error.
    const Clock::time_point issued = Clock::now();
    for (;;) {
      ncclResult_t async = ncclSuccess;
      const ncclResult_t q = ncclCommGetAsyncError(r.comm, &async);
      if (q != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
        const double waited = secondsSince(issued);
        std::printf(
            "rank %d: async error after %d iterations, %.2f s into the stuck call: "
            "%s (%s)\n",
            r.rank, completed, waited, ncclGetErrorString(q != ncclSuccess ? q : async),
            ncclGetLastError(r.comm));
        std::fflush(stdout);
        if (r.rank != 0) return 0;  // the victim is not expected to get here
        const Clock::time_point t0 = Clock::now();
        const ncclResult_t ab = ncclCommAbort(r.comm);
        std::printf("rank 0: ncclCommAbort returned %s after %.2f s\n", ncclGetErrorString(ab),
                    secondsSince(t0));
        std::fflush(stdout);
        // The communicator is gone (the caller must not abort it again), and the stream
        // may hold a failed launch: leave without tearing anything else down.
        _exit(ab == ncclSuccess ? 0 : 1);
      }
      if (res == ncclSuccess) {
        const cudaError_t st = cudaStreamQuery(s);
        if (st == cudaSuccess) break;
        if (st != cudaErrorNotReady) {
          std::printf("rank %d: the stream failed (%s); waiting for the async error\n", r.rank,
                      cudaGetErrorString(st));
        }
      }
      if (secondsSince(issued) > kDetectSeconds) {
        std::fprintf(stderr,
                     "FAIL rank %d: a call stuck for %.0f s (after %d iterations) and "
                     "ncclCommGetAsyncError still reports success\n",
                     r.rank, kDetectSeconds, completed);
        std::fflush(stderr);
        _exit(1);  // no clean teardown possible with a stuck call
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ++completed;
    if (completed >= 3 && !told) {
      const char c = 'r';
      told = write(statusFd, &c, 1) == 1;
      std::printf("rank %d: %d iterations done, looping\n", r.rank, completed);
      std::fflush(stdout);
    }
  }
  std::fprintf(stderr,
               "FAIL rank %d: still looping after %.0f s (%d iterations): the peer was "
               "not killed, or its death went unnoticed\n",
               r.rank, kMaxSeconds, completed);
  return 1;
}

int runAbortInFlight(const RankCtx& r) {
  Mem& m = *r.mem;
  const size_t count = size_t(16) << 20;  // 64 MiB of floats
  const cudaStream_t s = m.stream();
  float* send = static_cast<float*>(m.alloc(count * sizeof(float)));
  float* recv = static_cast<float*>(m.alloc(count * sizeof(float)));
  if (send == nullptr || recv == nullptr) {
    std::fprintf(stderr, "FAIL rank %d: buffers: %s\n", r.rank, m.lastError().c_str());
    return 1;
  }
  // A call on a nonblocking communicator may return ncclInProgress (as NCCL's do):
  // then it is done enqueueing once ncclCommGetAsyncError stops saying so.
  auto enqueued = [&](ncclResult_t res) {
    const Clock::time_point t0 = Clock::now();
    ncclResult_t state = res;
    while (state == ncclInProgress && secondsSince(t0) < 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ncclCommGetAsyncError(r.comm, &state) != ncclSuccess) return false;
    }
    return state == ncclSuccess;
  };
  // Together first: the first call on a communicator sets its device connections up
  // with the peer (as NCCL's runtime connection does), so a peer that never calls
  // would leave the call unable to enqueue at all, not in flight on the GPU.
  if (!enqueued(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, r.comm, s)) ||
      !m.sync()) {
    std::fprintf(stderr, "FAIL rank %d: the first (joint) ncclAllReduce: %s %s\n", r.rank,
                 ncclGetLastError(r.comm), m.lastError().c_str());
    return 1;
  }
  if (r.rank != 0) {
    // Never joins the second call: rank 0's kernel waits on us until it is told to stop.
    std::this_thread::sleep_for(std::chrono::seconds(3));
    const ncclResult_t ab = ncclCommAbort(r.comm);
    std::printf("rank %d: ncclCommAbort (idle) returned %s\n", r.rank, ncclGetErrorString(ab));
    std::fflush(stdout);
    _exit(ab == ncclSuccess ? 0 : 1);
  }
  if (!enqueued(ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, r.comm, s))) {
    std::fprintf(stderr, "FAIL rank 0: ncclAllReduce: %s\n", ncclGetLastError(r.comm));
    return 1;
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  if (cudaStreamQuery(s) != cudaErrorNotReady) {
    std::fprintf(stderr, "FAIL rank 0: the all-reduce finished without its peer\n");
    return 1;
  }
  const Clock::time_point t0 = Clock::now();
  const ncclResult_t ab = ncclCommAbort(r.comm);
  const double abortS = secondsSince(t0);
  std::printf("rank 0: ncclCommAbort with device work in flight returned %s after %.2f s\n",
              ncclGetErrorString(ab), abortS);
  const Clock::time_point t1 = Clock::now();
  cudaError_t q = cudaErrorNotReady;
  while (q == cudaErrorNotReady && secondsSince(t1) < 20) {
    q = cudaStreamQuery(s);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::printf("rank 0: stream after abort: %s after %.2f s\n", cudaGetErrorString(q),
              secondsSince(t1));
  std::fflush(stdout);
  const bool ok = ab == ncclSuccess && abortS < 20 && q != cudaErrorNotReady;
  if (!ok) std::fprintf(stderr, "FAIL rank 0: abort with device work in flight\n");
  std::fflush(stderr);
  _exit(ok ? 0 : 1);  // the communicator is gone: no teardown left to do
}

int runMismatch(const RankCtx& r) {
  Mem& m = *r.mem;
  const size_t count = 4096;
  const cudaStream_t s = m.stream();
  Buf<float> buf;
  if (!buf.init(m, count)) {
    std::fprintf(stderr, "FAIL rank %d: buffers: %s\n", r.rank, m.lastError().c_str());
    return 1;
  }
  for (size_t k = 0; k < count; ++k) buf.host[k] = static_cast<float>(r.rank + 1);
  if (!buf.put(m)) {
    std::fprintf(stderr, "FAIL rank %d: staging: %s\n", r.rank, m.lastError().c_str());
    return 1;
  }
  int failed = 0;
  // The last rank passes another count: every rank must refuse, naming it.
  const size_t mine = r.rank == r.nranks - 1 ? count - 1 : count;
  const ncclResult_t bad = ncclAllReduce(buf.dev, buf.dev, mine, ncclFloat32, ncclSum, r.comm, s);
  const std::string text = ncclGetLastError(r.comm);
  if (bad != ncclInvalidUsage || text.find("collective mismatch") == std::string::npos ||
      text.find("count " + std::to_string(count - 1)) == std::string::npos) {
    std::fprintf(stderr, "FAIL rank %d: mismatched all-reduce returned %s: %s\n", r.rank,
                 ncclGetErrorString(bad), text.c_str());
    ++failed;
  }
  // Nothing ran; the next, matching call works on the same buffers.
  const ncclResult_t good = ncclAllReduce(buf.dev, buf.dev, count, ncclFloat32, ncclSum, r.comm, s);
  if (good != ncclSuccess || !buf.get(m)) {
    std::fprintf(stderr, "FAIL rank %d: matching all-reduce: %s %s\n", r.rank,
                 ncclGetErrorString(good), m.lastError().c_str());
    return failed + 1;
  }
  const float want = static_cast<float>(r.nranks * (r.nranks + 1) / 2);
  failed += checkValues<float>(r, "all-reduce after a mismatch", buf.host,
                               [&](size_t) { return double(want); });
  std::printf("rank %d: mismatch: %d failed checks\n", r.rank, failed);
  return failed;
}

}  // namespace braid_gpu
