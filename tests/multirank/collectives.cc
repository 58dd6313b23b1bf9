// Every collective and p2p pattern, in place and out of place, on 1..8 ranks, over each
// transport (threads: local, shm, socket; processes: shm, socket), with 1 KiB FIFO slots
// and element counts around every slot and FIFO boundary. Every element is checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "nccl.h"
#include "tests/multirank/data.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

enum class C {
  kAllReduce, kBroadcast, kBcast, kReduce, kAllGather, kReduceScatter, kAlltoAll, kGather,
  kScatter, kSendRecvRing, kAllPairs
};

const char* collName(C c) {
  switch (c) {
    case C::kAllReduce: return "AllReduce";
    case C::kBroadcast: return "Broadcast";
    case C::kBcast: return "Bcast";
    case C::kReduce: return "Reduce";
    case C::kAllGather: return "AllGather";
    case C::kReduceScatter: return "ReduceScatter";
    case C::kAlltoAll: return "AlltoAll";
    case C::kGather: return "Gather";
    case C::kScatter: return "Scatter";
    case C::kSendRecvRing: return "SendRecvRing";
    case C::kAllPairs: return "AllPairs";
  }
  return "?";
}

/// A different datatype per collective, so element sizes 1, 4 and 8 all meet the
/// slot boundaries.
ncclDataType_t collType(C c) {
  switch (c) {
    case C::kAllReduce: return ncclFloat32;
    case C::kBroadcast: return ncclUint8;
    case C::kBcast: return ncclInt64;
    case C::kReduce: return ncclFloat64;
    case C::kAllGather: return ncclInt32;
    case C::kReduceScatter: return ncclInt64;
    case C::kAlltoAll: return ncclUint8;
    case C::kGather: return ncclFloat32;
    case C::kScatter: return ncclInt8;
    case C::kSendRecvRing: return ncclInt32;
    case C::kAllPairs: return ncclFloat64;
  }
  return ncclFloat32;
}

/// Whether the collective has an in-place form (NCCL's rules).
bool hasInPlace(C c) { return c != C::kAlltoAll && c != C::kSendRecvRing && c != C::kAllPairs; }
/// Whether it has an out-of-place form (ncclBcast is in place by definition).
bool hasOutOfPlace(C c) { return c != C::kBcast; }

/// Data-movement values: distinct per (rank, index), exact in every type.
double mv(ncclDataType_t t, int64_t r, size_t i) {
  if (typeSize(t) == 1) return double((r * 31 + int64_t(i) * 7 + 1) % 100);
  return double((r * 1009 + int64_t(i) * 7 + 1) % 1000003);
}
/// Reduction inputs: in [-15, 15]; sums of up to 8 ranks stay exact even in int8.
double rv(int64_t r, size_t i) { return double((r * 5 + int64_t(i) * 3) % 31 - 15); }
double rsum(int n, size_t i) {
  double s = 0;
  for (int r = 0; r < n; ++r) s += rv(r, i);
  return s;
}
/// All-to-all block values: from `src` to `dst`.
double a2a(ncclDataType_t t, int src, int dst, int n, size_t i) { return mv(t, src * n + dst, i); }

/// Whether the collective's buffers hold nranks * count elements.
bool scalesWithRanks(C c) {
  return c == C::kAllGather || c == C::kReduceScatter || c == C::kAlltoAll || c == C::kGather ||
         c == C::kScatter || c == C::kAllPairs;
}

bool isPrime(size_t x) {
  if (x < 2) return false;
  for (size_t d = 2; d * d <= x; ++d)
    if (x % d == 0) return false;
  return true;
}

/// Counts around the slot and FIFO boundaries of the small-FIFO environment, and a
/// prime count: ~100k elements per buffer (per rank's block when buffers hold nranks
/// blocks, to keep the run time of 8 ranks on 2 cores reasonable).
std::vector<size_t> countsFor(C c, int nranks) {
  const ncclDataType_t t = collType(c);
  const size_t slot = kSmallSlotBytes / typeSize(t), cap = kSmallFifoBytes / typeSize(t);
  size_t prime = scalesWithRanks(c) ? 100003 / size_t(nranks) : 100003;
  while (!isPrime(prime)) ++prime;
  return {0, 1, slot - 1, slot, slot + 1, cap / 2 - 1, cap / 2 + 1, cap * 3 + 7, prime};
}

#define MR_CALL(call)                                                                   \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    if (r_ != ncclSuccess) {                                                            \
      ADD_FAILURE() << #call << " on rank " << rank << ": " << ncclGetErrorString(r_)   \
                    << " - " << ncclGetLastError(comm);                                 \
      return false;                                                                     \
    }                                                                                   \
  } while (0)

/// Runs one collective on this rank and checks its output; false if a call failed.
bool runOne(C c, ncclComm_t comm, int rank, int n, size_t count, bool inPlace, int root) {
  const ncclDataType_t t = collType(c);
  const size_t nc = size_t(n) * count;
  const cudaStream_t s = nullptr;
  switch (c) {
    case C::kAllReduce: {
      TypedBuffer send(t, count), recv(t, count);
      TypedBuffer& in = inPlace ? recv : send;
      for (size_t i = 0; i < count; ++i) in.set(i, rv(rank, i));
      MR_CALL(ncclAllReduce(in.data(), recv.data(), count, t, ncclSum, comm, s));
      EXPECT_TRUE(checkElements("allreduce", count, [&](size_t i, double* g, double* w) {
        *g = recv.get(i);
        *w = rsum(n, i);
      }));
      EXPECT_TRUE(recv.guardsIntact());
      break;
    }
    case C::kBroadcast:
    case C::kBcast: {
      TypedBuffer send(t, count), recv(t, count);
      recv.fill(7);
      TypedBuffer& in = inPlace ? recv : send;
      if (rank == root)
        for (size_t i = 0; i < count; ++i) in.set(i, mv(t, root, i));
      if (c == C::kBcast) {
        MR_CALL(ncclBcast(recv.data(), count, t, root, comm, s));
      } else {
        const void* sb = inPlace ? recv.data() : (rank == root ? send.data() : nullptr);
        MR_CALL(ncclBroadcast(sb, recv.data(), count, t, root, comm, s));
      }
      EXPECT_TRUE(checkElements("broadcast", count, [&](size_t i, double* g, double* w) {
        *g = recv.get(i);
        *w = mv(t, root, i);
      }));
      EXPECT_TRUE(recv.guardsIntact());
      break;
    }
    case C::kReduce: {
      TypedBuffer send(t, count), recv(t, count);
      recv.fill(7);
      TypedBuffer& in = inPlace ? recv : send;
      for (size_t i = 0; i < count; ++i) in.set(i, rv(rank, i));
      void* rb = inPlace ? recv.data() : (rank == root ? recv.data() : nullptr);
      MR_CALL(ncclReduce(in.data(), rb, count, t, ncclSum, root, comm, s));
      if (rank == root) {
        EXPECT_TRUE(checkElements("reduce", count, [&](size_t i, double* g, double* w) {
          *g = recv.get(i);
          *w = rsum(n, i);
        }));
      } else if (!inPlace) {
        EXPECT_TRUE(checkElements("reduce (non-root recv untouched)", count,
                                  [&](size_t i, double* g, double* w) {
                                    *g = recv.get(i);
                                    *w = 7;
                                  }));
      }
      EXPECT_TRUE(recv.guardsIntact());
      break;
    }
    case C::kAllGather: {
      TypedBuffer send(t, count), recv(t, nc);
      recv.fill(7);
      for (size_t i = 0; i < count; ++i) {
        if (inPlace) recv.set(size_t(rank) * count + i, mv(t, rank, i));
        else send.set(i, mv(t, rank, i));
      }
      const void* sb = inPlace ? recv.at(size_t(rank) * count) : send.data();
      MR_CALL(ncclAllGather(sb, recv.data(), count, t, comm, s));
      EXPECT_TRUE(checkElements("allgather", nc, [&](size_t j, double* g, double* w) {
        *g = recv.get(j);
        *w = mv(t, int64_t(j / count), j % count);
      }));
      EXPECT_TRUE(recv.guardsIntact());
      break;
    }
    case C::kReduceScatter: {
      TypedBuffer send(t, nc), recv(t, count);
      for (size_t j = 0; j < nc; ++j) send.set(j, rv(rank, j));
      void* rb = inPlace ? send.at(size_t(rank) * count) : recv.data();
      MR_CALL(ncclReduceScatter(send.data(), rb, count, t, ncclSum, comm, s));
      const size_t base = size_t(rank) * count;
      EXPECT_TRUE(checkElements("reducescatter", count, [&](size_t i, double* g, double* w) {
        *g = inPlace ? send.get(base + i) : recv.get(i);
        *w = rsum(n, base + i);
      }));
      EXPECT_TRUE(send.guardsIntact());
      EXPECT_TRUE(recv.guardsIntact());
      break;
    }
    case C::kAlltoAll: {
      TypedBuffer send(t, nc), recv(t, nc);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i) send.set(size_t(p) * count + i, a2a(t, rank, p, n, i));
      MR_CALL(ncclAlltoAll(send.data(), recv.data(), count, t, comm, s));
      EXPECT_TRUE(checkElements("alltoall", nc, [&](size_t j, double* g, double* w) {
        *g = recv.get(j);
        *w = a2a(t, int(j / count), rank, n, j % count);
      }));
      EXPECT_TRUE(recv.guardsIntact());
      break;
    }
    case C::kGather: {
      TypedBuffer send(t, count), recv(t, nc);
      recv.fill(7);
      const bool useRecvAsSend = inPlace && rank == root;
      for (size_t i = 0; i < count; ++i) {
        if (useRecvAsSend) recv.set(size_t(rank) * count + i, mv(t, rank, i));
        else send.set(i, mv(t, rank, i));
      }
      const void* sb = useRecvAsSend ? recv.at(size_t(rank) * count) : send.data();
      MR_CALL(ncclGather(sb, rank == root ? recv.data() : nullptr, count, t, root, comm, s));
      if (rank == root) {
        EXPECT_TRUE(checkElements("gather", nc, [&](size_t j, double* g, double* w) {
          *g = recv.get(j);
          *w = mv(t, int64_t(j / count), j % count);
        }));
      }
      EXPECT_TRUE(recv.guardsIntact());
      break;
    }
    case C::kScatter: {
      TypedBuffer send(t, nc), recv(t, count);
      recv.fill(7);
      if (rank == root)
        for (size_t j = 0; j < nc; ++j) send.set(j, mv(t, int64_t(j / count), j % count));
      const bool inSend = inPlace && rank == root;
      void* rb = inSend ? send.at(size_t(rank) * count) : recv.data();
      MR_CALL(ncclScatter(rank == root ? send.data() : nullptr, rb, count, t, root, comm, s));
      EXPECT_TRUE(checkElements("scatter", count, [&](size_t i, double* g, double* w) {
        *g = inSend ? send.get(size_t(rank) * count + i) : recv.get(i);
        *w = mv(t, rank, i);
      }));
      EXPECT_TRUE(recv.guardsIntact());
      break;
    }
    case C::kSendRecvRing: {
      TypedBuffer send(t, count), recv(t, count);
      for (size_t i = 0; i < count; ++i) send.set(i, mv(t, rank, i));
      const int next = (rank + 1) % n, prev = (rank - 1 + n) % n;
      MR_CALL(ncclGroupStart());
      MR_CALL(ncclSend(send.data(), count, t, next, comm, s));
      MR_CALL(ncclRecv(recv.data(), count, t, prev, comm, s));
      MR_CALL(ncclGroupEnd());
      EXPECT_TRUE(checkElements("ring send/recv", count, [&](size_t i, double* g, double* w) {
        *g = recv.get(i);
        *w = mv(t, prev, i);
      }));
      EXPECT_TRUE(recv.guardsIntact());
      break;
    }
    case C::kAllPairs: {
      TypedBuffer send(t, nc), recv(t, nc);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < count; ++i) send.set(size_t(p) * count + i, a2a(t, rank, p, n, i));
      MR_CALL(ncclGroupStart());
      for (int k = n - 1; k >= 0; --k) {  // receives in reverse peer order
        const int p = (rank + k) % n;
        MR_CALL(ncclRecv(recv.at(size_t(p) * count), count, t, p, comm, s));
      }
      for (int k = 0; k < n; ++k) {  // sends starting with ourself
        const int p = (rank + k) % n;
        MR_CALL(ncclSend(send.at(size_t(p) * count), count, t, p, comm, s));
      }
      MR_CALL(ncclGroupEnd());
      EXPECT_TRUE(checkElements("all-pairs send/recv", nc, [&](size_t j, double* g, double* w) {
        *g = recv.get(j);
        *w = a2a(t, int(j / count), rank, n, j % count);
      }));
      EXPECT_TRUE(recv.guardsIntact());
      break;
    }
  }
  return true;
}

struct Mode {
  Launch launch;
  const char* transport;
  const char* variant;  ///< "" (defaults), "ring" (no direct small-message algorithms),
                        ///< "cma" (ring, and single-copy shm reads from 64-byte pieces),
                        ///< "board" (the flag board with small limits: inline up to
                        ///< 256 B per rank, single copy up to 64 KiB, FIFOs beyond)
};

using Param = std::tuple<Mode, int, C>;

class Collectives : public ::testing::TestWithParam<Param> {};

TEST_P(Collectives, CountsAroundSlotBoundaries) {
  const Mode mode = std::get<0>(GetParam());
  const int nranks = std::get<1>(GetParam());
  const C coll = std::get<2>(GetParam());
  auto env = smallFifoEnv(mode.transport);
  env.push_back({"BRAID_TIMEOUT_MS", "30000"});
  const std::string variant = mode.variant;
  if (variant == "ring" || variant == "cma") env.push_back({"BRAID_SMALL_MSG_BYTES", "0"});
  if (variant == "board") {
    env.push_back({"BRAID_BOARD_INLINE_BYTES", "256"});
    env.push_back({"BRAID_BOARD_COPY_MAX_BYTES", "65536"});
  }
  if (std::string(mode.variant) == "cma") {
    env.push_back({"BRAID_SHM_CMA", "1"});
    env.push_back({"BRAID_CMA_MIN_BYTES", "64"});
    env.push_back({"BRAID_STREAM_OUTPUT_BYTES", "1"});  // results with streaming stores too
  }
  ScopedEnv scoped(env);
  const std::vector<size_t> counts = countsFor(coll, nranks);
  run(mode.launch, nranks, [&](ncclComm_t& comm, int rank, int n) {
    for (size_t k = 0; k < counts.size(); ++k) {
      for (bool inPlace : {false, true}) {
        if (inPlace ? !hasInPlace(coll) : !hasOutOfPlace(coll)) continue;
        const int root = int((k + (inPlace ? 1 : 0)) % size_t(n));
        SCOPED_TRACE(std::string(collName(coll)) + " count " + std::to_string(counts[k]) +
                     (inPlace ? " in place" : " out of place") + " root " +
                     std::to_string(root) + " rank " + std::to_string(rank));
        if (!runOne(coll, comm, rank, n, counts[k], inPlace, root)) return;
      }
    }
  });
}

// Default FIFOs and large messages over shm processes: ring steps of half a FIFO with
// single-copy (process_vm_readv) entries, whose reductions must still fill whole slots
// (a regression: 256 KiB bounce pieces in 512 KiB slots deadlocked the ring).
TEST(CollectivesLarge, RingWithSingleCopyProcesses) {
  ScopedEnv scoped(
      {{"BRAID_TRANSPORT", "shm"}, {"BRAID_TIMEOUT_MS", "20000"}, {"BRAID_SHM_CMA", "1"}});
  run(Launch::kProcesses, 2, [&](ncclComm_t& comm, int rank, int n) {
    for (size_t count : {size_t(1) << 20, (size_t(3) << 19) + 7}) {
      for (int rep = 0; rep < 2; ++rep) {
        for (C coll : {C::kAllReduce, C::kAllGather, C::kBroadcast}) {
          for (bool inPlace : {false, true}) {
            SCOPED_TRACE(std::string(collName(coll)) + " count " + std::to_string(count) +
                         (inPlace ? " in place" : " out of place"));
            if (!runOne(coll, comm, rank, n, count, inPlace, rep % n)) return;
          }
        }
      }
    }
  });
}

const Mode kThreadModes[] = {{Launch::kInitAll, "local", ""},
                             {Launch::kInitAll, "auto", "board"},
                             {Launch::kThreads, "auto", "board"},
                             {Launch::kInitAll, "local", "ring"},
                             {Launch::kThreads, "shm", "cma"},
                             {Launch::kThreads, "socket", ""}};
const Mode kProcessModes[] = {{Launch::kProcesses, "shm", ""},
                              {Launch::kProcesses, "auto", "board"},
                              {Launch::kProcesses, "shm", "cma"},
                              {Launch::kProcesses, "socket", "ring"}};
const C kAllColls[] = {C::kAllReduce,     C::kBroadcast, C::kBcast,  C::kReduce,
                       C::kAllGather,     C::kReduceScatter, C::kAlltoAll, C::kGather,
                       C::kScatter,       C::kSendRecvRing,  C::kAllPairs};

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  const Mode m = std::get<0>(info.param);
  return std::string(launchName(m.launch)) + "_" + m.transport +
         (m.variant[0] ? std::string("_") + m.variant : std::string()) + "_" +
         std::to_string(std::get<1>(info.param)) + "ranks_" + collName(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Threads, Collectives,
                         ::testing::Combine(::testing::ValuesIn(kThreadModes),
                                            ::testing::Values(1, 2, 3, 4, 7, 8),
                                            ::testing::ValuesIn(kAllColls)),
                         paramName);

INSTANTIATE_TEST_SUITE_P(Processes, Collectives,
                         ::testing::Combine(::testing::ValuesIn(kProcessModes),
                                            ::testing::Values(1, 2, 3, 4, 7, 8),
                                            ::testing::ValuesIn(kAllColls)),
                         paramName);

}  // namespace
}  // namespace mr
