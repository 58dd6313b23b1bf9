// sendrecv_perf: every rank sends to rank+1 and receives from rank-1 in one group
// (no in-place form). A table entry over the shared driver (perf/common.h).
#include "perf/common.h"

namespace braid_perf {
namespace {

bool expected(const Pattern& p, const Counts& /*c*/, int rank, int nranks, int /*root*/, size_t k,
              double* v) {
  *v = p.input((rank + nranks - 1) % nranks, k);
  return true;
}

ncclResult_t run(const CallArgs& a) {
  const int next = (a.rank + 1) % a.nranks;
  const int prev = (a.rank + a.nranks - 1) % a.nranks;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  r = ncclSend(a.send, a.count, a.type, next, a.comm, a.stream);
  if (r == ncclSuccess) r = ncclRecv(a.recv, a.count, a.type, prev, a.comm, a.stream);
  const ncclResult_t end = ncclGroupEnd();
  return r != ncclSuccess ? r : end;
}

CollSpec spec() {
  CollSpec s{};
  s.name = "sendrecv";
  s.reduces = false;
  s.rooted = false;
  s.inPlace = InPlace::kNone;
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
