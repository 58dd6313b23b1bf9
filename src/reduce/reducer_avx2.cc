// The reduction kernels compiled for AVX2 + F16C (x86-64 only; elsewhere avx2Kernels()
// is nullptr). Everything the kernels include is included before the target pragma, so
// only the kernel templates themselves, in their own namespace, become AVX2 code.
// Not enabled: FMA (it would fuse PreMulSum's multiply with the sum and change the
// rounding). kernel_level.cc uses this table only where the CPU has AVX2 and F16C.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "src/reduce/float_types.h"
#include "src/reduce/kernel_table.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,f16c")
#define BRAID_REDUCE_KERNEL_NS avx2
#include "src/reduce/kernels.h"

namespace braid {
namespace reduce_detail {
namespace avx2 {

/// The vector operations narrow_simd.h needs, on 8 lanes (see there).
struct Isa {
  using F = __m256;
  using I = __m256i;
  using M = __m256i;  ///< all-ones lanes where true
  static constexpr int kLanes = 8;
  static constexpr int kRne = _MM_FROUND_TO_NEAREST_INT;

  static F loadF(const void* p) { return _mm256_loadu_ps(static_cast<const float*>(p)); }
  static void storeF(void* p, F v) { _mm256_storeu_ps(static_cast<float*>(p), v); }
  static F loadHalf(const void* p) { return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  static void storeHalf(void* p, F v) { _mm_storeu_si128(static_cast<__m128i*>(p), _mm256_cvtps_ph(v, kRne)); }
  static F roundHalf(F v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, kRne)); }
  static I loadU16(const void* p) { return _mm256_cvtepu16_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
  static I loadU8(const void* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p))); }
  /// The low 16 (8) bits of each lane, packed into the low 16 (8) bytes.
  static void storeU16(void* p, I v) {
    const I pick = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1,
                                    0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    const I packed = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, pick), 0x08);
    _mm_storeu_si128(static_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
  static void storeU8(void* p, I v) {
    const I pick = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                    0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    const I packed = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(v, pick),
                                                 _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
    _mm_storel_epi64(static_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }

  static F setF(float f) { return _mm256_set1_ps(f); }
  static I setI(uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static I addI(I a, I b) { return _mm256_add_epi32(a, b); }
  static I subI(I a, I b) { return _mm256_sub_epi32(a, b); }
  static I andI(I a, I b) { return _mm256_and_si256(a, b); }
  static I orI(I a, I b) { return _mm256_or_si256(a, b); }
  template <unsigned K>
  static I srl(I a) { return _mm256_srli_epi32(a, K); }
  template <unsigned K>
  static I sll(I a) { return _mm256_slli_epi32(a, K); }
  static M gtI(I a, I b) { return _mm256_cmpgt_epi32(a, b); }
  static M eqI(I a, I b) { return _mm256_cmpeq_epi32(a, b); }
  static M ltF(F a, F b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
  static M eqF(F a, F b) { return _mm256_castps_si256(_mm256_cmp_ps(a, b, _CMP_EQ_OQ)); }
  static M nanF(F a) { return _mm256_castps_si256(_mm256_cmp_ps(a, a, _CMP_UNORD_Q)); }
  static I selI(M m, I a, I b) { return _mm256_blendv_epi8(b, a, m); }
  static F selF(M m, F a, F b) { return _mm256_blendv_ps(b, a, _mm256_castsi256_ps(m)); }
  static F asF(I a) { return _mm256_castsi256_ps(a); }
  static I asI(F a) { return _mm256_castps_si256(a); }
  static F cvtF(I a) { return _mm256_cvtepi32_ps(a); }
};

}  // namespace avx2
}  // namespace reduce_detail
}  // namespace braid

#include "src/reduce/narrow_simd.h"
#include "src/reduce/kernel_fill.h"
#undef BRAID_REDUCE_KERNEL_NS
#pragma GCC pop_options

namespace braid {
namespace reduce_detail {
const KernelTable* avx2Kernels() { return &avx2::kTable; }
}  // namespace reduce_detail
}  // namespace braid

#else

namespace braid {
namespace reduce_detail {
const KernelTable* avx2Kernels() { return nullptr; }
}  // namespace reduce_detail
}  // namespace braid

#endif
