// Prints the exact C++ type of every function and named type of whichever nccl.h it is
// compiled against, as the Itanium-ABI mangled name (one "name type" per line). A mangled
// function type spells every parameter, so two headers print the same line only when the
// signatures match; struct tags (ncclConfig_v22800, ncclComm, CUstream_st, ...) appear too,
// which matters for C++ code that mangles these types into its own symbols.
// tests/abi.cmake builds this against both headers and compares the outputs; the function
// list itself is checked against both headers by tests/abi/function_list.cmake.
#include <nccl.h>

#include <cstdio>
#include <typeinfo>

#define FN(f)                                                                            \
  std::printf("fn " #f " %s\n", typeid(decltype(f)).name());                              \
  std::printf("fn p" #f " %s\n", typeid(decltype(p##f)).name())
#define TY(t) std::printf("type " #t " %s\n", typeid(t).name())

int main() {
  TY(ncclComm_t);
  TY(ncclWindow_t);
  TY(ncclUniqueId);
  TY(ncclResult_t);
  TY(ncclConfig_t);
  TY(ncclSimInfo_t);
  TY(ncclRedOp_dummy_t);
  TY(ncclRedOp_t);
  TY(ncclDataType_t);
  TY(ncclScalarResidence_t);
  TY(cudaStream_t);
  TY(ncclCommMemStat_t);
  TY(ncclWaitSignalDesc_t);
  TY(ncclParamHandle_t);

  FN(ncclMemAlloc);
  FN(ncclMemFree);
  FN(ncclGetVersion);
  FN(ncclGetUniqueId);
  FN(ncclCommInitRankConfig);
  FN(ncclCommInitRank);
  FN(ncclCommInitAll);
  FN(ncclCommFinalize);
  FN(ncclCommDestroy);
  FN(ncclCommAbort);
  FN(ncclCommRevoke);
  FN(ncclCommSplit);
  FN(ncclCommShrink);
  FN(ncclCommInitRankScalable);
  FN(ncclGetErrorString);
  FN(ncclGetLastError);
  FN(ncclResetDebugInit);
  FN(ncclCommGetAsyncError);
  FN(ncclCommCount);
  FN(ncclCommCuDevice);
  FN(ncclCommUserRank);
  FN(ncclCommRegister);
  FN(ncclCommDeregister);
  FN(ncclCommWindowRegister);
  FN(ncclCommWindowDeregister);
  FN(ncclRedOpCreatePreMulSum);
  FN(ncclRedOpDestroy);
  FN(ncclReduce);
  FN(ncclBcast);
  FN(ncclBroadcast);
  FN(ncclAllReduce);
  FN(ncclReduceScatter);
  FN(ncclAllGather);
  FN(ncclAlltoAll);
  FN(ncclGather);
  FN(ncclScatter);
  FN(ncclSend);
  FN(ncclRecv);
  FN(ncclGroupStart);
  FN(ncclGroupEnd);
  FN(ncclGroupSimulateEnd);
  // NCCL 2.30
  FN(ncclCommGetUniqueId);
  FN(ncclCommGrow);
  FN(ncclCommSuspend);
  FN(ncclCommResume);
  FN(ncclCommMemStats);
  FN(ncclWinGetUserPtr);
  FN(ncclPutSignal);
  FN(ncclSignal);
  FN(ncclWaitSignal);
  FN(ncclParamBind);
  FN(ncclParamGetI8);
  FN(ncclParamGetI16);
  FN(ncclParamGetI32);
  FN(ncclParamGetI64);
  FN(ncclParamGetU8);
  FN(ncclParamGetU16);
  FN(ncclParamGetU32);
  FN(ncclParamGetU64);
  FN(ncclParamGetStr);
  FN(ncclParamGet);
  FN(ncclParamGetParameter);
  FN(ncclParamGetAllParameterKeys);
  FN(ncclParamDumpAll);
  return 0;
}
