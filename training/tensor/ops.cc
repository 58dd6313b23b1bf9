// CPU kernels: CBLAS gemm when available, a blocked fallback otherwise.
#include "training/tensor/ops.h"

#include <algorithm>
#include <mutex>
#include <vector>

#if defined(BRAID_TRAIN_HAVE_CBLAS)
#include <cblas.h>
#endif

// OpenBLAS spawns one thread per core by default; ranks run as threads or processes
// sharing the cores, so it must run single-threaded. Weak: absent with other BLASes.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace braid {
namespace train {
namespace {

#if defined(BRAID_TRAIN_HAVE_CBLAS)
void blasInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (openblas_set_num_threads) openblas_set_num_threads(1);
  });
}

inline void blasGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                     const float* A, int lda, const float* B, int ldb, float beta, float* C,
                     int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
inline void blasGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha,
                     const double* A, int lda, const double* B, int ldb, double beta, double* C,
                     int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
#endif

constexpr int64_t kBlockM = 64, kBlockN = 256, kBlockK = 128;

}  // namespace

bool haveCblas() {
#if defined(BRAID_TRAIN_HAVE_CBLAS)
  return true;
#else
  return false;
#endif
}

template <class T>
void gemmBlocked(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha,
                 const T* A, int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0))
      std::fill(c, c + N, T(0));
    else if (beta != T(1))
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
  }
  if (K <= 0 || alpha == T(0)) return;
  // Pack op(A) and op(B) blocks contiguously, then an i-k-j kernel whose inner loop is a
  // contiguous axpy over a row of the B block (vectorisable).
  std::vector<T> pa(size_t(kBlockM * kBlockK)), pb(size_t(kBlockK * kBlockN));
  for (int64_t k0 = 0; k0 < K; k0 += kBlockK) {
    const int64_t kb = std::min(kBlockK, K - k0);
    for (int64_t j0 = 0; j0 < N; j0 += kBlockN) {
      const int64_t nb = std::min(kBlockN, N - j0);
      for (int64_t k = 0; k < kb; ++k)
        for (int64_t j = 0; j < nb; ++j)
          pb[size_t(k * nb + j)] = transB ? B[(j0 + j) * ldb + (k0 + k)] : B[(k0 + k) * ldb + j0 + j];
      for (int64_t i0 = 0; i0 < M; i0 += kBlockM) {
        const int64_t mb = std::min(kBlockM, M - i0);
        for (int64_t i = 0; i < mb; ++i)
          for (int64_t k = 0; k < kb; ++k)
            pa[size_t(i * kb + k)] =
                alpha * (transA ? A[(k0 + k) * lda + i0 + i] : A[(i0 + i) * lda + k0 + k]);
        for (int64_t i = 0; i < mb; ++i) {
          T* c = C + (i0 + i) * ldc + j0;
          for (int64_t k = 0; k < kb; ++k) {
            const T a = pa[size_t(i * kb + k)];
            const T* b = pb.data() + k * nb;
            for (int64_t j = 0; j < nb; ++j) c[j] += a * b[j];
          }
        }
      }
    }
  }
}

template <class T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
#if defined(BRAID_TRAIN_HAVE_CBLAS)
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {  // BLAS would leave C scaled by beta; do it here for the same contract
    gemmBlocked(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  blasInitOnce();
  blasGemm(transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans, int(M),
           int(N), int(K), alpha, A, int(lda), B, int(ldb), beta, C, int(ldc));
#else
  gemmBlocked(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

template <class T>
void matmulNN(const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K, bool accumulate) {
  gemm<T>(false, false, M, N, K, T(1), A, K, B, N, accumulate ? T(1) : T(0), C, N);
}
template <class T>
void matmulNT(const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K, bool accumulate) {
  gemm<T>(false, true, M, N, K, T(1), A, K, B, K, accumulate ? T(1) : T(0), C, N);
}
template <class T>
void matmulTN(const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K, bool accumulate) {
  gemm<T>(true, false, M, N, K, T(1), A, M, B, N, accumulate ? T(1) : T(0), C, N);
}

template <class T>
void addInPlace(T* y, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}
template <class T>
void axpy(T alpha, const T* x, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}
template <class T>
void addColumnSums(const T* x, T* out, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) addInPlace(out, x + i * cols, cols);
}
template <class T>
void addRowBias(T* x, const T* b, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) addInPlace(x + i * cols, b, cols);
}

#define BRAID_TRAIN_OPS(T)                                                                    \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, \
                        int64_t, T, T*, int64_t);                                              \
  template void gemmBlocked<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t,    \
                               const T*, int64_t, T, T*, int64_t);                             \
  template void matmulNN<T>(const T*, const T*, T*, int64_t, int64_t, int64_t, bool);          \
  template void matmulNT<T>(const T*, const T*, T*, int64_t, int64_t, int64_t, bool);          \
  template void matmulTN<T>(const T*, const T*, T*, int64_t, int64_t, int64_t, bool);          \
  template void addInPlace<T>(T*, const T*, int64_t);                                          \
  template void axpy<T>(T, const T*, T*, int64_t);                                             \
  template void addColumnSums<T>(const T*, T*, int64_t, int64_t);                              \
  template void addRowBias<T>(T*, const T*, int64_t, int64_t);
BRAID_TRAIN_OPS(float)
BRAID_TRAIN_OPS(double)
#undef BRAID_TRAIN_OPS

}  // namespace train
}  // namespace braid
