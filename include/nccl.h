/*
 * nccl.h — the NCCL 2.30 application interface, as implemented by Braid.
 *
 * Written for Braid. It declares the same functions, types, enumerators and macros as
 * NVIDIA's NCCL 2.30.7 nccl.h with the same binary layout and values, so a program built
 * against either header runs on either library (relinked or with LD_PRELOAD=libbraid.so).
 * tests/abi/ proves the layout and values line by line against NVIDIA's header. Programs
 * built against the 2.28 header keep working: everything 2.28 had is unchanged, and a
 * 2.28 ncclConfig_t (smaller, version 22809) is read as such.
 *
 * Braid extensions are NOT declared here; they live in <braid/...>.
 *
 * Memory kinds. Braid accepts host memory natively: every function that takes a buffer
 * (the collectives, ncclSend/ncclRecv, ncclCommRegister, ncclCommWindowRegister) accepts
 * plain host memory (malloc, mmap, ...) as well as CUDA device memory. Host buffers with
 * a null stream ((cudaStream_t)0) complete before the call returns (or, inside a group,
 * before ncclGroupEnd returns). ncclMemAlloc returns host memory when no GPU is present.
 * These are the "Braid host-memory-capable" functions marked [host-ok] below.
 *
 * Every ncclX function has a pncclX twin with the same signature (the NCCL profiling
 * interface); in Braid both names reach the same implementation.
 *
 * The header compiles as C (C99 and later) and C++ with or without the CUDA toolkit.
 * cudaStream_t comes from <cuda_runtime.h> when the compiler can find it; otherwise (or
 * when BRAID_NO_CUDA_HEADERS is defined) it is declared here exactly as CUDA declares it,
 * so both spellings name the same type when they meet in one translation unit.
 */
#ifndef NCCL_H_
#define NCCL_H_

/* ---- CUDA types ------------------------------------------------------------------ */

#if !defined(BRAID_NO_CUDA_HEADERS) && defined(__has_include)
#if __has_include(<cuda_runtime.h>)
#define BRAID_NCCL_H_USES_CUDA 1
#endif
#endif

#ifdef BRAID_NCCL_H_USES_CUDA
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif
#else
/// A CUDA stream handle; Braid's host path takes (cudaStream_t)0. Same type as CUDA's.
typedef struct CUstream_st* cudaStream_t;
#endif

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* ---- version --------------------------------------------------------------------- */

#define NCCL_MAJOR 2
#define NCCL_MINOR 30
#define NCCL_PATCH 7
#define NCCL_SUFFIX ""

/// The version code of this header: 2.30.7 -> 23007.
#define NCCL_VERSION_CODE 23007
/// Version code of X.Y.Z; releases up to 2.8 used X*1000+Y*100+Z, later X*10000+Y*100+Z.
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#ifdef __cplusplus
extern "C" {
#endif

/* ---- handles and identifiers ------------------------------------------------------- */

/// A communicator: one rank's membership in a group of ranks.
typedef struct ncclComm* ncclComm_t;
/// A registered memory window (ncclCommWindowRegister).
typedef struct ncclWindow_vidmem* ncclWindow_t;
/// The null communicator (returned for NCCL_SPLIT_NOCOLOR).
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/// Opaque rendezvous token from ncclGetUniqueId, passed by value to every rank.
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/* ---- result codes ------------------------------------------------------------------ */

/// Status returned by every call.
typedef enum {
  ncclSuccess = 0,            ///< done
  ncclUnhandledCudaError = 1, ///< a CUDA call failed
  ncclSystemError = 2,        ///< a system call or the network failed
  ncclInternalError = 3,      ///< a bug in the library
  ncclInvalidArgument = 4,    ///< a bad argument (see ncclGetLastError)
  ncclInvalidUsage = 5,       ///< a call out of order or a misuse of the API
  ncclRemoteError = 6,        ///< a peer failed or went away
  ncclInProgress = 7,         ///< non-blocking operation not finished yet
  ncclTimeout = 8,            ///< a wait ran out of time (BRAID_TIMEOUT_MS)
  ncclNumResults = 9          ///< number of result codes
} ncclResult_t;

/* ---- constants ----------------------------------------------------------------------- */

/// "Not set" markers for ncclConfig_t fields and the simulator's time.
#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_UNDEF_FLOAT -1.0f
/// Color that keeps a rank out of every communicator made by ncclCommSplit.
#define NCCL_SPLIT_NOCOLOR -1

/// The magic number the *_INITIALIZER macros store (the library checks it).
#define NCCL_API_MAGIC 0xcafebeef

/// ncclCommWindowRegister flags and the alignment symmetric windows need.
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/// ncclConfig_t.CTAPolicy values.
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/// ncclCommShrink flags: plain shrink, or abort the parent's pending work first.
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/// ncclCommRevoke flags (only the default, 0, exists).
#define NCCL_REVOKE_DEFAULT 0x00

/* ---- communicator configuration ------------------------------------------------------ */

/// Options for ncclCommInitRankConfig / Split / Shrink. Always start from
/// NCCL_CONFIG_INITIALIZER; fields left NCCL_CONFIG_UNDEF_* take the library default.
typedef struct ncclConfig_v23000 {
  size_t size;             ///< set by the initializer: sizeof(ncclConfig_t)
  unsigned int magic;      ///< set by the initializer
  unsigned int version;    ///< set by the initializer: NCCL_VERSION_CODE
  int blocking;            ///< 0: calls may return ncclInProgress
  int cgaClusterSize;      ///< CUDA cluster size for kernels (GPU only)
  int minCTAs;             ///< lower bound on channels
  int maxCTAs;             ///< upper bound on channels
  const char* netName;     ///< network to use, as NCCL_NET
  int splitShare;          ///< children of ncclCommSplit share resources
  int trafficClass;        ///< network traffic class
  const char* commName;    ///< name shown in logs
  int collnetEnable;       ///< allow in-network reduction
  int CTAPolicy;           ///< NCCL_CTA_POLICY_*
  int shrinkShare;         ///< children of ncclCommShrink share resources
  int nvlsCTAs;            ///< channels for NVLink SHARP
  int nChannelsPerNetPeer; ///< channels per network peer
  int nvlinkCentricSched;  ///< prefer NVLink-aware scheduling
  /* since 2.30 (a 2.28 config ends above: its size says so) */
  int graphUsageMode;      ///< 0 no CUDA graphs, 1 one graph, 2 several or mixed (default)
  int numRmaCtx;           ///< one-sided (ncclPutSignal) contexts: ctx < numRmaCtx (default 1)
  int maxP2pPeers;         ///< peers a rank talks to at once in send/recv patterns
  int graphStreamOrdering; ///< 0: the caller orders captured kernels; 1: the library does
} ncclConfig_t;

/// Value every ncclConfig_t must start from.
#define NCCL_CONFIG_INITIALIZER                                                        \
  {                                                                                    \
    sizeof(ncclConfig_t), NCCL_API_MAGIC, NCCL_VERSION_CODE,                          \
        NCCL_CONFIG_UNDEF_INT, /* blocking */                                          \
        NCCL_CONFIG_UNDEF_INT, /* cgaClusterSize */                                    \
        NCCL_CONFIG_UNDEF_INT, /* minCTAs */                                           \
        NCCL_CONFIG_UNDEF_INT, /* maxCTAs */                                           \
        NCCL_CONFIG_UNDEF_PTR, /* netName */                                           \
        NCCL_CONFIG_UNDEF_INT, /* splitShare */                                        \
        NCCL_CONFIG_UNDEF_INT, /* trafficClass */                                      \
        NCCL_CONFIG_UNDEF_PTR, /* commName */                                          \
        NCCL_CONFIG_UNDEF_INT, /* collnetEnable */                                     \
        NCCL_CONFIG_UNDEF_INT, /* CTAPolicy */                                         \
        NCCL_CONFIG_UNDEF_INT, /* shrinkShare */                                       \
        NCCL_CONFIG_UNDEF_INT, /* nvlsCTAs */                                          \
        NCCL_CONFIG_UNDEF_INT, /* nChannelsPerNetPeer */                               \
        NCCL_CONFIG_UNDEF_INT, /* nvlinkCentricSched */                                \
        NCCL_CONFIG_UNDEF_INT, /* graphUsageMode */                                    \
        NCCL_CONFIG_UNDEF_INT, /* numRmaCtx */                                         \
        NCCL_CONFIG_UNDEF_INT, /* maxP2pPeers */                                       \
        NCCL_CONFIG_UNDEF_INT, /* graphStreamOrdering */                               \
  }

/// Result of ncclGroupSimulateEnd: the predicted time of the group.
typedef struct ncclSimInfo_v22200 {
  size_t size;          ///< set by the initializer
  unsigned int magic;   ///< set by the initializer
  unsigned int version; ///< set by the initializer
  float estimatedTime;  ///< predicted time, microseconds
} ncclSimInfo_t;

/// Value every ncclSimInfo_t must start from.
#define NCCL_SIM_INFO_INITIALIZER                                                        \
  {                                                                                      \
    sizeof(ncclSimInfo_t), 0x74685283, NCCL_VERSION_CODE, NCCL_UNDEF_FLOAT               \
  }

/* ---- reduction operators and data types ---------------------------------------------- */

/// Sizing helper: gives ncclMaxRedOp the width of a plain enum on this ABI.
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;

/// Reduction operator: a built-in one, or a handle from ncclRedOpCreatePreMulSum.
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  /// Count of built-in operators; created operators take values from here upward.
  ncclNumOps = 5,
  /// Largest operator value: the largest signed value of an enum's width.
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/// Element type of a buffer. Aliases share a value.
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/// Where the scalar of ncclRedOpCreatePreMulSum lives and when it is read.
typedef enum {
  ncclScalarDevice = 0,       ///< device-visible memory, read while the collective runs
  ncclScalarHostImmediate = 1 ///< host memory, read before the create call returns
} ncclScalarResidence_t;

/* ---- memory ---------------------------------------------------------------------------- */

/// Allocate memory suited to registration; host memory when no GPU is present. [host-ok]
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);

/// Free memory from ncclMemAlloc. [host-ok]
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* ---- library and communicator lifecycle ------------------------------------------------ */

/// Store the library's NCCL_VERSION_CODE in *version.
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/// Create a rendezvous token; call once and give the same token to every rank.
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/// Join communicator commId as rank `rank` of `nranks`, with options (config may be NULL).
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                     int rank, ncclConfig_t* config);

/// Join communicator commId as rank `rank` of `nranks`; collective over all ranks.
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/// Create ndev communicators of one process at once; devlist NULL means devices 0..ndev-1.
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/// Flush all issued work; the communicator then reports ncclInProgress until quiescent.
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/// Free the communicator's local resources.
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/// Stop pending work and free the communicator.
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/// Stop in-flight work so destroy/split/shrink may follow; revokeFlags must be 0.
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/// Make new communicators from ranks with equal color, ordered by key (config NULL: inherit).
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config);

/// Make a communicator without the listed ranks; shrinkFlags is NCCL_SHRINK_*.
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);

/// Like ncclCommInitRankConfig with nId tokens (the same list on every rank) for speed.
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);

/// Make the token new ranks use to join comm through ncclCommGrow. One rank of comm (the
/// coordinator) calls it, then hands the token to the new ranks; each token serves one grow.
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);

/// Make a communicator of nRanks from comm's ranks (same rank numbers) and new ranks.
/// Existing ranks: comm, rank -1, uniqueId NULL (the coordinator: its token).
/// New ranks: comm NULL, the token, their rank (>= comm's size). config NULL: inherit.
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                           ncclComm_t* newcomm, ncclConfig_t* config);

/* ---- errors and queries ---------------------------------------------------------------- */

/// A fixed text for a result code.
const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/// The last error message on comm (or of this thread when comm is NULL).
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/// Deprecated by NVIDIA: re-read the logging environment variables. As in NCCL 2.30 the
/// declaration needs NCCL_OS_LINUX; elsewhere the call is an empty macro.
#ifdef NCCL_OS_LINUX
__attribute__((deprecated("ncclResetDebugInit is not supported as part of the NCCL API and will be removed in the future")))
void ncclResetDebugInit(void);
__attribute__((deprecated("pncclResetDebugInit is not supported as part of the NCCL API and will be removed in the future")))
void pncclResetDebugInit(void);
#else
#define ncclResetDebugInit()
#define pncclResetDebugInit()
#endif

/// Store in *asyncError the communicator's state (ncclInProgress while non-blocking work runs).
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

/// Store the number of ranks in *count.
ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);

/// Store the communicator's CUDA device in *device.
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);

/// Store this rank's index in *rank.
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- suspend, resume, memory statistics -------------------------------------------------- */

/// ncclCommSuspend flag: release the communicator's dynamic buffers (FIFOs, plan images).
#define NCCL_SUSPEND_MEM 0x01

/// Release what `flags` names; collective over the communicator, with no work pending.
/// Until ncclCommResume the communicator takes no operations. [host-ok]
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);

/// Make a suspended communicator usable again (collective). [host-ok]
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);

/// What ncclCommMemStats reports (GPU memory, in bytes, except ncclStatGpuMemSuspended).
typedef enum {
  ncclStatGpuMemSuspend = 0,   ///< memory ncclCommSuspend can release
  ncclStatGpuMemSuspended = 1, ///< 1 while suspended, else 0
  ncclStatGpuMemPersist = 2,   ///< memory kept while suspended
  ncclStatGpuMemTotal = 3      ///< all GPU memory the communicator holds
} ncclCommMemStat_t;

/// Store the statistic `stat` of comm in *value.
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);

/* ---- registration ---------------------------------------------------------------------- */

/// Register a buffer for zero-copy use; returns a handle. [host-ok]
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);

/// Release a handle from ncclCommRegister. [host-ok]
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/// Register a memory window (collective over the communicator); winFlags is NCCL_WIN_*. [host-ok]
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size,
                                     ncclWindow_t* win, int winFlags);

/// Release a window from ncclCommWindowRegister. [host-ok]
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/// Store in *outUserPtr the buffer this rank registered as win. [host-ok]
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);

/* ---- custom reduction operators ---------------------------------------------------------- */

/// Create "multiply by *scalar, then sum" for this comm and datatype; store it in *op. [host-ok]
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

/// Destroy an operator from ncclRedOpCreatePreMulSum (once no call using it is pending).
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/* ---- collectives ------------------------------------------------------------------------
 * Every rank of the communicator makes the same call. All of them are [host-ok]: buffers
 * may be host or device memory. Counts are in elements. "In place" means the send data
 * already sits at the rank's own place in recvbuff. */

/// Reduce sendbuff of every rank with op into recvbuff of rank root.
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);

/// Deprecated in-place broadcast: buff of root is copied to buff of every rank.
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);

/// Copy sendbuff of rank root to recvbuff of every rank.
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);

/// Reduce sendbuff of every rank with op; every rank gets the result in recvbuff.
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);

/// Reduce nranks*recvcount elements; rank i gets block i of the result in recvbuff.
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);

/// Every rank gets rank i's sendcount elements at recvbuff + i*sendcount.
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/// Block j of sendbuff goes to rank j; block i of recvbuff comes from rank i.
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/// Rank root gets rank i's count elements at recvbuff + i*count.
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm,
                         cudaStream_t stream);

/// Rank i gets block i (count elements) of rank root's sendbuff.
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm,
                         cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm,
                          cudaStream_t stream);

/* ---- point to point ---------------------------------------------------------------------
 * A send matches the peer's recv of the same count and type. Pairs that must progress
 * together go inside one ncclGroupStart/ncclGroupEnd. Both are [host-ok]. */

/// Send count elements of sendbuff to rank peer.
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/// Receive count elements from rank peer into recvbuff.
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/* ---- one-sided ---------------------------------------------------------------------------
 * The target's memory is a window (ncclCommWindowRegister); the target takes no part
 * until it waits for the signals. Operations to one peer and context are delivered, and
 * their signals raised, in program order. sigIdx, ctx and flags must be 0 (as in NCCL
 * 2.30). All three are [host-ok]. */

/// Write count elements of localbuff into rank peer's window peerWin at byte offset
/// peerWinOffset, then raise signal (sigIdx, ctx) there.
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype,
                           int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx,
                           int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype,
                            int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx,
                            int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream);

/// Raise signal (sigIdx, ctx) on rank peer, moving no data.
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                         cudaStream_t stream);

/// One ncclWaitSignal request: opCnt more signals from rank peer on (sigIdx, ctx).
typedef struct {
  int opCnt;  ///< number of signals to wait for
  int peer;   ///< the rank that raises them
  int sigIdx; ///< signal index (0)
  int ctx;    ///< context
} ncclWaitSignalDesc_t;

/// Wait until every descriptor's signals have arrived; their data is then visible here.
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                             cudaStream_t stream);

/* ---- groups ------------------------------------------------------------------------------ */

/// Open a group: calls until ncclGroupEnd are collected and launched together.
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);

/// Close the group and launch its calls (host work with a null stream is done on return).
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/// Close the group without running it; store the predicted time in *simInfo.
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

/* ---- parameters ---------------------------------------------------------------------------
 * The library's settings (NCCL_* and BRAID_* environment variables), read by key: the
 * variable's name ("NCCL_BUFFSIZE") or the name without its prefix ("BUFFSIZE"). A value
 * comes from the environment, else the default. Strings returned stay valid until the
 * same call is made again on the same thread. */

/// A parameter handle (owned by the library; never freed).
typedef struct ncclParamHandle* ncclParamHandle_t;

/// Look the parameter `key` up; store its handle in *out.
ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key);
ncclResult_t pncclParamBind(ncclParamHandle_t* out, const char* key);

/// Read the parameter as an integer of the function's width and sign.
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t* out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t* out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t* out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t* out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t* out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t* out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t* out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t* out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t* out);

/// Read the parameter as text.
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char** out);

/// Copy the parameter's value into out as raw bytes (an integer parameter: its int64_t;
/// a boolean: a bool; a string: its text and NUL); *len is the bytes copied. A value
/// larger than maxLen is refused (ncclInvalidArgument, *len = 0).
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len);

/// The text of parameter `key` and its length.
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen);
ncclResult_t pncclParamGetParameter(const char* key, const char** value, int* valueLen);

/// Every parameter's key.
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char*** table, int* tableLen);

/// Print every parameter, its value, where the value came from and its default (stdout).
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // NCCL_H_
