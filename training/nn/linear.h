// Linear: y = x W^T + b with W of full shape [out, in] (PyTorch's layout), in three
// tensor-parallel flavours:
//   kPlain           the whole layer on every rank (also what the others become
//                    without a TpGroup);
//   kColumnParallel  output features split: rank r holds rows [r*out/p, (r+1)*out/p)
//                    of W and b, computes its slice of y; the input gradient is
//                    all-reduced in backward (Megatron's f operator);
//   kRowParallel     input features split: rank r holds columns [r*in/p, ...) of W and
//                    reads its slice of x; the partial outputs are all-reduced in
//                    forward (Megatron's g), then the (replicated) bias is added once.
// `groups` > 1 stacks independent outputs, as the fused Q/K/V projection: W's full
// shape is [groups, out/groups, in] and each group is split separately (TpSplit dim 1),
// so rank r's output is [q slice | k slice | v slice].
// The module is stateless: activations are passed in by the caller.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "training/nn/param.h"
#include "training/nn/tp_group.h"

namespace braid {
namespace train {

/// How a Linear is split over the TP group (see the file comment).
enum class LinearKind : uint8_t { kPlain, kColumnParallel, kRowParallel };

/// Construction options of a Linear.
struct LinearOptions {
  bool bias = true;             ///< register and add a bias
  LinearKind kind = LinearKind::kPlain;
  int64_t groups = 1;           ///< stacked outputs (column-parallel or plain only)
  Init init = Init::kNormal002; ///< the weight's init (biases start at zero)
};

/// A linear layer over caller-owned activations (see the file comment).
template <class T>
class Linear {
 public:
  /// Registers `name`.weight (and `name`.bias) in `store` for model layer `layer`.
  /// Throws std::invalid_argument when the split sizes do not divide.
  Linear(ParamStore<T>& store, const std::string& name, int64_t in, int64_t out,
         LinearOptions options, TpGroup<T>* tp, int layer);

  /// y[n, outLocal()] = x[n, inLocal()] W^T + b (row-parallel: all-reduced over TP
  /// before the bias). y is overwritten.
  void forward(const T* x, T* y, int64_t n) const;
  /// Given dy[n, outLocal()] and the forward input x: accumulates dW (and db); when dx
  /// is non-null writes dx[n, inLocal()] (column-parallel: all-reduced over TP).
  void backward(const T* x, const T* dy, T* dx, int64_t n) const;

  /// Input features this rank reads (in / p for row-parallel, else in).
  int64_t inLocal() const { return inLocal_; }
  /// Output features this rank writes (out / p for column-parallel, else out).
  int64_t outLocal() const { return outLocal_; }
  /// The weight Param (this rank's part).
  Param<T>* weight() const { return w_; }
  /// The bias Param, or nullptr without bias.
  Param<T>* bias() const { return b_; }
  /// weight then bias (if any), in registration order.
  std::vector<Param<T>*> params() const;

 private:
  LinearKind kind_;
  TpGroup<T>* tp_;
  int64_t inLocal_, outLocal_;
  Param<T>* w_ = nullptr;
  Param<T>* b_ = nullptr;
};

}  // namespace train
}  // namespace braid
