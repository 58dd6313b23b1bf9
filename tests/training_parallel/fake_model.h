// A tiny stand-in model for the pipeline tests: the same Layer<T> interface as the GPT
// (training/model/layer.h) with hand-written forward/backward, no BLAS, no ParamStore.
//   layer 0:      embedding  y[b,t] = E[token]                    E: [V, C]
//   layers 1..L:  residual   y = x + tanh(x W)                     W: [C, C]
//   layer L+1:    head       loss = mean_bt 0.5 (x.u - target/V)^2 u: [C]
// Values come from a fixed LCG seeded by (seed, layer), so every rank that builds the
// model builds the same one.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "training/model/layer.h"

namespace tp_test {

using braid::train::Layer;
using braid::train::Micro;
using braid::train::Param;
using braid::train::Saved;
using braid::train::Tensor;

template <class T>
class FakeLayer : public Layer<T> {
 public:
  /// Makes one parameter of n values (deterministic from seed) and registers it.
  void makeParam(int64_t n, uint64_t seed, int layer, double scale) {
    w_.resize(size_t(n));
    g_.assign(size_t(n), T(0));
    uint64_t s = seed * 6364136223846793005ULL + uint64_t(layer) * 1442695040888963407ULL + 1;
    for (auto& v : w_) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      v = T(scale * (double((s >> 11) & 0xFFFFF) / double(0xFFFFF) - 0.5));
    }
    p_.name = "fake." + std::to_string(layer);
    p_.fullShape = p_.shape = {n};
    p_.layer = layer;
    p_.w = w_.data();
    p_.g = g_.data();
    this->params_.push_back(&p_);
  }
  std::vector<T>& grad() { return g_; }
  std::vector<T>& value() { return w_; }

 protected:
  Param<T> p_;
  std::vector<T> w_, g_;
};

template <class T>
class FakeEmbed : public FakeLayer<T> {
 public:
  FakeEmbed(int64_t V, int64_t C, uint64_t seed) : V_(V), C_(C) { this->makeParam(V * C, seed, 0, 1.0); }
  std::unique_ptr<Saved> forward(const Micro& mb, const Tensor<T>&, Tensor<T>& y) override {
    y.reset({mb.B, mb.T, C_});
    for (int64_t i = 0; i < mb.B * mb.T; ++i)
      for (int64_t c = 0; c < C_; ++c) y[i * C_ + c] = this->p_.w[mb.tokens[i] * C_ + c];
    return std::make_unique<Saved>();
  }
  void backward(const Micro& mb, Saved&, const Tensor<T>& dy, Tensor<T>* dx) override {
    if (dx) throw std::runtime_error("FakeEmbed: layer 0 must get no input gradient");
    for (int64_t i = 0; i < mb.B * mb.T; ++i)
      for (int64_t c = 0; c < C_; ++c) this->p_.g[mb.tokens[i] * C_ + c] += dy[i * C_ + c];
  }

 private:
  int64_t V_, C_;
};

template <class T>
class FakeBlock : public FakeLayer<T> {
 public:
  FakeBlock(int64_t C, uint64_t seed, int layer) : C_(C) { this->makeParam(C * C, seed, layer, 0.6); }
  struct State : Saved {
    Tensor<T> x, h;
  };
  std::unique_ptr<Saved> forward(const Micro&, const Tensor<T>& x, Tensor<T>& y) override {
    auto st = std::make_unique<State>();
    st->x = x;
    st->h.reset(x.shape());
    y.reset(x.shape());
    const int64_t N = x.numel() / C_;
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < C_; ++j) {
        T a = 0;
        for (int64_t k = 0; k < C_; ++k) a += x[i * C_ + k] * this->p_.w[k * C_ + j];
        st->h[i * C_ + j] = std::tanh(a);
        y[i * C_ + j] = x[i * C_ + j] + st->h[i * C_ + j];
      }
    return st;
  }
  void backward(const Micro&, Saved& saved, const Tensor<T>& dy, Tensor<T>* dx) override {
    auto& st = static_cast<State&>(saved);
    const int64_t N = st.x.numel() / C_;
    if (dx) dx->reset(st.x.shape());
    for (int64_t i = 0; i < N; ++i)
      for (int64_t j = 0; j < C_; ++j) {
        const T h = st.h[i * C_ + j];
        const T da = dy[i * C_ + j] * (T(1) - h * h);
        for (int64_t k = 0; k < C_; ++k) {
          this->p_.g[k * C_ + j] += st.x[i * C_ + k] * da;
          if (dx) (*dx)[i * C_ + k] += da * this->p_.w[k * C_ + j];
        }
        if (dx) (*dx)[i * C_ + j] += dy[i * C_ + j];
      }
  }

 private:
  int64_t C_;
};

template <class T>
class FakeHead : public FakeLayer<T> {
 public:
  FakeHead(int64_t V, int64_t C, uint64_t seed, int layer) : V_(V), C_(C) {
    this->makeParam(C, seed, layer, 1.0);
  }
  struct State : Saved {
    Tensor<T> x;
    std::vector<T> r;
  };
  std::unique_ptr<Saved> forward(const Micro& mb, const Tensor<T>& x, Tensor<T>& y) override {
    auto st = std::make_unique<State>();
    st->x = x;
    const int64_t N = mb.B * mb.T;
    st->r.resize(size_t(N));
    double loss = 0;
    for (int64_t i = 0; i < N; ++i) {
      T d = 0;
      for (int64_t c = 0; c < C_; ++c) d += x[i * C_ + c] * this->p_.w[c];
      st->r[size_t(i)] = d - T(mb.targets[i]) / T(V_);
      loss += 0.5 * double(st->r[size_t(i)]) * double(st->r[size_t(i)]);
    }
    y.reset({1});
    y[0] = T(loss / double(N));
    return st;
  }
  void backward(const Micro& mb, Saved& saved, const Tensor<T>& dy, Tensor<T>* dx) override {
    auto& st = static_cast<State&>(saved);
    const int64_t N = mb.B * mb.T;
    const T w = dy[0] / T(N);
    if (dx) dx->reset(st.x.shape());
    for (int64_t i = 0; i < N; ++i)
      for (int64_t c = 0; c < C_; ++c) {
        this->p_.g[c] += w * st.r[size_t(i)] * st.x[i * C_ + c];
        if (dx) (*dx)[i * C_ + c] = w * st.r[size_t(i)] * this->p_.w[c];
      }
  }

 private:
  int64_t V_, C_;
};

/// The whole fake model: blocks + 2 layers, built identically on every rank.
template <class T>
std::vector<std::unique_ptr<FakeLayer<T>>> makeFakeModel(int64_t V, int64_t C, int blocks,
                                                         uint64_t seed) {
  std::vector<std::unique_ptr<FakeLayer<T>>> m;
  m.push_back(std::make_unique<FakeEmbed<T>>(V, C, seed));
  for (int b = 1; b <= blocks; ++b) m.push_back(std::make_unique<FakeBlock<T>>(C, seed, b));
  m.push_back(std::make_unique<FakeHead<T>>(V, C, seed, blocks + 1));
  return m;
}

}  // namespace tp_test
