// Data movement of the CUDA executor's plan interpreter (host and device code): every
// thread of a block copies or reduces its share of one piece, in 16-byte vectors where
// the pointers allow (src/device/interp.h walks the steps; interp_peers.h moves the
// direct-access steps' data with these words). The Block policy's memory operations
// (ld/st, ld16/st16) and kUnroll are the interpreter's (see interp.h).
#pragma once
#include <cstdint>
#include <type_traits>

#include "src/device/dev_launch.h"
#include "src/device/hd.h"
#include "src/device/reduce_ops.h"

/// Full unrolling of the short constant loops over a thread's vectors (device only).
#if BRAID_DEVICE_PASS
#define BRAID_UNROLL _Pragma("unroll")
#else
#define BRAID_UNROLL
#endif

namespace braid {
namespace devinterp {

/// 16 bytes moved as one vector.
struct alignas(16) Vec16 {
  uint32_t w[4];
};

BRAID_HD_INLINE uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }
BRAID_HD_INLINE uint64_t minU(uint64_t a, uint64_t b) { return a < b ? a : b; }

// ---- data movement (all threads) ---------------------------------------------------------

/// One word of W bytes (16: a vector, 4: a 32-bit word).
template <class Block, int W>
struct Word {
  using T = std::conditional_t<W == 16, Vec16, uint32_t>;
  BRAID_HD_INLINE static T ld(const char* p) {
    if constexpr (W == 16) return Block::ld16(p);
    else return Block::template ld<uint32_t>(reinterpret_cast<const uint32_t*>(p));
  }
  BRAID_HD_INLINE static void st(char* p, const T& v) {
    if constexpr (W == 16) Block::st16(p, v);
    else Block::template st<uint32_t>(reinterpret_cast<uint32_t*>(p), v);
  }
};

/// Bytes [from, to) of src to d1 (and d2), one byte per thread.
template <class Block>
BRAID_HD_INLINE void copyTail(Block& b, char* d1, char* d2, const char* src, uint64_t from,
                              uint64_t to) {
  for (uint64_t i = from + uint64_t(b.tid()); i < to; i += uint64_t(b.nthreads())) {
    const uint8_t v = Block::template ld<uint8_t>(reinterpret_cast<const uint8_t*>(src + i));
    Block::template st<uint8_t>(reinterpret_cast<uint8_t*>(d1 + i), v);
    if (d2) Block::template st<uint8_t>(reinterpret_cast<uint8_t*>(d2 + i), v);
  }
}

/// d1[i] (and d2[i] if not null) = src[i] for i < n bytes, in words of W bytes (W: 4
/// or 16; bytes before the first and after the last whole word one by one); all
/// pointers must have the same address modulo W.
template <class Block, int W>
BRAID_HD void copyWords(Block& b, char* d1, char* d2, const char* src, uint64_t n) {
  using Wd = Word<Block, W>;
  using T = typename Wd::T;
  const uint64_t head = minU(n, (W - (addr(src) & (W - 1))) & (W - 1));
  const uint64_t nw = (n - head) / W;
  copyTail(b, d1, d2, src, 0, head);
  const char* s = src + head;
  char* o1 = d1 + head;
  char* o2 = d2 ? d2 + head : nullptr;
  constexpr int U = Block::kUnroll;
  const uint64_t step = uint64_t(b.nthreads());
  uint64_t i = uint64_t(b.tid());
  for (; i + (U - 1) * step < nw; i += U * step) {
    T v[U];
    BRAID_UNROLL
    for (int u = 0; u < U; ++u) v[u] = Wd::ld(s + (i + u * step) * W);
    BRAID_UNROLL
    for (int u = 0; u < U; ++u) {
      Wd::st(o1 + (i + u * step) * W, v[u]);
      if (o2) Wd::st(o2 + (i + u * step) * W, v[u]);
    }
  }
  for (; i < nw; i += step) {
    const T v = Wd::ld(s + i * W);
    Wd::st(o1 + i * W, v);
    if (o2) Wd::st(o2 + i * W, v);
  }
  copyTail(b, d1, d2, src, head + nw * W, n);
}

/// Byte copy to d1 (and d2): 16-byte vectors where the pointers agree modulo 16,
/// 4-byte words where they agree modulo 4, bytes otherwise.
template <class Block>
BRAID_HD void copyBytes(Block& b, char* d1, char* d2, const char* src, uint64_t n) {
  const uintptr_t r16 = addr(src) & 15;
  const bool co16 = (addr(d1) & 15) == r16 && (!d2 || (addr(d2) & 15) == r16);
  const bool co4 = (addr(d1) & 3) == (r16 & 3) && (!d2 || (addr(d2) & 3) == (r16 & 3));
  if (co16) copyWords<Block, 16>(b, d1, d2, src, n);
  else if (co4) copyWords<Block, 4>(b, d1, d2, src, n);
  else copyTail(b, d1, d2, src, 0, n);
}

/// Elementwise: d1[i] (and d2[i]) = reduce ? op.reduce(in[i], local[i]) : op.copy(in[i])
/// for i < n bytes. 16-byte vectors where every pointer has the same address modulo 16
/// (and an element-aligned one); single elements otherwise.
template <class Block, class Tr, DevRed R>
BRAID_HD void computeElems(Block& b, const devred::DevOp<Tr, R>& op, char* d1, char* d2,
                           const char* in, const char* local, uint64_t n, bool reduce) {
  using S = typename Tr::Storage;
  constexpr uint64_t ts = sizeof(S);
  constexpr int E = int(16 / ts);
  const int t = b.tid(), nt = b.nthreads();
  const uintptr_t r16 = addr(in) & 15;
  const bool vec = r16 % ts == 0 && (!d1 || (addr(d1) & 15) == r16) &&
                   (!d2 || (addr(d2) & 15) == r16) && (!reduce || (addr(local) & 15) == r16);
  const uint64_t head = vec ? minU(n, (16 - r16) & 15) : n;
  const uint64_t nv = vec ? (n - head) / 16 : 0;
  const uint64_t tailStart = head + nv * 16;
  auto one = [&](uint64_t off) {
    const S x = Block::template ld<S>(reinterpret_cast<const S*>(in + off));
    const S r = reduce ? op.reduce(x, Block::template ld<S>(reinterpret_cast<const S*>(local + off)))
                       : op.copy(x);
    if (d1) Block::template st<S>(reinterpret_cast<S*>(d1 + off), r);
    if (d2) Block::template st<S>(reinterpret_cast<S*>(d2 + off), r);
  };
  for (uint64_t e = uint64_t(t); e < head / ts; e += uint64_t(nt)) one(e * ts);
  union Pack {
    Vec16 v;
    S e[E];
  };
  constexpr int U = Block::kUnroll;
  const uint64_t step = uint64_t(nt);
  uint64_t i = uint64_t(t);
  for (; i + (U - 1) * step < nv; i += U * step) {
    Pack a[U], c[U];
    BRAID_UNROLL
    for (int u = 0; u < U; ++u) a[u].v = Block::ld16(in + head + (i + u * step) * 16);
    if (reduce)
      BRAID_UNROLL
      for (int u = 0; u < U; ++u) c[u].v = Block::ld16(local + head + (i + u * step) * 16);
    BRAID_UNROLL
    for (int u = 0; u < U; ++u) {
      BRAID_UNROLL
      for (int k = 0; k < E; ++k) a[u].e[k] = reduce ? op.reduce(a[u].e[k], c[u].e[k]) : op.copy(a[u].e[k]);
      const uint64_t off = head + (i + u * step) * 16;
      if (d1) Block::st16(d1 + off, a[u].v);
      if (d2) Block::st16(d2 + off, a[u].v);
    }
  }
  for (; i < nv; i += step) {
    const uint64_t off = head + i * 16;
    Pack a, c;
    a.v = Block::ld16(in + off);
    if (reduce) c.v = Block::ld16(local + off);
    BRAID_UNROLL
    for (int k = 0; k < E; ++k) a.e[k] = reduce ? op.reduce(a.e[k], c.e[k]) : op.copy(a.e[k]);
    if (d1) Block::st16(d1 + off, a.v);
    if (d2) Block::st16(d2 + off, a.v);
  }
  for (uint64_t e = tailStart / ts + uint64_t(t); e < n / ts; e += uint64_t(nt)) one(e * ts);
}

/// One piece: the result of `in` (OP `local` when reduce) to dst and/or slot.
template <class Block, class Tr, DevRed R>
BRAID_HD_INLINE void runPiece(Block& b, const devred::DevOp<Tr, R>& op, char* dst, char* slot,
                              const char* in, const char* local, uint64_t n, bool reduce) {
  if (n == 0) return;
  char* d1 = dst ? dst : slot;
  char* d2 = dst ? slot : nullptr;
  if (!reduce && op.copyIsIdentity()) {
    copyBytes(b, d1, d2, in, n);
    return;
  }
  if constexpr (R != DevRed::kNone) computeElems<Block, Tr, R>(b, op, d1, d2, in, local, n, reduce);
}

}  // namespace devinterp
}  // namespace braid
