// GELU, tanh approximation (GPT-2's): y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
#pragma once
#include <cstdint>

namespace braid {
namespace train {

/// y[i] = gelu(x[i]) for n elements (y may alias x).
template <class T>
void geluForward(const T* x, T* y, int64_t n);

/// dx[i] = gelu'(x[i]) * dy[i] (overwritten; dx may alias dy).
template <class T>
void geluBackward(const T* x, const T* dy, T* dx, int64_t n);

}  // namespace train
}  // namespace braid
