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
  /// params[i].offset unless FSDP re-pointed it. nullptr once released (below).
  T* flatValues() { return values_.data(); }
  T* flatGrads() { return grads_.data(); }
  /// Number of elements of the flat layout (every parameter of this rank's stage, TP
  /// parts, no padding). Unchanged by the release calls: offsets stay meaningful.
  int64_t flatSize() const { return flatSize_; }
  /// Points every Param's w/g back at the flat buffers (nullptr for a released one).
  void bindFlat();
  /// Zeroes the flat gradient buffer (no-op once released).
  void zeroGrads();

  /// Frees the flat gradient buffer, for owners that keep gradients elsewhere (ZeRO-2:
  /// per-bucket buffers and a gradient shard; ZeRO-3: gathered units). Every Param's g
  /// becomes nullptr: the owner must re-point g before any backward writes it and is
  /// responsible for it from then on. flatGrads() returns nullptr and zeroGrads() does
  /// nothing afterwards. Irreversible.
  void releaseGrads();
  /// Frees the flat value buffer (ZeRO-3, which keeps a 1/N shard and gathers full
  /// units just in time). Every Param's w becomes nullptr: the owner must re-point w
  /// before any forward/backward reads it. flatValues() returns nullptr afterwards.
  /// Irreversible.
  void releaseValues();
  bool hasFlatValues() const { return !valuesReleased_; }
  bool hasFlatGrads() const { return !gradsReleased_; }
  /// Heap bytes the store's flat buffers hold now (their capacity): what the release
  /// calls give back. For memory measurements.
  int64_t heldBytes() const {
    return int64_t((values_.capacity() + grads_.capacity()) * sizeof(T));
  }

 private:
  std::vector<std::unique_ptr<Param<T>>> params_;
  std::vector<T> values_, grads_;
  std::vector<Init> inits_;
  int64_t flatSize_ = 0;
  bool allocated_ = false;
  bool valuesReleased_ = false, gradsReleased_ = false;
};

}  // namespace train
}  // namespace braid
