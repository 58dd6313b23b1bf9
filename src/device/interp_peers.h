// Data movement of the CUDA executor's direct-access steps (algorithms/plan.h: kPeerCopy,
// kPeerReduce, kPeerPut), host and device code: every thread of a block moves its
// share of one step between the ranks' buffers, which it addresses through the
// block-shared table of the buffers each rank announced (PeerBufs).
//
// Reductions read every rank's src and combine them in rank order with the op of the
// host executor (src/exec/engine.cc: acc = s1 op s0, then acc = sp op acc, the op's
// post-step on the last), so all executors produce the same bits; the result, and a
// put's source, is stored to every destination rank of the step from one load. 16-byte
// vectors where every pointer of the step has the same address modulo 16, 4-byte words
// (copies) or single elements (reductions) otherwise. Pointer bases come from shared
// memory in the inner loops (never a pointer array in registers: that would spill to
// local memory, which the resource gate refuses).
#pragma once
#include <cstdint>

#include "src/device/dev_peers.h"
#include "src/device/hd.h"
#include "src/device/interp_data.h"
#include "src/device/reduce_ops.h"

namespace braid {
namespace devinterp {

/// Every rank's announced buffers (device addresses), block-shared; scratch is this
/// rank's own only (a peer's is private: algorithms/plan.h). Also thread 0's signal
/// state for the program's run (in shared memory rather than the interpreter's
/// registers, which the FIFO paths need: kept there, the kernels spilled to a stack).
struct PeerBufs {
  uint64_t send[kDevMaxDirectRanks];
  uint64_t recv[kDevMaxDirectRanks];
  uint64_t scratch;
  uint64_t base;       ///< the program's slot count when its run began
  uint64_t posted;     ///< signals posted in this run
  uint32_t announced;  ///< this run's buffers are in the slot
  uint32_t known;      ///< send/recv hold this run's buffers
  BRAID_HD_INLINE char* at(int rank, uint8_t buf, uint64_t off) const {
    const uint64_t base = buf == uint8_t(Buf::kSend)      ? send[rank]
                          : buf == uint8_t(Buf::kScratch) ? scratch
                                                          : recv[rank];
    return reinterpret_cast<char*>(uintptr_t(base + off));
  }
};

/// The lowest set bit's index (m != 0).
BRAID_HD_INLINE int lowBit(uint32_t m) {
#if BRAID_DEVICE_PASS
  return __ffs(int(m)) - 1;
#else
  return __builtin_ctz(m);
#endif
}

/// One direct-access data step: its sources (the src of the ranks in `srcMask`,
/// reduced in rank order, or the one source of a copy) and its destinations (the dst of
/// the ranks in `dstMask`).
struct PeerMove {
  uint32_t srcMask = 0;
  uint32_t dstMask = 0;
  uint8_t srcBuf = 0, dstBuf = 0;
  uint64_t srcOff = 0, dstOff = 0, bytes = 0;
};

/// Whether every pointer of the move agrees with `ref` modulo `w` bytes (a power of
/// two: masks, never a division, which the GPU would call out of line with a stack).
BRAID_HD_INLINE bool agrees(const PeerBufs& t, const PeerMove& m, uintptr_t ref, uintptr_t w) {
  const uintptr_t mask = w - 1;
  for (uint32_t s = m.srcMask; s; s &= s - 1)
    if ((addr(t.at(lowBit(s), m.srcBuf, m.srcOff)) - ref) & mask) return false;
  for (uint32_t d = m.dstMask; d; d &= d - 1)
    if ((addr(t.at(lowBit(d), m.dstBuf, m.dstOff)) - ref) & mask) return false;
  return true;
}

/// Copies (no reduction) the one source to every destination in words of W bytes over
/// bytes [lo, hi) of the move, which are W-aligned at every pointer (W: 16, 4 or 1).
template <class Block, int W>
BRAID_HD void putWords(Block& b, const PeerBufs& t, const PeerMove& m, uint64_t lo, uint64_t hi) {
  using Wd = Word<Block, W == 1 ? 4 : W>;
  const char* src = t.at(lowBit(m.srcMask), m.srcBuf, m.srcOff);
  const uint64_t step = uint64_t(b.nthreads());
  if constexpr (W == 1) {
    for (uint64_t i = lo + uint64_t(b.tid()); i < hi; i += step) {
      const uint8_t v = Block::template ld<uint8_t>(reinterpret_cast<const uint8_t*>(src + i));
      for (uint32_t d = m.dstMask; d; d &= d - 1)
        Block::template st<uint8_t>(
            reinterpret_cast<uint8_t*>(t.at(lowBit(d), m.dstBuf, m.dstOff) + i), v);
    }
  } else {
    using T = typename Wd::T;
    constexpr int U = Block::kUnroll;
    const uint64_t nw = (hi - lo) / W;
    uint64_t i = uint64_t(b.tid());
    for (; i + (U - 1) * step < nw; i += U * step) {
      T v[U];
      BRAID_UNROLL
      for (int u = 0; u < U; ++u) v[u] = Wd::ld(src + lo + (i + u * step) * W);
      for (uint32_t d = m.dstMask; d; d &= d - 1) {
        char* o = t.at(lowBit(d), m.dstBuf, m.dstOff) + lo;
        BRAID_UNROLL
        for (int u = 0; u < U; ++u) Wd::st(o + (i + u * step) * W, v[u]);
      }
    }
    for (; i < nw; i += step) {
      const T v = Wd::ld(src + lo + i * W);
      for (uint32_t d = m.dstMask; d; d &= d - 1) Wd::st(t.at(lowBit(d), m.dstBuf, m.dstOff) + lo + i * W, v);
    }
  }
}

/// A copy or put: 16-byte vectors, 4-byte words or bytes, as the pointers allow; the
/// bytes before the first whole vector and after the last one byte by byte.
template <class Block>
BRAID_HD void peerPut(Block& b, const PeerBufs& t, const PeerMove& m) {
  const uintptr_t ref = addr(t.at(lowBit(m.srcMask), m.srcBuf, m.srcOff));
  const int w = agrees(t, m, ref, 16) ? 16 : agrees(t, m, ref, 4) ? 4 : 1;
  if (w == 1) return putWords<Block, 1>(b, t, m, 0, m.bytes);
  const uint64_t head = minU(m.bytes, (w - (ref & uintptr_t(w - 1))) & uintptr_t(w - 1));
  const uint64_t body = (m.bytes - head) & ~uint64_t(w - 1);
  putWords<Block, 1>(b, t, m, 0, head);
  if (w == 16) putWords<Block, 16>(b, t, m, head, head + body);
  else putWords<Block, 4>(b, t, m, head, head + body);
  putWords<Block, 1>(b, t, m, head + body, m.bytes);
}

/// A reduction of every source rank's element at byte `off`, stored to every
/// destination: `red` combines (no post-step), `post` is the step's post-step (Avg's
/// division) applied to the result as a copy where it has one. (Rounding the combined
/// value to the type and then dividing is what the host's last combine with the
/// post-step does, so the bits agree.)
template <class Block, class Tr, DevRed R>
BRAID_HD_INLINE void reduceOne(const PeerBufs& t, const PeerMove& m, const devred::DevOp<Tr, R>& red,
                               const devred::DevOp<Tr, R>& post, uint64_t off) {
  using S = typename Tr::Storage;
  auto src = [&](int r) { return reinterpret_cast<const S*>(t.at(r, m.srcBuf, m.srcOff + off)); };
  uint32_t s = m.srcMask;
  S acc = Block::template ld<S>(src(lowBit(s)));
  for (s &= s - 1; s; s &= s - 1) acc = red.reduce(Block::template ld<S>(src(lowBit(s))), acc);
  if (!post.copyIsIdentity()) acc = post.copy(acc);
  for (uint32_t d = m.dstMask; d; d &= d - 1)
    Block::template st<S>(reinterpret_cast<S*>(t.at(lowBit(d), m.dstBuf, m.dstOff + off)), acc);
}

/// A reduction over bytes [0, m.bytes): 16-byte vectors of E elements where the
/// pointers agree modulo 16, single elements otherwise. Each thread takes one vector at
/// a time and reduces it over the sources in rank order: the loads of the sources are
/// independent, which keeps several in flight without unrolled copies of the combine
/// (one op per element type and reduction, for every kernel: compile time).
template <class Block, class Tr, DevRed R>
BRAID_HD void peerReduce(Block& b, const PeerBufs& t, const PeerMove& m,
                         const devred::DevOp<Tr, R>& red, const devred::DevOp<Tr, R>& post) {
  if constexpr (R == DevRed::kNone) {
    (void)b; (void)t; (void)m; (void)red; (void)post;
  } else {
    using S = typename Tr::Storage;
    constexpr uint64_t ts = sizeof(S);
    constexpr int E = int(16 / ts);
    const uintptr_t ref = addr(t.at(lowBit(m.srcMask), m.srcBuf, m.srcOff));
    // (One source, a one-rank plan, goes element by element: its post-step is then
    // the only combine, and the vector loop needs none of its own.)
    const bool vec = (ref & (ts - 1)) == 0 && (m.srcMask & (m.srcMask - 1)) != 0 && agrees(t, m, ref, 16);
    const uint64_t head = vec ? minU(m.bytes, (16 - (ref & 15)) & 15) : m.bytes;
    const uint64_t nv = vec ? (m.bytes - head) / 16 : 0;
    const uint64_t tailStart = head + nv * 16;
    const uint64_t step = uint64_t(b.nthreads());
    const bool hasPost = !post.copyIsIdentity();
    // The elements before the first whole vector and after the last, in one loop (one
    // copy of the element-wise combine in the kernel).
    const uint64_t nHead = head / ts, nOdd = nHead + (m.bytes - tailStart) / ts;
    for (uint64_t k = uint64_t(b.tid()); k < nOdd; k += step)
      reduceOne<Block>(t, m, red, post, k < nHead ? k * ts : tailStart + (k - nHead) * ts);
    union Pack {
      Vec16 v;
      S e[E];
    };
    for (uint64_t i = uint64_t(b.tid()); i < nv; i += step) {
      const uint64_t off = head + i * 16;
      uint32_t s = m.srcMask;
      Pack a;
      a.v = Block::ld16(t.at(lowBit(s), m.srcBuf, m.srcOff + off));
      devred::DevOp<Tr, R> op = red;
      for (s &= s - 1; s; s &= s - 1) {
        Pack c;
        c.v = Block::ld16(t.at(lowBit(s), m.srcBuf, m.srcOff + off));
        op.post = hasPost && (s & (s - 1)) == 0;  // the last source: with the post-step
        BRAID_UNROLL
        for (int k = 0; k < E; ++k) a.e[k] = op.reduce(c.e[k], a.e[k]);
      }
      for (uint32_t d = m.dstMask; d; d &= d - 1) Block::st16(t.at(lowBit(d), m.dstBuf, m.dstOff + off), a.v);
    }
  }
}

}  // namespace devinterp
}  // namespace braid
