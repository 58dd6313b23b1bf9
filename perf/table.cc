// Shared pieces of the collective table entries: nccl-tests count rules, busbw factors
// and in-place offsets (see common.h).
#include "perf/common.h"

namespace braid_perf {

Counts countsSameSize(size_t bytes, size_t eltSize, int /*nranks*/) {
  Counts c;
  c.count = bytes / eltSize;
  c.sendElems = c.recvElems = c.paramCount = c.count;
  return c;
}

Counts countsGather(size_t bytes, size_t eltSize, int nranks) {
  Counts c;
  c.paramCount = bytes / eltSize / static_cast<size_t>(nranks);
  c.count = c.paramCount * static_cast<size_t>(nranks);
  c.sendElems = c.paramCount;
  c.recvElems = c.count;
  return c;
}

Counts countsScatter(size_t bytes, size_t eltSize, int nranks) {
  Counts c = countsGather(bytes, eltSize, nranks);
  c.sendElems = c.count;
  c.recvElems = c.paramCount;
  return c;
}

Counts countsAlltoall(size_t bytes, size_t eltSize, int nranks) {
  Counts c = countsGather(bytes, eltSize, nranks);
  c.sendElems = c.recvElems = c.count;
  return c;
}

double factorOne(int /*nranks*/) { return 1.0; }
double factorRing(int nranks) { return static_cast<double>(nranks - 1) / nranks; }
double factorAllReduce(int nranks) { return 2.0 * (nranks - 1) / nranks; }

size_t offsetZero(const Counts& /*c*/, int /*rank*/) { return 0; }
size_t offsetRankBlock(const Counts& c, int rank) {
  return static_cast<size_t>(rank) * c.paramCount;
}

}  // namespace braid_perf
