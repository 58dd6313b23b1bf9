// The shared driver of the perf suite (see common.h): ranks as threads (and as
// processes), the size sweep, timing, checking and cross-rank aggregation. Everything
// talks to the library through the public NCCL API only.
//
// Host buffers (default): null stream, a call completes before it returns, the time is
// the calls' wall time. Device buffers (-D 1): every rank has a device (its local index %
// device count), cudaMalloc'd buffers and a CUDA stream; data is written and checked in
// host staging copies of the buffers (the same pattern and check code), and the time is
// the wall time from the first call to cudaStreamSynchronize of every local stream.
// The bookkeeping collectives (barrier, result sums) then run on device scratch too, so
// a communicator only ever sees one memory kind.
#include "perf/common.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "perf/device.h"
#include "perf/launch.h"
#include "perf/options.h"
#include "perf/report.h"

namespace braid_perf {

namespace {

/// Report a failed NCCL call with the library's last error and end the process: the
/// other ranks would otherwise wait for this one forever (braidrun then stops them).
void ncclOk(ncclResult_t r, ncclComm_t comm, const char* call, int rank) {
  if (r == ncclSuccess) return;
  const char* last = ncclGetLastError(comm);
  std::fprintf(stderr, "braid-perf: rank %d: %s failed: %s (last error: %s)\n", rank, call,
               ncclGetErrorString(r), last != nullptr && *last != '\0' ? last : "none");
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(1);
}

struct FreeDeleter {
  void operator()(unsigned char* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<unsigned char, FreeDeleter>;

/// Report a failed CUDA step (device buffers) and end the process, as ncclOk.
void cudaOk(bool ok, const std::string& error, int rank) {
  if (ok) return;
  std::fprintf(stderr, "braid-perf: rank %d: %s\n", rank, error.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(1);
}

struct DeviceFreeDeleter {
  void operator()(unsigned char* p) const { deviceFree(p); }
};
/// cudaMalloc'd memory (-D 1).
using DeviceBuffer = std::unique_ptr<unsigned char, DeviceFreeDeleter>;

struct StreamDeleter {
  void operator()(CUstream_st* s) const { streamDestroy(s); }
};
/// A rank's CUDA stream (-D 1); null (the host path's stream) otherwise.
using Stream = std::unique_ptr<CUstream_st, StreamDeleter>;

/// Page-aligned, zeroed host memory (never empty, so pointers are always valid).
HostBuffer allocate(size_t bytes) {
  constexpr size_t kAlign = 4096;
  const size_t size = bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, size);
  if (p == nullptr) {
    std::fprintf(stderr, "braid-perf: out of host memory allocating %zu bytes\n", size);
    std::_Exit(1);
  }
  std::memset(p, 0, size);
  return HostBuffer(static_cast<unsigned char*>(p));
}

ncclRedOp_t builtinOp(PerfOp op) {
  switch (op) {
    case PerfOp::kProd:
      return ncclProd;
    case PerfOp::kMin:
      return ncclMin;
    case PerfOp::kMax:
      return ncclMax;
    case PerfOp::kAvg:
      return ncclAvg;
    default:
      return ncclSum;
  }
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// What the threads of this process share.
struct Shared {
  const CollSpec& spec;
  const Options& opt;
  ProcessInfo proc;
  ncclUniqueId id;
  int nranks;       // world size
  int localRanks;   // ranks in this process
  int deviceCount;  // CUDA devices when -D 1, else 0
  bool corrupt;
  Report& report;  // touched only by the printing thread (global rank 0) until joined
  std::atomic<bool> failed{false};
};

/// Scratch layout: aggregation values at 0, the barrier's value here.
constexpr size_t kBarrierOffset = 1024;

/// One rank driven by a worker thread.
struct LocalRank {
  int rank = 0;
  ncclComm_t comm = nullptr;
  HostBuffer send, recv;  // the buffers, or with -D 1 their host staging copies
  HostBuffer scratch;     // barrier and aggregation values
  ncclRedOp_t op = ncclSum;
  bool createdOp = false;
  // -D 1 only:
  int device = -1;
  Stream stream;
  DeviceBuffer dsend, drecv, dscratch;
};

/// Buffer pointers of one call.
struct Ptrs {
  const void* send;
  void* recv;
  unsigned char* out;  // where the result is checked
  unsigned char* in;   // where the input data is written
};

/// Per-thread, per-placement measurement before aggregation.
struct Local {
  double timeUs = 0;
  std::vector<double> wrong;  // per local rank
};

/// A worker thread: one or more ranks (-g) of this process, run through the sweep.
class Worker {
 public:
  Worker(Shared& s, int thread) : s_(s), thread_(thread) {}
  void run();

 private:
  bool printer() const { return s_.proc.rank == 0 && thread_ == 0; }
  bool grouped() const { return ranks_.size() > 1; }
  bool onDevice() const { return s_.opt.device != 0; }
  // Device-buffer helpers; no-ops on host buffers.
  void useDevice(const LocalRank& lr) const;
  void syncAll() const;
  void toDevice(LocalRank& lr, unsigned char* dst, const unsigned char* src, size_t bytes) const;
  void toHost(LocalRank& lr, unsigned char* dst, const unsigned char* src, size_t bytes) const;
  /// The scratch the bookkeeping collectives use (device scratch with -D 1).
  unsigned char* scratchOf(LocalRank& lr) const {
    return onDevice() ? lr.dscratch.get() : lr.scratch.get();
  }
  void allocateBuffers(size_t sendBytes, size_t recvBytes);
  void groupStart(bool on) const;
  void groupEnd(bool on) const;
  void initComms();
  void printDevices();
  void barrier();
  void sweep(ncclDataType_t type, PerfOp op, int root);
  /// Buffer pointers of a call: where the call works (staging false) or the host copies
  /// of the data (staging true; the same buffers on host memory).
  Ptrs ptrs(LocalRank& lr, bool inPlace, const Counts& c, size_t elt, bool staging) const;
  void initData(bool inPlace, const Counts& c, const Pattern& p, ncclDataType_t type);
  void issue(bool inPlace, const Counts& c, ncclDataType_t type, int root, int agg);
  double checkData(LocalRank& lr, bool inPlace, const Counts& c, const Pattern& p,
                   ncclDataType_t type, int root);
  Local measure(bool inPlace, const Counts& c, const Pattern& p, ncclDataType_t type, int root);
  PlaceResult aggregate(const Local& l, bool valid, const Counts& c, size_t elt);

  Shared& s_;
  int thread_;
  std::vector<LocalRank> ranks_;
};

void Worker::groupStart(bool on) const {
  if (on) ncclOk(ncclGroupStart(), nullptr, "ncclGroupStart", ranks_[0].rank);
}
void Worker::groupEnd(bool on) const {
  if (on) ncclOk(ncclGroupEnd(), nullptr, "ncclGroupEnd", ranks_[0].rank);
}

void Worker::useDevice(const LocalRank& lr) const {
  if (!onDevice()) return;
  std::string error;
  cudaOk(deviceSet(lr.device, &error), error, lr.rank);
}

void Worker::syncAll() const {
  if (!onDevice()) return;
  for (const LocalRank& lr : ranks_) {
    std::string error;
    cudaOk(streamSync(lr.stream.get(), &error), error, lr.rank);
  }
}

void Worker::toDevice(LocalRank& lr, unsigned char* dst, const unsigned char* src,
                      size_t bytes) const {
  if (!onDevice()) return;
  std::string error;
  cudaOk(copyToDevice(dst, src, bytes, lr.stream.get(), &error), error, lr.rank);
}

void Worker::toHost(LocalRank& lr, unsigned char* dst, const unsigned char* src,
                    size_t bytes) const {
  if (!onDevice()) return;
  std::string error;
  cudaOk(copyToHost(dst, src, bytes, lr.stream.get(), &error), error, lr.rank);
}

void Worker::allocateBuffers(size_t sendBytes, size_t recvBytes) {
  for (LocalRank& lr : ranks_) {
    lr.send = allocate(sendBytes);
    lr.recv = allocate(recvBytes);
    if (!onDevice()) continue;
    useDevice(lr);
    lr.dsend.reset();
    lr.drecv.reset();
    std::string error;
    lr.dsend.reset(static_cast<unsigned char*>(deviceAlloc(sendBytes, &error)));
    cudaOk(lr.dsend != nullptr, error, lr.rank);
    lr.drecv.reset(static_cast<unsigned char*>(deviceAlloc(recvBytes, &error)));
    cudaOk(lr.drecv != nullptr, error, lr.rank);
  }
}

void Worker::initComms() {
  const int k = s_.opt.nGpus;
  ranks_.resize(static_cast<size_t>(k));
  for (int g = 0; g < k; ++g) {
    LocalRank& lr = ranks_[g];
    lr.rank = s_.proc.rank * s_.localRanks + thread_ * k + g;
    lr.scratch = allocate(4096);
    if (!onDevice()) continue;
    // nccl-tests' placement: the rank's index on this host, modulo the devices.
    const int local = s_.proc.localRank * s_.localRanks + thread_ * k + g;
    lr.device = local % s_.deviceCount;
    useDevice(lr);
    std::string error;
    lr.stream.reset(streamCreate(&error));
    cudaOk(lr.stream != nullptr, error, lr.rank);
    lr.dscratch.reset(static_cast<unsigned char*>(deviceAlloc(4096, &error)));
    cudaOk(lr.dscratch != nullptr, error, lr.rank);
  }
  if (!onDevice() && s_.proc.size == 1 && s_.opt.nThreads == 1 && k > 1) {
    // One thread owns every rank: the ncclCommInitAll form.
    std::vector<ncclComm_t> comms(static_cast<size_t>(k));
    ncclOk(ncclCommInitAll(comms.data(), k, nullptr), nullptr, "ncclCommInitAll", 0);
    for (int g = 0; g < k; ++g) ranks_[g].comm = comms[g];
  } else {
    // Each communicator binds to the device current at its ncclCommInitRank (-D 1).
    groupStart(grouped());
    for (LocalRank& lr : ranks_) {
      useDevice(lr);
      ncclOk(ncclCommInitRank(&lr.comm, s_.nranks, s_.id, lr.rank), nullptr, "ncclCommInitRank",
             lr.rank);
    }
    groupEnd(grouped());
  }
  for (LocalRank& lr : ranks_) {
    int count = -1, rank = -1;
    ncclOk(ncclCommCount(lr.comm, &count), lr.comm, "ncclCommCount", lr.rank);
    ncclOk(ncclCommUserRank(lr.comm, &rank), lr.comm, "ncclCommUserRank", lr.rank);
    if (count != s_.nranks || rank != lr.rank) {
      std::fprintf(stderr, "braid-perf: communicator reports rank %d of %d, expected %d of %d\n",
                   rank, count, lr.rank, s_.nranks);
      std::_Exit(1);
    }
  }
}

void Worker::printDevices() {
  // Every rank contributes its record; global rank 0 prints them all.
  std::vector<HostBuffer> gathered;
  std::vector<DeviceBuffer> dgathered;  // -D 1: where the records land on the device
  const std::string host = hostName();
  const size_t allBytes = sizeof(RankRecord) * static_cast<size_t>(s_.nranks);
  for (LocalRank& lr : ranks_) {
    RankRecord rec{};
    rec.rank = lr.rank;
    rec.pid = static_cast<int>(getpid());
    rec.group = 0;
    rec.device = -1;
    ncclOk(ncclCommCuDevice(lr.comm, &rec.device), lr.comm, "ncclCommCuDevice", lr.rank);
    std::snprintf(rec.host, sizeof(rec.host), "%s", host.c_str());
    std::memcpy(lr.scratch.get(), &rec, sizeof(rec));
    gathered.push_back(allocate(allBytes));
    if (!onDevice()) continue;
    useDevice(lr);
    toDevice(lr, lr.dscratch.get(), lr.scratch.get(), sizeof(rec));
    std::string error;
    dgathered.emplace_back(static_cast<unsigned char*>(deviceAlloc(allBytes, &error)));
    cudaOk(dgathered.back() != nullptr, error, lr.rank);
  }
  groupStart(grouped());
  for (size_t i = 0; i < ranks_.size(); ++i) {
    LocalRank& lr = ranks_[i];
    unsigned char* out = onDevice() ? dgathered[i].get() : gathered[i].get();
    ncclOk(
        ncclAllGather(scratchOf(lr), out, sizeof(RankRecord), ncclUint8, lr.comm, lr.stream.get()),
        lr.comm, "ncclAllGather", lr.rank);
  }
  groupEnd(grouped());
  syncAll();
  if (onDevice()) toHost(ranks_[0], gathered[0].get(), dgathered[0].get(), allBytes);
  if (!printer()) return;
  std::vector<RankRecord> records(static_cast<size_t>(s_.nranks));
  std::memcpy(records.data(), gathered[0].get(), records.size() * sizeof(RankRecord));
  int version = 0;
  ncclOk(ncclGetVersion(&version), nullptr, "ncclGetVersion", 0);
  s_.report.printHeader(records, version);
}

void Worker::barrier() {
  for (LocalRank& lr : ranks_) {
    double* flag = reinterpret_cast<double*>(lr.scratch.get() + kBarrierOffset);
    *flag = 0;
    toDevice(lr, scratchOf(lr) + kBarrierOffset, lr.scratch.get() + kBarrierOffset, sizeof(double));
  }
  groupStart(grouped());
  for (LocalRank& lr : ranks_) {
    double* flag = reinterpret_cast<double*>(scratchOf(lr) + kBarrierOffset);
    ncclOk(ncclAllReduce(flag, flag, 1, ncclFloat64, ncclSum, lr.comm, lr.stream.get()), lr.comm,
           "ncclAllReduce (barrier)", lr.rank);
  }
  groupEnd(grouped());
  syncAll();
}

Ptrs Worker::ptrs(LocalRank& lr, bool inPlace, const Counts& c, size_t elt, bool staging) const {
  const bool device = onDevice() && !staging;
  unsigned char* send = device ? lr.dsend.get() : lr.send.get();
  unsigned char* recv = device ? lr.drecv.get() : lr.recv.get();
  if (!inPlace) return {send, recv, recv, send};
  const size_t off = s_.spec.inPlaceOffset(c, lr.rank) * elt;
  if (s_.spec.inPlace == InPlace::kSendInRecv) return {recv + off, recv, recv, recv + off};
  return {send, send + off, send + off, send};
}

void Worker::initData(bool inPlace, const Counts& c, const Pattern& p, ncclDataType_t type) {
  const size_t elt = typeSize(type);
  for (LocalRank& lr : ranks_) {
    const Ptrs q = ptrs(lr, inPlace, c, elt, true);
    // Outputs start as 0xff.. (NaN for floats, never produced for integers).
    const bool recvUsed = !inPlace || s_.spec.inPlace == InPlace::kSendInRecv;
    if (recvUsed) std::memset(lr.recv.get(), 0xff, c.recvElems * elt);
    for (size_t j = 0; j < c.sendElems; ++j) storeValue(q.in, j, type, p.input(lr.rank, j));
    if (!onDevice()) continue;
    useDevice(lr);
    if (!inPlace || s_.spec.inPlace == InPlace::kRecvInSend) {
      toDevice(lr, lr.dsend.get(), lr.send.get(), c.sendElems * elt);
    }
    if (recvUsed) toDevice(lr, lr.drecv.get(), lr.recv.get(), c.recvElems * elt);
  }
}

void Worker::issue(bool inPlace, const Counts& c, ncclDataType_t type, int root, int agg) {
  const bool group = grouped() || agg > 1;
  groupStart(group);
  for (int a = 0; a < agg; ++a) {
    for (LocalRank& lr : ranks_) {
      const Ptrs q = ptrs(lr, inPlace, c, typeSize(type), false);
      const CallArgs args{q.send, q.recv,  c.paramCount, type,    lr.op,
                          root,   lr.rank, s_.nranks,    lr.comm, lr.stream.get()};
      ncclOk(s_.spec.run(args), lr.comm, s_.spec.name, lr.rank);
    }
  }
  groupEnd(group);
}

double Worker::checkData(LocalRank& lr, bool inPlace, const Counts& c, const Pattern& p,
                         ncclDataType_t type, int root) {
  const size_t elt = typeSize(type);
  if (onDevice()) {  // bring the output buffer back into its host copy
    useDevice(lr);
    if (!inPlace || s_.spec.inPlace == InPlace::kSendInRecv) {
      toHost(lr, lr.recv.get(), lr.drecv.get(), c.recvElems * elt);
    } else {
      toHost(lr, lr.send.get(), lr.dsend.get(), c.sendElems * elt);
    }
  }
  const Ptrs q = ptrs(lr, inPlace, c, elt, true);
  const int corruptRank = s_.spec.rooted ? root : 0;
  bool corrupt = s_.corrupt && lr.rank == corruptRank;
  double wrong = 0;
  for (size_t k = 0; k < c.recvElems; ++k) {
    double expected = 0;
    if (!s_.spec.expected(p, c, lr.rank, s_.nranks, root, k, &expected)) continue;
    if (corrupt) {  // debug hook: prove that the check can fail
      corruptValue(q.out, k, type);
      corrupt = false;
    }
    const double got = loadValue(q.out, k, type);
    if (!(std::fabs(got - expected) <= p.tolerance(expected))) wrong += 1;
  }
  return wrong;
}

Local Worker::measure(bool inPlace, const Counts& c, const Pattern& p, ncclDataType_t type,
                      int root) {
  Local out;
  out.wrong.assign(ranks_.size(), 0);
  initData(inPlace, c, p, type);
  barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int it = 0; it < s_.opt.iters; ++it) issue(inPlace, c, type, root, s_.opt.aggIters);
  syncAll();
  out.timeUs = secondsSince(t0) * 1e6 / (static_cast<double>(s_.opt.iters) * s_.opt.aggIters);
  for (int ci = 0; ci < s_.opt.check; ++ci) {
    initData(inPlace, c, p, type);
    issue(inPlace, c, type, root, 1);
    syncAll();
    for (size_t i = 0; i < ranks_.size(); ++i) {
      out.wrong[i] += checkData(ranks_[i], inPlace, c, p, type, root);
    }
  }
  return out;
}

PlaceResult Worker::aggregate(const Local& l, bool valid, const Counts& c, size_t elt) {
  // Sums, minima and maxima over every rank of every process, through the library.
  enum { kRank0Time, kSumTime, kWrong, kMin, kMax, kValues };
  for (size_t i = 0; i < ranks_.size(); ++i) {
    LocalRank& lr = ranks_[i];
    double* v = reinterpret_cast<double*>(lr.scratch.get());
    v[kRank0Time] = lr.rank == 0 ? l.timeUs : 0;
    v[kSumTime] = l.timeUs;
    v[kWrong] = l.wrong[i];
    v[kMin] = v[kMax] = l.timeUs;
    toDevice(lr, scratchOf(lr), lr.scratch.get(), kValues * sizeof(double));
  }
  groupStart(true);
  for (LocalRank& lr : ranks_) {
    double* v = reinterpret_cast<double*>(scratchOf(lr));
    cudaStream_t st = lr.stream.get();
    ncclOk(ncclAllReduce(v, v, 3, ncclFloat64, ncclSum, lr.comm, st), lr.comm,
           "ncclAllReduce (result sums)", lr.rank);
    ncclOk(ncclAllReduce(v + kMin, v + kMin, 1, ncclFloat64, ncclMin, lr.comm, st), lr.comm,
           "ncclAllReduce (result min)", lr.rank);
    ncclOk(ncclAllReduce(v + kMax, v + kMax, 1, ncclFloat64, ncclMax, lr.comm, st), lr.comm,
           "ncclAllReduce (result max)", lr.rank);
  }
  groupEnd(true);
  syncAll();
  toHost(ranks_[0], ranks_[0].scratch.get(), scratchOf(ranks_[0]), kValues * sizeof(double));
  const double* v = reinterpret_cast<const double*>(ranks_[0].scratch.get());
  PlaceResult r;
  r.valid = valid;
  if (!valid) return r;
  r.checked = s_.opt.check > 0;
  r.wrong = v[kWrong];
  switch (s_.opt.average) {
    case 0:
      r.timeUs = v[kRank0Time];
      break;
    case 2:
      r.timeUs = v[kMin];
      break;
    case 3:
      r.timeUs = v[kMax];
      break;
    default:
      r.timeUs = v[kSumTime] / s_.nranks;
      break;
  }
  const double bytes = static_cast<double>(c.count * elt);
  r.algBw = r.timeUs > 0 ? bytes / r.timeUs / 1e3 : 0;
  r.busBw = r.algBw * s_.spec.busBwFactor(s_.nranks);
  return r;
}

void Worker::sweep(ncclDataType_t type, PerfOp op, int root) {
  const Options& o = s_.opt;
  const size_t elt = typeSize(type);
  const Pattern pattern(op, type, s_.nranks);
  // The premulsum operator is created per communicator (scalar read immediately).
  for (LocalRank& lr : ranks_) {
    lr.op = builtinOp(op);
    lr.createdOp = false;
    if (op == PerfOp::kPreMulSum) {
      unsigned char scalar[16] = {};
      storeValue(scalar, 0, type, Pattern::kPreMulScalar);
      ncclOk(ncclRedOpCreatePreMulSum(&lr.op, scalar, type, ncclScalarHostImmediate, lr.comm),
             lr.comm, "ncclRedOpCreatePreMulSum", lr.rank);
      lr.createdOp = true;
    }
  }
  const Counts maxCounts = s_.spec.counts(o.maxBytes, elt, s_.nranks);
  for (int w = 0; w < o.warmup; ++w) issue(false, maxCounts, type, root, 1);
  syncAll();
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes;) {
    const Counts c = s_.spec.counts(bytes, elt, s_.nranks);
    const bool hasInPlace = s_.spec.inPlace != InPlace::kNone;
    const Local oop = measure(false, c, pattern, type, root);
    Local ip;
    ip.wrong.assign(ranks_.size(), 0);
    if (hasInPlace) ip = measure(true, c, pattern, type, root);
    Row row;
    row.bytes = c.count * elt;
    row.count = c.count;
    row.type = type;
    row.op = op;
    row.root = root;
    row.outOfPlace = aggregate(oop, true, c, elt);
    row.inPlace = aggregate(ip, hasInPlace, c, elt);
    if (row.outOfPlace.wrong > 0 || row.inPlace.wrong > 0) s_.failed = true;
    if (printer()) s_.report.addRow(row);
    bytes = nextSweepSize(o, bytes);
  }
  for (LocalRank& lr : ranks_) {
    if (lr.createdOp) {
      ncclOk(ncclRedOpDestroy(lr.op, lr.comm), lr.comm, "ncclRedOpDestroy", lr.rank);
    }
    lr.createdOp = false;
    lr.op = ncclSum;
  }
}

void Worker::run() {
  initComms();
  printDevices();
  const Options& o = s_.opt;
  const std::vector<PerfOp> ops = s_.spec.reduces ? o.ops : std::vector<PerfOp>{PerfOp::kNone};
  std::vector<int> roots{-1};
  if (s_.spec.rooted) {
    roots.clear();
    for (int r = 0; r < s_.nranks; ++r) {
      if (o.root < 0 || o.root == r) roots.push_back(r);
    }
  }
  for (int cycle = 0; o.cycles == 0 || cycle < o.cycles; ++cycle) {
    for (ncclDataType_t type : o.types) {
      const Counts maxCounts = s_.spec.counts(o.maxBytes, typeSize(type), s_.nranks);
      allocateBuffers(maxCounts.sendElems * typeSize(type), maxCounts.recvElems * typeSize(type));
      for (PerfOp op : ops) {
        for (int root : roots) sweep(type, op, root);
      }
    }
  }
  barrier();
  for (LocalRank& lr : ranks_) {
    ncclOk(ncclCommDestroy(lr.comm), lr.comm, "ncclCommDestroy", lr.rank);
    lr.comm = nullptr;
  }
}

}  // namespace

int perfMain(int argc, char** argv, const CollSpec& spec) {
  const std::string program = std::string(spec.name) + "_perf";
  Options opt;
  int exitCode = 0;
  if (!parseOptions(argc, argv, program.c_str(), &opt, &exitCode)) return exitCode;
  ProcessInfo proc;
  std::string error;
  if (!discoverProcess(&proc, &error)) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
    return 2;
  }
  const long world = static_cast<long>(proc.size) * opt.nThreads * opt.nGpus;
  if (world > 1 << 20) {
    std::fprintf(stderr, "%s: %ld ranks is too many\n", program.c_str(), world);
    return 2;
  }
  const int nranks = static_cast<int>(world);
  if (spec.rooted && opt.root >= nranks) {
    std::fprintf(stderr, "%s: root %d is not a rank (there are %d ranks)\n", program.c_str(),
                 opt.root, nranks);
    return 2;
  }
  int devices = 0;
  if (opt.device != 0) {
    std::string why;
    devices = deviceCount(&why);
    if (devices <= 0) {
      std::fprintf(stderr, "%s: device buffers (-D 1) need a usable CUDA device: %s\n",
                   program.c_str(), why.c_str());
      return 2;
    }
  }
  ncclUniqueId id;
  if (!shareUniqueId(proc, &id, &error)) {
    std::fprintf(stderr, "%s: %s\n", program.c_str(), error.c_str());
    finishProcess();
    return 2;
  }
  Report report(program, spec.name, opt, nranks, proc.size);
  Shared shared{spec,  opt, proc, id, nranks, opt.nThreads * opt.nGpus, devices, corruptRequested(),
                report};
  std::vector<std::thread> threads;
  for (int t = 1; t < opt.nThreads; ++t) {
    threads.emplace_back([&shared, t] { Worker(shared, t).run(); });
  }
  Worker(shared, 0).run();
  for (std::thread& t : threads) t.join();
  int rc = shared.failed ? 1 : 0;
  if (proc.rank == 0) {
    report.printFooter();
    if (!opt.jsonPath.empty() && !report.writeJson(opt.jsonPath)) rc = 1;
  }
  if (shared.failed) {
    std::fprintf(stderr, "%s: process %d: wrong results were found\n", program.c_str(), proc.rank);
  }
  finishProcess();
  return rc;
}

}  // namespace braid_perf
