// mpi_bench: the Open MPI side of the comparison (perf/compare/README.md). Times
// MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather, MPI_Alltoall, MPI_Bcast and
// MPI_Reduce on float32 sums over the sizes of Braid's perf suite, and writes JSON in the
// schema of Braid's `-J` output with "library": "openmpi".
//   mpirun -np 2 build/bin/mpi_bench -b 8 -e 256M -f 2 -n 20 -w 5 -N 3 -J out/mpi_n2_
#include <mpi.h>

#include <climits>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "perf/compare/bench.h"

namespace braid_compare {
namespace {

/// Throw with MPI's message when a call fails (errors return instead of aborting).
void mpiOk(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw std::runtime_error(std::string(call) + " failed: " + text);
}

int intCount(size_t n) {
  if (n > static_cast<size_t>(INT_MAX)) throw std::runtime_error("count exceeds INT_MAX");
  return static_cast<int>(n);
}

class MpiBackend : public Backend {
 public:
  MpiBackend() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void barrier() override { mpiOk(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  void sumDoubles(double* v, size_t n) override {
    mpiOk(MPI_Allreduce(MPI_IN_PLACE, v, intCount(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
          "MPI_Allreduce (results)");
  }

 private:
  int rank_ = 0, size_ = 1;
};

Case makeCase(Coll coll, bool inPlace, int rank) {
  Case cs;
  cs.coll = coll;
  cs.inPlace = inPlace;
  switch (coll) {
    case Coll::kAllReduce:
      cs.prepare = [inPlace](const Buffers& b, const Counts& k, int) {
        const int n = intCount(k.paramCount);
        Op op;
        op.in = inPlace ? b.recv : b.send;
        op.out = b.recv;
        const void* src = inPlace ? MPI_IN_PLACE : static_cast<const void*>(b.send);
        float* dst = b.recv;
        op.run = [=] {
          mpiOk(MPI_Allreduce(src, dst, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        };
        return op;
      };
      break;
    case Coll::kReduceScatter:
      cs.prepare = [inPlace](const Buffers& b, const Counts& k, int) {
        const int n = intCount(k.paramCount);
        Op op;
        // MPI's in-place form reads the whole input from, and leaves the block at the
        // start of, one buffer: the send buffer is the one sized for the whole input.
        op.in = b.send;
        op.out = inPlace ? b.send : b.recv;
        const void* src = inPlace ? MPI_IN_PLACE : static_cast<const void*>(b.send);
        float* dst = op.out;
        op.run = [=] {
          mpiOk(MPI_Reduce_scatter_block(src, dst, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                "MPI_Reduce_scatter_block");
        };
        return op;
      };
      break;
    case Coll::kAllGather:
      cs.prepare = [inPlace, rank](const Buffers& b, const Counts& k, int) {
        const int n = intCount(k.paramCount);
        Op op;
        op.in = inPlace ? b.recv + static_cast<size_t>(rank) * k.paramCount : b.send;
        op.out = b.recv;
        const void* src = inPlace ? MPI_IN_PLACE : static_cast<const void*>(b.send);
        float* dst = b.recv;
        op.run = [=] {
          mpiOk(MPI_Allgather(src, n, MPI_FLOAT, dst, n, MPI_FLOAT, MPI_COMM_WORLD),
                "MPI_Allgather");
        };
        return op;
      };
      break;
    case Coll::kAlltoall:
      cs.prepare = [](const Buffers& b, const Counts& k, int) {
        const int n = intCount(k.paramCount);
        Op op;
        op.in = b.send;
        op.out = b.recv;
        const float* src = b.send;
        float* dst = b.recv;
        op.run = [=] {
          mpiOk(MPI_Alltoall(src, n, MPI_FLOAT, dst, n, MPI_FLOAT, MPI_COMM_WORLD), "MPI_Alltoall");
        };
        return op;
      };
      break;
    case Coll::kBroadcast:
      // MPI_Bcast has one buffer: it is reported in the out-of-place column.
      cs.prepare = [](const Buffers& b, const Counts& k, int root) {
        const int n = intCount(k.paramCount);
        Op op;
        op.in = op.out = b.recv;
        float* buf = b.recv;
        op.run = [=] { mpiOk(MPI_Bcast(buf, n, MPI_FLOAT, root, MPI_COMM_WORLD), "MPI_Bcast"); };
        return op;
      };
      break;
    case Coll::kReduce:
      cs.prepare = [inPlace, rank](const Buffers& b, const Counts& k, int root) {
        const int n = intCount(k.paramCount);
        Op op;
        op.in = inPlace ? b.recv : b.send;
        op.out = b.recv;
        const void* src = inPlace && rank == root ? MPI_IN_PLACE : static_cast<const void*>(op.in);
        float* dst = b.recv;
        op.run = [=] {
          mpiOk(MPI_Reduce(src, dst, n, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD), "MPI_Reduce");
        };
        return op;
      };
      break;
  }
  return cs;
}

bool hasInPlace(Coll c) { return c != Coll::kAlltoall && c != Coll::kBroadcast; }

int benchMain(int argc, char** argv) {
  BenchOptions opt;
  int exitCode = 0;
  if (!parseBenchOptions(argc, argv, "mpi_bench", &opt, &exitCode)) return exitCode;
  MpiBackend be;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  if (opt.root >= be.size()) {
    if (be.rank() == 0) std::fprintf(stderr, "mpi_bench: root %d is not a rank\n", opt.root);
    return 2;
  }
  if (be.rank() == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int len = 0;
    MPI_Get_library_version(version, &len);
    std::printf("# mpi_bench: %d ranks, %s%s%s\n", be.size(), opt.variant.c_str(),
                opt.variant.empty() ? "" : ", ", version);
  }
  std::vector<Case> cases;
  for (Coll c : opt.colls) {
    cases.push_back(makeCase(c, false, be.rank()));
    if (opt.inPlace && hasInPlace(c)) cases.push_back(makeCase(c, true, be.rank()));
  }
  return runBench(be, opt, cases, "mpi_bench", "openmpi");
}

}  // namespace
}  // namespace braid_compare

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rc = braid_compare::benchMain(argc, argv);
  MPI_Finalize();
  return rc;
}
