// reduce_scatter_perf: Rank r gets block r of the reduction of all ranks' inputs.
// A table entry over the shared driver (perf/common.h).
#include "perf/common.h"

namespace braid_perf {
namespace {

bool expected(const Pattern& p, const Counts& c, int rank, int nranks, int root, size_t k,
              double* v) {
  *v = p.reduced(static_cast<size_t>(rank) * c.paramCount + k);
  return true;
}

ncclResult_t run(const CallArgs& a) {
  return ncclReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}

CollSpec spec() {
  CollSpec s{};
  s.name = "reduce_scatter";
  s.reduces = true;
  s.rooted = false;
  s.inPlace = InPlace::kRecvInSend;
  s.inPlaceOffset = offsetRankBlock;
  s.counts = countsScatter;
  s.busBwFactor = factorRing;
  s.expected = expected;
  s.run = run;
  return s;
}

}  // namespace
}  // namespace braid_perf

int main(int argc, char** argv) { return braid_perf::perfMain(argc, argv, braid_perf::spec()); }
