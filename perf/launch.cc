// Process discovery and unique-id sharing of the perf suite (see launch.h).
#include "perf/launch.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "perf/mpi_glue.h"

namespace braid_perf {
namespace {

/// Parse environment variable `name` as a non-negative int; false if unset.
bool envInt(const char* name, int* out, std::string* error) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return false;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0 || v > 1 << 24) {
    *error = std::string("malformed ") + name + "='" + text + "'";
    *out = -1;
    return true;
  }
  *out = static_cast<int>(v);
  return true;
}

struct Launcher {
  const char* name;
  const char* rank;
  const char* size;
  const char* localRank;
};

constexpr Launcher kLaunchers[] = {
    {"RANK/WORLD_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
};

}  // namespace

bool discoverProcess(ProcessInfo* info, std::string* error) {
  *info = ProcessInfo{};
  for (const Launcher& l : kLaunchers) {
    int rank = 0, size = 0;
    const bool hasRank = envInt(l.rank, &rank, error);
    const bool hasSize = envInt(l.size, &size, error);
    if (!hasRank && !hasSize) continue;
    if (!error->empty()) return false;
    if (!hasRank || !hasSize) {
      *error = std::string("only one of ") + l.rank + " and " + l.size + " is set";
      return false;
    }
    if (size < 1 || rank >= size) {
      *error = std::string(l.rank) + "=" + std::to_string(rank) + " is not below " + l.size + "=" +
               std::to_string(size);
      return false;
    }
    int local = rank;
    if (!envInt(l.localRank, &local, error)) local = rank;
    if (!error->empty()) return false;
    info->rank = rank;
    info->size = size;
    info->localRank = local;
    info->source = l.name;
    return true;
  }
  return true;
}

bool shareUniqueId(const ProcessInfo& info, ncclUniqueId* id, std::string* error) {
  std::memset(id, 0, sizeof(*id));
  const char* commId = std::getenv("NCCL_COMM_ID");
  const bool haveCommId = commId != nullptr && *commId != '\0';
  if (info.size == 1 || haveCommId) {
    const ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess) {
      *error = std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r) + " (" +
               ncclGetLastError(nullptr) + ")";
      return false;
    }
    return true;
  }
  if (!mpiBuilt()) {
    *error = std::to_string(info.size) +
             " processes need a shared unique id: set NCCL_COMM_ID=<host>:<port> in every "
             "process (braidrun does this), or build the perf suite with MPI (BRAID_PERF_MPI=ON) "
             "and launch with mpirun";
    return false;
  }
  if (info.rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(id);
    if (r != ncclSuccess) {
      *error = std::string("ncclGetUniqueId failed: ") + ncclGetErrorString(r);
      return false;
    }
  }
  int mpiRank = -1, mpiSize = -1;
  if (!mpiBroadcast(id, sizeof(*id), &mpiRank, &mpiSize, error)) return false;
  if (mpiRank != info.rank || mpiSize != info.size) {
    *error = "MPI rank " + std::to_string(mpiRank) + "/" + std::to_string(mpiSize) +
             " disagrees with the launcher's " + std::to_string(info.rank) + "/" +
             std::to_string(info.size) + " (" + info.source + ")";
    return false;
  }
  return true;
}

void finishProcess() { mpiFinish(); }

bool corruptRequested() {
  const char* v = std::getenv("BRAID_PERF_CORRUPT");
  return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

}  // namespace braid_perf
