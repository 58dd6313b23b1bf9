#include "training/parallel/zero.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace braid {
namespace train {

/// Stage 3: one layer's parameters as one flat, padded unit.
template <class T>
struct Zero<T>::Unit {
  int layer = -1;
  std::vector<int> params;         ///< store indices, store order
  std::vector<int64_t> unitOff;    ///< each param's offset inside the unit
  int64_t numel = 0;               ///< U: unpadded size
  int64_t shard = 0;               ///< Su = ceil(U / N)
  int64_t base = 0;                ///< offset of this rank's shard in the shard buffers
  std::vector<T> fullW, fullG;     ///< gathered values / full gradient (empty when freed)
  Work gatherWork, reduceWork;
  bool gathered = false;           ///< fullW holds current values (or their gather is queued)
  bool gradLaunched = false;       ///< reduce-scatter of fullG queued this step
  double gatherQueued = 0, reduceQueued = 0;
};

template <class T>
struct Zero<T>::Impl {
  int n = 1, r = 0;
  // Stages 1-2: this rank's range [b0, e0) of the flat vector; ranges of every owner.
  int64_t slice = 0, b0 = 0, e0 = 0;
  std::vector<Bucket> buckets;
  std::vector<std::vector<size_t>> bucketsOfLayer;
  std::vector<int> pendingLayers;
  std::vector<char> layerDone;
  std::vector<Work> bucketWork;
  std::vector<double> bucketQueued;
  std::vector<std::vector<T>> bucketGrad;  ///< stage 2: a bucket's gradient, while alive
  std::vector<T> shardGrad;                ///< stage 2: [b0, e0) reduced gradient
  int64_t bucketBytesNow = 0, bucketBytesPeak = 0;
  // Stage 3.
  std::vector<Unit> units;
  std::vector<int> unitOfLayer;            ///< layer -> unit index or -1
  std::vector<T> shardW, shardG;           ///< all units' shards, concatenated
  int64_t gatheredNow = 0;
  double lastBackwardAt = 0;
  std::vector<CommTiming> extraOps;        ///< gathers etc. of this step

  int64_t ownerBegin(int o, int64_t F) const { return std::min(F, int64_t(o) * slice); }
  int64_t ownerEnd(int o, int64_t F) const { return std::min(F, int64_t(o + 1) * slice); }
};

namespace {

template <class T>
int64_t elemsOf(int64_t elems, int64_t bytes) {
  return elems > 0 ? elems : std::max<int64_t>(1, bytes / int64_t(sizeof(T)));
}

/// AdamW state size for a rank (computed before the optimizer is built).
template <class T>
int64_t stateSizeFor(const ParamStore<T>& store, int stage, int n) {
  const int64_t F = store.flatSize();
  if (stage != 3) {
    const int64_t slice = (F + n - 1) / n;
    return slice;  // the last ranks' ranges may be shorter; unused tail is harmless
  }
  std::vector<int64_t> unitSize;
  std::vector<int> seen;
  for (size_t i = 0; i < store.size(); ++i) {
    const int l = store[i].layer;
    auto it = std::find(seen.begin(), seen.end(), l);
    if (it == seen.end()) {
      seen.push_back(l);
      unitSize.push_back(store[i].numel());
    } else {
      unitSize[size_t(it - seen.begin())] += store[i].numel();
    }
  }
  int64_t total = 0;
  for (int64_t u : unitSize) total += (u + n - 1) / n;
  return total;
}

}  // namespace

template <class T>
Zero<T>::Zero(ProcessGroup& pg, ParamStore<T>& store, AdamWConfig opt, ZeroConfig cfg)
    : pg_(pg),
      store_(store),
      cfg_(std::move(cfg)),
      impl_(new Impl()),
      opt_(opt, (cfg_.stage >= 1 && cfg_.stage <= 3) ? stateSizeFor(store, cfg_.stage, pg.size()) : 0) {
  if (cfg_.stage < 1 || cfg_.stage > 3)
    throw std::invalid_argument("Zero: stage must be 1, 2 or 3 (got " + std::to_string(cfg_.stage) + ")");
  if (store.size() == 0) throw std::invalid_argument("Zero: the ParamStore has no parameters");
  Impl& I = *impl_;
  I.n = pg.size();
  I.r = pg.rank();
  const int64_t F = store.flatSize();
  int maxLayer = 0;
  for (size_t i = 0; i < store.size(); ++i) {
    if (store[i].layer < 0)
      throw std::invalid_argument("Zero: parameter " + store[i].name + " has no layer");
    maxLayer = std::max(maxLayer, store[i].layer);
  }
  if (!store.hasFlatValues() || (cfg_.stage == 1 && !store.hasFlatGrads()))
    throw std::invalid_argument("Zero: the ParamStore's flat buffers were released");
  store_.bindFlat();
  if (cfg_.stage <= 2) {
    I.slice = (F + I.n - 1) / I.n;
    I.b0 = I.ownerBegin(I.r, F);
    I.e0 = I.ownerEnd(I.r, F);
    I.buckets = planBuckets(store, elemsOf<T>(cfg_.firstBucketElems, cfg_.firstBucketBytes),
                            elemsOf<T>(cfg_.bucketCapElems, cfg_.bucketCapBytes));
    I.bucketsOfLayer.assign(size_t(maxLayer) + 1, {});
    for (size_t b = 0; b < I.buckets.size(); ++b)
      for (int l : I.buckets[b].layers) I.bucketsOfLayer[size_t(l)].push_back(b);
    I.layerDone.assign(size_t(maxLayer) + 1, 0);
    I.pendingLayers.assign(I.buckets.size(), 0);
    I.bucketWork.assign(I.buckets.size(), Work());
    I.bucketQueued.assign(I.buckets.size(), 0);
    I.bucketGrad.assign(I.buckets.size(), {});
    if (cfg_.stage == 2) I.shardGrad.assign(size_t(I.e0 - I.b0), T(0));
    if (cfg_.broadcastParams && I.n > 1) pg_.broadcast(store_.flatValues(), size_t(F), 0);
    // Stage 2: gradients live in per-bucket buffers while alive, then in shardGrad.
    if (cfg_.stage == 2) store_.releaseGrads();
  } else {
    // Units: one per layer, params in store order.
    I.unitOfLayer.assign(size_t(maxLayer) + 1, -1);
    for (size_t i = 0; i < store.size(); ++i) {
      const int l = store[i].layer;
      if (I.unitOfLayer[size_t(l)] < 0) {
        I.unitOfLayer[size_t(l)] = int(I.units.size());
        I.units.emplace_back();
        I.units.back().layer = l;
      }
      Unit& u = I.units[size_t(I.unitOfLayer[size_t(l)])];
      u.params.push_back(int(i));
      u.unitOff.push_back(u.numel);
      u.numel += store[i].numel();
    }
    std::sort(I.units.begin(), I.units.end(),
              [](const Unit& a, const Unit& b) { return a.layer < b.layer; });
    int64_t base = 0;
    for (size_t k = 0; k < I.units.size(); ++k) {
      Unit& u = I.units[k];
      I.unitOfLayer[size_t(u.layer)] = int(k);
      u.shard = (u.numel + I.n - 1) / I.n;
      u.base = base;
      base += u.shard;
    }
    I.shardW.assign(size_t(base), T(0));
    I.shardG.assign(size_t(base), T(0));
    // Rank 0's values (as DDP; the deterministic init makes them equal anyway), then
    // every rank keeps its shard.
    if (cfg_.broadcastParams && I.n > 1) pg_.broadcast(store_.flatValues(), size_t(F), 0);
    for (Unit& u : I.units) {
      const int64_t lo = int64_t(I.r) * u.shard, hi = lo + u.shard;
      for (size_t j = 0; j < u.params.size(); ++j) {
        const Param<T>& p = store_[size_t(u.params[j])];
        const int64_t a = std::max(lo, u.unitOff[j]), b = std::min(hi, u.unitOff[j] + p.numel());
        if (a < b)
          std::memcpy(I.shardW.data() + u.base + (a - lo),
                      store_.flatValues() + p.offset + (a - u.unitOff[j]), size_t(b - a) * sizeof(T));
      }
    }
    // Only the shards remain: the store's flat buffers go (every Param's w/g -> null).
    store_.releaseValues();
    store_.releaseGrads();
  }
  beginStep();
}

template <class T>
Zero<T>::~Zero() {
  try {
    pg_.synchronize();
  } catch (...) {
  }
}

template <class T>
int Zero<T>::unitOf(int layer) const {
  const Impl& I = *impl_;
  if (layer < 0 || size_t(layer) >= I.unitOfLayer.size()) return -1;
  return I.unitOfLayer[size_t(layer)];
}

template <class T>
void Zero<T>::beginStep() {
  Impl& I = *impl_;
  I.lastBackwardAt = 0;
  I.extraOps.clear();
  if (cfg_.stage <= 2) {
    for (Work& w : I.bucketWork) w.wait();
    if (cfg_.stage == 1) {
      store_.zeroGrads();
    } else {
      std::fill(I.shardGrad.begin(), I.shardGrad.end(), T(0));
      for (size_t b = 0; b < I.buckets.size(); ++b) {
        I.bucketGrad[b].clear();
        I.bucketGrad[b].shrink_to_fit();
        for (int p = I.buckets[b].firstParam; p <= I.buckets[b].lastParam; ++p)
          store_[size_t(p)].g = nullptr;
      }
      I.bucketBytesNow = 0;
    }
    std::fill(I.layerDone.begin(), I.layerDone.end(), 0);
    for (size_t b = 0; b < I.buckets.size(); ++b) {
      I.pendingLayers[b] = int(I.buckets[b].layers.size());
      I.bucketWork[b] = Work();
      I.bucketQueued[b] = 0;
    }
  } else {
    std::fill(I.shardG.begin(), I.shardG.end(), T(0));
    for (Unit& u : I.units) {
      u.gradLaunched = false;
      u.reduceWork = Work();
      u.reduceQueued = 0;
    }
  }
}

// ---------------------------------------------------------------- stage 3 mechanics

template <class T>
void Zero<T>::recordGathered() {
  Impl& I = *impl_;
  peakGathered_ = std::max(peakGathered_, I.gatheredNow);
}

template <class T>
void Zero<T>::gather(int k, bool async) {
  Impl& I = *impl_;
  Unit& u = I.units[size_t(k)];
  if (!u.gathered) {
    u.fullW.assign(size_t(u.shard) * size_t(I.n), T(0));
    I.gatheredNow += int64_t(u.fullW.size() * sizeof(T));
    recordGathered();
    u.gatherQueued = now();
    u.gatherWork = pg_.allGatherAsync(I.shardW.data() + u.base, u.fullW.data(), size_t(u.shard));
    u.gathered = true;
  }
  if (!async) waitGathered(k);
}

template <class T>
void Zero<T>::waitGathered(int k) {
  Impl& I = *impl_;
  Unit& u = I.units[size_t(k)];
  if (!u.gathered) gather(k, true);
  const bool fresh = u.gatherQueued != 0;
  u.gatherWork.wait();
  if (fresh) {
    CommTiming t;
    t.what = "gather layer " + std::to_string(u.layer);
    t.elements = int64_t(u.fullW.size());
    t.queuedAt = u.gatherQueued;
    t.startedAt = u.gatherWork.startedAt();
    t.finishedAt = u.gatherWork.finishedAt();
    I.extraOps.push_back(std::move(t));
    u.gatherQueued = 0;
  }
  for (size_t j = 0; j < u.params.size(); ++j)
    store_[size_t(u.params[j])].w = u.fullW.data() + u.unitOff[j];
}

template <class T>
void Zero<T>::release(int k) {
  Impl& I = *impl_;
  Unit& u = I.units[size_t(k)];
  if (!u.gathered) return;
  u.gatherWork.wait();  // the stream may still be writing into fullW
  u.gatherQueued = 0;
  I.gatheredNow -= int64_t(u.fullW.size() * sizeof(T));
  u.fullW.clear();
  u.fullW.shrink_to_fit();
  u.gathered = false;
  for (int pi : u.params) store_[size_t(pi)].w = nullptr;
}

template <class T>
void Zero<T>::reduceUnitGrads(int k) {
  Impl& I = *impl_;
  Unit& u = I.units[size_t(k)];
  if (u.gradLaunched || u.fullG.empty()) return;
  u.reduceQueued = now();
  u.reduceWork = pg_.reduceScatterAsync(u.fullG.data(), I.shardG.data() + u.base, size_t(u.shard),
                                        cfg_.average ? ReduceOp::kAvg : ReduceOp::kSum);
  u.gradLaunched = true;
}

// ---------------------------------------------------------------- hooks

template <class T>
void Zero<T>::preForward(int layer) {
  if (cfg_.stage <= 2) return;
  const int k = unitOf(layer);
  if (k < 0) return;
  gather(k, false);
  if (cfg_.prefetch && size_t(k) + 1 < impl_->units.size()) gather(k + 1, true);
}

template <class T>
void Zero<T>::postForward(int layer) {
  if (cfg_.stage <= 2 || !cfg_.reshardAfterForward) return;
  const int k = unitOf(layer);
  if (k >= 0) release(k);
}

template <class T>
void Zero<T>::preBackward(int layer) {
  Impl& I = *impl_;
  if (cfg_.stage == 2) {
    // Gradient memory for the buckets this layer writes, allocated on first use.
    if (layer < 0 || size_t(layer) >= I.bucketsOfLayer.size()) return;
    for (size_t b : I.bucketsOfLayer[size_t(layer)]) {
      if (!I.bucketGrad[b].empty() || I.pendingLayers[b] < 0) continue;
      const Bucket& k = I.buckets[b];
      I.bucketGrad[b].assign(size_t(k.elements()), T(0));
      I.bucketBytesNow += k.elements() * int64_t(sizeof(T));
      I.bucketBytesPeak = std::max(I.bucketBytesPeak, I.bucketBytesNow);
      for (int p = k.firstParam; p <= k.lastParam; ++p)
        store_[size_t(p)].g = I.bucketGrad[b].data() + (store_[size_t(p)].offset - k.begin);
    }
    return;
  }
  if (cfg_.stage != 3) return;
  const int k = unitOf(layer);
  if (k < 0) return;
  Unit& u = I.units[size_t(k)];
  gather(k, false);
  if (u.fullG.empty()) {
    if (u.gradLaunched) u.reduceWork.wait();  // a second backward after the reduction
    u.fullG.assign(size_t(u.shard) * size_t(I.n), T(0));
    I.gatheredNow += int64_t(u.fullG.size() * sizeof(T));
    recordGathered();
  }
  for (size_t j = 0; j < u.params.size(); ++j)
    store_[size_t(u.params[j])].g = u.fullG.data() + u.unitOff[j];
  if (cfg_.prefetch && k > 0) gather(k - 1, true);
}

template <class T>
void Zero<T>::launchBucket(size_t b) {
  Impl& I = *impl_;
  const Bucket& k = I.buckets[b];
  const int64_t F = store_.flatSize();
  const ReduceOp op = cfg_.average ? ReduceOp::kAvg : ReduceOp::kSum;
  I.bucketQueued[b] = now();
  I.pendingLayers[b] = -1;
  if (cfg_.stage == 1) {
    T* g = store_.flatGrads() + k.begin;
    I.bucketWork[b] = pg_.allReduceAsync(g, g, size_t(k.elements()), op);
    return;
  }
  // Stage 2: reduce each owner's part of the bucket to that owner (a reduce-scatter
  // along the owners' ranges), straight into its shard gradient.
  if (I.bucketGrad[b].empty()) {  // no backward touched it: zeros
    I.bucketGrad[b].assign(size_t(k.elements()), T(0));
    I.bucketBytesNow += k.elements() * int64_t(sizeof(T));
    I.bucketBytesPeak = std::max(I.bucketBytesPeak, I.bucketBytesNow);
  }
  T* src = I.bucketGrad[b].data();
  I.bucketWork[b] = pg_.group([&] {
    for (int o = 0; o < I.n; ++o) {
      const int64_t a = std::max(k.begin, I.ownerBegin(o, F)), e = std::min(k.end, I.ownerEnd(o, F));
      if (a >= e) continue;
      T* dst = o == I.r ? I.shardGrad.data() + (a - I.b0) : nullptr;
      pg_.reduceAsync(src + (a - k.begin), dst, size_t(e - a), o, op);
    }
  });
}

template <class T>
void Zero<T>::postBackward(int layer, bool lastMicro) {
  Impl& I = *impl_;
  if (lastMicro) I.lastBackwardAt = now();
  if (cfg_.stage <= 2) {
    if (!lastMicro || layer < 0 || size_t(layer) >= I.layerDone.size() || I.layerDone[size_t(layer)])
      return;
    I.layerDone[size_t(layer)] = 1;
    for (size_t b : I.bucketsOfLayer[size_t(layer)])
      if (I.pendingLayers[b] > 0 && --I.pendingLayers[b] == 0) launchBucket(b);
    if (cfg_.stage == 2) {  // free bucket gradients whose reduction completed
      for (size_t b = 0; b < I.buckets.size(); ++b) {
        if (I.pendingLayers[b] < 0 && !I.bucketGrad[b].empty() && I.bucketWork[b].done()) {
          I.bucketBytesNow -= I.buckets[b].elements() * int64_t(sizeof(T));
          I.bucketGrad[b].clear();
          I.bucketGrad[b].shrink_to_fit();
          for (int p = I.buckets[b].firstParam; p <= I.buckets[b].lastParam; ++p)
            store_[size_t(p)].g = nullptr;
        }
      }
    }
    return;
  }
  const int k = unitOf(layer);
  if (k < 0) return;
  release(k);
  if (lastMicro) reduceUnitGrads(k);
  for (int pi : I.units[size_t(k)].params) store_[size_t(pi)].g = nullptr;
  // Free full gradients whose reduce-scatter completed.
  for (Unit& u : I.units) {
    if (u.gradLaunched && !u.fullG.empty() && u.reduceWork.done()) {
      I.gatheredNow -= int64_t(u.fullG.size() * sizeof(T));
      u.fullG.clear();
      u.fullG.shrink_to_fit();
    }
  }
}

// ---------------------------------------------------------------- the step

template <class T>
double Zero<T>::localSquares() const {
  const Impl& I = *impl_;
  double s = 0;
  if (cfg_.stage <= 2) {
    const T* g = cfg_.stage == 1 ? store_.flatGrads() + I.b0 : I.shardGrad.data();
    for (size_t i = 0; i < store_.size(); ++i) {
      const Param<T>& p = store_[i];
      if (p.tp.dim < 0 && cfg_.tpRank != 0) continue;
      const int64_t a = std::max(I.b0, p.offset), e = std::min(I.e0, p.offset + p.numel());
      if (a < e) s += sumSquares(g + (a - I.b0), e - a);
    }
    return s;
  }
  for (const Unit& u : I.units) {
    const int64_t lo = int64_t(I.r) * u.shard, hi = lo + u.shard;
    for (size_t j = 0; j < u.params.size(); ++j) {
      const Param<T>& p = store_[size_t(u.params[j])];
      if (p.tp.dim < 0 && cfg_.tpRank != 0) continue;
      const int64_t a = std::max(lo, u.unitOff[j]), e = std::min(hi, u.unitOff[j] + p.numel());
      if (a < e) s += sumSquares(I.shardG.data() + u.base + (a - lo), e - a);
    }
  }
  return s;
}

template <class T>
double Zero<T>::finishStep() {
  Impl& I = *impl_;
  const double backwardEnd = I.lastBackwardAt > 0 ? I.lastBackwardAt : now();
  stats_ = CommStats();
  stats_.backwardEndAt = backwardEnd;
  const int64_t F = store_.flatSize();
  if (cfg_.stage <= 2) {
    for (size_t b = 0; b < I.buckets.size(); ++b)
      if (I.pendingLayers[b] >= 0) launchBucket(b);
    for (size_t b = 0; b < I.buckets.size(); ++b) {
      I.bucketWork[b].wait();
      CommTiming t;
      t.what = "bucket " + std::to_string(b);
      t.elements = I.buckets[b].elements();
      t.queuedAt = I.bucketQueued[b];
      t.startedAt = I.bucketWork[b].startedAt();
      t.finishedAt = I.bucketWork[b].finishedAt();
      stats_.ops.push_back(std::move(t));
    }
    if (cfg_.stage == 2) {  // every reduction is done: only the shard gradient stays
      for (size_t b = 0; b < I.buckets.size(); ++b) {
        if (I.bucketGrad[b].empty()) continue;
        I.bucketBytesNow -= I.buckets[b].elements() * int64_t(sizeof(T));
        std::vector<T>().swap(I.bucketGrad[b]);
        for (int p = I.buckets[b].firstParam; p <= I.buckets[b].lastParam; ++p)
          store_[size_t(p)].g = nullptr;
      }
    }
  } else {
    for (size_t k = 0; k < I.units.size(); ++k) {
      release(int(k));
      reduceUnitGrads(int(k));
    }
    for (Unit& u : I.units) {
      u.reduceWork.wait();
      if (u.reduceQueued > 0) {
        CommTiming t;
        t.what = "reduce-scatter layer " + std::to_string(u.layer);
        t.elements = u.shard * I.n;
        t.queuedAt = u.reduceQueued;
        t.startedAt = u.reduceWork.startedAt();
        t.finishedAt = u.reduceWork.finishedAt();
        stats_.ops.push_back(std::move(t));
      }
      if (!u.fullG.empty()) {
        I.gatheredNow -= int64_t(u.fullG.size() * sizeof(T));
        u.fullG.clear();
        u.fullG.shrink_to_fit();
      }
      for (int pi : u.params) store_[size_t(pi)].g = nullptr;
    }
    for (CommTiming& t : I.extraOps) stats_.ops.push_back(std::move(t));
    I.extraOps.clear();
  }
  // Global norm: this rank's shard of squares, summed over DP, then over TP x PP.
  double sq = localSquares();
  sq = pg_.allReduceScalar(sq);
  if (cfg_.normReduce) sq = cfg_.normReduce(sq);
  const double norm = std::sqrt(sq);
  const T scale = opt_.clipScale(norm);
  opt_.beginStep();
  if (cfg_.stage <= 2) {
    const T* g = cfg_.stage == 1 ? store_.flatGrads() + I.b0 : I.shardGrad.data();
    for (size_t i = 0; i < store_.size(); ++i) {
      const Param<T>& p = store_[i];
      const int64_t a = std::max(I.b0, p.offset), e = std::min(I.e0, p.offset + p.numel());
      if (a < e)
        opt_.update(a - I.b0, store_.flatValues() + a, g + (a - I.b0), e - a, p.decay, scale);
    }
    // Every owner's updated range to every rank.
    const double q = now();
    Work w = pg_.group([&] {
      for (int o = 0; o < I.n; ++o) {
        const int64_t a = I.ownerBegin(o, F), e = I.ownerEnd(o, F);
        if (a < e) pg_.broadcastAsync(store_.flatValues() + a, size_t(e - a), o);
      }
    });
    w.wait();
    CommTiming t;
    t.what = "param all-gather";
    t.elements = F;
    t.queuedAt = q;
    t.startedAt = w.startedAt();
    t.finishedAt = w.finishedAt();
    stats_.ops.push_back(std::move(t));
  } else {
    for (Unit& u : I.units) {
      const int64_t lo = int64_t(I.r) * u.shard, hi = lo + u.shard;
      for (size_t j = 0; j < u.params.size(); ++j) {
        const Param<T>& p = store_[size_t(u.params[j])];
        const int64_t a = std::max(lo, u.unitOff[j]), e = std::min(hi, u.unitOff[j] + p.numel());
        if (a < e) {
          const int64_t off = u.base + (a - lo);
          opt_.update(off, I.shardW.data() + off, I.shardG.data() + off, e - a, p.decay, scale);
        }
      }
    }
  }
  stats_.stepEndAt = now();
  return norm;
}

template <class T>
StateBytes Zero<T>::stateBytes() const {
  const Impl& I = *impl_;
  const int64_t e = int64_t(sizeof(T));
  StateBytes b;
  if (cfg_.stage <= 2) {
    const int64_t own = I.e0 - I.b0;
    b.params = store_.flatSize() * e;
    b.grads = (cfg_.stage == 1 ? store_.flatSize() : own) * e;
    b.optimizer = 2 * own * e;
    b.buffers = I.bucketBytesPeak;
  } else {
    b.params = int64_t(I.shardW.size()) * e;
    b.grads = int64_t(I.shardG.size()) * e;
    b.optimizer = 2 * int64_t(I.shardW.size()) * e;
    b.buffers = peakGathered_;
  }
  return b;
}

template <class T>
int64_t Zero<T>::heldBytes() const {
  const Impl& I = *impl_;
  size_t elems = opt_.m().capacity() + opt_.v().capacity() + I.shardGrad.capacity() +
                 I.shardW.capacity() + I.shardG.capacity();
  for (const auto& g : I.bucketGrad) elems += g.capacity();
  for (const Unit& u : I.units) elems += u.fullW.capacity() + u.fullG.capacity();
  return store_.heldBytes() + int64_t(elems * sizeof(T));
}

template <class T>
std::vector<StateSlice<T>> Zero<T>::stateSlices(bool) {
  Impl& I = *impl_;
  std::vector<StateSlice<T>> out;
  if (cfg_.stage <= 2) {
    StateSlice<T> s;
    s.flatBegin = I.b0;
    s.n = I.e0 - I.b0;
    s.w = store_.flatValues() + I.b0;
    s.m = opt_.m().data();
    s.v = opt_.v().data();
    if (s.n > 0) out.push_back(s);
    return out;
  }
  for (Unit& u : I.units) {
    const int64_t lo = int64_t(I.r) * u.shard, hi = lo + u.shard;
    for (size_t j = 0; j < u.params.size(); ++j) {
      const Param<T>& p = store_[size_t(u.params[j])];
      const int64_t a = std::max(lo, u.unitOff[j]), e = std::min(hi, u.unitOff[j] + p.numel());
      if (a >= e) continue;
      const int64_t off = u.base + (a - lo);
      StateSlice<T> s;
      s.flatBegin = p.offset + (a - u.unitOff[j]);
      s.n = e - a;
      s.w = I.shardW.data() + off;
      s.m = opt_.m().data() + off;
      s.v = opt_.v().data() + off;
      out.push_back(s);
    }
  }
  return out;
}

template <class T>
void Zero<T>::afterLoad() {
  Impl& I = *impl_;
  if (cfg_.stage <= 2) {
    const int64_t F = store_.flatSize();
    pg_.group([&] {
      for (int o = 0; o < I.n; ++o) {
        const int64_t a = I.ownerBegin(o, F), e = I.ownerEnd(o, F);
        if (a < e) pg_.broadcastAsync(store_.flatValues() + a, size_t(e - a), o);
      }
    }).wait();
    return;
  }
  for (size_t k = 0; k < I.units.size(); ++k) release(int(k));  // stale gathered copies
}

template <class T>
void Zero<T>::fullParams(std::vector<T>* out) {
  Impl& I = *impl_;
  out->assign(size_t(store_.flatSize()), T(0));
  if (cfg_.stage <= 2) {
    std::memcpy(out->data(), store_.flatValues(), out->size() * sizeof(T));
    return;
  }
  for (size_t k = 0; k < I.units.size(); ++k) {
    Unit& u = I.units[k];
    std::vector<T> full(size_t(u.shard) * size_t(I.n));
    pg_.allGather(I.shardW.data() + u.base, full.data(), size_t(u.shard));
    for (size_t j = 0; j < u.params.size(); ++j) {
      const Param<T>& p = store_[size_t(u.params[j])];
      std::memcpy(out->data() + p.offset, full.data() + u.unitOff[j], size_t(p.numel()) * sizeof(T));
    }
  }
}

template class Zero<float>;
template class Zero<double>;

}  // namespace train
}  // namespace braid
