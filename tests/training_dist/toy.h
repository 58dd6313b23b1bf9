// A toy language model for the data-parallel tests, independent of the GPT: token
// embedding -> `depth` residual tanh dense layers -> linear head + cross-entropy. Every
// layer is a Layer<T> with hand-written backward, parameters in a ParamStore, so DDP and
// ZeRO see exactly what they see with the GPT. Plus: a rank-as-thread runner, a
// deterministic global batch, a training loop that drives the DataParallel hooks, and
// a single-process reference loop (plain AdamW, no DataParallel code at all).
#pragma once
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "training/dist/process_group.h"
#include "training/model/layer.h"
#include "training/nn/param.h"
#include "training/optim/adamw.h"
#include "training/parallel/data_parallel.h"
#include "training/tensor/rng.h"

namespace braid {
namespace train {
namespace toy {

struct Config {
  int64_t vocab = 16, width = 8, depth = 3;
  int64_t batch = 8, seq = 4;  ///< global batch: sequences x tokens
  uint64_t seed = 1234;
  int micro = 1;               ///< microbatches per DP rank
  double backwardSleepMs = 0;  ///< simulated compute in each embedding/dense backward
  int numLayers() const { return int(depth) + 2; }
};

template <class T>
struct Embed : Layer<T> {
  int64_t V, C;
  double sleepMs;
  Param<T>* E;
  Embed(ParamStore<T>& s, const Config& c) : V(c.vocab), C(c.width), sleepMs(c.backwardSleepMs) {
    E = s.add("embed.weight", Shape{V, C}, TpSplit{}, Init::kNormal002, true, 0);
    this->params_ = {E};
  }
  std::unique_ptr<Saved> forward(const Micro& m, const Tensor<T>&, Tensor<T>& y) override {
    y.reset(Shape{m.B, m.T, C});
    for (int64_t i = 0; i < m.B * m.T; ++i)
      for (int64_t c = 0; c < C; ++c) y[i * C + c] = E->w[m.tokens[i] * C + c];
    return std::make_unique<Saved>();
  }
  void backward(const Micro& m, Saved&, const Tensor<T>& dy, Tensor<T>*) override {
    for (int64_t i = 0; i < m.B * m.T; ++i)
      for (int64_t c = 0; c < C; ++c) E->g[m.tokens[i] * C + c] += dy[i * C + c];
    if (sleepMs > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(sleepMs));
  }
};

template <class T>
struct Dense : Layer<T> {
  struct S : Saved {
    Tensor<T> x, h;
  };
  int64_t C;
  double sleepMs;
  Param<T>*W, *b;
  Dense(ParamStore<T>& s, const Config& c, int layer) : C(c.width), sleepMs(c.backwardSleepMs) {
    const std::string n = "dense." + std::to_string(layer);
    W = s.add(n + ".weight", Shape{C, C}, TpSplit{}, Init::kNormal002, true, layer);
    b = s.add(n + ".bias", Shape{C}, TpSplit{}, Init::kNormal002, false, layer);
    this->params_ = {W, b};
  }
  // y = x + tanh(x W^T + b)
  std::unique_ptr<Saved> forward(const Micro&, const Tensor<T>& x, Tensor<T>& y) override {
    auto s = std::make_unique<S>();
    s->x = x;
    const int64_t N = x.numel() / C;
    s->h.reset(Shape{N, C});
    y.reset(x.shape());
    for (int64_t i = 0; i < N; ++i)
      for (int64_t o = 0; o < C; ++o) {
        double z = double(b->w[o]);
        for (int64_t k = 0; k < C; ++k) z += double(x[i * C + k]) * double(W->w[o * C + k]);
        s->h[i * C + o] = T(std::tanh(z) * 4.0);  // a steeper nonlinearity: gradients are not tiny
        y[i * C + o] = x[i * C + o] + s->h[i * C + o];
      }
    return s;
  }
  void backward(const Micro&, Saved& saved, const Tensor<T>& dy, Tensor<T>* dx) override {
    auto& s = static_cast<S&>(saved);
    const int64_t N = s.x.numel() / C;
    dx->reset(s.x.shape());
    for (int64_t i = 0; i < N; ++i)
      for (int64_t o = 0; o < C; ++o) {
        const double h = double(s.h[i * C + o]) / 4.0;
        const double dz = double(dy[i * C + o]) * 4.0 * (1.0 - h * h);
        b->g[o] += T(dz);
        for (int64_t k = 0; k < C; ++k) {
          W->g[o * C + k] += T(dz * double(s.x[i * C + k]));
          (*dx)[i * C + k] += T(dz * double(W->w[o * C + k]));
        }
      }
    for (int64_t i = 0; i < s.x.numel(); ++i) (*dx)[i] += dy[i];
    if (sleepMs > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(sleepMs));
  }
};

template <class T>
struct Head : Layer<T> {
  struct S : Saved {
    Tensor<T> x;
    std::vector<double> p;
  };
  int64_t V, C;
  Param<T>* W;
  Head(ParamStore<T>& s, const Config& c, int layer) : V(c.vocab), C(c.width) {
    W = s.add("head.weight", Shape{V, C}, TpSplit{}, Init::kNormal002, true, layer);
    this->params_ = {W};
  }
  std::unique_ptr<Saved> forward(const Micro& m, const Tensor<T>& x, Tensor<T>& y) override {
    auto s = std::make_unique<S>();
    s->x = x;
    const int64_t N = m.B * m.T;
    s->p.assign(size_t(N * V), 0.0);
    double loss = 0;
    for (int64_t i = 0; i < N; ++i) {
      double mx = -1e300;
      double* p = s->p.data() + i * V;
      for (int64_t v = 0; v < V; ++v) {
        double z = 0;
        for (int64_t k = 0; k < C; ++k) z += double(x[i * C + k]) * double(W->w[v * C + k]);
        p[v] = z * 8.0;
        mx = std::max(mx, p[v]);
      }
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += (p[v] = std::exp(p[v] - mx));
      for (int64_t v = 0; v < V; ++v) p[v] /= sum;
      loss -= std::log(p[m.targets[i]]);
    }
    y.reset(Shape{1});
    y[0] = T(loss / double(N));
    return s;
  }
  void backward(const Micro& m, Saved& saved, const Tensor<T>& dy, Tensor<T>* dx) override {
    auto& s = static_cast<S&>(saved);
    const int64_t N = m.B * m.T;
    const double scale = double(dy[0]) / double(N) * 8.0;
    dx->reset(s.x.shape());
    for (int64_t i = 0; i < N; ++i)
      for (int64_t v = 0; v < V; ++v) {
        const double dl = (s.p[size_t(i * V + v)] - (m.targets[i] == v ? 1.0 : 0.0)) * scale;
        for (int64_t k = 0; k < C; ++k) {
          W->g[v * C + k] += T(dl * double(s.x[i * C + k]));
          (*dx)[i * C + k] += T(dl * double(W->w[v * C + k]));
        }
      }
  }
};

template <class T>
struct Model {
  Config cfg;
  ParamStore<T> store;
  std::vector<std::unique_ptr<Layer<T>>> layers;
  explicit Model(const Config& c) : cfg(c) {
    layers.push_back(std::make_unique<Embed<T>>(store, c));
    for (int l = 1; l <= c.depth; ++l) layers.push_back(std::make_unique<Dense<T>>(store, c, l));
    layers.push_back(std::make_unique<Head<T>>(store, c, int(c.depth) + 1));
    store.allocate(c.seed, c.numLayers());
  }
};

/// Step `step`'s global batch: tokens and next-token targets (a noisy rule to learn).
struct Batch {
  std::vector<int32_t> tokens, targets;
};
inline Batch globalBatch(const Config& c, int step) {
  Rng rng(c.seed, uint64_t(step) + 1);
  Batch b;
  for (int64_t i = 0; i < c.batch * c.seq; ++i) {
    const int32_t t = int32_t(rng.next() % uint64_t(c.vocab));
    b.tokens.push_back(t);
    const bool noise = rng.next() % 5 == 0;
    b.targets.push_back(noise ? int32_t(rng.next() % uint64_t(c.vocab)) : int32_t((t * 3 + 1) % c.vocab));
  }
  return b;
}

/// One training step through `dp`'s hooks on DP rank r of d (M microbatches). Returns
/// the global-batch mean loss (summed over the group with `pg`). *norm gets the norm.
template <class T, class M>
double step(M& m, DataParallel<T>& dp, ProcessGroup& pg, int stepIdx, double* norm = nullptr,
            const std::function<void()>& afterBackward = nullptr) {
  const Config& c = m.cfg;
  const int d = pg.size(), r = pg.rank(), Mi = c.micro;
  const Batch b = globalBatch(c, stepIdx);
  const int64_t per = c.batch / d, perMicro = per / Mi;
  dp.beginStep();
  double local = 0;
  const int L = int(m.layers.size());
  for (int mi = 0; mi < Mi; ++mi) {
    const int64_t first = r * per + mi * perMicro;
    Micro mb{b.tokens.data() + first * c.seq, b.targets.data() + first * c.seq, perMicro, c.seq};
    std::vector<Tensor<T>> acts(static_cast<size_t>(L) + 1);
    std::vector<std::unique_ptr<Saved>> saved(static_cast<size_t>(L));
    for (int l = 0; l < L; ++l) {
      dp.preForward(l);
      saved[size_t(l)] = m.layers[size_t(l)]->forward(mb, acts[size_t(l)], acts[size_t(l) + 1]);
      dp.postForward(l);
    }
    local += double(acts[size_t(L)][0]);
    Tensor<T> dy(Shape{1});
    dy[0] = T(1.0 / double(Mi * d));
    for (int l = L - 1; l >= 0; --l) {
      Tensor<T> dx;
      dp.preBackward(l);
      m.layers[size_t(l)]->backward(mb, *saved[size_t(l)], dy, l > 0 ? &dx : nullptr);
      dp.postBackward(l, mi == Mi - 1);
      dy = std::move(dx);
    }
  }
  if (afterBackward) afterBackward();
  const double n = dp.finishStep();
  if (norm) *norm = n;
  return pg.allReduceScalar(local / Mi) / d;
}

/// The single-process reference: same global batch, plain AdamW over the flat buffers.
/// M: a model type with cfg (Config), store and layers (Model<T>, or the GPT wrapper).
template <class T, class M = Model<T>>
struct Reference {
  M model;
  AdamW<T> opt;
  explicit Reference(const Config& c, AdamWConfig o) : model(c), opt(o, model.store.flatSize()) {}
  double step(int stepIdx, double* norm = nullptr) {
    M& m = model;
    const Config& c = m.cfg;
    const Batch b = globalBatch(c, stepIdx);
    m.store.zeroGrads();
    Micro mb{b.tokens.data(), b.targets.data(), c.batch, c.seq};
    const int L = int(m.layers.size());
    std::vector<Tensor<T>> acts(static_cast<size_t>(L) + 1);
    std::vector<std::unique_ptr<Saved>> saved(static_cast<size_t>(L));
    for (int l = 0; l < L; ++l) saved[size_t(l)] = m.layers[size_t(l)]->forward(mb, acts[size_t(l)], acts[size_t(l) + 1]);
    Tensor<T> dy(Shape{1});
    dy[0] = T(1);
    for (int l = L - 1; l >= 0; --l) {
      Tensor<T> dx;
      m.layers[size_t(l)]->backward(mb, *saved[size_t(l)], dy, l > 0 ? &dx : nullptr);
      dy = std::move(dx);
    }
    const double n = std::sqrt(sumSquares(m.store.flatGrads(), m.store.flatSize()));
    if (norm) *norm = n;
    const T scale = opt.clipScale(n);
    opt.beginStep();
    for (size_t i = 0; i < m.store.size(); ++i) {
      Param<T>& p = m.store[i];
      opt.update(p.offset, m.store.flatValues() + p.offset, m.store.flatGrads() + p.offset, p.numel(), p.decay, scale);
    }
    return double(acts[size_t(L)][0]);
  }
};

/// Runs fn(rank, pg) on n ranks as threads (one ncclCommInitRank each, shared id).
/// Returns the per-rank error messages (empty strings when fine).
inline std::vector<std::string> runRanks(int n, const std::function<void(int, ProcessGroup&)>& fn) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return std::vector<std::string>(size_t(n), "ncclGetUniqueId failed");
  std::vector<std::string> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        ProcessGroup pg(id, r, n);
        fn(r, pg);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

inline AdamWConfig testAdam() {
  AdamWConfig a;
  a.lr = 1e-2;
  a.weightDecay = 0.1;
  a.clipNorm = 0.5;  // active on some steps: the global norm must be right
  return a;
}

}  // namespace toy
}  // namespace train
}  // namespace braid
