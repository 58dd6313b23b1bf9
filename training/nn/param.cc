// ParamStore: registration, flat layout and deterministic initialisation.
#include "training/nn/param.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "training/nn/tp_shard.h"
#include "training/tensor/rng.h"

namespace braid {
namespace train {
namespace {

/// Fills `out` (this rank's part) with the values the FULL tensor would have, then keeps
/// the slice [rank*part, (rank+1)*part) along tp.dim.
template <class T>
void initParam(const Param<T>& p, Init init, uint64_t seed, int numLayers, T* out) {
  const int64_t n = p.numel();
  if (init == Init::kZeros || init == Init::kOnes) {
    const T v = init == Init::kOnes ? T(1) : T(0);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
    return;
  }
  double stddev = 0.02;
  if (init == Init::kNormalProj) stddev = 0.02 / std::sqrt(2.0 * double(std::max(1, numLayers)));
  const int64_t full = numelOf(p.fullShape);
  std::vector<double> values(static_cast<size_t>(full));
  Rng rng(seed, hashString(p.name));
  for (double& v : values) v = stddev * rng.normal();
  tpSliceOf(p.fullShape, p.tp, values.data(), out);
}

}  // namespace

template <class T>
Param<T>* ParamStore<T>::add(std::string name, Shape fullShape, TpSplit tp, Init init,
                             bool decay, int layer) {
  if (allocated_) throw std::logic_error("ParamStore::add after allocate: " + name);
  if (find(name)) throw std::invalid_argument("ParamStore::add: duplicate name " + name);
  auto p = std::make_unique<Param<T>>();
  p->name = std::move(name);
  p->fullShape = fullShape;
  p->shape = fullShape;
  if (tp.size < 1 || tp.rank < 0 || tp.rank >= tp.size)
    throw std::invalid_argument("ParamStore::add: bad TpSplit for " + p->name);
  if (tp.dim >= 0) {
    if (size_t(tp.dim) >= fullShape.size() || fullShape[size_t(tp.dim)] % tp.size != 0)
      throw std::invalid_argument("ParamStore::add: " + p->name + " shape " +
                                  shapeString(fullShape) + " not splittable along dim " +
                                  std::to_string(tp.dim) + " into " + std::to_string(tp.size));
    p->shape[size_t(tp.dim)] /= tp.size;
  } else {
    tp.rank = 0;
    tp.size = 1;
  }
  p->tp = tp;
  p->decay = decay;
  p->layer = layer;
  params_.push_back(std::move(p));
  inits_.push_back(init);
  return params_.back().get();
}

template <class T>
void ParamStore<T>::allocate(uint64_t seed, int numLayers) {
  if (allocated_) throw std::logic_error("ParamStore::allocate called twice");
  int64_t total = 0;
  for (auto& p : params_) {
    p->offset = total;
    total += p->numel();
  }
  values_.assign(size_t(total), T(0));
  grads_.assign(size_t(total), T(0));
  flatSize_ = total;
  allocated_ = true;
  bindFlat();
  for (size_t i = 0; i < params_.size(); ++i)
    initParam(*params_[i], inits_[i], seed, numLayers, params_[i]->w);
}

template <class T>
Param<T>* ParamStore<T>::find(const std::string& name) {
  for (auto& p : params_)
    if (p->name == name) return p.get();
  return nullptr;
}

template <class T>
void ParamStore<T>::bindFlat() {
  for (auto& p : params_) {
    p->w = valuesReleased_ ? nullptr : values_.data() + p->offset;
    p->g = gradsReleased_ ? nullptr : grads_.data() + p->offset;
  }
}

template <class T>
void ParamStore<T>::zeroGrads() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template <class T>
void ParamStore<T>::releaseGrads() {
  if (!allocated_) throw std::logic_error("ParamStore::releaseGrads before allocate");
  std::vector<T>().swap(grads_);
  gradsReleased_ = true;
  for (auto& p : params_) p->g = nullptr;
}

template <class T>
void ParamStore<T>::releaseValues() {
  if (!allocated_) throw std::logic_error("ParamStore::releaseValues before allocate");
  std::vector<T>().swap(values_);
  valuesReleased_ = true;
  for (auto& p : params_) p->w = nullptr;
}

template class ParamStore<float>;
template class ParamStore<double>;

}  // namespace train
}  // namespace braid
