// Linear layers: plain, column-parallel and row-parallel.
#include "training/nn/linear.h"

#include <stdexcept>

#include "training/nn/tp_ops.h"
#include "training/tensor/ops.h"

namespace braid {
namespace train {

template <class T>
Linear<T>::Linear(ParamStore<T>& store, const std::string& name, int64_t in, int64_t out,
                  LinearOptions options, TpGroup<T>* tp, int layer)
    : kind_(options.kind), tp_(tp), inLocal_(in), outLocal_(out) {
  const int p = tpSize(tp), r = tpRank(tp);
  if (p == 1) kind_ = LinearKind::kPlain;
  const int64_t groups = options.groups;
  if (groups < 1 || out % groups != 0)
    throw std::invalid_argument(name + ": out features " + std::to_string(out) +
                                " not divisible by groups " + std::to_string(groups));
  if (groups > 1 && kind_ == LinearKind::kRowParallel)
    throw std::invalid_argument(name + ": groups > 1 needs a plain or column-parallel layer");
  Shape wShape = groups == 1 ? Shape{out, in} : Shape{groups, out / groups, in};
  Shape bShape = groups == 1 ? Shape{out} : Shape{groups, out / groups};
  TpSplit wSplit, bSplit;
  if (kind_ == LinearKind::kColumnParallel) {
    if ((out / groups) % p != 0)
      throw std::invalid_argument(name + ": out features per group " +
                                  std::to_string(out / groups) + " not divisible by TP size " +
                                  std::to_string(p));
    wSplit = TpSplit{groups == 1 ? 0 : 1, r, p};
    bSplit = wSplit;
    outLocal_ = out / p;
  } else if (kind_ == LinearKind::kRowParallel) {
    if (in % p != 0)
      throw std::invalid_argument(name + ": in features " + std::to_string(in) +
                                  " not divisible by TP size " + std::to_string(p));
    wSplit = TpSplit{1, r, p};
    inLocal_ = in / p;
  }
  w_ = store.add(name + ".weight", wShape, wSplit, options.init, true, layer);
  if (options.bias) b_ = store.add(name + ".bias", bShape, bSplit, Init::kZeros, false, layer);
}

template <class T>
std::vector<Param<T>*> Linear<T>::params() const {
  std::vector<Param<T>*> v{w_};
  if (b_) v.push_back(b_);
  return v;
}

template <class T>
void Linear<T>::forward(const T* x, T* y, int64_t n) const {
  matmulNT<T>(x, w_->w, y, n, outLocal_, inLocal_, false);
  if (kind_ == LinearKind::kRowParallel) tpReduceForward(tp_, y, n * outLocal_);
  if (b_) addRowBias<T>(y, b_->w, n, outLocal_);
}

template <class T>
void Linear<T>::backward(const T* x, const T* dy, T* dx, int64_t n) const {
  // dW[out, in] += dy^T[out, n] x[n, in]; db += column sums of dy.
  matmulTN<T>(dy, x, w_->g, outLocal_, inLocal_, n, true);
  if (b_) addColumnSums<T>(dy, b_->g, n, outLocal_);
  if (!dx) return;
  matmulNN<T>(dy, w_->w, dx, n, inLocal_, outLocal_, false);
  if (kind_ == LinearKind::kColumnParallel) tpCopyBackward(tp_, dx, n * inLocal_);
}

template class Linear<float>;
template class Linear<double>;

}  // namespace train
}  // namespace braid
