// Errors in two layers: ncclResult_t at the API boundary; inside, setError() records a
// message (for ncclGetLastError and the WARN log) at the point of failure, and
// BRAID_CHECK propagates a failure upward, logging one "-> code" line per frame at INFO.
#pragma once
#include "nccl.h"
#include "src/config/log.h"

namespace braid {

struct Comm;

/// Record an error message: logged at WARN, kept as this thread's last error and, if
/// comm is not null, as that communicator's last error. Returns `code` for chaining:
///   return setError(ncclInvalidArgument, comm, "ncclAllReduce: sendbuff is NULL");
ncclResult_t setError(ncclResult_t code, Comm* comm, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/// Like setError for this thread only, logged at INFO (NET) instead of WARN: for
/// failures that are often part of an orderly end (a peer closing a connection at
/// teardown), which the layer above reports if they matter.
ncclResult_t noteError(ncclResult_t code, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

/// The message ncclGetLastError(comm) returns (comm may be null: this thread's).
const char* lastError(Comm* comm);
/// Drop a destroyed communicator's message.
void forgetErrors(Comm* comm);

/// Keeps this thread's last error as it was across work done for others (an executor
/// progressing other communicators' network connections): restored on destruction.
/// Cheap when nothing fails (it sits in the executor's wait loop): the message is
/// copied aside only by the first error recorded inside the scope.
class KeepThreadError {
 public:
  KeepThreadError();
  ~KeepThreadError();
  KeepThreadError(const KeepThreadError&) = delete;
  KeepThreadError& operator=(const KeepThreadError&) = delete;
};

}  // namespace braid

#define BRAID_CHECK(expr)                                                             \
  do {                                                                                \
    ncclResult_t braid_res_ = (expr);                                                 \
    if (braid_res_ != ncclSuccess && braid_res_ != ncclInProgress) {                  \
      BRAID_INFO(::braid::kLogAll, "%s:%d -> %d", __FILE__, __LINE__, int(braid_res_)); \
      return braid_res_;                                                              \
    }                                                                                 \
  } while (0)
