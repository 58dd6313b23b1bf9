// One soak operation: a random collective (or a send/recv ring) described by an OpSpec
// that every rank draws from the same seeded generator, run on this rank's buffers and
// checked element by element against a reference computed here.
//
// Inputs are small integers chosen per type and op so that every result is exact in
// every type (fp8 included): sums stay below the type's exact-integer range, products
// are powers of two up to 4, and Avg inputs sum to a multiple of nranks.
#pragma once
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "nccl.h"

namespace soak {

using Rng = std::mt19937_64;

/// Uniform in [lo, hi] from rng (modulo: the same sequence on every rank by design).
inline uint64_t uniform(Rng& rng, uint64_t lo, uint64_t hi) { return lo + rng() % (hi - lo + 1); }

enum class Coll {
  kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter,
  kAllToAll, kGather, kScatter, kSendRecv, kCount
};
const char* collName(Coll c);

constexpr int kPreMulSum = 5;  ///< OpSpec::op value for PreMulSum (scalar 2)

struct OpSpec {
  Coll coll = Coll::kAllReduce;
  size_t count = 0;   ///< elements per rank block (NCCL's count / sendcount / recvcount)
  ncclDataType_t type = ncclFloat32;
  int op = 0;         ///< ncclSum..ncclAvg, or kPreMulSum
  int root = 0;
  bool inPlace = false;
  int shift = 0;      ///< send/recv ring: rank r sends to r + shift
  uint32_t salt = 0;  ///< varies the input pattern per op
};

struct Limits {
  size_t maxBlockBytes = 4u << 20;  ///< largest per-rank block
  bool preMulSum = true;            ///< draw PreMulSum (not inside groups)
};

/// Where this thread's OpRuns count the bytes of their live buffers (nullptr: nowhere):
/// the sampler subtracts them from RSS so that it sees the library's memory.
void setLiveBytesCounter(std::atomic<int64_t>* counter);

/// Draws one op for a communicator of n ranks.
OpSpec randomOp(Rng& rng, int n, const Limits& lim);
/// "allreduce float32 sum count=7 root=0 in-place" and so on.
std::string describe(const OpSpec& s);

/// One rank's buffers for one op: prepare, enqueue (inside or outside a group), check.
class OpRun {
 public:
  OpRun(const OpSpec& s, int rank, int nranks);
  ~OpRun();
  OpRun(const OpRun&) = delete;
  OpRun& operator=(const OpRun&) = delete;
  /// Changes one output element (or a guard byte): the check must then report it.
  void corrupt();
  /// Creates the PreMulSum op if needed, then issues the NCCL call(s).
  ncclResult_t enqueue(ncclComm_t comm);
  /// Destroys a created reduction op (after the op completed).
  ncclResult_t release(ncclComm_t comm);
  /// Wrong elements (and broken guard bytes, as one each); prints the first few.
  size_t check(const std::string& where) const;
  const OpSpec& spec() const { return s_; }

 private:
  struct Buf {
    std::vector<unsigned char> mem;
    size_t bytes = 0;
    void resize(size_t b);
    unsigned char* data() { return mem.data() + kGuard; }
    const unsigned char* data() const { return mem.data() + kGuard; }
    bool guardsIntact() const;
  };
  static constexpr size_t kGuard = 64;
  static constexpr unsigned char kGuardByte = 0xa5;

  double input(int q, size_t j) const;
  double expected(size_t j) const;

  OpSpec s_;
  int rank_, n_;
  size_t sendElems_ = 0, recvElems_ = 0;
  Buf a_, b_;  ///< send and receive buffers (in place: only a_)
  unsigned char* send_ = nullptr;
  unsigned char* recv_ = nullptr;
  ncclRedOp_t redOp_ = ncclSum;
  bool createdOp_ = false;
  std::atomic<int64_t>* live_ = nullptr;
  int64_t liveBytes_ = 0;
};

}  // namespace soak
