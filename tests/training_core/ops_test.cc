// Kernels and building blocks: gemm (CBLAS and the blocked fallback) against a naive
// reference, the RNG, shapes and the ParamStore's layout and initialisation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/training_core/helpers.h"
#include "training/nn/param.h"
#include "training/nn/tp_shard.h"
#include "training/tensor/ops.h"
#include "training/tensor/rng.h"
#include "training/tensor/tensor.h"

namespace braid {
namespace train {
namespace {

using testing_core::fillNormal;

/// C = alpha op(A) op(B) + beta C, the obvious triple loop in long double.
template <class T>
void naiveGemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
               int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      long double s = 0;
      for (int64_t k = 0; k < K; ++k)
        s += (long double)(ta ? A[k * lda + i] : A[i * lda + k]) *
             (long double)(tb ? B[j * ldb + k] : B[k * ldb + j]);
      C[i * ldc + j] = T(alpha * s + (beta == T(0) ? 0.0L : (long double)beta * C[i * ldc + j]));
    }
}

template <class T>
void checkGemm(bool blocked, bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, T beta,
               double tol) {
  const int64_t pad = 3;  // strided operands: ld > logical width
  const int64_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
  std::vector<T> A(size_t((ta ? K : M) * lda)), B(size_t((tb ? N : K) * ldb)),
      C(size_t(M * ldc)), R;
  fillNormal(A.data(), int64_t(A.size()), 1);
  fillNormal(B.data(), int64_t(B.size()), 2);
  fillNormal(C.data(), int64_t(C.size()), 3);
  if (beta == T(0)) std::fill(C.begin(), C.end(), std::numeric_limits<T>::quiet_NaN());
  R = C;
  naiveGemm<T>(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, R.data(), ldc);
  if (blocked)
    gemmBlocked<T>(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  else
    gemm<T>(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      ASSERT_NEAR(double(C[size_t(i * ldc + j)]), double(R[size_t(i * ldc + j)]),
                  tol * (1 + std::sqrt(double(K))))
          << (blocked ? "blocked" : "gemm") << " ta=" << ta << " tb=" << tb << " at " << i
          << "," << j;
}

TEST(TrainOps, GemmAllTransposesBothPaths) {
  for (bool blocked : {false, true})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        checkGemm<double>(blocked, ta, tb, 5, 7, 3, 1.0, 0.0, 1e-12);
        checkGemm<double>(blocked, ta, tb, 70, 260, 130, 0.5, 1.0, 1e-12);  // > one block
        checkGemm<double>(blocked, ta, tb, 4, 3, 0, 1.0, 2.0, 1e-12);       // K = 0: C *= beta
        checkGemm<float>(blocked, ta, tb, 33, 17, 65, 1.0, 1.0, 1e-5);
      }
}

TEST(TrainOps, MatmulHelpersAndVectorOps) {
  // A[2,3] * B[3,2]
  const double A[6] = {1, 2, 3, 4, 5, 6}, B[6] = {1, 0, 0, 1, 1, 1};
  double C[4] = {100, 100, 100, 100};
  matmulNN(A, B, C, 2, 2, 3, false);
  EXPECT_EQ(C[0], 4);
  EXPECT_EQ(C[1], 5);
  EXPECT_EQ(C[2], 10);
  EXPECT_EQ(C[3], 11);
  matmulNN(A, B, C, 2, 2, 3, true);  // accumulate
  EXPECT_EQ(C[3], 22);
  // A[2,3] * A[2,3]^T
  matmulNT(A, A, C, 2, 2, 3, false);
  EXPECT_EQ(C[0], 14);
  EXPECT_EQ(C[1], 32);
  EXPECT_EQ(C[3], 77);
  // A[2,3]^T * A[2,3] = [3,3]; check two entries.
  double D[9];
  matmulTN(A, A, D, 3, 3, 2, false);
  EXPECT_EQ(D[0], 17);
  EXPECT_EQ(D[8], 45);
  double y[3] = {1, 1, 1};
  axpy(2.0, A, y, 3);
  EXPECT_EQ(y[2], 7);
  double cs[3] = {0, 0, 0};
  addColumnSums(A, cs, 2, 3);
  EXPECT_EQ(cs[0], 5);
  EXPECT_EQ(cs[2], 9);
  double X[6] = {0, 0, 0, 1, 1, 1};
  addRowBias(X, A, 2, 3);
  EXPECT_EQ(X[5], 4);
}

TEST(TrainRng, DeterministicAndDistributed) {
  uint64_t s = 0;
  EXPECT_EQ(splitmix64(s), 0xE220A8397B1DCDAFull);  // splitmix64's published first output
  Rng a(7), b(7), c(8);
  EXPECT_EQ(a.next(), b.next());
  EXPECT_NE(Rng(7).next(), c.next());
  EXPECT_NE(Rng(1, 2).next(), Rng(2, 1).next());
  EXPECT_EQ(hashString("wte.weight"), hashString("wte.weight"));
  EXPECT_NE(hashString("wte.weight"), hashString("wpe.weight"));
  Rng r(3);
  const int n = 100000;
  double sum = 0, sumsq = 0, usum = 0;
  for (int i = 0; i < n; ++i) {
    const double x = r.normal();
    sum += x;
    sumsq += x * x;
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    usum += u;
    ASSERT_LT(r.below(5), 5u);
  }
  EXPECT_NEAR(sum / n, 0.0, 0.02);
  EXPECT_NEAR(sumsq / n, 1.0, 0.02);
  EXPECT_NEAR(usum / n, 0.5, 0.01);
}

TEST(TrainTensor, ShapesViewsAndCopies) {
  EXPECT_EQ(shapeString({2, 3, 4}), "[2, 3, 4]");
  EXPECT_EQ(shapeString({}), "[]");
  Tensor<float> t({2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_TRUE(t.owning());
  t[4] = 5;
  Tensor<float> v = Tensor<float>::view(t.data(), {3, 2});
  EXPECT_FALSE(v.owning());
  EXPECT_EQ(v[4], 5);
  Tensor<float> empty;  // copying an empty tensor must not read through its null pointer
  Tensor<float> emptyCopy = empty;
  EXPECT_EQ(emptyCopy.data(), nullptr);
  std::vector<Tensor<float>> many;
  many.assign(3, Tensor<float>());
  EXPECT_EQ(many.size(), 3u);
  Tensor<float> copy = v;  // a copy owns
  EXPECT_TRUE(copy.owning());
  copy[4] = 1;
  EXPECT_EQ(t[4], 5);
  EXPECT_THROW(t.reshape({4, 2}), std::invalid_argument);
  EXPECT_TRUE(empty.empty());
  EXPECT_FALSE(t.empty());
}

// A moved-from tensor is empty: it must not keep pointing at the storage it handed
// over (copying it after the new owner died read freed memory).
TEST(TrainTensor, MovedFromIsEmpty) {
  Tensor<float> a({4});
  a[3] = 7;
  const float* storage = a.data();
  Tensor<float> b = std::move(a);
  EXPECT_EQ(b.data(), storage);  // the buffer moved, not copied
  EXPECT_EQ(b[3], 7.0f);
  EXPECT_TRUE(a.empty());
  EXPECT_TRUE(a.shape().empty());
  Tensor<float> c({2});
  c = std::move(b);
  EXPECT_EQ(c.data(), storage);
  EXPECT_TRUE(b.empty());
  { Tensor<float> gone = std::move(c); }
  Tensor<float> copyOfMoved = c;  // c handed its buffer to `gone`, which is destroyed
  EXPECT_TRUE(copyOfMoved.empty());
  Tensor<float> view = Tensor<float>::view(const_cast<float*>(storage), {4});
  Tensor<float> moved = std::move(view);
  EXPECT_FALSE(moved.owning());
  EXPECT_TRUE(view.empty());
}

TEST(TrainParamStore, LayoutInitAndErrors) {
  ParamStore<float> s;
  Param<float>* w = s.add("a.weight", {64, 32}, TpSplit{}, Init::kNormal002, true, 1);
  Param<float>* p = s.add("a.proj", {64, 32}, TpSplit{}, Init::kNormalProj, true, 1);
  Param<float>* o = s.add("a.ln.weight", {5}, TpSplit{}, Init::kOnes, false, 1);
  Param<float>* z = s.add("a.ln.bias", {5}, TpSplit{}, Init::kZeros, false, 1);
  EXPECT_THROW(s.add("a.weight", {1}, TpSplit{}, Init::kZeros, false, 1), std::invalid_argument);
  EXPECT_THROW(s.add("bad", {5, 3}, TpSplit{0, 0, 2}, Init::kZeros, false, 1),
               std::invalid_argument);
  s.allocate(1, 8);
  EXPECT_THROW(s.add("late", {1}, TpSplit{}, Init::kZeros, false, 1), std::logic_error);
  EXPECT_EQ(s.flatSize(), 64 * 32 * 2 + 10);
  EXPECT_EQ(p->offset, 64 * 32);
  EXPECT_EQ(z->offset, 64 * 32 * 2 + 5);
  EXPECT_EQ(s.find("a.ln.bias"), z);
  EXPECT_EQ(s.find("nope"), nullptr);
  EXPECT_EQ(w->w, s.flatValues());
  EXPECT_EQ(z->g, s.flatGrads() + z->offset);
  EXPECT_EQ(o->w[4], 1.0f);
  EXPECT_EQ(z->w[4], 0.0f);
  auto stddev = [](const Param<float>* q) {
    double ss = 0;
    for (int64_t i = 0; i < q->numel(); ++i) ss += double(q->w[i]) * q->w[i];
    return std::sqrt(ss / double(q->numel()));
  };
  EXPECT_NEAR(stddev(w), 0.02, 0.002);
  EXPECT_NEAR(stddev(p), 0.02 / std::sqrt(16.0), 0.0005);
  // Same (seed, name): same values, whatever else the store holds; another seed differs.
  ParamStore<float> s2;
  s2.add("other", {3}, TpSplit{}, Init::kNormal002, true, 0);
  Param<float>* w2 = s2.add("a.weight", {64, 32}, TpSplit{}, Init::kNormal002, true, 1);
  s2.allocate(1, 8);
  EXPECT_EQ(std::vector<float>(w->w, w->w + w->numel()),
            std::vector<float>(w2->w, w2->w + w2->numel()));
  ParamStore<float> s3;
  Param<float>* w3 = s3.add("a.weight", {64, 32}, TpSplit{}, Init::kNormal002, true, 1);
  s3.allocate(2, 8);
  EXPECT_NE(w3->w[0], w->w[0]);
  // A TP part is the slice of the full tensor along the split dimension (here dim 1).
  ParamStore<float> s4;
  Param<float>* part =
      s4.add("a.weight", {64, 32}, TpSplit{1, 1, 4}, Init::kNormal002, true, 1);
  s4.allocate(1, 8);
  EXPECT_EQ(part->shape, (Shape{64, 8}));
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t c = 0; c < 8; ++c) ASSERT_EQ(part->w[r * 8 + c], w->w[r * 32 + 8 + c]);
  std::vector<float> back(size_t(64 * 32), -1.0f);
  tpScatterInto(part->fullShape, part->tp, part->w, back.data());
  EXPECT_EQ(back[size_t(5 * 32 + 9)], w->w[5 * 32 + 9]);
  EXPECT_EQ(back[size_t(5 * 32 + 7)], -1.0f);
  // zeroGrads and bindFlat.
  s.flatGrads()[3] = 2;
  s.zeroGrads();
  EXPECT_EQ(s.flatGrads()[3], 0.0f);
  w->w = nullptr;
  s.bindFlat();
  EXPECT_EQ(w->w, s.flatValues());
  // Releasing the flat buffers (ZeRO-2/3): the bytes go, the layout stays.
  const int64_t both = s.heldBytes();
  EXPECT_EQ(both, 2 * s.flatSize() * int64_t(sizeof(float)));
  s.releaseGrads();
  EXPECT_EQ(s.heldBytes(), both / 2);
  EXPECT_FALSE(s.hasFlatGrads());
  EXPECT_TRUE(s.hasFlatValues());
  EXPECT_EQ(s.flatGrads(), nullptr);
  EXPECT_EQ(z->g, nullptr);
  EXPECT_EQ(s.flatSize(), 64 * 32 * 2 + 10);
  s.zeroGrads();  // a no-op now
  s.bindFlat();   // values re-bound, gradients stay null
  EXPECT_EQ(w->w, s.flatValues());
  EXPECT_EQ(w->g, nullptr);
  s.releaseValues();
  EXPECT_EQ(s.heldBytes(), 0);
  EXPECT_EQ(w->w, nullptr);
  s.bindFlat();
  EXPECT_EQ(w->w, nullptr);
  EXPECT_EQ(z->offset, 64 * 32 * 2 + 5);
  ParamStore<float> fresh;
  EXPECT_THROW(fresh.releaseGrads(), std::logic_error);
}

}  // namespace
}  // namespace train
}  // namespace braid
