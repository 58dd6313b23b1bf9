// The shared driver of the collective perf suite (nccl-tests compatible command line and
// output). Each *_perf binary is one CollSpec table entry handed to perfMain.
#ifndef BRAID_PERF_COMMON_H_
#define BRAID_PERF_COMMON_H_

#include <cstddef>

#include "nccl.h"
#include "perf/pattern.h"

namespace braid_perf {

/// Element counts of one tested size, as one collective sees them.
struct Counts {
  size_t count = 0;       ///< "count" column: elements of the largest buffer
  size_t sendElems = 0;   ///< elements of each rank's send buffer
  size_t recvElems = 0;   ///< elements of each rank's receive buffer
  size_t paramCount = 0;  ///< count argument of the API call
};

/// Where an in-place call keeps its data (nccl-tests conventions).
enum class InPlace {
  kNone,        ///< no in-place form: the in-place columns read N/A
  kSendInRecv,  ///< sendbuff = recvbuff + offset
  kRecvInSend,  ///< recvbuff = sendbuff + offset
};

/// Arguments of one collective call by one rank.
struct CallArgs {
  const void* send;
  void* recv;
  size_t count;  ///< Counts::paramCount
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  int rank;
  int nranks;
  ncclComm_t comm;
  cudaStream_t stream;  ///< null for host buffers; the rank's stream for device buffers (-D)
};

/// One collective of the suite: a small table entry over the shared driver.
struct CollSpec {
  const char* name;  ///< e.g. "all_reduce"; the binary is <name>_perf
  bool reduces;      ///< takes -o operators
  bool rooted;       ///< takes -r roots
  InPlace inPlace;
  /// In-place offset (elements) of rank `rank`'s data (see InPlace).
  size_t (*inPlaceOffset)(const Counts& c, int rank);
  /// Counts for a requested size of `bytes` with elements of `eltSize` bytes.
  Counts (*counts)(size_t bytes, size_t eltSize, int nranks);
  /// busbw = algbw * busBwFactor(nranks).
  double (*busBwFactor)(int nranks);
  /// Expected element k of rank `rank`'s output; false when that element is not checked.
  bool (*expected)(const Pattern& p, const Counts& c, int rank, int nranks, int root, size_t k,
                   double* value);
  /// Issue the call (inside a group when the driver aggregates).
  ncclResult_t (*run)(const CallArgs& a);
};

/// Run the whole benchmark for one collective; returns the process exit code.
int perfMain(int argc, char** argv, const CollSpec& spec);

/// Count helpers shared by the table entries.
Counts countsSameSize(size_t bytes, size_t eltSize, int nranks);  ///< send = recv = count
Counts countsGather(size_t bytes, size_t eltSize, int nranks);    ///< send = count/n, recv = n*that
Counts countsScatter(size_t bytes, size_t eltSize,
                     int nranks);  ///< send = n*(count/n), recv = count/n
Counts countsAlltoall(size_t bytes, size_t eltSize, int nranks);  ///< send = recv = n*(count/n)
/// busbw factors.
double factorOne(int nranks);
double factorRing(int nranks);       ///< (n-1)/n
double factorAllReduce(int nranks);  ///< 2(n-1)/n
/// In-place offsets.
size_t offsetZero(const Counts& c, int rank);
size_t offsetRankBlock(const Counts& c, int rank);  ///< rank * paramCount

}  // namespace braid_perf

#endif  // BRAID_PERF_COMMON_H_
