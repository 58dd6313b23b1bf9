// The perf suite built without MPI (see mpi_glue.h).
#include "perf/mpi_glue.h"

namespace braid_perf {

bool mpiBuilt() { return false; }

bool mpiBroadcast(void* /*data*/, size_t /*bytes*/, int* /*rank*/, int* /*size*/,
                  std::string* error) {
  *error = "this perf binary was built without MPI";
  return false;
}

void mpiFinish() {}

}  // namespace braid_perf
