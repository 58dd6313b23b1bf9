// Optional MPI support of the perf suite: one implementation with MPI (mpi_glue_mpi.cc)
// and one without (mpi_glue_none.cc); CMake compiles exactly one of them.
#ifndef BRAID_PERF_MPI_GLUE_H_
#define BRAID_PERF_MPI_GLUE_H_

#include <cstddef>
#include <string>

namespace braid_perf {

/// True when the suite was built with MPI.
bool mpiBuilt();
/// Initialise MPI (once) and broadcast `bytes` bytes of `data` from MPI rank 0.
/// On success *rank/*size receive MPI's view of this process. False with a message on error.
bool mpiBroadcast(void* data, size_t bytes, int* rank, int* size, std::string* error);
/// Finalise MPI if mpiBroadcast initialised it.
void mpiFinish();

}  // namespace braid_perf

#endif  // BRAID_PERF_MPI_GLUE_H_
