// all_gather_perf: Block i of every rank's output is rank i's input.
// A table entry over the shared driver (perf/common.h).
#include "perf/common.h"

namespace braid_perf {
namespace {

bool expected(const Pattern& p, const Counts& c, int rank, int nranks, int root, size_t k,
              double* v) {
  const size_t per = c.paramCount;
  *v = p.input(static_cast<int>(k / per), k % per);
  return true;
}

ncclResult_t run(const CallArgs& a) {
  return ncclAllGather(a.send, a.recv, a.count, a.type, a.comm, a.stream);
}

CollSpec spec() {
  CollSpec s{};
  s.name = "all_gather";
  s.reduces = false;
  s.rooted = false;
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
