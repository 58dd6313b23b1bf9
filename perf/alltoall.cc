// alltoall_perf: Block i of rank r's output is block r of rank i's input (no in-place form).
// A table entry over the shared driver (perf/common.h).
#include "perf/common.h"

namespace braid_perf {
namespace {

bool expected(const Pattern& p, const Counts& c, int rank, int nranks, int root, size_t k,
              double* v) {
  const size_t per = c.paramCount;
  *v = p.input(static_cast<int>(k / per), static_cast<size_t>(rank) * per + k % per);
  return true;
}

ncclResult_t run(const CallArgs& a) {
  return ncclAlltoAll(a.send, a.recv, a.count, a.type, a.comm, a.stream);
}

CollSpec spec() {
  CollSpec s{};
  s.name = "alltoall";
  s.reduces = false;
  s.rooted = false;
  s.inPlace = InPlace::kNone;
  s.inPlaceOffset = offsetZero;
  s.counts = countsAlltoall;
  s.busBwFactor = factorRing;
  s.expected = expected;
  s.run = run;
  return s;
}

}  // namespace
}  // namespace braid_perf

int main(int argc, char** argv) { return braid_perf::perfMain(argc, argv, braid_perf::spec()); }
