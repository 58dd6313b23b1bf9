// gather_perf: Block i of the root's output is rank i's input; other outputs are not checked.
// A table entry over the shared driver (perf/common.h).
#include "perf/common.h"

namespace braid_perf {
namespace {

bool expected(const Pattern& p, const Counts& c, int rank, int nranks, int root, size_t k,
              double* v) {
  if (rank != root) return false;
  const size_t per = c.paramCount;
  *v = p.input(static_cast<int>(k / per), k % per);
  return true;
}

ncclResult_t run(const CallArgs& a) {
  return ncclGather(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

CollSpec spec() {
  CollSpec s{};
  s.name = "gather";
  s.reduces = false;
  s.rooted = true;
  s.inPlace = InPlace::kSendInRecv;
  s.inPlaceOffset = offsetRankBlock;
  s.counts = countsGather;
  s.busBwFactor = factorRing;
  s.expected = expected;
  s.run = run;
  return s;
}

}  // namespace
}  // namespace braid_perf

int main(int argc, char** argv) { return braid_perf::perfMain(argc, argv, braid_perf::spec()); }
