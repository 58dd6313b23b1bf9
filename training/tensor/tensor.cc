// Tensor helpers that need no template parameter.
#include "training/tensor/tensor.h"

namespace braid {
namespace train {

/// "[2, 3, 4]" (and "[]" for a scalar shape).
std::string shapeString(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace train
}  // namespace braid
