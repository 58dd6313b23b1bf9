// The diagnosis extension API (include/braid/braid.h): braidCommDumpFlightRecord, an
// entry point of the API layer over the communicator's flight recorder (src/diag/).
#include "braid/braid.h"
#include "src/config/error.h"
#include "src/core/comm.h"
#include "src/diag/flight_recorder.h"

using namespace braid;

ncclResult_t braidCommDumpFlightRecord(ncclComm_t comm, const char* path) {
  const char* call = "braidCommDumpFlightRecord";
  BRAID_CHECK(checkComm(comm, call));
  Comm* c = asComm(comm);
  if (c->asyncError.load() == ncclInProgress)
    return setError(ncclInvalidUsage, c, "%s: the communicator is still initialising", call);
  if (!c->recorder)
    return setError(ncclInvalidUsage, c, "%s: the flight recorder is off "
                    "(BRAID_FLIGHT_RECORDER=0)", call);
  const std::string target = path ? path : "";
  const std::string written = c->recorder->dump("api", target);
  if (written.empty())
    return setError(ncclSystemError, c, "%s: could not write %s", call,
                    (target.empty() ? c->recorder->defaultPath() : target).c_str());
  return ncclSuccess;
}
