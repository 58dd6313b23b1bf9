// Dense kernels over raw row-major buffers, for float and double (CPU). Matrix products
// go to CBLAS (OpenBLAS, forced single-threaded) when BRAID_TRAIN_HAVE_CBLAS is defined,
// otherwise to a portable blocked implementation (gemmBlocked, always compiled and
// tested against the BLAS path). A CUDA backend would add cuBLAS behind the same calls.
#pragma once
#include <cstdint>

namespace braid {
namespace train {

/// C[M,N] = alpha * op(A) * op(B) + beta * C, all row-major; op(X) is X, or X^T when the
/// trans flag is set. lda/ldb/ldc are row strides in elements (A is M x K, or K x M when
/// transposed; likewise B). With beta == 0, C is overwritten (its old values, even NaN,
/// are ignored).
template <class T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
          int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

/// The portable cache-blocked gemm (same contract as gemm); gemm uses it without CBLAS.
template <class T>
void gemmBlocked(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha,
                 const T* A, int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

/// C[M,N] (+)= A[M,K] * B[K,N] (contiguous); accumulate selects beta = 1.
template <class T>
void matmulNN(const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K, bool accumulate);

/// C[M,N] (+)= A[M,K] * B[N,K]^T (contiguous): a linear layer's forward x * W^T.
template <class T>
void matmulNT(const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K, bool accumulate);

/// C[M,N] (+)= A[K,M]^T * B[K,N] (contiguous): a weight gradient dy^T * x.
template <class T>
void matmulTN(const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K, bool accumulate);

/// y[i] += x[i] for n elements.
template <class T>
void addInPlace(T* y, const T* x, int64_t n);

/// y[i] += alpha * x[i] for n elements.
template <class T>
void axpy(T alpha, const T* x, T* y, int64_t n);

/// out[j] += sum over rows i of x[i, j] (x is rows x cols): a bias gradient.
template <class T>
void addColumnSums(const T* x, T* out, int64_t rows, int64_t cols);

/// x[i, j] += b[j] for every row (x is rows x cols): adding a bias.
template <class T>
void addRowBias(T* x, const T* b, int64_t rows, int64_t cols);

/// True when gemm runs on CBLAS (false: the blocked fallback).
bool haveCblas();

}  // namespace train
}  // namespace braid
