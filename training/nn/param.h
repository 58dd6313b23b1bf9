// Param and ParamStore: the model's parameters, in registration order.
//
// Modules register their parameters in their constructors (ParamStore::add) with a
// dotted name ("blocks.3.mlp.fc.weight"), the FULL (unsharded) shape, and how tensor
// parallelism splits it. After the model is built, ParamStore::allocate() lays every
// parameter out contiguously, in registration order, in one flat value buffer and one
// flat gradient buffer: DDP buckets are then plain ranges of the flat gradient buffer
// and the optimizer runs over flat ranges.
//
// Modules must read `w` and `g` through the Param at call time and never cache them:
// FSDP (training/parallel/) re-points them at gathered buffers before a layer runs and
// sets them to nullptr when it frees them (so a use of a freed parameter crashes in a
// test instead of silently reading stale values).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "training/tensor/tensor.h"

namespace braid {
namespace train {

/// How tensor parallelism splits a parameter's full shape across the TP group.
struct TpSplit {
  int dim = -1;  ///< dimension split into tpSize equal parts; -1: replicated on every TP rank
  int rank = 0;  ///< this rank's part along `dim`
  int size = 1;  ///< number of parts
};

template <class T>
struct Param {
  std::string name;    ///< unique dotted name; also seeds its initialisation
  Shape fullShape;     ///< shape before TP sharding (what one process would hold)
  Shape shape;         ///< this rank's shape (fullShape with `tp.dim` divided by tp.size)
  TpSplit tp;          ///< how fullShape is split across the TP group
  bool decay = true;   ///< AdamW weight decay applies (matrices yes; biases, norms no)
  int layer = -1;      ///< index of the Layer (training/model/layer.h) that owns it
  T* w = nullptr;      ///< current values (this rank's shard of them), or null when freed
  T* g = nullptr;      ///< current gradient, same layout, or null when freed
  int64_t offset = 0;  ///< element offset in the store's flat buffers
  int64_t numel() const { return numelOf(shape); }
};

/// Initialisation of a parameter's FULL tensor, deterministic from (seed, name): the
/// same values whatever the parallel layout, so every layout starts from the model one
/// process would build.
enum class Init : uint8_t {
  kNormal002,  ///< N(0, 0.02^2) (GPT-2's weights)
  kNormalProj, ///< N(0, (0.02/sqrt(2*layers))^2) (GPT-2's residual projections)
  kZeros,
  kOnes,
};

template <class T>
class ParamStore {
 public:
  ParamStore() = default;
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  /// Registers a parameter (before allocate()). Returns a pointer that stays valid for
  /// the store's life.
  Param<T>* add(std::string name, Shape fullShape, TpSplit tp, Init init, bool decay,
                int layer);
  /// Lays out all parameters in the flat buffers, initialises values from `seed`
  /// (each full tensor from (seed, name), then this rank's TP part is kept) and zeroes
  /// gradients. Called once. numLayers scales kNormalProj (std 0.02/sqrt(2*numLayers));
  /// every layout must pass the same value (the trainer passes GptConfig::numLayers()).
  void allocate(uint64_t seed, int numLayers);

  size_t size() const { return params_.size(); }
  Param<T>& operator[](size_t i) { return *params_[i]; }
  const Param<T>& operator[](size_t i) const { return *params_[i]; }
  /// The parameter of that name, or nullptr.
  Param<T>* find(const std::string& name);

  /// The flat buffers (valid after allocate()). Param i's data is at flatValues() +
  /// params[i].offset unless FSDP re-pointed it.
  T* flatValues() { return values_.data(); }
  T* flatGrads() { return grads_.data(); }
  int64_t flatSize() const { return int64_t(values_.size()); }
  /// Points every Param's w/g back at the flat buffers.
  void bindFlat();
  void zeroGrads();

 private:
  std::vector<std::unique_ptr<Param<T>>> params_;
  std::vector<T> values_, grads_;
  std::vector<Init> inits_;
  bool allocated_ = false;
};

}  // namespace train
}  // namespace braid
