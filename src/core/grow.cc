// ncclCommGetUniqueId / ncclCommGrow (NCCL 2.30): a communicator grown by new ranks.
// Placeholder until the implementation lands: both calls refuse with a message.
#include "src/core/comm.h"
#include "src/core/error.h"

using namespace braid;

extern "C" {

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  (void)comm;
  (void)uniqueId;
  return setError(ncclInvalidUsage, nullptr, "ncclCommGetUniqueId: growing a communicator is "
                  "not implemented in Braid yet");
}

ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config) {
  (void)comm, (void)nRanks, (void)uniqueId, (void)rank, (void)newcomm, (void)config;
  return setError(ncclInvalidUsage, nullptr, "ncclCommGrow: growing a communicator is not "
                  "implemented in Braid yet");
}

}  // extern "C"
