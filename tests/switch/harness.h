// Helpers of the braid-switch tests: members of a BraidSwitch collnet group as threads
// of this process (each with its own context, handle and collComm), a logger that
// records what the collnet says, bounded waits, a hang watchdog, and the reference
// element-wise reductions the results are checked against.
#pragma once
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "braid/net_plugin.h"
#include "src/reduce/float_types.h"
#include "src/reduce/reducer.h"
#include "transports/net/builtin_nets.h"

namespace switchtest {

inline const ncclCollNet_v11_t* net() { return braid::switchCollNet(); }

// ---- the collnet's log ------------------------------------------------------------------

inline std::mutex& logMutex() {
  static std::mutex m;
  return m;
}
inline std::vector<std::string>& logLines() {
  static std::vector<std::string> v;
  return v;
}
inline void recordLog(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt,
                      ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (level != NCCL_LOG_WARN) return;
  std::lock_guard<std::mutex> lk(logMutex());
  logLines().push_back(buf);
}
/// The last WARN line containing every one of `parts`, or "".
inline std::string findWarn(const std::vector<std::string>& parts) {
  std::lock_guard<std::mutex> lk(logMutex());
  for (auto it = logLines().rbegin(); it != logLines().rend(); ++it) {
    bool all = true;
    for (const std::string& p : parts) all = all && it->find(p) != std::string::npos;
    if (all) return *it;
  }
  return "";
}
inline std::string allWarnings() {
  std::lock_guard<std::mutex> lk(logMutex());
  std::string s;
  for (const std::string& l : logLines()) s += "  " + l + "\n";
  return s;
}

// ---- watchdog -----------------------------------------------------------------------------

/// Ends the process with a message if not dismissed (destroyed) within `seconds`:
/// a hung test fails instead of hanging. Starts the recorded log afresh.
class Watchdog {
 public:
  Watchdog(int seconds, std::string what) : what_(std::move(what)) {
    {
      std::lock_guard<std::mutex> lk(logMutex());
      logLines().clear();
    }
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lk(mu_);
      if (!cv_.wait_for(lk, std::chrono::seconds(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "WATCHDOG: %s did not finish within %d s\n%s", what_.c_str(),
                     seconds, allWarnings().c_str());
        std::fflush(stderr);
        std::_Exit(3);
      }
    });
  }
  ~Watchdog() {
    if (std::getenv("SWITCH_TEST_VERBOSE"))
      std::fprintf(stderr, "collnet warnings during %s:\n%s", what_.c_str(), allWarnings().c_str());
    {
      std::lock_guard<std::mutex> lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

inline void runThreads(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i) ts.emplace_back(fn, i);
  for (auto& t : ts) t.join();
}

/// A reusable barrier for n threads.
class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lk(mu_);
    const int gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lk, [&] { return gen != gen_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_, count_ = 0, gen_ = 0;
};

/// Polls cond() (every ms) until it holds or timeoutMs passed; returns its last value.
inline bool pollUntil(const std::function<bool()>& cond, int timeoutMs) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > end) return cond();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// ---- members ------------------------------------------------------------------------------

struct Member {
  int rank = 0;
  void* ctx = nullptr;
  void* listen = nullptr;
  void* coll = nullptr;
  alignas(8) char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
};

/// Contexts and handles for one group: member r uses the switch at addrs[r] (set as
/// BRAID_SWITCH while it listens). Run before any member thread starts.
inline std::vector<Member> prepare(const std::vector<std::string>& addrs, uint64_t commId,
                                   uint64_t secret) {
  std::vector<Member> m(addrs.size());
  for (size_t r = 0; r < addrs.size(); ++r) {
    setenv("BRAID_SWITCH", addrs[r].c_str(), 1);
    m[r].rank = int(r);
    EXPECT_EQ(net()->init(&m[r].ctx, commId, recordLog), ncclSuccess);
    braid::switchCollNetSetJobSecret(m[r].ctx, secret);
    int ndev = 0;
    EXPECT_EQ(net()->devices(&ndev), ncclSuccess);
    EXPECT_EQ(ndev, 1);
    EXPECT_EQ(net()->listen(m[r].ctx, 0, m[r].handle, &m[r].listen), ncclSuccess);
  }
  return m;
}

/// Member r's collective connect (call from its own thread).
inline ncclResult_t connectMember(std::vector<Member>& m, int r) {
  std::vector<void*> handles;
  for (Member& x : m) handles.push_back(x.handle);
  return net()->connect(handles.data(), int(m.size()), r, m[r].listen, &m[r].coll);
}

inline void connectAll(std::vector<Member>& m) {
  std::vector<ncclResult_t> res(m.size(), ncclInternalError);
  runThreads(int(m.size()), [&](int r) { res[size_t(r)] = connectMember(m, r); });
  for (size_t r = 0; r < m.size(); ++r)
    ASSERT_EQ(res[r], ncclSuccess) << "rank " << r << " connect\n" << allWarnings();
}

inline void closeAll(std::vector<Member>& m) {
  for (Member& x : m) {
    if (x.coll) {
      EXPECT_EQ(net()->closeColl(x.coll), ncclSuccess);
    }
    if (x.listen) {
      EXPECT_EQ(net()->closeListen(x.listen), ncclSuccess);
    }
    if (x.ctx) {
      EXPECT_EQ(net()->finalize(x.ctx), ncclSuccess);
    }
    x.coll = x.listen = x.ctx = nullptr;
  }
}

/// Tests `req` until done (returns ncclSuccess, *size set), an error (returned) or
/// timeoutMs (ncclInProgress).
inline ncclResult_t waitRequest(void* req, int* size, int timeoutMs = 20000) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  int n = 0;
  for (;;) {
    int done = 0;
    ncclResult_t r = net()->test(req, &done, size);
    if (r != ncclSuccess) return r;
    if (done) return ncclSuccess;
    if (std::chrono::steady_clock::now() > end) return ncclInProgress;
    if (++n > 64) std::this_thread::yield();
  }
}

// ---- data and reference reductions ------------------------------------------------------

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// One of rank r's input values for datatype t (stored into p): integers take any
/// bits; floats random mantissas over a range of exponents (so that sums round, and
/// the order of the reduction shows in the bits), the narrow ones rounded to their type.
inline void genValue(ncclDataType_t t, uint64_t seed, int r, size_t k, void* p) {
  const uint64_t h = mix(seed * 1315423911u + uint64_t(r) * 0x100000001b3ull + k);
  const int e = int((h >> 3) % 16) - 8;
  const double sign = (h & 1) ? -1.0 : 1.0;
  const float small = float(sign * std::ldexp(double(h >> 52) / 4096.0 + 0.5, e % 3));
  switch (t) {
    case ncclFloat32: {
      const float f = float(sign * std::ldexp(double(h >> 40), e - 24));
      std::memcpy(p, &f, 4);
      break;
    }
    case ncclFloat64: {
      const double d = sign * std::ldexp(double(h >> 11), e - 53);
      std::memcpy(p, &d, 8);
      break;
    }
    case ncclFloat16: { uint16_t v = braid::floatToHalf(small); std::memcpy(p, &v, 2); break; }
    case ncclBfloat16: { uint16_t v = braid::floatToBfloat16(small); std::memcpy(p, &v, 2); break; }
    case ncclFloat8e4m3: { uint8_t v = braid::floatToFp8e4m3(small); std::memcpy(p, &v, 1); break; }
    case ncclFloat8e5m2: { uint8_t v = braid::floatToFp8e5m2(small); std::memcpy(p, &v, 1); break; }
    default: std::memcpy(p, &h, braid::dataTypeSize(t)); break;
  }
}

/// Rank r's input for (t, seed): element i is one of 256 values picked by a hash of i
/// (cheap, and without a short period).
class Pattern {
 public:
  Pattern(ncclDataType_t t, uint64_t seed, int r)
      : ts_(braid::dataTypeSize(t)), key_(uint32_t(mix(seed * 31 + uint64_t(r)))), table_(256 * ts_) {
    for (size_t k = 0; k < 256; ++k) genValue(t, seed, r, k, &table_[k * ts_]);
  }
  const char* at(size_t i) const {
    uint32_t x = uint32_t(i) * 0x9E3779B1u ^ key_;
    x ^= x >> 15;
    x *= 0x85EBCA6Bu;
    x ^= x >> 13;
    return &table_[(x & 255u) * ts_];
  }
  void fill(void* buf, size_t begin, size_t end) const {
    switch (ts_) {
      case 1: fillAs<1>(buf, begin, end); break;
      case 2: fillAs<2>(buf, begin, end); break;
      case 4: fillAs<4>(buf, begin, end); break;
      default: fillAs<8>(buf, begin, end); break;
    }
  }

 private:
  template <size_t TS>
  void fillAs(void* buf, size_t begin, size_t end) const {
    char* p = static_cast<char*>(buf);
    for (size_t i = begin; i < end; ++i, p += TS) std::memcpy(p, at(i), TS);
  }

  size_t ts_;
  uint32_t key_;
  std::vector<char> table_;
};

inline void fillInput(ncclDataType_t t, uint64_t seed, int r, void* buf, size_t count) {
  Pattern(t, seed, r).fill(buf, 0, count);
}

template <typename F>
F maxNum(F a, F b) {
  if (a > b) return a;
  if (b > a) return b;
  return std::signbit(a) ? b : a;  // equal: +0 beats -0
}
template <typename F>
F minNum(F a, F b) {
  if (a < b) return a;
  if (b < a) return b;
  return std::signbit(a) ? a : b;
}

template <typename F>
F applyFloat(ncclRedOp_t op, F a, F b) {
  switch (op) {
    case ncclProd: return a * b;
    case ncclMax: return maxNum(a, b);
    case ncclMin: return minNum(a, b);
    default: return a + b;
  }
}

template <typename I>
I applyInt(ncclRedOp_t op, I a, I b) {
  using U = typename std::make_unsigned<I>::type;
  switch (op) {
    case ncclProd: return I(U(U(a) * U(b)));
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return I(U(U(a) + U(b)));
  }
}

template <typename I>
void intLoop(ncclRedOp_t op, void* acc, const void* in, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    I a, b;
    std::memcpy(&a, static_cast<char*>(acc) + i * sizeof(I), sizeof(I));
    std::memcpy(&b, static_cast<const char*>(in) + i * sizeof(I), sizeof(I));
    a = applyInt<I>(op, a, b);
    std::memcpy(static_cast<char*>(acc) + i * sizeof(I), &a, sizeof(I));
  }
}

template <typename S, float (*ToF)(S), S (*FromF)(float)>
void narrowLoop(ncclRedOp_t op, void* acc, const void* in, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    S a, b;
    std::memcpy(&a, static_cast<char*>(acc) + i * sizeof(S), sizeof(S));
    std::memcpy(&b, static_cast<const char*>(in) + i * sizeof(S), sizeof(S));
    a = FromF(applyFloat<float>(op, ToF(a), ToF(b)));
    std::memcpy(static_cast<char*>(acc) + i * sizeof(S), &a, sizeof(S));
  }
}

inline float h2f(uint16_t v) { return braid::halfToFloat(v); }
inline uint16_t f2h(float f) { return braid::floatToHalf(f); }
inline float b2f(uint16_t v) { return braid::bfloat16ToFloat(v); }
inline uint16_t f2b(float f) { return braid::floatToBfloat16(f); }
inline float e4ToF(uint8_t v) { return braid::fp8e4m3ToFloat(v); }
inline uint8_t fToE4(float f) { return braid::floatToFp8e4m3(f); }
inline float e5ToF(uint8_t v) { return braid::fp8e5m2ToFloat(v); }
inline uint8_t fToE5(float f) { return braid::floatToFp8e5m2(f); }

/// acc[i] = acc[i] OP in[i] for n elements, computed as the switch does (narrow floats
/// in float, rounded after each op).
inline void refApply(ncclDataType_t t, ncclRedOp_t op, void* acc, const void* in, size_t n) {
  switch (t) {
    case ncclInt8: intLoop<int8_t>(op, acc, in, n); break;
    case ncclUint8: intLoop<uint8_t>(op, acc, in, n); break;
    case ncclInt32: intLoop<int32_t>(op, acc, in, n); break;
    case ncclUint32: intLoop<uint32_t>(op, acc, in, n); break;
    case ncclInt64: intLoop<int64_t>(op, acc, in, n); break;
    case ncclUint64: intLoop<uint64_t>(op, acc, in, n); break;
    case ncclFloat16: narrowLoop<uint16_t, h2f, f2h>(op, acc, in, n); break;
    case ncclBfloat16: narrowLoop<uint16_t, b2f, f2b>(op, acc, in, n); break;
    case ncclFloat8e4m3: narrowLoop<uint8_t, e4ToF, fToE4>(op, acc, in, n); break;
    case ncclFloat8e5m2: narrowLoop<uint8_t, e5ToF, fToE5>(op, acc, in, n); break;
    case ncclFloat32:
      for (size_t i = 0; i < n; ++i) {
        float a, b;
        std::memcpy(&a, static_cast<char*>(acc) + 4 * i, 4);
        std::memcpy(&b, static_cast<const char*>(in) + 4 * i, 4);
        a = applyFloat<float>(op, a, b);
        std::memcpy(static_cast<char*>(acc) + 4 * i, &a, 4);
      }
      break;
    case ncclFloat64:
      for (size_t i = 0; i < n; ++i) {
        double a, b;
        std::memcpy(&a, static_cast<char*>(acc) + 8 * i, 8);
        std::memcpy(&b, static_cast<const char*>(in) + 8 * i, 8);
        a = applyFloat<double>(op, a, b);
        std::memcpy(static_cast<char*>(acc) + 8 * i, &a, 8);
      }
      break;
    default: break;
  }
}

/// The reduction of elements [begin, end) of every rank's input, in the tree order
/// `groups` (each group reduced in order, then the groups in order; one group: plain
/// rank order), into out (end - begin elements).
inline void reference(ncclDataType_t t, ncclRedOp_t op, uint64_t seed,
                      const std::vector<std::vector<int>>& groups, size_t begin, size_t end,
                      void* out) {
  const size_t ts = braid::dataTypeSize(t);
  const size_t n = end - begin;
  std::vector<char> part(n * ts), tmp(n * ts);
  for (size_t g = 0; g < groups.size(); ++g) {
    char* acc = g == 0 ? static_cast<char*>(out) : part.data();
    for (size_t k = 0; k < groups[g].size(); ++k) {
      char* dst = k == 0 ? acc : tmp.data();
      Pattern(t, seed, groups[g][k]).fill(dst, begin, end);
      if (k > 0) refApply(t, op, acc, tmp.data(), n);
    }
    if (g > 0) refApply(t, op, out, part.data(), n);
  }
}

inline std::vector<std::vector<int>> flatOrder(int n) {
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  return {all};
}

inline const ncclDataType_t kAllTypes[] = {
    ncclInt8,    ncclUint8,   ncclInt32,    ncclUint32,     ncclInt64,     ncclUint64,
    ncclFloat16, ncclFloat32, ncclFloat64,  ncclBfloat16,   ncclFloat8e4m3, ncclFloat8e5m2};
inline const ncclRedOp_t kAllOps[] = {ncclSum, ncclProd, ncclMax, ncclMin};

/// Byte j of member r's allgather block.
inline uint8_t agByte(uint64_t seed, int r, size_t j) {
  return uint8_t(mix(seed ^ (uint64_t(r) << 40) ^ j) >> 13);
}

}  // namespace switchtest
