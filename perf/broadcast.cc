// broadcast_perf: Every rank gets the root's input.
// A table entry over the shared driver (perf/common.h).
#include "perf/common.h"

namespace braid_perf {
namespace {

bool expected(const Pattern& p, const Counts& c, int rank, int nranks, int root, size_t k,
              double* v) {
  *v = p.input(root, k);
  return true;
}

ncclResult_t run(const CallArgs& a) {
  return ncclBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

CollSpec spec() {
  CollSpec s{};
  s.name = "broadcast";
  s.reduces = false;
  s.rooted = true;
  s.inPlace = InPlace::kSendInRecv;
  s.inPlaceOffset = offsetZero;
  s.counts = countsSameSize;
  s.busBwFactor = factorOne;
  s.expected = expected;
  s.run = run;
  return s;
}

}  // namespace
}  // namespace braid_perf

int main(int argc, char** argv) { return braid_perf::perfMain(argc, argv, braid_perf::spec()); }
