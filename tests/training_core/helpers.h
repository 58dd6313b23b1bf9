// Shared helpers of the training-core tests: random fills, finite-difference gradient
// checks and a thread-per-rank launcher over ncclCommInitRank.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "training/model/gpt.h"
#include "training/tensor/rng.h"

namespace braid {
namespace train {
namespace testing_core {

/// Fills n values with scale * N(0, 1) from `seed`.
template <class T>
void fillNormal(T* x, int64_t n, uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  for (int64_t i = 0; i < n; ++i) x[i] = T(scale * rng.normal());
}

/// Compares the analytic gradient of `f` w.r.t. x[idx] with a central difference, for
/// up to `samples` indices spread over [0, n) (all when n <= samples): each must satisfy
/// |a - d| <= tol * (|a| + |d|) + atol, atol covering the difference's rounding noise
/// (about 1e-16 |f| / eps) where the true gradient is 0 (e.g. attention's key bias).
/// Returns the worst |a - d| / (|a| + |d| + atol).
inline double gradCheck(const std::function<double()>& f, double* x, const double* analytic,
                        int64_t n, const std::string& what, int samples = 24,
                        double tol = 1e-6, double eps = 1e-5, double atol = 1e-9) {
  double worst = 0;
  const int64_t stride = n <= samples ? 1 : (n + samples - 1) / samples;
  for (int64_t i = 0; i < n; i += stride) {
    const int64_t k = (i * 7919 + stride / 2) % n;  // spread the sample inside each stride
    const double save = x[k];
    x[k] = save + eps;
    const double fp = f();
    x[k] = save - eps;
    const double fm = f();
    x[k] = save;
    const double numeric = (fp - fm) / (2 * eps);
    const double diff = std::fabs(numeric - analytic[k]);
    const double scale = std::fabs(numeric) + std::fabs(analytic[k]);
    worst = std::max(worst, diff / (scale + atol));
    EXPECT_LE(diff, tol * scale + atol) << what << "[" << k << "]: analytic " << analytic[k] << " numeric "
                        << numeric;
  }
  return worst;
}

/// Runs fn(rank, comm) on `n` threads, each with a communicator from ncclCommInitRank
/// over one shared id; rethrows the first exception of any rank.
inline void runRanks(int n, const std::function<void(int, ncclComm_t)>& fn) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> threads;
  std::exception_ptr error;
  std::mutex mu;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      ncclComm_t comm = nullptr;
      try {
        if (ncclCommInitRank(&comm, n, id, r) != ncclSuccess)
          throw std::runtime_error("ncclCommInitRank failed on rank " + std::to_string(r));
        fn(r, comm);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
      if (comm) ncclCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

/// One forward and backward of every layer of `stage` (a whole model) on `m`, with
/// loss weight `weight`; returns the mean loss. Gradients accumulate into the store.
template <class T>
T forwardBackward(GptStage<T>& stage, const Micro& m, T weight = T(1)) {
  std::vector<std::unique_ptr<Saved>> saved;
  std::vector<Tensor<T>> acts(stage.layers.size() + 1);
  for (size_t l = 0; l < stage.layers.size(); ++l)
    saved.push_back(stage.layers[l]->forward(m, acts[l], acts[l + 1]));
  Tensor<T> dy(Shape{1}), dx;
  dy[0] = weight;
  for (size_t l = stage.layers.size(); l-- > 0;) {
    stage.layers[l]->backward(m, *saved[l], dy, l > 0 ? &dx : nullptr);
    std::swap(dy, dx);
  }
  return acts.back()[0];
}

/// Largest |a[i] - b[i]| over n elements, relative to max(1e-3, max |b|).
template <class T, class U>
double maxRelDiff(const T* a, const U* b, int64_t n) {
  double diff = 0, scale = 1e-3;
  for (int64_t i = 0; i < n; ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / scale;
}

}  // namespace testing_core
}  // namespace train
}  // namespace braid
