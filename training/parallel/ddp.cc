#include "training/parallel/ddp.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace braid {
namespace train {

// ---------------------------------------------------------------- CommStats

double CommStats::commSeconds() const {
  double s = 0;
  for (const CommTiming& o : ops) s += std::max(0.0, o.finishedAt - o.startedAt);
  return s;
}

double CommStats::hiddenSeconds() const {
  double s = 0;
  for (const CommTiming& o : ops) s += std::max(0.0, std::min(o.finishedAt, backwardEndAt) - o.startedAt);
  return s;
}

double CommStats::hiddenShare() const {
  const double c = commSeconds();
  return c > 0 ? hiddenSeconds() / c : 1.0;
}

// ---------------------------------------------------------------- planBuckets

template <class T>
std::vector<Bucket> planBuckets(const ParamStore<T>& store, int64_t firstElems, int64_t capElems) {
  if (firstElems < 1 || capElems < 1)
    throw std::invalid_argument("planBuckets: bucket sizes must be positive");
  std::vector<Bucket> out;
  const int n = int(store.size());
  int i = n - 1;
  while (i >= 0) {
    const int64_t cap = out.empty() ? firstElems : capElems;
    Bucket b;
    b.lastParam = i;
    b.end = store[size_t(i)].offset + store[size_t(i)].numel();
    int64_t size = 0;
    // Take params (in reverse) while the bucket stays within its cap; always at least one.
    while (i >= 0) {
      const int64_t pn = store[size_t(i)].numel();
      if (size > 0 && size + pn > cap) break;
      size += pn;
      const int layer = store[size_t(i)].layer;
      if (std::find(b.layers.begin(), b.layers.end(), layer) == b.layers.end())
        b.layers.push_back(layer);
      --i;
    }
    b.firstParam = i + 1;
    b.begin = store[size_t(b.firstParam)].offset;
    if (b.end - b.begin != size)
      throw std::logic_error("planBuckets: parameters are not contiguous in the flat buffer");
    out.push_back(std::move(b));
  }
  return out;
}

namespace {

template <class T>
int64_t elemsOf(int64_t elems, int64_t bytes) {
  return elems > 0 ? elems : std::max<int64_t>(1, bytes / int64_t(sizeof(T)));
}

}  // namespace

// ---------------------------------------------------------------- Ddp

template <class T>
Ddp<T>::Ddp(ProcessGroup& pg, ParamStore<T>& store, AdamWConfig opt, DdpConfig cfg)
    : pg_(pg), store_(store), opt_(opt, store.flatSize()), cfg_(std::move(cfg)) {
  if (store.size() == 0) throw std::invalid_argument("Ddp: the ParamStore has no parameters");
  if (!store.hasFlatValues() || !store.hasFlatGrads())
    throw std::invalid_argument("Ddp: the ParamStore's flat buffers were released");
  buckets_ = planBuckets(store, elemsOf<T>(cfg_.firstBucketElems, cfg_.firstBucketBytes),
                         elemsOf<T>(cfg_.bucketCapElems, cfg_.bucketCapBytes));
  int maxLayer = 0;
  for (size_t i = 0; i < store.size(); ++i) {
    if (store[i].layer < 0)
      throw std::invalid_argument("Ddp: parameter " + store[i].name + " has no layer");
    maxLayer = std::max(maxLayer, store[i].layer);
  }
  bucketsOfLayer_.assign(size_t(maxLayer) + 1, {});
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (int l : buckets_[b].layers) bucketsOfLayer_[size_t(l)].push_back(b);
  layerDone_.assign(size_t(maxLayer) + 1, 0);
  pendingLayers_.assign(buckets_.size(), 0);
  work_.assign(buckets_.size(), Work());
  queuedAt_.assign(buckets_.size(), 0);
  if (cfg_.broadcastParams && pg_.size() > 1) {
    store_.bindFlat();
    pg_.broadcast(store_.flatValues(), size_t(store_.flatSize()), 0);
  }
  beginStep();
}

template <class T>
Ddp<T>::~Ddp() {
  // Buckets in flight read the store's buffers: let them finish (errors ignored here).
  for (Work& w : work_) {
    try {
      w.wait();
    } catch (...) {
    }
  }
}

template <class T>
void Ddp<T>::beginStep() {
  for (Work& w : work_) w.wait();  // a step never starts with reductions in flight
  store_.zeroGrads();
  std::fill(layerDone_.begin(), layerDone_.end(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    pendingLayers_[b] = int(buckets_[b].layers.size());
    work_[b] = Work();
    queuedAt_[b] = 0;
  }
  lastBackwardAt_ = 0;
}

template <class T>
void Ddp<T>::launch(size_t b) {
  const Bucket& k = buckets_[b];
  T* g = store_.flatGrads() + k.begin;
  queuedAt_[b] = now();
  work_[b] = pg_.allReduceAsync(g, g, size_t(k.elements()),
                                cfg_.average ? ReduceOp::kAvg : ReduceOp::kSum);
  pendingLayers_[b] = -1;  // launched
}

template <class T>
void Ddp<T>::postBackward(int layer, bool lastMicro) {
  if (!lastMicro) return;
  lastBackwardAt_ = now();
  if (noSync_) return;
  if (layer < 0 || size_t(layer) >= layerDone_.size() || layerDone_[size_t(layer)]) return;
  layerDone_[size_t(layer)] = 1;
  for (size_t b : bucketsOfLayer_[size_t(layer)]) {
    if (pendingLayers_[b] > 0 && --pendingLayers_[b] == 0) launch(b);
  }
}

template <class T>
double Ddp<T>::localSquares() const {
  double s = 0;
  for (size_t i = 0; i < store_.size(); ++i) {
    const Param<T>& p = store_[i];
    if (p.tp.dim < 0 && cfg_.tpRank != 0) continue;  // TP-replicated: TP rank 0 counts it
    s += sumSquares(store_.flatGrads() + p.offset, p.numel());
  }
  return s;
}

template <class T>
double Ddp<T>::gradNorm() {
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (pendingLayers_[b] >= 0) launch(b);  // not launched yet (no_sync or missing hooks)
  }
  for (Work& w : work_) w.wait();
  double sq = localSquares();
  if (cfg_.normReduce) sq = cfg_.normReduce(sq);
  return std::sqrt(sq);
}

template <class T>
double Ddp<T>::finishStep() {
  const double backwardEnd = lastBackwardAt_ > 0 ? lastBackwardAt_ : now();
  const double norm = gradNorm();
  stats_ = CommStats();
  stats_.backwardEndAt = backwardEnd;
  stats_.stepEndAt = now();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    CommTiming t;
    t.what = "bucket " + std::to_string(b) + " [params " + std::to_string(buckets_[b].firstParam) +
             ".." + std::to_string(buckets_[b].lastParam) + "]";
    t.elements = buckets_[b].elements();
    t.queuedAt = queuedAt_[b];
    t.startedAt = work_[b].startedAt();
    t.finishedAt = work_[b].finishedAt();
    stats_.ops.push_back(std::move(t));
  }
  const T scale = opt_.clipScale(norm);
  opt_.beginStep();
  for (size_t i = 0; i < store_.size(); ++i) {
    Param<T>& p = store_[i];
    opt_.update(p.offset, store_.flatValues() + p.offset, store_.flatGrads() + p.offset, p.numel(),
                p.decay, scale);
  }
  return norm;
}

template <class T>
StateBytes Ddp<T>::stateBytes() const {
  StateBytes b;
  const int64_t n = store_.flatSize();
  b.params = n * int64_t(sizeof(T));
  b.grads = n * int64_t(sizeof(T));
  b.optimizer = 2 * n * int64_t(sizeof(T));
  return b;
}

template <class T>
int64_t Ddp<T>::heldBytes() const {
  return store_.heldBytes() + int64_t((opt_.m().capacity() + opt_.v().capacity()) * sizeof(T));
}

template <class T>
std::vector<StateSlice<T>> Ddp<T>::stateSlices(bool forSave) {
  const int64_t n = store_.flatSize();
  int64_t begin = 0, end = n;
  if (forSave) {  // every rank holds everything; each writes 1/N of it
    begin = n * pg_.rank() / pg_.size();
    end = n * (pg_.rank() + 1) / pg_.size();
  }
  StateSlice<T> s;
  s.flatBegin = begin;
  s.n = end - begin;
  s.w = store_.flatValues() + begin;
  s.m = opt_.m().data() + begin;
  s.v = opt_.v().data() + begin;
  return {s};
}

template class Ddp<float>;
template class Ddp<double>;
template std::vector<Bucket> planBuckets<float>(const ParamStore<float>&, int64_t, int64_t);
template std::vector<Bucket> planBuckets<double>(const ParamStore<double>&, int64_t, int64_t);

}  // namespace train
}  // namespace braid
