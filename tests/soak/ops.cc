#include "tests/soak/ops.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tests/soak/elements.h"

namespace soak {
namespace {

std::atomic<int> g_printed{0};
thread_local std::atomic<int64_t>* t_live = nullptr;
constexpr int kMaxPrinted = 40;

bool isReduction(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

/// Largest input of a reduction in `t`: nranks (<= 8) of them sum exactly.
double reductionMax(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: return 15;
    case ncclUint8: return 31;
    case ncclFloat16: return 255;
    case ncclBfloat16: return 31;
    case ncclFloat8e4m3: return 2;
    case ncclFloat8e5m2: return 1;
    default: return 1000;
  }
}

const char* opName(int op) {
  static const char* const names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
  return op >= 0 && op <= kPreMulSum ? names[op] : "?";
}

}  // namespace

const char* collName(Coll c) {
  static const char* const names[] = {"allreduce", "broadcast",  "reduce",  "allgather",
                                      "reducescatter", "alltoall", "gather", "scatter",
                                      "sendrecv"};
  return int(c) >= 0 && c < Coll::kCount ? names[int(c)] : "?";
}

void setLiveBytesCounter(std::atomic<int64_t>* counter) { t_live = counter; }

OpSpec randomOp(Rng& rng, int n, const Limits& lim) {
  OpSpec s;
  s.coll = Coll(uniform(rng, 0, uint64_t(Coll::kCount) - 1));
  s.type = ncclDataType_t(uniform(rng, 0, kNumTypes - 1));
  s.op = int(uniform(rng, 0, lim.preMulSum ? kPreMulSum : ncclAvg));
  s.root = int(uniform(rng, 0, uint64_t(n) - 1));
  s.inPlace = uniform(rng, 0, 2) == 0;
  s.shift = n > 1 ? int(uniform(rng, 1, uint64_t(n) - 1)) : 0;
  s.salt = uint32_t(uniform(rng, 0, 1u << 20));
  const size_t ts = typeSize(s.type);
  const uint64_t u = uniform(rng, 0, 99);
  size_t count;
  if (u < 5) count = 0;
  else if (u < 30) count = uniform(rng, 1, 16);
  else if (u < 60) count = uniform(rng, 17, 4099) | 1;
  else if (u < 88) count = uniform(rng, 1, 65537);
  else count = uniform(rng, 1, std::max<size_t>(1, lim.maxBlockBytes / ts));
  count = std::min(count, std::max<size_t>(1, lim.maxBlockBytes / ts));
  // Collectives with n blocks per buffer: at most 4 x maxBlockBytes per buffer.
  const bool nBlocks = s.coll == Coll::kAllGather || s.coll == Coll::kReduceScatter ||
                       s.coll == Coll::kAllToAll || s.coll == Coll::kGather ||
                       s.coll == Coll::kScatter;
  if (nBlocks && count > 0)
    count = std::max<size_t>(1, std::min(count, 4 * lim.maxBlockBytes / (size_t(n) * ts)));
  s.count = count;
  if (s.coll == Coll::kAllToAll || s.coll == Coll::kSendRecv) s.inPlace = false;
  return s;
}

std::string describe(const OpSpec& s) {
  char text[200];
  std::snprintf(text, sizeof text, "%s %s%s%s count=%zu root=%d shift=%d salt=%u%s",
                collName(s.coll), typeName(s.type), isReduction(s.coll) ? " " : "",
                isReduction(s.coll) ? opName(s.op) : "", s.count, s.root, s.shift, s.salt,
                s.inPlace ? " in-place" : "");
  return text;
}

void OpRun::Buf::resize(size_t b) {
  bytes = b;
  mem.assign(b + 2 * kGuard, kGuardByte);
}

bool OpRun::Buf::guardsIntact() const {
  for (size_t i = 0; i < kGuard; ++i)
    if (mem[i] != kGuardByte || mem[kGuard + bytes + i] != kGuardByte) return false;
  return true;
}

OpRun::OpRun(const OpSpec& s, int rank, int nranks) : s_(s), rank_(rank), n_(nranks) {
  const size_t c = s.count, nc = size_t(nranks) * c;
  const bool root = rank == s.root;
  switch (s.coll) {
    case Coll::kAllGather: sendElems_ = c; recvElems_ = nc; break;
    case Coll::kReduceScatter: sendElems_ = nc; recvElems_ = c; break;
    case Coll::kAllToAll: sendElems_ = nc; recvElems_ = nc; break;
    case Coll::kGather: sendElems_ = c; recvElems_ = root ? nc : 0; break;
    case Coll::kScatter: sendElems_ = root ? nc : 0; recvElems_ = c; break;
    default: sendElems_ = c; recvElems_ = c; break;
  }
  const size_t ts = typeSize(s.type);
  // In place for gather/scatter only means something at the root.
  if ((s.coll == Coll::kGather || s.coll == Coll::kScatter) && !root) s_.inPlace = false;
  if (s_.inPlace) {
    a_.resize(std::max(sendElems_, recvElems_) * ts);
    std::memset(a_.data(), 0xee, a_.bytes);
    size_t sendOff = 0, recvOff = 0;
    if (s.coll == Coll::kAllGather) sendOff = size_t(rank) * c;
    if (s.coll == Coll::kReduceScatter) recvOff = size_t(rank) * c;
    if (s.coll == Coll::kGather) sendOff = size_t(rank) * c;
    if (s.coll == Coll::kScatter) recvOff = size_t(rank) * c;
    send_ = a_.data() + sendOff * ts;
    recv_ = a_.data() + recvOff * ts;
  } else {
    a_.resize(sendElems_ * ts);
    b_.resize(recvElems_ * ts);
    std::memset(b_.data(), 0xee, b_.bytes);  // poison: untouched output is caught
    send_ = a_.data();
    recv_ = b_.data();
  }
  // A broadcast's non-roots in place hold only poison before the call.
  const bool sendMatters = !(s.coll == Coll::kBroadcast && s_.inPlace && !root);
  if (sendMatters)
    for (size_t j = 0; j < sendElems_; ++j) putElement(send_, s.type, j, input(rank, j));
  redOp_ = ncclRedOp_t(s.op == kPreMulSum ? ncclSum : s.op);
  live_ = t_live;
  liveBytes_ = int64_t(a_.mem.size() + b_.mem.size());
  if (live_) live_->fetch_add(liveBytes_);
}

OpRun::~OpRun() {
  if (live_) live_->fetch_sub(liveBytes_);
}

void OpRun::corrupt() {
  if (recvElems_ > 0 && !(s_.coll == Coll::kReduce && rank_ != s_.root))
    putElement(recv_, s_.type, recvElems_ - 1,
               getElement(recv_, s_.type, recvElems_ - 1) == 1 ? 2 : 1);
  else
    a_.mem[0] ^= 0xff;  // a guard byte
}

double OpRun::input(int q, size_t j) const {
  const OpSpec& s = s_;
  if (!isReduction(s.coll)) {
    const double range = std::min(exactRange(s.type), 1e6);
    return double((uint64_t(q) * 131 + j * 7 + s.salt) % (uint64_t(range) + 1));
  }
  const double m = reductionMax(s.type);
  switch (s.op) {
    case ncclProd: return (j + size_t(q) + s.salt) % 4 == 0 ? 2 : 1;
    case ncclAvg:  // every rank's sum is a multiple of n: the average is exact
      return double((j * 5 + s.salt) % uint64_t(m)) + (q == 0 ? n_ : 0);
    case kPreMulSum:
      return double((uint64_t(q) * 3 + j * 5 + s.salt) % (uint64_t(m / 2) + 1));
    default: return double((uint64_t(q) * 3 + j * 5 + s.salt) % (uint64_t(m) + 1));
  }
}

double OpRun::expected(size_t j) const {
  const OpSpec& s = s_;
  const size_t c = s.count;
  auto reduce = [&](size_t idx) {
    double acc = s.op == ncclProd ? 1 : s.op == ncclMin ? 1e18 : s.op == ncclMax ? -1e18 : 0;
    for (int q = 0; q < n_; ++q) {
      const double v = input(q, idx);
      if (s.op == ncclProd) acc *= v;
      else if (s.op == ncclMax) acc = std::max(acc, v);
      else if (s.op == ncclMin) acc = std::min(acc, v);
      else acc += v;
    }
    if (s.op == ncclAvg) acc = isFloatType(s.type) ? acc / n_ : std::floor(acc / n_);
    if (s.op == kPreMulSum) acc *= 2;
    return acc;
  };
  switch (s.coll) {
    case Coll::kAllReduce: return reduce(j);
    case Coll::kReduce: return rank_ == s.root ? reduce(j) : std::nan("");
    case Coll::kReduceScatter: return reduce(size_t(rank_) * c + j);
    case Coll::kBroadcast: return input(s.root, j);
    case Coll::kAllGather:
    case Coll::kGather: return input(int(j / c), j % c);
    case Coll::kAllToAll: return input(int(j / c), size_t(rank_) * c + j % c);
    case Coll::kScatter: return input(s.root, size_t(rank_) * c + j);
    case Coll::kSendRecv: return input((rank_ - s.shift + n_) % n_, j);
    default: return std::nan("");
  }
}

ncclResult_t OpRun::enqueue(ncclComm_t comm) {
  const OpSpec& s = s_;
  if (s.op == kPreMulSum && isReduction(s.coll)) {
    std::vector<unsigned char> scalar(8);
    putElement(scalar.data(), s.type, 0, 2);
    ncclResult_t r = ncclRedOpCreatePreMulSum(&redOp_, scalar.data(), s.type,
                                              ncclScalarHostImmediate, comm);
    if (r != ncclSuccess) return r;
    createdOp_ = true;
  }
  const size_t c = s.count;
  switch (s.coll) {
    case Coll::kAllReduce: return ncclAllReduce(send_, recv_, c, s.type, redOp_, comm, nullptr);
    case Coll::kBroadcast: return ncclBroadcast(send_, recv_, c, s.type, s.root, comm, nullptr);
    case Coll::kReduce:
      return ncclReduce(send_, recv_, c, s.type, redOp_, s.root, comm, nullptr);
    case Coll::kAllGather: return ncclAllGather(send_, recv_, c, s.type, comm, nullptr);
    case Coll::kReduceScatter:
      return ncclReduceScatter(send_, recv_, c, s.type, redOp_, comm, nullptr);
    case Coll::kAllToAll: return ncclAlltoAll(send_, recv_, c, s.type, comm, nullptr);
    case Coll::kGather: return ncclGather(send_, recv_, c, s.type, s.root, comm, nullptr);
    case Coll::kScatter: return ncclScatter(send_, recv_, c, s.type, s.root, comm, nullptr);
    case Coll::kSendRecv: {
      ncclResult_t r = ncclGroupStart();
      const int to = (rank_ + s.shift) % n_, from = (rank_ - s.shift + n_) % n_;
      if (r == ncclSuccess) r = ncclSend(send_, c, s.type, to, comm, nullptr);
      if (r == ncclSuccess) r = ncclRecv(recv_, c, s.type, from, comm, nullptr);
      ncclResult_t e = ncclGroupEnd();
      return r != ncclSuccess ? r : e;
    }
    default: return ncclInvalidArgument;
  }
}

ncclResult_t OpRun::release(ncclComm_t comm) {
  if (!createdOp_) return ncclSuccess;
  createdOp_ = false;
  return ncclRedOpDestroy(redOp_, comm);
}

size_t OpRun::check(const std::string& where) const {
  size_t bad = 0;
  auto report = [&](const std::string& what) {
    if (g_printed.fetch_add(1) < kMaxPrinted)
      std::fprintf(stderr, "soak: WRONG %s rank %d/%d %s: %s\n", where.c_str(), rank_, n_,
                   describe(s_).c_str(), what.c_str());
  };
  if (!a_.guardsIntact() || (!s_.inPlace && !b_.guardsIntact())) {
    ++bad;
    report("guard bytes around a buffer were overwritten");
  }
  for (size_t j = 0; j < recvElems_; ++j) {
    const double want = expected(j);
    if (std::isnan(want)) continue;
    const double got = getElement(recv_, s_.type, j);
    if (got == want) continue;
    if (bad++ < 3) {
      char text[120];
      std::snprintf(text, sizeof text, "element %zu got %.17g want %.17g", j, got, want);
      report(text);
    }
  }
  return bad;
}

}  // namespace soak
