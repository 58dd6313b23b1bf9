// DDP and ZeRO mechanics on the toy model: the bucket plan, communication overlapping
// backward (from timestamps), no_sync accumulation, the rank-0 broadcast, memory per
// rank falling ~1/N, and ZeRO-3's just-in-time gathering with prefetch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>

#include "tests/training_dist/strategies.h"
#include "tests/training_dist/toy.h"

namespace braid {
namespace train {
namespace {

void expectNoErrors(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(Buckets, ReverseOrderFirstSmallAtParamBoundaries) {
  toy::Config c;
  c.depth = 4;
  toy::Model<float> m(c);  // embed 128, 4 x (64 + 8), head 128
  const auto b = planBuckets(m.store, 100, 150);
  ASSERT_GE(b.size(), 3u);
  // Covers the flat buffer exactly, from the end backwards, without gaps.
  EXPECT_EQ(b.front().end, m.store.flatSize());
  EXPECT_EQ(b.back().begin, 0);
  for (size_t i = 1; i < b.size(); ++i) EXPECT_EQ(b[i].end, b[i - 1].begin);
  // First bucket: the head alone (128 <= 100 is false, but one param always fits).
  EXPECT_EQ(b.front().firstParam, int(m.store.size()) - 1);
  for (const Bucket& k : b) {
    EXPECT_EQ(k.begin, m.store[size_t(k.firstParam)].offset);  // parameter boundaries
    EXPECT_TRUE(k.elements() <= 150 || k.firstParam == k.lastParam);
  }
  // Byte defaults: one bucket of everything for a tiny model.
  EXPECT_EQ(planBuckets(m.store, (1 << 20) / 4, (25 << 20) / 4).size(), 1u);
}

TEST(Ddp, CommunicationOverlapsBackward) {
  toy::Config c;
  c.depth = 5;
  c.width = 32;              // a dense layer: 1024 + 32 elements
  c.backwardSleepMs = 10;    // simulated compute per layer (margin for loaded / sanitized runs)
  // Measures one run; returns what was wrong with its timeline ("" if nothing).
  auto measure = [&]() -> std::string {
    CommStats stats;
    std::mutex mu;
    expectNoErrors(toy::runRanks(2, [&](int r, ProcessGroup& pg) {
      toy::Model<float> m(c);
      DdpConfig dc;
      dc.firstBucketElems = 600;  // the head (512) alone, then ~one dense layer per bucket
      dc.bucketCapElems = 1100;
      Ddp<float> ddp(pg, m.store, toy::testAdam(), dc);
      EXPECT_GE(ddp.buckets().size(), 5u);
      for (int s = 0; s < 2; ++s) toy::step(m, ddp, pg, s);
      if (r == 0) {
        std::lock_guard<std::mutex> lock(mu);
        stats = ddp.commStats();
      }
    }));
    if (stats.ops.size() < 5) return "only " + std::to_string(stats.ops.size()) + " buckets";
    std::string bad;
    const double end = stats.backwardEndAt;
    for (size_t b = 0; b + 1 < stats.ops.size(); ++b) {
      const CommTiming& t = stats.ops[b];
      if (!(t.queuedAt > 0)) bad += t.what + " never queued; ";
      if (!(t.queuedAt < end)) bad += t.what + " queued after backward ended; ";
      if (!(t.startedAt < end)) bad += t.what + " started after backward ended; ";
      if (!(t.startedAt <= t.finishedAt)) bad += t.what + " finished before it started; ";
    }
    // The last bucket (embedding) can only start once backward is over.
    if (stats.ops.back().queuedAt < stats.ops[stats.ops.size() - 2].queuedAt)
      bad += "the last bucket was queued before the one before it; ";
    if (!(stats.hiddenShare() > 0.5))
      bad += "hidden " + std::to_string(stats.hiddenSeconds()) + " s of " +
             std::to_string(stats.commSeconds()) + " s; ";
    return bad;
  };
  // A timeline on a shared, loaded machine can be disturbed by the scheduler: the
  // overlap must show in one of three runs (a missing overlap fails all three).
  std::string bad;
  for (int attempt = 0; attempt < 3; ++attempt) {
    bad = measure();
    if (bad.empty()) break;
  }
  EXPECT_EQ(bad, "");
}

// Two halves of each step's batch, the first under no_sync, equal one step on the whole
// batch in one process.
TEST(Ddp, NoSyncAccumulationEqualsBiggerBatch) {
  toy::Config c;
  const int kSteps = 5;
  toy::Reference<float> ref(c, toy::testAdam());
  std::vector<double> refLoss;
  for (int s = 0; s < kSteps; ++s) refLoss.push_back(ref.step(s));
  std::vector<float> params;
  std::vector<double> losses;
  std::mutex mu;
  expectNoErrors(toy::runRanks(2, [&](int r, ProcessGroup& pg) {
    toy::Model<float> m(c);
    DdpConfig dc;
    dc.firstBucketElems = 40;
    dc.bucketCapElems = 100;
    Ddp<float> ddp(pg, m.store, toy::testAdam(), dc);
    const int L = int(m.layers.size()), d = pg.size();
    const int64_t per = c.batch / d, half = per / 2;
    for (int s = 0; s < kSteps; ++s) {
      const toy::Batch b = toy::globalBatch(c, s);
      ddp.beginStep();
      double local = 0, noSyncEnded = 0;
      for (int part = 0; part < 2; ++part) {
        std::unique_ptr<Ddp<float>::NoSync> scope;
        if (part == 0) scope = std::make_unique<Ddp<float>::NoSync>(ddp);
        const int64_t first = r * per + part * half;
        Micro mb{b.tokens.data() + first * c.seq, b.targets.data() + first * c.seq, half, c.seq};
        std::vector<Tensor<float>> acts(static_cast<size_t>(L) + 1);
        std::vector<std::unique_ptr<Saved>> saved(static_cast<size_t>(L));
        for (int l = 0; l < L; ++l) saved[size_t(l)] = m.layers[size_t(l)]->forward(mb, acts[size_t(l)], acts[size_t(l) + 1]);
        local += acts[size_t(L)][0];
        Tensor<float> dy(Shape{1});
        dy[0] = 1.0f / float(2 * d);
        for (int l = L - 1; l >= 0; --l) {
          Tensor<float> dx;
          m.layers[size_t(l)]->backward(mb, *saved[size_t(l)], dy, l > 0 ? &dx : nullptr);
          ddp.postBackward(l, true);  // "last" backward, but no_sync holds the first one
          dy = std::move(dx);
        }
        if (part == 0) noSyncEnded = now();
      }
      ddp.finishStep();
      for (const CommTiming& t : ddp.commStats().ops)
        EXPECT_GT(t.queuedAt, noSyncEnded) << t.what << " communicated under no_sync";
      const double loss = pg.allReduceScalar(local / 2) / d;
      if (r == 0) losses.push_back(loss);
    }
    if (r == 0) {
      std::lock_guard<std::mutex> lock(mu);
      params.assign(m.store.flatValues(), m.store.flatValues() + m.store.flatSize());
    }
  }));
  ASSERT_EQ(losses.size(), size_t(kSteps));
  for (int s = 0; s < kSteps; ++s) EXPECT_NEAR(losses[size_t(s)], refLoss[size_t(s)], 1e-5 * refLoss[size_t(s)]);
  ASSERT_EQ(params.size(), size_t(ref.model.store.flatSize()));
  for (size_t i = 0; i < params.size(); ++i) {
    const float want = ref.model.store.flatValues()[i];
    ASSERT_NEAR(params[i], want, 1e-5 * std::fabs(want) + 1e-6) << "param " << i;
  }
}

class Broadcast : public ::testing::TestWithParam<std::string> {};

TEST_P(Broadcast, FixesDivergentInitialParams) {
  const std::string kind = GetParam();
  expectNoErrors(toy::runRanks(3, [&](int r, ProcessGroup& pg) {
    toy::Config c;
    toy::Model<float> m(c);
    for (int64_t i = 0; i < m.store.flatSize(); ++i) m.store.flatValues()[i] += 0.5f * float(r);
    std::vector<float> rank0(m.store.flatValues(), m.store.flatValues() + m.store.flatSize());
    pg.broadcast(rank0.data(), rank0.size(), 0);
    auto dp = toy::makeStrategy<float>(kind, pg, m.store, toy::testAdam());
    const auto now = toy::fullParams(*dp, m.store);
    ASSERT_EQ(now.size(), rank0.size());
    for (size_t i = 0; i < now.size(); ++i) ASSERT_EQ(now[i], rank0[i]) << "rank " << r << " param " << i;
  }));
}

INSTANTIATE_TEST_SUITE_P(Strategies, Broadcast, ::testing::Values("ddp", "zero1", "zero2"));

TEST(Broadcast, WithoutItParamsStayDivergent) {  // the check above can fail
  expectNoErrors(toy::runRanks(2, [&](int r, ProcessGroup& pg) {
    toy::Model<float> m(toy::Config{});
    m.store.flatValues()[0] += float(r);
    DdpConfig dc;
    dc.broadcastParams = false;
    Ddp<float> ddp(pg, m.store, toy::testAdam(), dc);
    float v = m.store.flatValues()[0], mx = v;
    pg.allReduce(&mx, 1, ReduceOp::kMax);
    if (r == 0) {
      EXPECT_NE(v, mx);
    }
  }));
}

TEST(Memory, StateBytesFallOneOverN) {
  const int n = 4;
  std::mutex mu;
  std::map<std::string, StateBytes> got;
  int64_t peak = 0;
  expectNoErrors(toy::runRanks(n, [&](int r, ProcessGroup& pg) {
    toy::Config c;
    c.depth = 6;
    for (std::string kind : {"ddp", "zero1", "zero2", "zero3"}) {
      toy::Model<float> m(c);
      auto dp = toy::makeStrategy<float>(kind, pg, m.store, toy::testAdam());
      toy::step(m, *dp, pg, 0);
      if (r == 1) {
        std::lock_guard<std::mutex> lock(mu);
        got[kind] = dp->stateBytes();
        if (kind == "zero3") peak = dynamic_cast<Zero<float>*>(dp.get())->peakGatheredBytes();
      }
    }
  }));
  const StateBytes ddp = got["ddp"];
  for (const auto& kv : got)
    std::printf("[ memory   ] dp=%d %-5s params %6lld grads %6lld optimizer %6lld buffers %6lld bytes/rank\n", n,
                kv.first.c_str(), (long long)kv.second.params, (long long)kv.second.grads,
                (long long)kv.second.optimizer, (long long)kv.second.buffers);
  auto ratio = [](int64_t a, int64_t b) { return double(a) / double(b); };
  const int64_t full = ddp.params;
  EXPECT_EQ(ddp.optimizer, 2 * full);
  EXPECT_NEAR(ratio(got["zero1"].optimizer, ddp.optimizer), 1.0 / n, 0.02);
  EXPECT_EQ(got["zero1"].params, full);
  EXPECT_NEAR(ratio(got["zero2"].grads, ddp.grads), 1.0 / n, 0.02);
  EXPECT_NEAR(ratio(got["zero2"].optimizer, ddp.optimizer), 1.0 / n, 0.02);
  const StateBytes z3 = got["zero3"];
  const int64_t sharded = z3.params + z3.grads + z3.optimizer;
  EXPECT_NEAR(ratio(sharded, ddp.params + ddp.grads + ddp.optimizer), 1.0 / n, 0.03)
      << "zero3 " << sharded << " bytes vs ddp " << ddp.total();
  // Gathered units never amount to the whole model at once (8 units here).
  EXPECT_GT(peak, 0);
  EXPECT_LT(peak, full);
}

// The heap bytes really held for the model state (capacity of the ParamStore's flat
// buffers after ZeRO released them, plus every buffer the strategy owns), measured
// after a step, fall like the report: not just StateBytes' formula.
TEST(Memory, HeldHeapBytesFallOneOverN) {
  const int n = 4;
  std::mutex mu;
  std::map<std::string, int64_t> held, storeHeld;
  std::map<std::string, StateBytes> rep;
  int64_t flatBytes = 0;
  expectNoErrors(toy::runRanks(n, [&](int r, ProcessGroup& pg) {
    toy::Config c;
    c.depth = 6;
    for (std::string kind : {"ddp", "zero1", "zero2", "zero3"}) {
      toy::Model<float> m(c);
      const int64_t before = m.store.heldBytes();
      auto dp = toy::makeStrategy<float>(kind, pg, m.store, toy::testAdam());
      for (int s = 0; s < 2; ++s) toy::step(m, *dp, pg, s);
      if (r == 1) {
        std::lock_guard<std::mutex> lock(mu);
        flatBytes = before / 2;  // values + grads before any release
        held[kind] = dp->heldBytes();
        storeHeld[kind] = m.store.heldBytes();
        rep[kind] = dp->stateBytes();
      }
    }
  }));
  ASSERT_EQ(held.size(), 4u);
  for (const auto& kv : held)
    std::printf("[ memory   ] dp=%d %-5s heap held %7lld bytes/rank (ParamStore %6lld)\n", n,
                kv.first.c_str(), (long long)kv.second, (long long)storeHeld[kv.first]);
  const double F = double(flatBytes);  // one full copy of the parameters, in bytes
  EXPECT_EQ(storeHeld["ddp"], 2 * flatBytes);
  EXPECT_EQ(storeHeld["zero1"], 2 * flatBytes);
  EXPECT_EQ(storeHeld["zero2"], flatBytes) << "ZeRO-2 must release the flat gradients";
  EXPECT_EQ(storeHeld["zero3"], 0) << "ZeRO-3 must release the flat values and gradients";
  // ddp: values + grads + 2 moments = 4F. zero1: 2F + 2F/n. zero2: F + 3F/n. zero3: 4F/n
  // (plus the padding of each unit to a multiple of n).
  EXPECT_NEAR(held["ddp"] / F, 4.0, 0.01);
  EXPECT_NEAR(held["zero1"] / F, 2.0 + 2.0 / n, 0.05);
  EXPECT_NEAR(held["zero2"] / F, 1.0 + 3.0 / n, 0.05);
  EXPECT_NEAR(double(held["zero3"]) / double(held["ddp"]), 1.0 / n, 0.02);
  // The measurement agrees with the report's steady state (transient buffers freed).
  for (const auto& kv : rep) {
    const StateBytes& b = kv.second;
    EXPECT_NEAR(double(held[kv.first]), double(b.params + b.grads + b.optimizer), 0.01 * F) << kv.first;
  }
}

TEST(Zero3, ParamsGatheredJustInTimeWithPrefetch) {
  for (bool prefetch : {true, false}) {
    SCOPED_TRACE(prefetch ? "prefetch" : "no prefetch");
    expectNoErrors(toy::runRanks(2, [&](int r, ProcessGroup& pg) {
      toy::Config c;
      toy::Model<float> m(c);
      ZeroConfig zc;
      zc.stage = 3;
      zc.prefetch = prefetch;
      Zero<float> z(pg, m.store, toy::testAdam(), zc);
      for (size_t i = 0; i < m.store.size(); ++i) {
        EXPECT_EQ(m.store[i].w, nullptr) << m.store[i].name << " not freed after construction";
        EXPECT_EQ(m.store[i].g, nullptr);
      }
      const int L = int(m.layers.size());
      const toy::Batch b = toy::globalBatch(c, 0);
      const int64_t per = c.batch / 2;
      Micro mb{b.tokens.data() + r * per * c.seq, b.targets.data() + r * per * c.seq, per, c.seq};
      std::vector<double> preF(static_cast<size_t>(L)), preB(static_cast<size_t>(L));
      std::vector<Tensor<float>> acts(static_cast<size_t>(L) + 1);
      std::vector<std::unique_ptr<Saved>> saved(static_cast<size_t>(L));
      z.beginStep();
      for (int l = 0; l < L; ++l) {
        preF[size_t(l)] = now();
        z.preForward(l);
        for (Param<float>* p : m.layers[size_t(l)]->params()) EXPECT_NE(p->w, nullptr);
        if (l + 2 < L) {
          for (Param<float>* p : m.layers[size_t(l + 2)]->params()) EXPECT_EQ(p->w, nullptr);
        }
        saved[size_t(l)] = m.layers[size_t(l)]->forward(mb, acts[size_t(l)], acts[size_t(l) + 1]);
        z.postForward(l);
        for (Param<float>* p : m.layers[size_t(l)]->params()) EXPECT_EQ(p->w, nullptr) << "not resharded";
      }
      Tensor<float> dy(Shape{1});
      dy[0] = 0.5f;
      for (int l = L - 1; l >= 0; --l) {
        Tensor<float> dx;
        preB[size_t(l)] = now();
        z.preBackward(l);
        for (Param<float>* p : m.layers[size_t(l)]->params()) EXPECT_NE(p->g, nullptr);
        m.layers[size_t(l)]->backward(mb, *saved[size_t(l)], dy, l > 0 ? &dx : nullptr);
        z.postBackward(l, true);
        for (Param<float>* p : m.layers[size_t(l)]->params()) EXPECT_EQ(p->w, nullptr);
        dy = std::move(dx);
      }
      z.finishStep();
      for (size_t i = 0; i < m.store.size(); ++i) EXPECT_EQ(m.store[i].w, nullptr) << "after finishStep";
      // Each layer gathered twice (forward, backward) in that order; with prefetch, the
      // gather was queued before the layer's own hook (during its neighbour's).
      std::vector<std::vector<double>> queued(static_cast<size_t>(L));
      for (const CommTiming& t : z.commStats().ops)
        for (int l = 0; l < L; ++l) {
          if (t.what == "gather layer " + std::to_string(l)) queued[size_t(l)].push_back(t.queuedAt);
        }
      for (int l = 0; l < L; ++l) {
        ASSERT_EQ(queued[size_t(l)].size(), 2u) << "layer " << l;
        if (l > 0) {
          EXPECT_EQ(queued[size_t(l)][0] < preF[size_t(l)], prefetch) << "forward gather of " << l;
        }
        if (l < L - 1) {
          EXPECT_EQ(queued[size_t(l)][1] < preB[size_t(l)], prefetch) << "backward gather of " << l;
        }
      }
    }));
  }
}

// reshardAfterForward = false: a layer's gathered parameters stay from its forward to
// its backward (no second all-gather), and are freed after its backward.
TEST(Zero3, KeepsParamsFromForwardToBackwardWithoutReshard) {
  expectNoErrors(toy::runRanks(2, [&](int, ProcessGroup& pg) {
    toy::Config c;
    toy::Model<float> m(c);
    ZeroConfig zc;
    zc.stage = 3;
    zc.reshardAfterForward = false;
    Zero<float> z(pg, m.store, toy::testAdam(), zc);
    const int L = int(m.layers.size());
    int afterForward = 0;
    toy::step(m, z, pg, 0, nullptr, [&] {
      for (size_t i = 0; i < m.store.size(); ++i) afterForward += m.store[i].w != nullptr;
    });
    // Every layer's backward ran and freed it again; nothing gathered after the step.
    EXPECT_EQ(afterForward, 0);
    for (size_t i = 0; i < m.store.size(); ++i) EXPECT_EQ(m.store[i].w, nullptr);
    int gathers = 0;
    for (const CommTiming& t : z.commStats().ops) gathers += t.what.rfind("gather layer", 0) == 0;
    EXPECT_EQ(gathers, L) << "one gather per layer per step without resharding";
    // Mid-forward: the layer just run stays gathered.
    z.beginStep();
    const toy::Batch b = toy::globalBatch(c, 1);
    Micro mb{b.tokens.data(), b.targets.data(), c.batch / 2, c.seq};
    Tensor<float> x, y;
    z.preForward(0);
    auto saved = m.layers[0]->forward(mb, x, y);
    z.postForward(0);
    for (Param<float>* p : m.layers[0]->params()) EXPECT_NE(p->w, nullptr) << "resharded anyway";
    z.preBackward(0);
    m.layers[0]->backward(mb, *saved, Tensor<float>(y), nullptr);
    z.postBackward(0, true);
    for (Param<float>* p : m.layers[0]->params()) EXPECT_EQ(p->w, nullptr) << "not freed after backward";
    z.finishStep();
  }));
}

}  // namespace
}  // namespace train
}  // namespace braid
