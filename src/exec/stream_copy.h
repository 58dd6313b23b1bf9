// streamCopy: memcpy for bytes another core will read next (FIFO slots). Non-temporal
// stores send the lines to memory instead of leaving them dirty in this core's cache;
// where the reader's core shares no cache with ours it then gets them up to 5x faster
// than by transfer of dirty lines (docs/performance.md; perf/handoff.cc measures it).
// Call streamFence()
// before publishing the data (the stores are weakly ordered).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

namespace braid {

inline void streamCopy(void* dstv, const void* srcv, size_t n) {
#if defined(__x86_64__) || defined(__i386__)
  auto* dst = static_cast<char*>(dstv);
  auto* src = static_cast<const char*>(srcv);
  // Head: up to the first 16-byte boundary of dst, with plain stores.
  size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
  if (head > n) head = n;
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  for (; i + 16 <= n; i += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  std::memcpy(dst + i, src + i, n - i);
#else
  std::memcpy(dstv, srcv, n);
#endif
}

/// Orders earlier streamCopy stores before the stores that follow (the FIFO's tail).
inline void streamFence() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_sfence();
#endif
}

}  // namespace braid
