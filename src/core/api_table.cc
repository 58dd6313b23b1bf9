// braidGetNcclApi (include/braid/api_table.h): Braid's NCCL API as one table, filled
// here from the library's own functions (bound inside the library: -Bsymbolic-functions).
#include "braid/api_table.h"

namespace {

braidNcclApi_t makeTable() {
  braidNcclApi_t t{};
  t.size = sizeof(t);
  t.version = NCCL_VERSION_CODE;
  t.memAlloc = ncclMemAlloc;
  t.memFree = ncclMemFree;
  t.getVersion = ncclGetVersion;
  t.getUniqueId = ncclGetUniqueId;
  t.commInitRankConfig = ncclCommInitRankConfig;
  t.commInitRank = ncclCommInitRank;
  t.commInitAll = ncclCommInitAll;
  t.commFinalize = ncclCommFinalize;
  t.commDestroy = ncclCommDestroy;
  t.commAbort = ncclCommAbort;
  t.commRevoke = ncclCommRevoke;
  t.commSplit = ncclCommSplit;
  t.commShrink = ncclCommShrink;
  t.commInitRankScalable = ncclCommInitRankScalable;
  t.commGetUniqueId = ncclCommGetUniqueId;
  t.commGrow = ncclCommGrow;
  t.getErrorString = ncclGetErrorString;
  t.getLastError = ncclGetLastError;
  t.commGetAsyncError = ncclCommGetAsyncError;
  t.commCount = ncclCommCount;
  t.commCuDevice = ncclCommCuDevice;
  t.commUserRank = ncclCommUserRank;
  t.commSuspend = ncclCommSuspend;
  t.commResume = ncclCommResume;
  t.commMemStats = ncclCommMemStats;
  t.commRegister = ncclCommRegister;
  t.commDeregister = ncclCommDeregister;
  t.commWindowRegister = ncclCommWindowRegister;
  t.commWindowDeregister = ncclCommWindowDeregister;
  t.winGetUserPtr = ncclWinGetUserPtr;
  t.redOpCreatePreMulSum = ncclRedOpCreatePreMulSum;
  t.redOpDestroy = ncclRedOpDestroy;
  t.reduce = ncclReduce;
  t.bcast = ncclBcast;
  t.broadcast = ncclBroadcast;
  t.allReduce = ncclAllReduce;
  t.reduceScatter = ncclReduceScatter;
  t.allGather = ncclAllGather;
  t.alltoAll = ncclAlltoAll;
  t.gather = ncclGather;
  t.scatter = ncclScatter;
  t.send = ncclSend;
  t.recv = ncclRecv;
  t.putSignal = ncclPutSignal;
  t.signal = ncclSignal;
  t.waitSignal = ncclWaitSignal;
  t.groupStart = ncclGroupStart;
  t.groupEnd = ncclGroupEnd;
  t.groupSimulateEnd = ncclGroupSimulateEnd;
  t.paramBind = ncclParamBind;
  t.paramGetI8 = ncclParamGetI8;
  t.paramGetI16 = ncclParamGetI16;
  t.paramGetI32 = ncclParamGetI32;
  t.paramGetI64 = ncclParamGetI64;
  t.paramGetU8 = ncclParamGetU8;
  t.paramGetU16 = ncclParamGetU16;
  t.paramGetU32 = ncclParamGetU32;
  t.paramGetU64 = ncclParamGetU64;
  t.paramGetStr = ncclParamGetStr;
  t.paramGet = ncclParamGet;
  t.paramGetParameter = ncclParamGetParameter;
  t.paramGetAllParameterKeys = ncclParamGetAllParameterKeys;
  t.paramDumpAll = ncclParamDumpAll;
  return t;
}

}  // namespace

extern "C" const braidNcclApi_t* braidGetNcclApi(void) {
  static const braidNcclApi_t table = makeTable();
  return &table;
}
