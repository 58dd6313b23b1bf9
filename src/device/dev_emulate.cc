// The host emulation of the CUDA executor's kernel: the same interpreter
// (src/device/interp.h) with a "block" of one host thread. Counters go through
// __atomic loads/stores with acquire/release semantics, so ThreadSanitizer checks the
// protocol; data through memcpy (any alignment).
#include <cstring>
#include <thread>

#include "src/device/dev_kernel.h"
#include "src/device/interp.h"

namespace braid {
namespace {

using devinterp::PieceShared;
using devinterp::Vec16;

/// One host thread playing a whole CUDA block.
class HostBlock {
 public:
  static constexpr int kUnroll = 2;
  static constexpr uint32_t kCheckEvery = 256;

  int tid() const { return 0; }
  int nthreads() const { return 1; }
  void sync() {}
  PieceShared& sh() { return sh_; }
  void* cacheMem() { return cache_; }

  template <class T>
  static T ld(const T* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  template <class T>
  static void st(T* p, T v) {
    std::memcpy(p, &v, sizeof v);
  }
  static Vec16 ld16(const void* p) {
    Vec16 v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void st16(void* p, const Vec16& v) { std::memcpy(p, &v, sizeof v); }

  static uint64_t ldAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static uint64_t ldVolatile(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
  static uint32_t ldFlag(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static void stPlain(uint64_t* p, uint64_t v) { *p = v; }
  static void stRelease(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  static void stFlag(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  static void bump(uint64_t* p) { __atomic_fetch_add(p, 1, __ATOMIC_RELAXED); }
  /// The arrival (an acq_rel read-modify-write) already orders this thread's writes.
  static void fenceGpu() {}
  static uint32_t ldAcquireGpu(const uint32_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static void stReleaseGpu(uint32_t* p, uint32_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  static uint32_t arrive(uint32_t* p, uint32_t n) { return __atomic_fetch_add(p, n, __ATOMIC_ACQ_REL); }
  static void reset(uint32_t* p) { __atomic_store_n(p, 0, __ATOMIC_RELEASE); }
  /// Many emulated blocks share few cores: spin briefly, then let the others run.
  static void pause(uint32_t polls) {
    if (polls > 16) std::this_thread::yield();
  }

 private:
  PieceShared sh_{};
  alignas(16) unsigned char cache_[devinterp::kConnCacheBytes];
};

template <int T, DevRed R>
bool runTyped(const DevLaunch& l, uint32_t block) {
  HostBlock b;
  return devinterp::runDevBlock<devred::DevTraits<T>, R>(b, l, block);
}

template <int T>
bool runType(const DevLaunch& l, uint32_t block, DevRed red) {
  switch (red) {
    case DevRed::kSum: return runTyped<T, DevRed::kSum>(l, block);
    case DevRed::kProd: return runTyped<T, DevRed::kProd>(l, block);
    case DevRed::kMax: return runTyped<T, DevRed::kMax>(l, block);
    case DevRed::kMin: return runTyped<T, DevRed::kMin>(l, block);
    case DevRed::kNone: break;
  }
  HostBlock b;
  return devinterp::runDevBlock<devred::ByteTraits, DevRed::kNone>(b, l, block);
}

}  // namespace

DevRed devRedFor(ncclRedOp_t op, bool reduces) {
  if (!reduces) return DevRed::kNone;
  switch (op) {
    case ncclProd: return DevRed::kProd;
    case ncclMax: return DevRed::kMax;
    case ncclMin: return DevRed::kMin;
    default: return DevRed::kSum;  // ncclSum, ncclAvg, PreMulSum (user ops)
  }
}

bool emulateDevBlock(const DevLaunch& l, uint32_t block, ncclDataType_t type, DevRed red) {
  if (red == DevRed::kNone) {
    HostBlock b;
    return devinterp::runDevBlock<devred::ByteTraits, DevRed::kNone>(b, l, block);
  }
  switch (type) {
    case ncclInt8: return runType<ncclInt8>(l, block, red);
    case ncclUint8: return runType<ncclUint8>(l, block, red);
    case ncclInt32: return runType<ncclInt32>(l, block, red);
    case ncclUint32: return runType<ncclUint32>(l, block, red);
    case ncclInt64: return runType<ncclInt64>(l, block, red);
    case ncclUint64: return runType<ncclUint64>(l, block, red);
    case ncclFloat16: return runType<ncclFloat16>(l, block, red);
    case ncclFloat32: return runType<ncclFloat32>(l, block, red);
    case ncclFloat64: return runType<ncclFloat64>(l, block, red);
    case ncclBfloat16: return runType<ncclBfloat16>(l, block, red);
    case ncclFloat8e4m3: return runType<ncclFloat8e4m3>(l, block, red);
    case ncclFloat8e5m2: return runType<ncclFloat8e5m2>(l, block, red);
    default: break;
  }
  // An invalid type: give up like a kernel would (the caller validated it, so never).
  if (l.control) __atomic_store_n(&l.control->error, 1u, __ATOMIC_RELEASE);
  return false;
}

}  // namespace braid
