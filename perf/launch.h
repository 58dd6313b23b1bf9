// How a perf process finds its place among processes: the launcher's environment
// (braidrun/torchrun RANK & WORLD_SIZE, Open MPI, PMI) and the shared ncclUniqueId
// (NCCL_COMM_ID rendezvous, or MPI_Bcast when built with MPI). The perf programs are
// plain NCCL applications, so they read their launcher's variables here, in one place.
#ifndef BRAID_PERF_LAUNCH_H_
#define BRAID_PERF_LAUNCH_H_

#include <string>

#include "nccl.h"

namespace braid_perf {

/// This process's rank among the launched processes.
struct ProcessInfo {
  int rank = 0;                 ///< process rank
  int size = 1;                 ///< number of processes
  int localRank = 0;            ///< rank among the processes on this host
  const char* source = "none";  ///< which launcher's variables were found
};

/// Read RANK/WORLD_SIZE/LOCAL_RANK, else OMPI_COMM_WORLD_*, else PMI_RANK/PMI_SIZE.
/// Returns false (with a message) on malformed values.
bool discoverProcess(ProcessInfo* info, std::string* error);

/// Obtain the id every process shares: ncclGetUniqueId when alone or when NCCL_COMM_ID
/// is set (the library derives the same id from it everywhere), else MPI_Bcast from
/// process 0 when built with MPI. Returns false with a message when none applies.
bool shareUniqueId(const ProcessInfo& info, ncclUniqueId* id, std::string* error);

/// Release what shareUniqueId set up (MPI_Finalize when MPI was initialised).
void finishProcess();

/// Debug hook for the suite's own tests: BRAID_PERF_CORRUPT=1 corrupts one result
/// element before checking, so the check is proven able to fail.
bool corruptRequested();

/// Host name of this machine (for the "Using devices" lines).
std::string hostName();

}  // namespace braid_perf

#endif  // BRAID_PERF_LAUNCH_H_
