/* Prints the binary facts of whichever nccl.h it is compiled against, one "name value"
 * per line: type sizes and alignments, struct field offsets, every enumerator, every macro
 * constant (with the size of its type) and the values the initializers produce.
 * tests/abi.cmake builds it against Braid's include/nccl.h and against NVIDIA's, and
 * tests/abi/compare_outputs.cmake fails on any line that differs. */
#include <nccl.h>

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* Make sure each build saw the header it was meant to see. */
#if defined(PROBE_EXPECT_NVIDIA_HEADER) && \
    (!defined(CUDART_VERSION) || defined(BRAID_NCCL_H_USES_CUDA))
#error "expected NVIDIA's nccl.h (which always includes cuda_runtime.h)"
#endif
#if defined(PROBE_EXPECT_BRAID_FALLBACK) && defined(CUDART_VERSION)
#error "expected Braid's nccl.h on its no-CUDA path"
#endif
#if defined(PROBE_EXPECT_BRAID_CUDA) && !defined(BRAID_NCCL_H_USES_CUDA)
#error "expected Braid's nccl.h on its CUDA-header path"
#endif

#define TYPE(t) printf("sizeof(" #t ") %zu\nalignof(" #t ") %zu\n", sizeof(t), (size_t)_Alignof(t))
#define FIELD(s, f)                                                              \
  printf("offsetof(" #s "." #f ") %zu\nsizeof(" #s "." #f ") %zu\n", offsetof(s, f), \
         sizeof(((s*)0)->f))
#define INT(x) printf(#x " %lld\n", (long long)(x))
#define CONST(x) printf(#x " %lld sizeof %zu\n", (long long)(x), sizeof(x))

static void types(void) {
  TYPE(ncclUniqueId);
  TYPE(ncclComm_t);
  TYPE(ncclWindow_t);
  TYPE(cudaStream_t);
  TYPE(ncclResult_t);
  TYPE(ncclRedOp_t);
  TYPE(ncclRedOp_dummy_t);
  TYPE(ncclDataType_t);
  TYPE(ncclScalarResidence_t);
  TYPE(ncclConfig_t);
  TYPE(ncclSimInfo_t);
  TYPE(ncclCommMemStat_t);
  TYPE(ncclWaitSignalDesc_t);
  TYPE(ncclParamHandle_t);
  FIELD(ncclUniqueId, internal);
  FIELD(ncclConfig_t, size);
  FIELD(ncclConfig_t, magic);
  FIELD(ncclConfig_t, version);
  FIELD(ncclConfig_t, blocking);
  FIELD(ncclConfig_t, cgaClusterSize);
  FIELD(ncclConfig_t, minCTAs);
  FIELD(ncclConfig_t, maxCTAs);
  FIELD(ncclConfig_t, netName);
  FIELD(ncclConfig_t, splitShare);
  FIELD(ncclConfig_t, trafficClass);
  FIELD(ncclConfig_t, commName);
  FIELD(ncclConfig_t, collnetEnable);
  FIELD(ncclConfig_t, CTAPolicy);
  FIELD(ncclConfig_t, shrinkShare);
  FIELD(ncclConfig_t, nvlsCTAs);
  FIELD(ncclConfig_t, nChannelsPerNetPeer);
  FIELD(ncclConfig_t, nvlinkCentricSched);
  FIELD(ncclConfig_t, graphUsageMode);
  FIELD(ncclConfig_t, numRmaCtx);
  FIELD(ncclConfig_t, maxP2pPeers);
  FIELD(ncclConfig_t, graphStreamOrdering);
  FIELD(ncclSimInfo_t, size);
  FIELD(ncclSimInfo_t, magic);
  FIELD(ncclSimInfo_t, version);
  FIELD(ncclSimInfo_t, estimatedTime);
  FIELD(ncclWaitSignalDesc_t, opCnt);
  FIELD(ncclWaitSignalDesc_t, peer);
  FIELD(ncclWaitSignalDesc_t, sigIdx);
  FIELD(ncclWaitSignalDesc_t, ctx);
}

static void enums(void) {
  INT(ncclSuccess);
  INT(ncclUnhandledCudaError);
  INT(ncclSystemError);
  INT(ncclInternalError);
  INT(ncclInvalidArgument);
  INT(ncclInvalidUsage);
  INT(ncclRemoteError);
  INT(ncclInProgress);
  INT(ncclTimeout);
  INT(ncclNumResults);
  INT(ncclNumOps_dummy);
  INT(ncclSum);
  INT(ncclProd);
  INT(ncclMax);
  INT(ncclMin);
  INT(ncclAvg);
  INT(ncclNumOps);
  INT(ncclMaxRedOp);
  INT(ncclInt8);
  INT(ncclChar);
  INT(ncclUint8);
  INT(ncclInt32);
  INT(ncclInt);
  INT(ncclUint32);
  INT(ncclInt64);
  INT(ncclUint64);
  INT(ncclFloat16);
  INT(ncclHalf);
  INT(ncclFloat32);
  INT(ncclFloat);
  INT(ncclFloat64);
  INT(ncclDouble);
  INT(ncclBfloat16);
  INT(ncclFloat8e4m3);
  INT(ncclFloat8e5m2);
  INT(ncclNumTypes);
  INT(ncclScalarDevice);
  INT(ncclScalarHostImmediate);
  INT(ncclStatGpuMemSuspend);
  INT(ncclStatGpuMemSuspended);
  INT(ncclStatGpuMemPersist);
  INT(ncclStatGpuMemTotal);
}

static void macros(void) {
  CONST(NCCL_MAJOR);
  CONST(NCCL_MINOR);
  CONST(NCCL_PATCH);
  printf("NCCL_SUFFIX \"%s\" sizeof %zu\n", NCCL_SUFFIX, sizeof(NCCL_SUFFIX));
  CONST(NCCL_VERSION_CODE);
  CONST(NCCL_VERSION(2, 8, 4));
  CONST(NCCL_VERSION(2, 9, 0));
  CONST(NCCL_VERSION(2, 28, 9));
  CONST(NCCL_VERSION(2, 30, 7));
  CONST(NCCL_VERSION(3, 0, 1));
  CONST(NCCL_VERSION(1, 20, 3));
  CONST(NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH));
  printf("NCCL_COMM_NULL is-null %d sizeof %zu\n", NCCL_COMM_NULL == 0,
         sizeof(NCCL_COMM_NULL));
  CONST(NCCL_UNIQUE_ID_BYTES);
  CONST(NCCL_CONFIG_UNDEF_INT);
  printf("NCCL_CONFIG_UNDEF_PTR is-null %d sizeof %zu\n", NCCL_CONFIG_UNDEF_PTR == 0,
         sizeof(NCCL_CONFIG_UNDEF_PTR));
  CONST(NCCL_SPLIT_NOCOLOR);
  printf("NCCL_UNDEF_FLOAT %a sizeof %zu\n", (double)NCCL_UNDEF_FLOAT, sizeof(NCCL_UNDEF_FLOAT));
  CONST(NCCL_WIN_DEFAULT);
  CONST(NCCL_WIN_COLL_SYMMETRIC);
  CONST(NCCL_WIN_STRICT_ORDERING);
  CONST(NCCL_API_MAGIC);
  CONST(NCCL_SUSPEND_MEM);
  CONST(NCCL_WIN_REQUIRED_ALIGNMENT);
  CONST(NCCL_CTA_POLICY_DEFAULT);
  CONST(NCCL_CTA_POLICY_EFFICIENCY);
  CONST(NCCL_CTA_POLICY_ZERO);
  CONST(NCCL_SHRINK_DEFAULT);
  CONST(NCCL_SHRINK_ABORT);
  CONST(NCCL_REVOKE_DEFAULT);
}

static void initializers(void) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  INT(c.size);
  INT(c.magic);
  INT(c.version);
  INT(c.blocking);
  INT(c.cgaClusterSize);
  INT(c.minCTAs);
  INT(c.maxCTAs);
  printf("c.netName is-null %d\n", c.netName == 0);
  INT(c.splitShare);
  INT(c.trafficClass);
  printf("c.commName is-null %d\n", c.commName == 0);
  INT(c.collnetEnable);
  INT(c.CTAPolicy);
  INT(c.shrinkShare);
  INT(c.nvlsCTAs);
  INT(c.nChannelsPerNetPeer);
  INT(c.nvlinkCentricSched);
  INT(c.graphUsageMode);
  INT(c.numRmaCtx);
  INT(c.maxP2pPeers);
  INT(c.graphStreamOrdering);
  INT(s.size);
  INT(s.magic);
  INT(s.version);
  printf("s.estimatedTime %a\n", (double)s.estimatedTime);
}

int main(void) {
  types();
  enums();
  macros();
  initializers();
  return 0;
}
