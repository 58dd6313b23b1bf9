// The host emulation of the CUDA executor's kernel, for the tests (no GPU needed): the
// same interpreter (src/device/interp.h) with a "block" of host threads (one, or several sharing the
// block's shared memory and meeting at a barrier, as a CUDA block's threads do).
// Counters go through __atomic loads/stores with acquire/release semantics and the
// block barrier through acquire/release atomics, so ThreadSanitizer checks the protocol
// and the hand-offs between a block's threads; data through memcpy (any alignment).
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "src/device/interp.h"
#include "tests/device_emu/emulate.h"

namespace braid {
namespace {

using devinterp::PeerBufs;
using devinterp::PieceShared;
using devinterp::Vec16;

/// What a block's threads share: __shared__ memory and the barrier (__syncthreads).
struct BlockState {
  explicit BlockState(int n) : nthreads(n) {}
  const int nthreads;
  std::atomic<uint32_t> arrived{0};
  std::atomic<uint32_t> generation{0};
  PieceShared sh{};
  alignas(16) unsigned char cache[devinterp::kConnCacheBytes];
  PeerBufs peers{};

  std::atomic<uint32_t> sleepers{0};

  /// Every thread of the block arrives; none leaves before all have arrived. The last
  /// arrival's read-modify-write acquires the others' writes and its release of the
  /// generation hands them to every waiter. Waiters spin briefly, then sleep on the
  /// generation word (futex): emulated blocks far outnumber the cores.
  void sync() {
    if (nthreads == 1) return;
    const uint32_t g = generation.load(std::memory_order_acquire);
    if (arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == uint32_t(nthreads)) {
      arrived.store(0, std::memory_order_relaxed);
      generation.store(g + 1, std::memory_order_seq_cst);
      if (sleepers.load(std::memory_order_seq_cst) != 0) futexWake(&generation);
      return;
    }
    for (int i = 0; i < 100; ++i)
      if (generation.load(std::memory_order_acquire) != g) return;
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    while (generation.load(std::memory_order_seq_cst) == g) futexWait(&generation, g);
    sleepers.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  static void futexWait(std::atomic<uint32_t>* w, uint32_t expected) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(w), FUTEX_WAIT_PRIVATE, expected, nullptr,
            nullptr, 0);
  }
  static void futexWake(std::atomic<uint32_t>* w) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(w), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr,
            nullptr, 0);
  }
};

/// One host thread playing thread `tid` of a CUDA block.
class HostBlock {
 public:
  static constexpr int kUnroll = 2;
  static constexpr uint32_t kCheckEvery = 256;

  HostBlock(BlockState* st, int tid) : st_(st), tid_(tid) {}

  int tid() const { return tid_; }
  int nthreads() const { return st_->nthreads; }
  void sync() { st_->sync(); }
  PieceShared& sh() { return st_->sh; }
  void* cacheMem() { return st_->cache; }
  PeerBufs& peerBufs() { return st_->peers; }

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
  static uint64_t ldAcquireGpu64(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static void stReleaseGpu64(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  static uint32_t arrive(uint32_t* p, uint32_t n) { return __atomic_fetch_add(p, n, __ATOMIC_ACQ_REL); }
  static void reset(uint32_t* p) { __atomic_store_n(p, 0, __ATOMIC_RELEASE); }
  /// Many emulated blocks share few cores: spin briefly, then let the others run.
  static void pause(uint32_t polls) {
    if (polls > 16) std::this_thread::yield();
  }

 private:
  BlockState* st_;
  int tid_;
};

/// Runs the interpreter as every thread of one block: threads 1.. on their own host
/// threads, thread 0 on the caller's. All must return alike (a block leaves a launch as
/// one); a difference is a bug in the interpreter, reported and counted as a failure.
template <class Tr, DevRed R>
bool runBlock(const DevLaunch& l, uint32_t block, int threads) {
  BlockState st(threads < 1 ? 1 : threads);
  std::vector<char> ok(size_t(st.nthreads), 0);
  std::vector<std::thread> others;
  for (int t = 1; t < st.nthreads; ++t)
    others.emplace_back([&, t] {
      HostBlock b(&st, t);
      ok[size_t(t)] = devinterp::runDevBlock<Tr, R>(b, l, block) ? 1 : 0;
    });
  HostBlock b0(&st, 0);
  ok[0] = devinterp::runDevBlock<Tr, R>(b0, l, block) ? 1 : 0;
  for (std::thread& t : others) t.join();
  for (int t = 1; t < st.nthreads; ++t)
    if (ok[size_t(t)] != ok[0]) {
      std::fprintf(stderr, "emulateDevBlock: block %u: thread %d returned %d, thread 0 %d\n",
                   block, t, int(ok[size_t(t)]), int(ok[0]));
      return false;
    }
  return ok[0] != 0;
}

template <int T>
bool runType(const DevLaunch& l, uint32_t block, DevRed red, int threads) {
  using Tr = devred::DevTraits<T>;
  switch (red) {
    case DevRed::kSum: return runBlock<Tr, DevRed::kSum>(l, block, threads);
    case DevRed::kProd: return runBlock<Tr, DevRed::kProd>(l, block, threads);
    case DevRed::kMax: return runBlock<Tr, DevRed::kMax>(l, block, threads);
    case DevRed::kMin: return runBlock<Tr, DevRed::kMin>(l, block, threads);
    case DevRed::kNone: break;
  }
  return runBlock<devred::ByteTraits, DevRed::kNone>(l, block, threads);
}

}  // namespace

bool emulateDevBlock(const DevLaunch& l, uint32_t block, ncclDataType_t type, DevRed red,
                     int threads) {
  if (red == DevRed::kNone) return runBlock<devred::ByteTraits, DevRed::kNone>(l, block, threads);
  switch (type) {
    case ncclInt8: return runType<ncclInt8>(l, block, red, threads);
    case ncclUint8: return runType<ncclUint8>(l, block, red, threads);
    case ncclInt32: return runType<ncclInt32>(l, block, red, threads);
    case ncclUint32: return runType<ncclUint32>(l, block, red, threads);
    case ncclInt64: return runType<ncclInt64>(l, block, red, threads);
    case ncclUint64: return runType<ncclUint64>(l, block, red, threads);
    case ncclFloat16: return runType<ncclFloat16>(l, block, red, threads);
    case ncclFloat32: return runType<ncclFloat32>(l, block, red, threads);
    case ncclFloat64: return runType<ncclFloat64>(l, block, red, threads);
    case ncclBfloat16: return runType<ncclBfloat16>(l, block, red, threads);
    case ncclFloat8e4m3: return runType<ncclFloat8e4m3>(l, block, red, threads);
    case ncclFloat8e5m2: return runType<ncclFloat8e5m2>(l, block, red, threads);
    default: break;
  }
  // An invalid type: give up like a kernel would (the caller validated it, so never).
  if (l.control) __atomic_store_n(&l.control->error, 1u, __ATOMIC_RELEASE);
  return false;
}

}  // namespace braid
