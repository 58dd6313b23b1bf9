/*
 * braid/api_table.h — Braid's NCCL API as a table of function pointers.
 *
 * For code that shares a process with another NCCL. PyTorch, for one, loads NVIDIA's
 * libnccl.so.2 before any extension: a plain call to ncclAllReduce from an extension
 * linked to libbraid.so is then bound by the dynamic linker to NVIDIA's function, not
 * Braid's. Calls through this table always reach Braid:
 *
 *   const braidNcclApi_t* api = braidGetNcclApi();
 *   api->allReduce(send, recv, n, ncclFloat, ncclSum, comm, stream);
 *
 * The table has one member per function of nccl.h (the name without "nccl", first letter
 * lower-case), in the header's order; members are only ever appended, and `size` says how
 * many this library fills, so a caller built against a newer header can check. The library
 * itself is linked with -Bsymbolic-functions, so Braid's calls inside Braid stay there too.
 */
#ifndef BRAID_API_TABLE_H_
#define BRAID_API_TABLE_H_

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Every function of nccl.h (but the deprecated ncclResetDebugInit).
typedef struct braidNcclApi {
  size_t size;  ///< sizeof(braidNcclApi_t) as the library was built
  int version;  ///< the NCCL_VERSION_CODE the library implements
  ncclResult_t (*memAlloc)(void** ptr, size_t size);
  ncclResult_t (*memFree)(void* ptr);
  ncclResult_t (*getVersion)(int* version);
  ncclResult_t (*getUniqueId)(ncclUniqueId* uniqueId);
  ncclResult_t (*commInitRankConfig)(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);
  ncclResult_t (*commInitRank)(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
  ncclResult_t (*commInitAll)(ncclComm_t* comm, int ndev, const int* devlist);
  ncclResult_t (*commFinalize)(ncclComm_t comm);
  ncclResult_t (*commDestroy)(ncclComm_t comm);
  ncclResult_t (*commAbort)(ncclComm_t comm);
  ncclResult_t (*commRevoke)(ncclComm_t comm, int revokeFlags);
  ncclResult_t (*commSplit)(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config);
  ncclResult_t (*commShrink)(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
  ncclResult_t (*commInitRankScalable)(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);
  ncclResult_t (*commGetUniqueId)(ncclComm_t comm, ncclUniqueId* uniqueId);
  ncclResult_t (*commGrow)(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                           ncclComm_t* newcomm, ncclConfig_t* config);
  const char* (*getErrorString)(ncclResult_t result);
  const char* (*getLastError)(ncclComm_t comm);
  ncclResult_t (*commGetAsyncError)(ncclComm_t comm, ncclResult_t* asyncError);
  ncclResult_t (*commCount)(const ncclComm_t comm, int* count);
  ncclResult_t (*commCuDevice)(const ncclComm_t comm, int* device);
  ncclResult_t (*commUserRank)(const ncclComm_t comm, int* rank);
  ncclResult_t (*commSuspend)(ncclComm_t comm, int flags);
  ncclResult_t (*commResume)(ncclComm_t comm);
  ncclResult_t (*commMemStats)(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value);
  ncclResult_t (*commRegister)(const ncclComm_t comm, void* buff, size_t size, void** handle);
  ncclResult_t (*commDeregister)(const ncclComm_t comm, void* handle);
  ncclResult_t (*commWindowRegister)(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                     int winFlags);
  ncclResult_t (*commWindowDeregister)(ncclComm_t comm, ncclWindow_t win);
  ncclResult_t (*winGetUserPtr)(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
  ncclResult_t (*redOpCreatePreMulSum)(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
  ncclResult_t (*redOpDestroy)(ncclRedOp_t op, ncclComm_t comm);
  ncclResult_t (*reduce)(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);
  ncclResult_t (*bcast)(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*broadcast)(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);
  ncclResult_t (*allReduce)(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);
  ncclResult_t (*reduceScatter)(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);
  ncclResult_t (*allGather)(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*alltoAll)(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*gather)(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*scatter)(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*send)(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*recv)(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*putSignal)(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                            unsigned int flags, ncclComm_t comm, cudaStream_t stream);
  ncclResult_t (*signal)(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                         cudaStream_t stream);
  ncclResult_t (*waitSignal)(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                             cudaStream_t stream);
  ncclResult_t (*groupStart)(void);
  ncclResult_t (*groupEnd)(void);
  ncclResult_t (*groupSimulateEnd)(ncclSimInfo_t* simInfo);
  ncclResult_t (*paramBind)(ncclParamHandle_t* out, const char* key);
  ncclResult_t (*paramGetI8)(ncclParamHandle_t h, int8_t* out);
  ncclResult_t (*paramGetI16)(ncclParamHandle_t h, int16_t* out);
  ncclResult_t (*paramGetI32)(ncclParamHandle_t h, int32_t* out);
  ncclResult_t (*paramGetI64)(ncclParamHandle_t h, int64_t* out);
  ncclResult_t (*paramGetU8)(ncclParamHandle_t h, uint8_t* out);
  ncclResult_t (*paramGetU16)(ncclParamHandle_t h, uint16_t* out);
  ncclResult_t (*paramGetU32)(ncclParamHandle_t h, uint32_t* out);
  ncclResult_t (*paramGetU64)(ncclParamHandle_t h, uint64_t* out);
  ncclResult_t (*paramGetStr)(ncclParamHandle_t h, const char** out);
  ncclResult_t (*paramGet)(ncclParamHandle_t h, void* out, int maxLen, int* len);
  ncclResult_t (*paramGetParameter)(const char* key, const char** value, int* valueLen);
  ncclResult_t (*paramGetAllParameterKeys)(const char*** table, int* tableLen);
  void (*paramDumpAll)(void);
} braidNcclApi_t;

/// The table (static storage, never null, valid for the life of the process).
const braidNcclApi_t* braidGetNcclApi(void);

#ifdef __cplusplus
}
#endif
#endif /* BRAID_API_TABLE_H_ */
