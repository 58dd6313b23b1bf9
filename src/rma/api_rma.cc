// One-sided operations (NCCL 2.30): ncclPutSignal, ncclSignal, ncclWaitSignal, and
// ncclWinGetUserPtr. Placeholder until the implementation lands.
#include "src/core/comm.h"
#include "src/core/error.h"

using namespace braid;

extern "C" {

ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype,
                           int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx,
                           int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  (void)localbuff, (void)count, (void)datatype, (void)peer, (void)peerWin, (void)peerWinOffset;
  (void)sigIdx, (void)ctx, (void)flags, (void)comm, (void)stream;
  return setError(ncclInvalidUsage, nullptr, "ncclPutSignal: not implemented in Braid yet");
}

ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream) {
  (void)peer, (void)sigIdx, (void)ctx, (void)flags, (void)comm, (void)stream;
  return setError(ncclInvalidUsage, nullptr, "ncclSignal: not implemented in Braid yet");
}

ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                            cudaStream_t stream) {
  (void)nDesc, (void)signalDescs, (void)comm, (void)stream;
  return setError(ncclInvalidUsage, nullptr, "ncclWaitSignal: not implemented in Braid yet");
}

ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  (void)comm, (void)win, (void)outUserPtr;
  return setError(ncclInvalidUsage, nullptr, "ncclWinGetUserPtr: not implemented in Braid yet");
}

}  // extern "C"
