// The perf suite built with MPI (see mpi_glue.h): only the unique id travels over MPI;
// everything else, including the cross-process sums of results, uses the library.
#include <mpi.h>

#include "perf/mpi_glue.h"

namespace braid_perf {
namespace {
bool gInitialisedHere = false;
}  // namespace

bool mpiBuilt() { return true; }

bool mpiBroadcast(void* data, size_t bytes, int* rank, int* size, std::string* error) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    if (MPI_Init(nullptr, nullptr) != MPI_SUCCESS) {
      *error = "MPI_Init failed";
      return false;
    }
    gInitialisedHere = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  if (MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS) {
    *error = "MPI_Bcast of the unique id failed";
    return false;
  }
  return true;
}

void mpiFinish() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (gInitialisedHere && !finalised) MPI_Finalize();
  gInitialisedHere = false;
}

}  // namespace braid_perf
