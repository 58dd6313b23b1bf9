// ncclCommSuspend / ncclCommResume / ncclCommMemStats (NCCL 2.30).
// Placeholder until the implementation lands: the calls refuse with a message.
#include "src/core/comm.h"
#include "src/core/error.h"

using namespace braid;

extern "C" {

ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  (void)comm, (void)flags;
  return setError(ncclInvalidUsage, nullptr, "ncclCommSuspend: not implemented in Braid yet");
}

ncclResult_t ncclCommResume(ncclComm_t comm) {
  (void)comm;
  return setError(ncclInvalidUsage, nullptr, "ncclCommResume: not implemented in Braid yet");
}

ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  (void)comm, (void)stat, (void)value;
  return setError(ncclInvalidUsage, nullptr, "ncclCommMemStats: not implemented in Braid yet");
}

}  // extern "C"
