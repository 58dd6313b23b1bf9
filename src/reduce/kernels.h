// The reduction kernels as templates (internal to src/reduce; see reducer.cc for the
// design and the numerics). Included by one .cc per instruction set, each inside its
// own namespace: define BRAID_REDUCE_KERNEL_NS before including, e.g.
//   #define BRAID_REDUCE_KERNEL_NS avx2
// Every name here then has distinct linkage per instruction set, so no AVX2 code can
// be picked by the linker for the portable build.
#pragma once
#ifndef BRAID_REDUCE_KERNEL_NS
#error "define BRAID_REDUCE_KERNEL_NS before including src/reduce/kernels.h"
#endif
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "src/reduce/float_types.h"
#include "src/reduce/kernel_table.h"

namespace braid {
namespace reduce_detail {
namespace BRAID_REDUCE_KERNEL_NS {

using Kind = Reducer::Kind;
constexpr size_t kBlockBytes = 1024;

// Under-aligned views of the storage types (see the file comment). The attribute must
// sit on a typedef that is used directly (GCC drops it from template arguments).
template <class S>
struct Unaligned;
#define BRAID_UNALIGNED(S)                                      \
  template <>                                                   \
  struct Unaligned<S> {                                         \
    typedef S type __attribute__((aligned(1), may_alias));      \
  };
BRAID_UNALIGNED(int8_t)
BRAID_UNALIGNED(uint8_t)
BRAID_UNALIGNED(uint16_t)
BRAID_UNALIGNED(int32_t)
BRAID_UNALIGNED(uint32_t)
BRAID_UNALIGNED(int64_t)
BRAID_UNALIGNED(uint64_t)
BRAID_UNALIGNED(float)
BRAID_UNALIGNED(double)
#undef BRAID_UNALIGNED

// ---- type traits: storage, compute type, conversions, arithmetic ------------------

/// Integer types: compute in the type, wrap through the unsigned type.
template <class S>
struct IntTraits {
  using Storage = S;
  using Mem = typename Unaligned<S>::type;
  using Compute = S;
  using U = std::make_unsigned_t<S>;
  using Wide = std::conditional_t<std::is_signed<S>::value, int64_t, uint64_t>;
  static Compute load(S v) { return v; }
  static S store(Compute v) { return v; }
  static Compute round(Compute v) { return v; }
  static Compute add(Compute a, Compute b) { return static_cast<S>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b))); }
  static Compute mul(Compute a, Compute b) { return static_cast<S>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b))); }
  static Compute max(Compute a, Compute b) { return a > b ? a : b; }
  static Compute min(Compute a, Compute b) { return a < b ? a : b; }
  /// Truncating division. 8-bit types divide in float, 32-bit ones in double: that
  /// vectorises and is exact, since |a| < 2^24 (resp. 2^53) makes the quotient's rounding
  /// error smaller than its distance (>= 1/n) to the next integer, and the conversion
  /// back truncates toward zero.
  static Compute div(Compute a, int n) {
    if (sizeof(S) == 1) return static_cast<S>(static_cast<float>(a) / static_cast<float>(n));
    if (sizeof(S) == 4) return static_cast<S>(static_cast<double>(a) / static_cast<double>(n));
    return static_cast<S>(static_cast<Wide>(a) / static_cast<Wide>(n));
  }
};

template <class F>
struct FloatBits;
template <>
struct FloatBits<float> {
  using Bits = uint32_t;
};
template <>
struct FloatBits<double> {
  using Bits = uint64_t;
};

/// IEEE maxNum/minNum with +0 > -0, branch-free (see the file comment).
template <class F>
struct FloatMinMax {
  using B = typename FloatBits<F>::Bits;
  static B bits(F f) {
    B b;
    std::memcpy(&b, &f, sizeof b);
    return b;
  }
  static F fromBits(B b) {
    F f;
    std::memcpy(&f, &b, sizeof f);
    return f;
  }
  static B sel(bool c, B a, B b) {
    const B m = B(0) - static_cast<B>(c);
    return (a & m) | (b & ~m);
  }
  static F max(F a, F b) {
    const B ab = bits(a), bb = bits(b);
    B r = sel(a < b, bb, ab);
    r = sel(a == b, ab & bb, r);  // max(+0, -0) = +0
    r = sel(a != a, bb, r);       // a NaN: take b
    return fromBits(r);
  }
  static F min(F a, F b) {
    const B ab = bits(a), bb = bits(b);
    B r = sel(b < a, bb, ab);
    r = sel(a == b, ab | bb, r);  // min(+0, -0) = -0
    r = sel(a != a, bb, r);
    return fromBits(r);
  }
};

/// fp32 / fp64: compute in the type.
template <class F>
struct WideFloatTraits {
  using Storage = F;
  using Mem = typename Unaligned<F>::type;
  using Compute = F;
  static Compute load(F v) { return v; }
  static F store(Compute v) { return v; }
  static Compute round(Compute v) { return v; }
  static Compute add(Compute a, Compute b) { return a + b; }
  static Compute mul(Compute a, Compute b) { return a * b; }
  static Compute max(Compute a, Compute b) { return FloatMinMax<F>::max(a, b); }
  static Compute min(Compute a, Compute b) { return FloatMinMax<F>::min(a, b); }
  static Compute div(Compute a, int n) { return a / static_cast<F>(n); }
};

/// Narrow floats: compute in float, round to the type on every store. Codec supplies
/// toFloat / fromFloat (a class rather than function pointers, so calls stay direct and
/// inline into the loops).
template <class S, class Codec>
struct NarrowFloatTraits {
  using Storage = S;
  using Mem = typename Unaligned<S>::type;
  using Compute = float;
  static Compute load(S v) { return Codec::toFloat(v); }
  static S store(Compute v) { return Codec::fromFloat(v); }
  static Compute round(Compute v) { return Codec::toFloat(Codec::fromFloat(v)); }
  static Compute add(Compute a, Compute b) { return a + b; }
  static Compute mul(Compute a, Compute b) { return a * b; }
  static Compute max(Compute a, Compute b) { return FloatMinMax<float>::max(a, b); }
  static Compute min(Compute a, Compute b) { return FloatMinMax<float>::min(a, b); }
  static Compute div(Compute a, int n) { return a / static_cast<float>(n); }
};

#define BRAID_CODEC(Name, S, ToFloat, FromFloat)               \
  struct Name {                                                \
    static float toFloat(S v) { return ToFloat(v); }           \
    static S fromFloat(float f) { return FromFloat(f); }       \
  };
BRAID_CODEC(HalfCodec, uint16_t, halfToFloat, floatToHalf)
BRAID_CODEC(Bf16Codec, uint16_t, bfloat16ToFloat, floatToBfloat16)
BRAID_CODEC(E4m3Codec, uint8_t, fp8e4m3ToFloat, floatToFp8e4m3)
BRAID_CODEC(E5m2Codec, uint8_t, fp8e5m2ToFloat, floatToFp8e5m2)
#undef BRAID_CODEC

/// The traits of each NCCL datatype, keyed by the enum value.
template <int T>
struct TraitsOf;
template <>
struct TraitsOf<ncclInt8> : IntTraits<int8_t> {};
template <>
struct TraitsOf<ncclUint8> : IntTraits<uint8_t> {};
template <>
struct TraitsOf<ncclInt32> : IntTraits<int32_t> {};
template <>
struct TraitsOf<ncclUint32> : IntTraits<uint32_t> {};
template <>
struct TraitsOf<ncclInt64> : IntTraits<int64_t> {};
template <>
struct TraitsOf<ncclUint64> : IntTraits<uint64_t> {};
template <>
struct TraitsOf<ncclFloat16> : NarrowFloatTraits<uint16_t, HalfCodec> {};
template <>
struct TraitsOf<ncclFloat32> : WideFloatTraits<float> {};
template <>
struct TraitsOf<ncclFloat64> : WideFloatTraits<double> {};
template <>
struct TraitsOf<ncclBfloat16>
    : NarrowFloatTraits<uint16_t, Bf16Codec> {};
template <>
struct TraitsOf<ncclFloat8e4m3>
    : NarrowFloatTraits<uint8_t, E4m3Codec> {};
template <>
struct TraitsOf<ncclFloat8e5m2>
    : NarrowFloatTraits<uint8_t, E5m2Codec> {};

// ---- kernels ----------------------------------------------------------------------

/// Per-call constants: the PreMulSum scalar (in the compute type) and nranks.
template <class Tr>
struct Params {
  typename Tr::Compute scalar;
  int nranks;
  Params(const void* scalarBytes, int n) : nranks(n > 0 ? n : 1) {
    typename Tr::Storage s;
    std::memcpy(&s, scalarBytes, sizeof s);
    scalar = Tr::load(s);
  }
};

template <class Tr, Kind K>
inline typename Tr::Compute apply(typename Tr::Compute a, typename Tr::Compute b) {
  if (K == Kind::kSum) return Tr::add(a, b);
  if (K == Kind::kProd) return Tr::mul(a, b);
  if (K == Kind::kMax) return Tr::max(a, b);
  return Tr::min(a, b);
}

/// out[j] = post(a[j] OP pre(b[j])) for j < m. Inlined with m constant for full blocks.
/// O: the stack block's Storage, or Mem when writing straight to a destination.
template <class Tr, Kind K, bool Pre, bool Post, class O>
__attribute__((always_inline)) inline void reduceBlock(
    O* __restrict out, const typename Tr::Mem* __restrict a,
    const typename Tr::Mem* __restrict b, size_t m, const Params<Tr>& p) {
  const auto scalar = p.scalar;
  const int nranks = p.nranks;
  for (size_t j = 0; j < m; ++j) {
    const auto x = Tr::load(a[j]);
    auto y = Tr::load(b[j]);
    if (Pre) y = Tr::round(Tr::mul(y, scalar));
    auto r = apply<Tr, K>(x, y);
    if (Post) r = Tr::div(Tr::round(r), nranks);
    out[j] = Tr::store(r);
  }
}

/// out[j] = post(pre(a[j])) for j < m.
template <class Tr, bool Pre, bool Post, class O>
__attribute__((always_inline)) inline void copyBlock(O* __restrict out,
                                                     const typename Tr::Mem* __restrict a,
                                                     size_t m, const Params<Tr>& p) {
  const auto scalar = p.scalar;
  const int nranks = p.nranks;
  for (size_t j = 0; j < m; ++j) {
    auto r = Tr::load(a[j]);
    if (Pre) r = Tr::mul(r, scalar);
    if (Pre && Post) r = Tr::round(r);
    if (Post) r = Tr::div(r, nranks);
    out[j] = Tr::store(r);
  }
}

/// True when [p, p + bytes) and [q, q + bytes) share no byte.
inline bool disjoint(const void* p, const void* q, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  return a + bytes <= b || b + bytes <= a;
}

inline void storeBlock(void* dst, void* dst2, size_t byteOffset, const void* tmp, size_t bytes) {
  std::memcpy(static_cast<char*>(dst) + byteOffset, tmp, bytes);
  if (dst2 != nullptr) std::memcpy(static_cast<char*>(dst2) + byteOffset, tmp, bytes);
}

/// The kernel of one (type, kind, pre, post): a class template so that an instruction
/// set's .cc can specialize it for a type (before including kernel_fill.h).
template <class Tr, Kind K, bool Pre, bool Post>
struct ReduceKernel {
  static void run(void* dst, void* dst2, const void* in, const void* local, size_t n,
                  const void* scalar, int nranks);
};
template <class Tr, bool Pre, bool Post>
struct CopyKernel {
  static void run(void* dst, const void* src, size_t n, const void* scalar, int nranks);
};

template <class Tr, Kind K, bool Pre, bool Post>
void ReduceKernel<Tr, K, Pre, Post>::run(void* dst, void* dst2, const void* in,
                                         const void* local, size_t n, const void* scalar,
                                         int nranks) {
  using S = typename Tr::Storage;
  using M = typename Tr::Mem;
  constexpr size_t kBlock = kBlockBytes / sizeof(S);
  const Params<Tr> p(scalar, nranks);
  const M* a = static_cast<const M*>(in);
  const M* b = static_cast<const M*>(local);
  size_t i = 0;
  const size_t bytes = n * sizeof(S);
  if (dst2 == nullptr && disjoint(dst, in, bytes) && disjoint(dst, local, bytes)) {
    // No aliasing: straight to the destination (the __restrict promise holds).
    M* d = static_cast<M*>(dst);
    for (; i + kBlock <= n; i += kBlock) reduceBlock<Tr, K, Pre, Post>(d + i, a + i, b + i, kBlock, p);
    if (i < n) reduceBlock<Tr, K, Pre, Post>(d + i, a + i, b + i, n - i, p);
    return;
  }
  alignas(64) S tmp[kBlock];
  for (; i + kBlock <= n; i += kBlock) {
    reduceBlock<Tr, K, Pre, Post>(tmp, a + i, b + i, kBlock, p);
    storeBlock(dst, dst2, i * sizeof(S), tmp, sizeof tmp);
  }
  if (i < n) {
    reduceBlock<Tr, K, Pre, Post>(tmp, a + i, b + i, n - i, p);
    storeBlock(dst, dst2, i * sizeof(S), tmp, (n - i) * sizeof(S));
  }
}

template <class Tr, bool Pre, bool Post>
void CopyKernel<Tr, Pre, Post>::run(void* dst, const void* src, size_t n, const void* scalar,
                                    int nranks) {
  using S = typename Tr::Storage;
  using M = typename Tr::Mem;
  constexpr size_t kBlock = kBlockBytes / sizeof(S);
  const Params<Tr> p(scalar, nranks);
  const M* a = static_cast<const M*>(src);
  size_t i = 0;
  if (disjoint(dst, src, n * sizeof(S))) {
    M* d = static_cast<M*>(dst);
    for (; i + kBlock <= n; i += kBlock) copyBlock<Tr, Pre, Post>(d + i, a + i, kBlock, p);
    if (i < n) copyBlock<Tr, Pre, Post>(d + i, a + i, n - i, p);
    return;
  }
  alignas(64) S tmp[kBlock];
  for (; i + kBlock <= n; i += kBlock) {
    copyBlock<Tr, Pre, Post>(tmp, a + i, kBlock, p);
    storeBlock(dst, nullptr, i * sizeof(S), tmp, sizeof tmp);
  }
  if (i < n) {
    copyBlock<Tr, Pre, Post>(tmp, a + i, n - i, p);
    storeBlock(dst, nullptr, i * sizeof(S), tmp, (n - i) * sizeof(S));
  }
}

}  // namespace BRAID_REDUCE_KERNEL_NS
}  // namespace reduce_detail
}  // namespace braid
