// The flag board (src/exec/board.h): which path a size takes (read back from the flight
// record), ranks that disagree on in-place, bitwise-equal results on every rank, many
// communicators driven by one thread in one group, collectives grouped with sends and
// receives, and the switch that turns the board off.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "braid/braid.h"
#include "nccl.h"
#include "tests/multirank/harness.h"

namespace mr {
namespace {

/// The communicator's flight record as text (written through braidCommDumpFlightRecord).
std::string flightRecord(ncclComm_t comm, int rank) {
  char path[128];
  std::snprintf(path, sizeof path, "/tmp/braid-board-test-%d-%d.json", int(getpid()), rank);
  if (braidCommDumpFlightRecord(comm, path) != ncclSuccess) return "";
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::remove(path);
  return ss.str();
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

/// All-reduces of `count` floats on every rank; checks the sums.
bool allReduceOk(ncclComm_t comm, int rank, int n, size_t count) {
  std::vector<float> in(count), out(count, -1.0f);
  for (size_t i = 0; i < count; ++i) in[i] = float(rank + 1) + float(i % 7);
  const ncclResult_t r = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm,
                                       nullptr);
  EXPECT_EQ(r, ncclSuccess) << ncclGetLastError(comm);
  const float ranks = float(n * (n + 1) / 2);
  for (size_t i = 0; i < count; ++i)
    if (out[i] != ranks + float(n) * float(i % 7)) {
      ADD_FAILURE() << "rank " << rank << " count " << count << " element " << i << ": got "
                    << out[i];
      return false;
    }
  return r == ncclSuccess;
}

class BoardPaths : public ::testing::TestWithParam<std::tuple<Launch, int>> {};

// Inline up to 1 KiB per rank, single copy up to 64 KiB, FIFO plans beyond: each size
// must run where the limits say, and be right.
TEST_P(BoardPaths, EachSizeTakesItsPath) {
  ScopedEnv env({{"BRAID_TRANSPORT", "auto"},
                 {"BRAID_BOARD_INLINE_BYTES", "1024"},
                 {"BRAID_BOARD_COPY_MAX_BYTES", "65536"},
                 {"BRAID_FLIGHT_RECORDER", "64"}});
  run(std::get<0>(GetParam()), std::get<1>(GetParam()), [&](ncclComm_t& comm, int rank, int n) {
    ASSERT_TRUE(allReduceOk(comm, rank, n, 256));  // 1 KiB: inline
    std::string fr = flightRecord(comm, rank);
    EXPECT_EQ(occurrences(fr, "board-inline"), 1u) << fr;
    EXPECT_EQ(occurrences(fr, "board-copy"), 0u) << fr;
    ASSERT_TRUE(allReduceOk(comm, rank, n, 257));  // just over: single copy
    ASSERT_TRUE(allReduceOk(comm, rank, n, 16384));  // 64 KiB: single copy
    fr = flightRecord(comm, rank);
    EXPECT_EQ(occurrences(fr, "board-copy"), 2u) << fr;
    ASSERT_TRUE(allReduceOk(comm, rank, n, 16385));  // over the copy limit: a plan
    fr = flightRecord(comm, rank);
    EXPECT_EQ(occurrences(fr, "board-"), 3u) << fr;
    // All-gather: the limits count one rank's part (inline) and the whole output (copy).
    std::vector<int32_t> in(256, rank), out(256 * size_t(n), -1);
    MR_NCCL_OK(ncclAllGather(in.data(), out.data(), 256, ncclInt32, comm, nullptr));
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], int32_t(i / 256)) << i;
    fr = flightRecord(comm, rank);
    EXPECT_EQ(occurrences(fr, "board-inline"), 2u) << fr;
  });
}

INSTANTIATE_TEST_SUITE_P(Launches, BoardPaths,
                         ::testing::Combine(::testing::Values(Launch::kInitAll, Launch::kThreads,
                                                              Launch::kProcesses),
                                            ::testing::Values(2, 3, 4)),
                         [](const ::testing::TestParamInfo<std::tuple<Launch, int>>& info) {
                           return std::string(launchName(std::get<0>(info.param))) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// BRAID_BOARD=0 (rank 0's value): no collective runs on the board.
TEST(BoardOff, NoBoardPathsProcesses) {
  ScopedEnv env({{"BRAID_TRANSPORT", "auto"}, {"BRAID_BOARD", "0"}});
  run(Launch::kProcesses, 2, [&](ncclComm_t& comm, int rank, int n) {
    for (size_t count : {size_t(1), size_t(1000), size_t(100000)})
      ASSERT_TRUE(allReduceOk(comm, rank, n, count));
    EXPECT_EQ(occurrences(flightRecord(comm, rank), "board-"), 0u);
  });
}

class BoardMixed : public ::testing::TestWithParam<Launch> {};

// Rank 0 works in place, the others out of place (each rank decides for its own buffers):
// single copy must stay correct for every collective where NCCL defines in place.
TEST_P(BoardMixed, InPlaceOnSomeRanks) {
  ScopedEnv env({{"BRAID_TRANSPORT", "auto"}, {"BRAID_BOARD_INLINE_BYTES", "64"}});
  run(GetParam(), 3, [&](ncclComm_t& comm, int rank, int n) {
    const bool inPlace = rank == 0;
    for (size_t count : {size_t(40), size_t(3001)}) {
      const size_t N = size_t(n);
      SCOPED_TRACE("count " + std::to_string(count) + " rank " + std::to_string(rank));
      {  // all-to-all
        std::vector<int32_t> send(count * N), recvBuf(count * N, -1);
        for (size_t i = 0; i < send.size(); ++i) send[i] = int32_t(rank * 1000000 + int(i));
        int32_t* recv = inPlace ? send.data() : recvBuf.data();
        MR_NCCL_OK(ncclAlltoAll(send.data(), recv, count, ncclInt32, comm, nullptr));
        for (size_t p = 0; p < N; ++p)
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(recv[p * count + i], int32_t(int(p) * 1000000 + int(size_t(rank) * count + i)))
                << "from rank " << p << " element " << i;
      }
      {  // all-reduce
        std::vector<float> buf(count), out(count, -1.0f);
        for (size_t i = 0; i < count; ++i) buf[i] = float(rank) + float(i % 5);
        float* recv = inPlace ? buf.data() : out.data();
        MR_NCCL_OK(ncclAllReduce(buf.data(), recv, count, ncclFloat32, ncclSum, comm, nullptr));
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(recv[i], 3.0f + 3.0f * float(i % 5)) << i;
      }
      {  // all-gather (in place: own part at its offset of the output)
        std::vector<int32_t> out(count * N, -1), own(count);
        for (size_t i = 0; i < count; ++i) own[i] = int32_t(rank * 7 + int(i));
        int32_t* send = own.data();
        if (inPlace) {
          std::copy(own.begin(), own.end(), out.begin() + long(size_t(rank) * count));
          send = out.data() + size_t(rank) * count;
        }
        MR_NCCL_OK(ncclAllGather(send, out.data(), count, ncclInt32, comm, nullptr));
        for (size_t p = 0; p < N; ++p)
          for (size_t i = 0; i < count; ++i)
            ASSERT_EQ(out[p * count + i], int32_t(int(p) * 7 + int(i)));
      }
      {  // reduce-scatter (in place: output at this rank's offset of the input)
        std::vector<int32_t> in(count * N), out(count, -1);
        for (size_t i = 0; i < in.size(); ++i) in[i] = int32_t(rank + int(i));
        int32_t* recv = inPlace ? in.data() + size_t(rank) * count : out.data();
        MR_NCCL_OK(ncclReduceScatter(in.data(), recv, count, ncclInt32, ncclSum, comm, nullptr));
        for (size_t i = 0; i < count; ++i)
          ASSERT_EQ(recv[i], int32_t(3 + 3 * int(size_t(rank) * count + i)));
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Launches, BoardMixed,
                         ::testing::Values(Launch::kThreads, Launch::kProcesses),
                         [](const ::testing::TestParamInfo<Launch>& info) {
                           return std::string(launchName(info.param));
                         });

// Floats whose sum depends on the order: every rank must still get the same bits (the
// two-shot all-reduce reduces each chunk once, in rank order).
TEST(BoardBits, EveryRankGetsTheSameBitsProcesses) {
  ScopedEnv env({{"BRAID_TRANSPORT", "auto"}});
  run(Launch::kProcesses, 3, [&](ncclComm_t& comm, int rank, int n) {
    for (size_t count : {size_t(700), size_t(200000)}) {  // inline, single copy
      std::vector<float> in(count), out(count);
      for (size_t i = 0; i < count; ++i)
        in[i] = (rank == 1 ? 1e8f : 1.0f) * (1.0f + float((i * 2654435761u + rank) % 1000) / 7.0f);
      MR_NCCL_OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr));
      std::vector<float> all(count * size_t(n));
      MR_NCCL_OK(ncclAllGather(out.data(), all.data(), count, ncclFloat32, comm, nullptr));
      for (int p = 1; p < n; ++p)
        ASSERT_EQ(std::memcmp(all.data(), all.data() + size_t(p) * count, count * sizeof(float)), 0)
            << "rank " << p << " got other bits than rank 0 (count " << count << ")";
    }
  });
}

// One thread drives three communicators' ranks in one group (the ncclCommInitAll idiom):
// the board runs must progress side by side, not one waiting for another. Also with
// sends and receives in the same group.
TEST(BoardGroups, OneThreadManyRanksWithP2p) {
  ScopedEnv env({{"BRAID_TRANSPORT", "auto"}});
  const int n = 3;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  for (size_t count : {size_t(16), size_t(50000)}) {
    std::vector<std::vector<float>> in(n), out(n), ring(n);
    for (int r = 0; r < n; ++r) {
      in[size_t(r)].assign(count, float(r + 1));
      out[size_t(r)].assign(count, 0.0f);
      ring[size_t(r)].assign(count, -1.0f);
    }
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < n; ++r) {
      ncclAllReduce(in[size_t(r)].data(), out[size_t(r)].data(), count, ncclFloat32, ncclSum,
                    comms[size_t(r)], nullptr);
      ncclSend(in[size_t(r)].data(), count, ncclFloat32, (r + 1) % n, comms[size_t(r)], nullptr);
      ncclRecv(ring[size_t(r)].data(), count, ncclFloat32, (r + n - 1) % n, comms[size_t(r)],
               nullptr);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(out[size_t(r)][count - 1], 6.0f) << "rank " << r;
      EXPECT_EQ(ring[size_t(r)][count - 1], float((r + n - 1) % n + 1)) << "rank " << r;
    }
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

class BoardSequences : public ::testing::TestWithParam<Launch> {};

// Rooted collectives return without waiting for everyone (a broadcast's root, a
// reduce's other ranks): back to back with changing roots and sizes, mixed with
// symmetric ones, no rank may overwrite inline data a slower rank still reads.
TEST_P(BoardSequences, RootedBackToBack) {
  ScopedEnv env({{"BRAID_TRANSPORT", "auto"}, {"BRAID_BOARD_INLINE_BYTES", "512"}});
  run(GetParam(), 3, [&](ncclComm_t& comm, int rank, int n) {
    for (int it = 0; it < 300; ++it) {
      const size_t count = size_t(1 + it % 5) * 20;  // 80..400 B: inline
      const int root = it % n;
      std::vector<int32_t> buf(count), out(count * size_t(n), -1);
      for (size_t i = 0; i < count; ++i) buf[i] = int32_t(rank == root ? it * 1000 + int(i) : -7);
      MR_NCCL_OK(ncclBroadcast(buf.data(), buf.data(), count, ncclInt32, root, comm, nullptr));
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(buf[i], int32_t(it * 1000 + int(i))) << it;
      for (size_t i = 0; i < count; ++i) buf[i] = int32_t(rank + it + int(i));
      const int rroot = (it + 1) % n;
      MR_NCCL_OK(ncclReduce(buf.data(), out.data(), count, ncclInt32, ncclSum, rroot, comm, nullptr));
      if (rank == rroot) {
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], int32_t(3 + 3 * (it + int(i)))) << it;
      }
      MR_NCCL_OK(ncclGather(buf.data(), out.data(), count, ncclInt32, root, comm, nullptr));
      if (rank == root) {
        for (size_t p = 0; p < size_t(n); ++p)
          ASSERT_EQ(out[p * count + 1], int32_t(int(p) + it + 1)) << it;
      }
      for (size_t i = 0; i < out.size(); ++i) out[i] = int32_t(it + int(i));
      MR_NCCL_OK(ncclScatter(out.data(), buf.data(), count, ncclInt32, rroot, comm, nullptr));
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(buf[i], int32_t(it + int(size_t(rank) * count + i)));
      if (it % 7 == 0) {
        float x = float(rank + it), y = 0;
        MR_NCCL_OK(ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr));
        ASSERT_EQ(y, float(3 + 3 * it));
      }
    }
  });
}

// A root broadcasting while the others fall behind (they nap now and then): the root
// runs ahead by up to seven broadcasts, never over data a slow rank has not read.
TEST_P(BoardSequences, RootRunsAheadOfSlowRanks) {
  ScopedEnv env({{"BRAID_TRANSPORT", "auto"}});
  run(GetParam(), 3, [&](ncclComm_t& comm, int rank, int) {
    for (int it = 0; it < 400; ++it) {
      if (rank != 0 && it % 16 == rank) usleep(2000);
      int64_t v[4] = {rank == 0 ? it : -1, rank == 0 ? 3 * it : -1, 7, rank == 0 ? -it : -1};
      MR_NCCL_OK(ncclBroadcast(v, v, 4, ncclInt64, 0, comm, nullptr));
      ASSERT_EQ(v[0], it) << "rank " << rank;
      ASSERT_EQ(v[1], 3 * it) << "rank " << rank;
      ASSERT_EQ(v[3], -it) << "rank " << rank;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Launches, BoardSequences,
                         ::testing::Values(Launch::kInitAll, Launch::kThreads, Launch::kProcesses),
                         [](const ::testing::TestParamInfo<Launch>& info) {
                           return std::string(launchName(info.param));
                         });

// A thread rank that aborts instead of joining (no pid to check in one process): the
// other fails at once through the board's failure word, naming it, not at the timeout.
TEST(BoardFaults, AbortedPeerFailsTheWaiterThreads) {
  ScopedEnv env({{"BRAID_TRANSPORT", "auto"}, {"BRAID_TIMEOUT_MS", "20000"}});
  run(Launch::kThreads, 2, [&](ncclComm_t& comm, int rank, int n) {
    ASSERT_TRUE(allReduceOk(comm, rank, n, 16));  // the board works first
    if (rank == 1) {
      usleep(100000);  // rank 0 is waiting by now
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      comm = nullptr;
      return;
    }
    float x = 1, y = 0;
    const auto t0 = std::chrono::steady_clock::now();
    const ncclResult_t r = ncclAllReduce(&x, &y, 1, ncclFloat32, ncclSum, comm, nullptr);
    const double took = secondsSince(t0);
    EXPECT_NE(r, ncclSuccess);
    EXPECT_LT(took, 5.0) << "waited " << took << " s for an aborted peer";
    EXPECT_TRUE(mentions(ncclGetLastError(comm), "rank 1"));
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    comm = nullptr;
  });
}

}  // namespace
}  // namespace mr
