// The GPU suite's correctness matrix (see matrix.h).
#include "tests/gpu/matrix.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "perf/datatypes.h"
#include "perf/pattern.h"

namespace braid_gpu {
namespace {

using braid_perf::Pattern;
using braid_perf::PerfOp;

constexpr const char* kCollNames[kNumColls] = {"allreduce", "broadcast",     "reduce",
                                               "allgather", "reducescatter", "alltoall",
                                               "gather",    "scatter",       "sendrecv"};

constexpr ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                        ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                        ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

/// Bytes after an output region that must keep their 0xff fill.
constexpr size_t kGuardBytes = 256;
/// Failed cases printed in full (the rest are only counted).
constexpr int kMaxPrinted = 12;

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}
bool rooted(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}

/// Where an in-place call keeps its data (as the perf suite, perf/common.h).
enum class InPlace { kNone, kSendInRecv, kRecvInSend };

struct Layout {
  size_t sendElems = 0;
  size_t recvElems = 0;
  InPlace inPlace = InPlace::kNone;
  size_t offset = 0;  ///< in-place offset (elements)
};

Layout layoutOf(Coll coll, size_t c, int rank, int n) {
  const size_t nc = c * static_cast<size_t>(n);
  const size_t rankBlock = c * static_cast<size_t>(rank);
  switch (coll) {
    case Coll::kAllReduce:
    case Coll::kBroadcast:
    case Coll::kReduce:
      return {c, c, InPlace::kSendInRecv, 0};
    case Coll::kAllGather:
    case Coll::kGather:
      return {c, nc, InPlace::kSendInRecv, rankBlock};
    case Coll::kReduceScatter:
    case Coll::kScatter:
      return {nc, c, InPlace::kRecvInSend, rankBlock};
    case Coll::kAllToAll:
      return {nc, nc, InPlace::kNone, 0};
    case Coll::kSendRecv:
      return {c, c, InPlace::kNone, 0};
  }
  return {};
}

/// One cell of the matrix.
struct Case {
  Coll coll;
  ncclDataType_t type;
  PerfOp op;
  bool deviceScalar;  ///< PreMulSum: scalar in device memory (ncclScalarDevice)
  bool inPlace;
  size_t count;
  int root;
};

std::string describe(const Case& k) {
  char buf[200];
  const char* op = k.op == PerfOp::kPreMulSum
                       ? (k.deviceScalar ? "premulsum(device scalar)" : "premulsum(host scalar)")
                       : braid_perf::opName(k.op);
  std::snprintf(buf, sizeof(buf), "%s type=%s op=%s %s count=%zu root=%d", collName(k.coll),
                braid_perf::typeName(k.type), op, k.inPlace ? "in-place" : "out-of-place", k.count,
                k.root);
  return buf;
}

/// Expected element k of this rank's output; false when it is not checked.
bool expected(const Case& cs, const Pattern& p, int rank, int n, size_t k, double* v) {
  const size_t c = cs.count;
  switch (cs.coll) {
    case Coll::kAllReduce:
      *v = p.reduced(k);
      return true;
    case Coll::kBroadcast:
      *v = p.input(cs.root, k);
      return true;
    case Coll::kReduce:
      *v = p.reduced(k);
      return rank == cs.root;
    case Coll::kAllGather:
      *v = p.input(static_cast<int>(k / c), k % c);
      return true;
    case Coll::kGather:
      *v = p.input(static_cast<int>(k / c), k % c);
      return rank == cs.root;
    case Coll::kReduceScatter:
      *v = p.reduced(static_cast<size_t>(rank) * c + k);
      return true;
    case Coll::kScatter:
      *v = p.input(cs.root, static_cast<size_t>(rank) * c + k);
      return true;
    case Coll::kAllToAll:
      *v = p.input(static_cast<int>(k / c), static_cast<size_t>(rank) * c + k % c);
      return true;
    case Coll::kSendRecv:
      *v = p.input((rank + n - 1) % n, k);
      return true;
  }
  return false;
}

ncclResult_t issue(const Case& cs, const void* send, void* recv, ncclRedOp_t op, const RankCtx& r) {
  const cudaStream_t s = r.mem->stream();
  const size_t c = cs.count;
  switch (cs.coll) {
    case Coll::kAllReduce:
      return ncclAllReduce(send, recv, c, cs.type, op, r.comm, s);
    case Coll::kBroadcast:
      return ncclBroadcast(send, recv, c, cs.type, cs.root, r.comm, s);
    case Coll::kReduce:
      return ncclReduce(send, recv, c, cs.type, op, cs.root, r.comm, s);
    case Coll::kAllGather:
      return ncclAllGather(send, recv, c, cs.type, r.comm, s);
    case Coll::kReduceScatter:
      return ncclReduceScatter(send, recv, c, cs.type, op, r.comm, s);
    case Coll::kAllToAll:
      return ncclAlltoAll(send, recv, c, cs.type, r.comm, s);
    case Coll::kGather:
      return ncclGather(send, recv, c, cs.type, cs.root, r.comm, s);
    case Coll::kScatter:
      return ncclScatter(send, recv, c, cs.type, cs.root, r.comm, s);
    case Coll::kSendRecv: {
      const int next = (r.rank + 1) % r.nranks;
      const int prev = (r.rank + r.nranks - 1) % r.nranks;
      ncclResult_t res = ncclGroupStart();
      if (res != ncclSuccess) return res;
      res = ncclSend(send, c, cs.type, next, r.comm, s);
      if (res == ncclSuccess) res = ncclRecv(recv, c, cs.type, prev, r.comm, s);
      const ncclResult_t end = ncclGroupEnd();
      return res != ncclSuccess ? res : end;
    }
  }
  return ncclInvalidArgument;
}

/// Runs cases on one rank with buffers sized for the largest.
class Runner {
 public:
  Runner(const RankCtx& r, size_t capacityBytes) : r_(r), capacity_(capacityBytes) {}
  bool init();
  /// Runs one case. False when it failed; *fatal when the run cannot go on (a call or
  /// CUDA failed, so the peers may be stuck).
  bool run(const Case& cs, bool* fatal);
  bool corruptNext = false;

 private:
  bool fail(const Case& cs, const std::string& what);
  const RankCtx& r_;
  size_t capacity_;
  unsigned char* a_ = nullptr;  // device (or host) buffer A: send
  unsigned char* b_ = nullptr;  // buffer B: receive
  unsigned char* scalar_ = nullptr;
  std::vector<unsigned char> hostA_, hostB_, got_;
  int printed_ = 0;
};

bool Runner::init() {
  a_ = static_cast<unsigned char*>(r_.mem->alloc(capacity_));
  b_ = static_cast<unsigned char*>(r_.mem->alloc(capacity_));
  scalar_ = static_cast<unsigned char*>(r_.mem->alloc(16));
  if (a_ == nullptr || b_ == nullptr || scalar_ == nullptr) {
    std::fprintf(stderr, "rank %d: allocating %zu bytes: %s\n", r_.rank, capacity_,
                 r_.mem->lastError().c_str());
    return false;
  }
  hostA_.resize(capacity_);
  hostB_.resize(capacity_);
  got_.resize(capacity_);
  return true;
}

bool Runner::fail(const Case& cs, const std::string& what) {
  if (printed_ < kMaxPrinted) {
    std::fprintf(stderr, "FAIL rank %d of %d: %s: %s\n", r_.rank, r_.nranks, describe(cs).c_str(),
                 what.c_str());
  } else if (printed_ == kMaxPrinted) {
    std::fprintf(stderr, "rank %d: further failures are only counted\n", r_.rank);
  }
  ++printed_;
  std::fflush(stderr);
  return false;
}

bool Runner::run(const Case& cs, bool* fatal) {
  *fatal = false;
  const size_t elt = braid_perf::typeSize(cs.type);
  const Layout l = layoutOf(cs.coll, cs.count, r_.rank, r_.nranks);
  const bool inPlace = cs.inPlace && l.inPlace != InPlace::kNone;
  const size_t need = (l.sendElems > l.recvElems ? l.sendElems : l.recvElems) * elt + kGuardBytes;
  if (need > capacity_) return fail(cs, "internal: buffers too small");
  const Pattern p(cs.op == PerfOp::kNone ? PerfOp::kNone : cs.op, cs.type, r_.nranks);
  // Where the call works: A and B out of place; one of them in place.
  const size_t off = l.offset * elt;
  unsigned char* send = a_;
  unsigned char* recv = b_;
  unsigned char* hostIn = hostA_.data();
  bool outInB = true;
  if (inPlace && l.inPlace == InPlace::kSendInRecv) {
    send = b_ + off;
    hostIn = hostB_.data() + off;
  } else if (inPlace) {
    recv = a_ + off;
    outInB = false;
  }
  // Host images: B is all 0xff (outputs start as NaN / impossible integers), then the
  // input pattern goes where the call reads it.
  const size_t bBytes = l.recvElems * elt + kGuardBytes;
  std::memset(hostB_.data(), 0xff, bBytes);
  if (inPlace && l.inPlace == InPlace::kSendInRecv && off + l.sendElems * elt > bBytes) {
    return fail(cs, "internal: in-place input outside the receive buffer");
  }
  for (size_t j = 0; j < l.sendElems; ++j) {
    braid_perf::storeValue(hostIn, j, cs.type, p.input(r_.rank, j));
  }
  Mem& m = *r_.mem;
  const bool aUsed = !inPlace || l.inPlace == InPlace::kRecvInSend;
  if ((aUsed && !m.put(a_, hostA_.data(), l.sendElems * elt)) ||
      (outInB && !m.put(b_, hostB_.data(), bBytes))) {
    *fatal = true;
    return fail(cs, "staging the inputs: " + m.lastError());
  }
  // The operator.
  ncclRedOp_t op = ncclSum;
  bool created = false;
  switch (cs.op) {
    case PerfOp::kProd:
      op = ncclProd;
      break;
    case PerfOp::kMax:
      op = ncclMax;
      break;
    case PerfOp::kMin:
      op = ncclMin;
      break;
    case PerfOp::kAvg:
      op = ncclAvg;
      break;
    case PerfOp::kPreMulSum: {
      unsigned char scalar[16] = {};
      braid_perf::storeValue(scalar, 0, cs.type, Pattern::kPreMulScalar);
      ncclResult_t res;
      if (cs.deviceScalar && m.device()) {
        if (!m.put(scalar_, scalar, elt)) {
          *fatal = true;
          return fail(cs, "staging the scalar: " + m.lastError());
        }
        res = ncclRedOpCreatePreMulSum(&op, scalar_, cs.type, ncclScalarDevice, r_.comm);
      } else {
        res = ncclRedOpCreatePreMulSum(&op, scalar, cs.type, ncclScalarHostImmediate, r_.comm);
      }
      if (res != ncclSuccess) {
        *fatal = true;
        return fail(cs, std::string("ncclRedOpCreatePreMulSum: ") + ncclGetErrorString(res) + ": " +
                            ncclGetLastError(r_.comm));
      }
      created = true;
      break;
    }
    default:
      break;
  }
  const ncclResult_t res = issue(cs, send, recv, op, r_);
  if (res != ncclSuccess) {
    *fatal = true;
    return fail(cs, std::string("call returned ") + ncclGetErrorString(res) + ": " +
                        ncclGetLastError(r_.comm));
  }
  if (!m.sync()) {
    *fatal = true;
    return fail(cs, m.lastError());
  }
  ncclResult_t async = ncclSuccess;
  if (ncclCommGetAsyncError(r_.comm, &async) != ncclSuccess || async != ncclSuccess) {
    *fatal = true;
    return fail(cs, std::string("ncclCommGetAsyncError: ") + ncclGetErrorString(async));
  }
  if (created) {
    const ncclResult_t d = ncclRedOpDestroy(op, r_.comm);
    if (d != ncclSuccess)
      return fail(cs, std::string("ncclRedOpDestroy: ") + ncclGetErrorString(d));
  }
  // Read back the output (and the guard after it when the output starts B).
  const unsigned char* out = outInB ? b_ : recv;
  const size_t outBytes = l.recvElems * elt + (outInB ? kGuardBytes : 0);
  if (!m.get(got_.data(), out, outBytes)) {
    *fatal = true;
    return fail(cs, "reading the output: " + m.lastError());
  }
  size_t wrong = 0, first = 0;
  double firstGot = 0, firstWant = 0;
  for (size_t k = 0; k < l.recvElems; ++k) {
    double want = 0;
    if (!expected(cs, p, r_.rank, r_.nranks, k, &want)) continue;
    if (corruptNext) {  // harness self-check: this must be reported
      braid_perf::corruptValue(got_.data(), k, cs.type);
      corruptNext = false;
    }
    const double v = braid_perf::loadValue(got_.data(), k, cs.type);
    if (std::fabs(v - want) <= p.tolerance(want)) continue;
    if (wrong++ == 0) {
      first = k;
      firstGot = v;
      firstWant = want;
    }
  }
  size_t guard = 0;
  if (outInB) {
    for (size_t i = l.recvElems * elt; i < outBytes; ++i) guard += got_[i] != 0xff;
  }
  if (wrong == 0 && guard == 0) return true;
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "%zu of %zu elements wrong (first: element %zu = %g, expected %g); %zu guard "
                "bytes after the output overwritten",
                wrong, l.recvElems, first, firstGot, firstWant, guard);
  return fail(cs, buf);
}

}  // namespace

const char* collName(Coll c) { return kCollNames[static_cast<int>(c)]; }

bool parseColl(const std::string& text, Coll* c) {
  for (int i = 0; i < kNumColls; ++i) {
    if (text == kCollNames[i]) {
      *c = static_cast<Coll>(i);
      return true;
    }
  }
  return false;
}

int runMatrix(const RankCtx& r, Coll coll, const MatrixOptions& o) {
  size_t maxCount = o.largeCount;
  for (size_t c : o.counts) maxCount = c > maxCount ? c : maxCount;
  const size_t capacity = maxCount * static_cast<size_t>(r.nranks) * 8 + 2 * kGuardBytes;
  Runner run(r, capacity);
  if (!run.init()) return 1;
  run.corruptNext = r.corrupt;
  std::vector<ncclDataType_t> types(std::begin(kAllTypes), std::end(kAllTypes));
  if (!o.allTypes) types = {ncclFloat32, ncclInt32};
  struct OpChoice {
    PerfOp op;
    bool deviceScalar;
  };
  std::vector<OpChoice> ops{{PerfOp::kNone, false}};
  if (reduces(coll)) {
    ops = {{PerfOp::kSum, false},     {PerfOp::kProd, false}, {PerfOp::kMax, false},
           {PerfOp::kMin, false},     {PerfOp::kAvg, false},  {PerfOp::kPreMulSum, false},
           {PerfOp::kPreMulSum, true}};
  }
  const bool hasInPlace = layoutOf(coll, 1, r.rank, r.nranks).inPlace != InPlace::kNone;
  int failed = 0, cases = 0;
  bool fatal = false;
  for (ncclDataType_t type : types) {
    for (const OpChoice& op : ops) {
      for (size_t ci = 0; ci < o.counts.size(); ++ci) {
        for (int ip = 0; ip < (hasInPlace ? 2 : 1); ++ip) {
          // Rooted collectives take every root in turn over the cases.
          const int root = rooted(coll) ? static_cast<int>((ci + ip) % size_t(r.nranks)) : 0;
          const Case cs{coll, type, op.op, op.deviceScalar, ip == 1, o.counts[ci], root};
          ++cases;
          if (!run.run(cs, &fatal)) ++failed;
          if (fatal) return failed;
        }
      }
    }
  }
  if (o.largeCount > 0) {
    const PerfOp op = reduces(coll) ? PerfOp::kSum : PerfOp::kNone;
    const Case cs{coll, ncclFloat32, op, false, false, o.largeCount, r.nranks - 1};
    if (!run.run(cs, &fatal)) ++failed;
    if (fatal) return failed;
  }
  // Count 0: a no-op that must succeed (and complete on the stream).
  const Case zero{coll, ncclFloat32, reduces(coll) ? PerfOp::kSum : PerfOp::kNone, false, false, 0,
                  0};
  if (!run.run(zero, &fatal)) ++failed;
  std::printf("rank %d: %s: %d cases + large + count 0 run, %d failed\n", r.rank, collName(coll),
              cases, failed);
  return failed;
}

}  // namespace braid_gpu
