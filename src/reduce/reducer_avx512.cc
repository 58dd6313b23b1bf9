// The reduction kernels compiled for AVX-512 (F, BW, DQ, VL) + F16C, 512-bit vectors
// preferred (x86-64 only; elsewhere avx512Kernels() is nullptr). As in reducer_avx2.cc,
// everything is included before the target pragma, so only the kernel templates, in
// their own namespace, become AVX-512 code; no FMA contraction (see reducer_avx2.cc).
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "src/reduce/float_types.h"
#include "src/reduce/kernel_table.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC diagnostic push
// GCC 12 warns about the deliberately undefined pass-through operand inside
// immintrin.h's AVX-512 intrinsics (_mm512_undefined_*) once they are inlined.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,f16c,prefer-vector-width=512")
// AVX-512F brings FMA instructions, and GCC contracts a * b + c by default in C++.
#pragma GCC optimize("fp-contract=off")
#define BRAID_REDUCE_KERNEL_NS avx512
#include "src/reduce/kernels.h"

namespace braid {
namespace reduce_detail {
namespace avx512 {

/// The vector operations narrow_simd.h needs, on 16 lanes (see there).
struct Isa {
  using F = __m512;
  using I = __m512i;
  using M = __mmask16;
  static constexpr int kLanes = 16;
  static constexpr int kRne = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

  static F loadF(const void* p) { return _mm512_loadu_ps(static_cast<const float*>(p)); }
  static void storeF(void* p, F v) { _mm512_storeu_ps(static_cast<float*>(p), v); }
  static F loadHalf(const void* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p))); }
  static void storeHalf(void* p, F v) { _mm256_storeu_si256(static_cast<__m256i*>(p), _mm512_cvtps_ph(v, kRne)); }
  static F roundHalf(F v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, kRne)); }
  static I loadU16(const void* p) { return _mm512_cvtepu16_epi32(_mm256_loadu_si256(static_cast<const __m256i*>(p))); }
  static I loadU8(const void* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  static void storeU16(void* p, I v) { _mm256_storeu_si256(static_cast<__m256i*>(p), _mm512_cvtepi32_epi16(v)); }
  static void storeU8(void* p, I v) { _mm_storeu_si128(static_cast<__m128i*>(p), _mm512_cvtepi32_epi8(v)); }

  static F setF(float f) { return _mm512_set1_ps(f); }
  static I setI(uint32_t v) { return _mm512_set1_epi32(static_cast<int>(v)); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static I addI(I a, I b) { return _mm512_add_epi32(a, b); }
  static I subI(I a, I b) { return _mm512_sub_epi32(a, b); }
  static I andI(I a, I b) { return _mm512_and_si512(a, b); }
  static I orI(I a, I b) { return _mm512_or_si512(a, b); }
  template <unsigned K>
  static I srl(I a) { return _mm512_srli_epi32(a, K); }
  template <unsigned K>
  static I sll(I a) { return _mm512_slli_epi32(a, K); }
  static M gtI(I a, I b) { return _mm512_cmpgt_epi32_mask(a, b); }
  static M eqI(I a, I b) { return _mm512_cmpeq_epi32_mask(a, b); }
  static M ltF(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M eqF(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  static M nanF(F a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static I selI(M m, I a, I b) { return _mm512_mask_blend_epi32(m, b, a); }
  static F selF(M m, F a, F b) { return _mm512_mask_blend_ps(m, b, a); }
  static F asF(I a) { return _mm512_castsi512_ps(a); }
  static I asI(F a) { return _mm512_castps_si512(a); }
  static F cvtF(I a) { return _mm512_cvtepi32_ps(a); }
};

}  // namespace avx512
}  // namespace reduce_detail
}  // namespace braid

#include "src/reduce/narrow_simd.h"
#include "src/reduce/kernel_fill.h"
#undef BRAID_REDUCE_KERNEL_NS
#pragma GCC diagnostic pop
#pragma GCC pop_options

namespace braid {
namespace reduce_detail {
const KernelTable* avx512Kernels() { return &avx512::kTable; }
}  // namespace reduce_detail
}  // namespace braid

#else

namespace braid {
namespace reduce_detail {
const KernelTable* avx512Kernels() { return nullptr; }
}  // namespace reduce_detail
}  // namespace braid

#endif
