// The memory traffic of the plans, counted step by step as the CUDA executor moves bytes
// (every byte a step loads or stores, in a rank's own buffers, a peer's or a FIFO slot),
// against the least traffic each collective needs, the formulas behind the busbw
// ceilings of docs/performance.md ("Ceilings on one GPU"): with C the device's copy rate
// (bytes copied per second: each byte read once and written once) the ceilings follow
// from the total bytes read plus written by all n ranks:
//
//   all-reduce of S bytes       2S per rank      busbw <= C * 2(n-1)/n^2
//   all-gather, S = n blocks    (n+1)S/n         busbw <= C * 2(n-1)/(n(n+1))
//   reduce-scatter, S = n blocks (n+1)S/n        (the same)
//   all-to-all of S bytes       2S               busbw <= C * (n-1)/n^2
//
// The direct-access plans the CUDA executor takes between ranks of one GPU must move
// exactly that; the FIFO plans (ring, pairwise) are shown for comparison: staging makes
// them move about twice as much.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "algorithms/registry.h"
#include "src/core/tuner.h"

namespace braid {
namespace {

/// Bytes one rank's plan loads and stores, counting each step as the device
/// interpreter runs it (src/device/interp.h, interp_peers.h).
uint64_t traffic(const Plan& plan, int nranks, size_t ts, bool inPlace) {
  uint64_t t = 0;
  for (const Program& p : plan.programs)
    for (const Step& s : p.steps) {
      const uint64_t b = s.count() * ts;
      switch (s.kind) {
        case StepKind::kSend: t += 2 * b; break;                // src -> slot
        case StepKind::kRecv: t += 2 * b; break;                // slot -> dst
        case StepKind::kRecvReduceSend: t += 3 * b; break;      // slot + src -> slot
        case StepKind::kRecvReduceCopy: t += 3 * b; break;      // slot + src -> dst
        case StepKind::kRecvReduceCopySend: t += 4 * b; break;  // slot + src -> dst + slot
        case StepKind::kRecvCopySend: t += 3 * b; break;        // slot -> dst + slot
        case StepKind::kCopy: t += 2 * b; break;
        case StepKind::kPeerCopy: t += 2 * b; break;
        case StepKind::kPeerReduce:  // every rank's src, one dst or every rank's
          t += uint64_t(nranks) * b + (s.sendPeer == kAllPeers ? uint64_t(nranks) : 1) * b;
          break;
        case StepKind::kPeerPut:  // one load, a store per destination (not onto itself)
          t += b + (s.sendPeer == kAllPeers ? uint64_t(nranks - (inPlace ? 1 : 0)) : 1) * b;
          break;
        case StepKind::kSignal:
        case StepKind::kWait: break;
      }
    }
  return t;
}

struct Case {
  Coll coll;
  const char* algo;
  /// The least traffic per rank for S = nccl-tests' size (the larger buffer), n ranks.
  double (*least)(double S, int n);
};

double twoS(double S, int) { return 2 * S; }
double gatherLeast(double S, int n) { return (n + 1) * S / n; }

uint64_t countFor(Coll c, uint64_t S, int n, size_t ts) {
  const uint64_t elems = S / ts;
  // PlanArgs::count: per-rank block for all-gather, reduce-scatter and all-to-all.
  return c == Coll::kAllReduce ? elems : elems / uint64_t(n);
}

Plan build(const Algorithm* a, Coll coll, int n, int r, uint64_t count, size_t ts, bool inPlace,
           int programs) {
  PlanArgs args;
  args.coll = coll;
  args.nranks = n;
  args.rank = r;
  args.count = count;
  args.typeSize = ts;
  args.inPlace = inPlace;
  args.peerAccess = true;
  Plan p;
  EXPECT_TRUE(a->build(args, PlanParams{1 << 20, programs}, &p)) << a->name;
  return p;
}

TEST(Traffic, DirectPlansMoveTheLeastThereIs) {
  const Case cases[] = {
      {Coll::kAllReduce, "reduce_put", twoS},
      {Coll::kAllGather, "peer_put", gatherLeast},
      {Coll::kReduceScatter, "peer_read", gatherLeast},
      {Coll::kAllToAll, "peer_read", twoS},
  };
  const size_t ts = 4;
  for (const Case& c : cases) {
    const Algorithm* a = findAlgorithm(c.coll, c.algo);
    ASSERT_NE(a, nullptr) << c.algo;
    for (int n : {2, 3, 4, 8}) {
      const uint64_t S = uint64_t(n) * 3 * 1024 * 1024;  // divides into whole blocks
      const uint64_t count = countFor(c.coll, S, n, ts);
      for (int programs : {1, 16}) {
        for (int r = 0; r < n; ++r) {
          const Plan p = build(a, c.coll, n, r, count, ts, false, programs);
          EXPECT_EQ(double(traffic(p, n, ts, false)), c.least(double(S), n))
              << collName(c.coll) << "/" << c.algo << " n=" << n << " rank " << r
              << " programs " << programs;
        }
      }
    }
  }
}

TEST(Traffic, InPlaceDirectPlansMoveNoMore) {
  // In place an all-gather's own block is already there: less than out of place.
  const Algorithm* a = findAlgorithm(Coll::kAllGather, "peer_put");
  ASSERT_NE(a, nullptr);
  for (int n : {2, 4}) {
    const uint64_t S = uint64_t(n) << 20, count = S / 4 / uint64_t(n);
    const Plan p = build(a, Coll::kAllGather, n, 0, count, 4, true, 4);
    EXPECT_EQ(double(traffic(p, n, 4, true)), double(S)) << n;
  }
}

TEST(Traffic, FifoPlansStageAboutTwiceAsMuch) {
  // The ring through FIFOs, for the record (docs/performance.md quotes these ratios):
  // every byte written into a slot is read out again.
  const size_t ts = 4;
  for (int n : {2, 4, 8}) {
    const uint64_t S = uint64_t(n) << 22;
    const Algorithm* ring = findAlgorithm(Coll::kAllReduce, "ring");
    ASSERT_NE(ring, nullptr);
    PlanArgs args;
    args.coll = Coll::kAllReduce;
    args.nranks = n;
    args.count = S / ts;
    args.typeSize = ts;
    Plan p;
    ASSERT_TRUE(ring->build(args, PlanParams{1 << 20, 1}, &p));
    const double ratio = double(traffic(p, n, ts, false)) / (2.0 * double(S));
    std::printf("ring all-reduce, %d ranks: %.2fx the least traffic\n", n, ratio);
    EXPECT_GT(ratio, 1.4) << n;
  }
}

TEST(Traffic, TheTunerTakesTheLeastTrafficPlanForLargeMessages) {
  // What the CUDA executor asks for between thread ranks of one GPU: direct access,
  // BRAID_DEVICE_NCHANNELS programs; the cheapest prediction for 256 MiB must be the
  // plan that moves the least.
  const struct {
    Coll coll;
    const char* algo;
  } want[] = {{Coll::kAllReduce, "reduce_put"},
              {Coll::kAllGather, "peer_put"},
              {Coll::kReduceScatter, "peer_read"},
              {Coll::kAllToAll, "peer_read"}};
  for (const auto& w : want) {
    for (int n : {2, 4, 8}) {
      TuneInput in;
      in.args.coll = w.coll;
      in.args.nranks = n;
      in.args.typeSize = 4;
      in.args.count = countFor(w.coll, uint64_t(256) << 20, n, 4);
      in.args.peerAccess = true;
      in.directOnly = true;
      in.minChannels = in.maxChannels = 16;
      const std::vector<TuneChoice> ch = rankChoices(in);
      ASSERT_FALSE(ch.empty());
      EXPECT_STREQ(ch[0].algo->name, w.algo) << collName(w.coll) << " n=" << n;
    }
  }
}

}  // namespace
}  // namespace braid
