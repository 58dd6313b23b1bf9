// Tensor-parallel equivalence: on 2 thread ranks (ncclCommInitRank per thread, one id),
// every TP module and a whole tiny GPT give the same outputs, loss and (sliced)
// gradients as one process, within 1e-5 (float) and 1e-10 (double) relative.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/training_core/helpers.h"
#include "training/dist/nccl_tp_group.h"
#include "training/model/gpt.h"
#include "training/nn/attention.h"
#include "training/nn/cross_entropy.h"
#include "training/nn/embedding.h"
#include "training/nn/linear.h"
#include "training/nn/tp_shard.h"

namespace braid {
namespace train {
namespace {

using testing_core::fillNormal;
using testing_core::forwardBackward;
using testing_core::maxRelDiff;
using testing_core::runRanks;

constexpr int kTp = 2;

template <class T>
double tolerance() {
  return sizeof(T) == sizeof(float) ? 1e-5 : 1e-10;
}

template <class T>
class TrainTp : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(TrainTp, Types);

/// Full gradients of a store, by parameter name.
template <class T>
std::map<std::string, std::vector<T>> gradsByName(ParamStore<T>& store) {
  std::map<std::string, std::vector<T>> out;
  for (size_t i = 0; i < store.size(); ++i)
    out[store[i].name] = std::vector<T>(store[i].g, store[i].g + store[i].numel());
  return out;
}

/// Every parameter of a TP rank's store equals its slice of the reference: values
/// (the initialisation is layout-independent) and gradients.
template <class T>
void expectSlices(ParamStore<T>& store, ParamStore<T>& ref,
                  const std::map<std::string, std::vector<T>>& refGrads, int rank) {
  ASSERT_EQ(store.size(), ref.size());
  for (size_t i = 0; i < store.size(); ++i) {
    Param<T>& p = store[i];
    Param<T>* full = ref.find(p.name);
    ASSERT_NE(full, nullptr) << p.name;
    ASSERT_EQ(p.fullShape, full->shape) << p.name;
    std::vector<T> want(size_t(p.numel()));
    tpSliceOf(p.fullShape, p.tp, full->w, want.data());
    EXPECT_EQ(maxRelDiff(p.w, want.data(), p.numel()), 0.0) << "values of " << p.name;
    tpSliceOf(p.fullShape, p.tp, refGrads.at(p.name).data(), want.data());
    EXPECT_LE(maxRelDiff(p.g, want.data(), p.numel()), tolerance<T>())
        << "gradient of " << p.name << " on TP rank " << rank;
  }
}

TYPED_TEST(TrainTp, LinearColumnAndRowParallel) {
  using T = TypeParam;
  const int64_t n = 6, in = 8, hidden = 12, out = 4;
  // Reference: x -> column(in->hidden) -> row(hidden->out) = y; objective sum(y * r).
  auto build = [&](ParamStore<T>& store, TpGroup<T>* tp) {
    LinearOptions col, row;
    col.kind = LinearKind::kColumnParallel;
    row.kind = LinearKind::kRowParallel;
    auto a = std::make_unique<Linear<T>>(store, "a", in, hidden, col, tp, 0);
    auto b = std::make_unique<Linear<T>>(store, "b", hidden, out, row, tp, 0);
    store.allocate(5, 1);
    for (size_t i = 0; i < store.size(); ++i)  // non-zero biases
      if (store[i].name.find("bias") != std::string::npos) {
        std::vector<double> full(size_t(numelOf(store[i].fullShape)));
        fillNormal(full.data(), int64_t(full.size()), 77 + i, 0.1);
        tpSliceOf(store[i].fullShape, store[i].tp, full.data(), store[i].w);
      }
    return std::make_pair(std::move(a), std::move(b));
  };
  std::vector<T> x(size_t(n * in)), r(size_t(n * out));
  fillNormal(x.data(), n * in, 1);
  fillNormal(r.data(), n * out, 2);
  auto run = [&](std::pair<std::unique_ptr<Linear<T>>, std::unique_ptr<Linear<T>>>& ab,
                 std::vector<T>& y, std::vector<T>& dx) {
    std::vector<T> h(size_t(n * ab.first->outLocal())), dh(h.size());
    y.assign(size_t(n * out), T(0));
    dx.assign(size_t(n * in), T(0));
    ab.first->forward(x.data(), h.data(), n);
    ab.second->forward(h.data(), y.data(), n);
    ab.second->backward(h.data(), r.data(), dh.data(), n);
    ab.first->backward(x.data(), dh.data(), dx.data(), n);
  };
  ParamStore<T> ref;
  auto refAb = build(ref, nullptr);
  std::vector<T> yRef, dxRef;
  run(refAb, yRef, dxRef);
  auto refGrads = gradsByName(ref);
  runRanks(kTp, [&](int rank, ncclComm_t comm) {
    NcclTpGroup<T> tp(comm);
    ParamStore<T> store;
    auto ab = build(store, &tp);
    EXPECT_EQ(ab.first->outLocal(), hidden / kTp);
    EXPECT_EQ(ab.second->inLocal(), hidden / kTp);
    std::vector<T> y, dx;
    run(ab, y, dx);
    EXPECT_LE(maxRelDiff(y.data(), yRef.data(), n * out), tolerance<T>()) << "y";
    EXPECT_LE(maxRelDiff(dx.data(), dxRef.data(), n * in), tolerance<T>()) << "dx";
    expectSlices(store, ref, refGrads, rank);
  });
}

TYPED_TEST(TrainTp, VocabParallelEmbeddingAndCrossEntropy) {
  using T = TypeParam;
  const int64_t V = 10, C = 4, n = 7;
  const std::vector<int32_t> tokens{0, 9, 4, 5, 5, 1, 8};
  const std::vector<int32_t> targets{3, 4, 5, 9, 0, 2, 6};
  std::vector<T> r(size_t(n * C)), logits(size_t(n * V));
  fillNormal(r.data(), n * C, 3);
  fillNormal(logits.data(), n * V, 4, 2.0);
  ParamStore<T> ref;
  Embedding<T> refEmb(ref, "wte", V, C, true, nullptr, 0);
  ref.allocate(9, 1);
  std::vector<T> yRef(size_t(n * C)), probsRef(logits.size()), lossesRef(static_cast<size_t>(n)),
      dRef(logits.size());
  refEmb.forward(tokens.data(), n, yRef.data());
  refEmb.backward(tokens.data(), n, r.data());
  const T lossRef = crossEntropyForward<T>(logits.data(), targets.data(), n, V, 0, nullptr,
                                           probsRef.data(), lossesRef.data());
  crossEntropyBackward<T>(probsRef.data(), targets.data(), n, V, 0, T(0.5), dRef.data());
  auto refGrads = gradsByName(ref);
  runRanks(kTp, [&](int rank, ncclComm_t comm) {
    NcclTpGroup<T> tp(comm);
    ParamStore<T> store;
    Embedding<T> emb(store, "wte", V, C, true, &tp, 0);
    store.allocate(9, 1);
    EXPECT_EQ(emb.vocabLocal(), V / kTp);
    EXPECT_EQ(emb.vocabStart(), rank * V / kTp);
    std::vector<T> y(size_t(n * C));
    emb.forward(tokens.data(), n, y.data());
    emb.backward(tokens.data(), n, r.data());
    EXPECT_LE(maxRelDiff(y.data(), yRef.data(), n * C), tolerance<T>());
    expectSlices(store, ref, refGrads, rank);
    // Cross-entropy on this rank's vocab slice of the same logits.
    const int64_t Vl = V / kTp, start = rank * Vl;
    std::vector<T> local(size_t(n * Vl)), probs(local.size()), losses(static_cast<size_t>(n)), d(local.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < Vl; ++j)
        local[size_t(i * Vl + j)] = logits[size_t(i * V + start + j)];
    const T loss = crossEntropyForward<T>(local.data(), targets.data(), n, Vl, start, &tp,
                                          probs.data(), losses.data());
    EXPECT_LE(std::fabs(double(loss - lossRef)), tolerance<T>() * std::fabs(double(lossRef)));
    EXPECT_LE(maxRelDiff(losses.data(), lossesRef.data(), n), tolerance<T>());
    crossEntropyBackward<T>(probs.data(), targets.data(), n, Vl, start, T(0.5), d.data());
    std::vector<T> want(local.size());
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < Vl; ++j) want[size_t(i * Vl + j)] = dRef[size_t(i * V + start + j)];
    EXPECT_LE(maxRelDiff(d.data(), want.data(), n * Vl), tolerance<T>()) << "dlogits";
  });
}

TYPED_TEST(TrainTp, AttentionHeadsSplit) {
  using T = TypeParam;
  const int64_t B = 2, Tn = 5, C = 16, H = 4;
  std::vector<T> x(size_t(B * Tn * C)), r(x.size());
  fillNormal(x.data(), B * Tn * C, 5);
  fillNormal(r.data(), B * Tn * C, 6);
  auto run = [&](CausalSelfAttention<T>& attn, std::vector<T>& y, std::vector<T>& dx) {
    typename CausalSelfAttention<T>::Cache cache;
    y.assign(x.size(), T(0));
    dx.assign(x.size(), T(0));
    attn.forward(x.data(), y.data(), B, Tn, cache);
    attn.backward(x.data(), cache, r.data(), dx.data(), B, Tn);
  };
  ParamStore<T> ref;
  CausalSelfAttention<T> refAttn(ref, "attn", C, H, nullptr, 0);
  ref.allocate(11, 2);
  std::vector<T> yRef, dxRef;
  run(refAttn, yRef, dxRef);
  auto refGrads = gradsByName(ref);
  runRanks(kTp, [&](int rank, ncclComm_t comm) {
    NcclTpGroup<T> tp(comm);
    ParamStore<T> store;
    CausalSelfAttention<T> attn(store, "attn", C, H, &tp, 0);
    store.allocate(11, 2);
    EXPECT_EQ(attn.localHeads(), H / kTp);
    std::vector<T> y, dx;
    run(attn, y, dx);
    EXPECT_LE(maxRelDiff(y.data(), yRef.data(), B * Tn * C), tolerance<T>()) << "y";
    EXPECT_LE(maxRelDiff(dx.data(), dxRef.data(), B * Tn * C), tolerance<T>()) << "dx";
    expectSlices(store, ref, refGrads, rank);
  });
}

TYPED_TEST(TrainTp, WholeTinyGpt) {
  using T = TypeParam;
  GptConfig c;
  c.vocab = 12;
  c.context = 8;
  c.width = 16;
  c.layers = 2;
  c.heads = 4;
  const int64_t B = 2, Tn = 6;
  std::vector<int32_t> tokens(size_t(B * Tn)), targets(tokens.size());
  Rng rng(12);
  for (auto& t : tokens) t = int32_t(rng.below(uint64_t(c.vocab)));
  for (auto& t : targets) t = int32_t(rng.below(uint64_t(c.vocab)));
  const Micro m{tokens.data(), targets.data(), B, Tn};
  ParamStore<T> ref;
  GptStage<T> refGpt = buildGptStage<T>(c, 0, c.numLayers() - 1, ref, nullptr);
  ref.allocate(2024, int(c.layers));
  const T lossRef = forwardBackward(refGpt, m, T(0.75));
  auto refGrads = gradsByName(ref);
  runRanks(kTp, [&](int rank, ncclComm_t comm) {
    NcclTpGroup<T> tp(comm);
    ParamStore<T> store;
    GptStage<T> gpt = buildGptStage<T>(c, 0, c.numLayers() - 1, store, &tp);
    store.allocate(2024, int(c.layers));
    EXPECT_LT(store.flatSize(), ref.flatSize());
    const T loss = forwardBackward(gpt, m, T(0.75));
    EXPECT_LE(std::fabs(double(loss - lossRef)), tolerance<T>() * double(lossRef))
        << "rank " << rank << " loss " << loss << " vs " << lossRef;
    expectSlices(store, ref, refGrads, rank);
  });
}

TEST(TrainTpGroup, CollectivesAndErrors) {
  EXPECT_THROW(NcclTpGroup<float>(nullptr), std::runtime_error);
  runRanks(kTp, [&](int rank, ncclComm_t comm) {
    NcclTpGroup<double> tp(comm);
    EXPECT_EQ(tp.rank(), rank);
    EXPECT_EQ(tp.size(), kTp);
    double v[2] = {double(rank + 1), double(10 - rank)};
    tp.allReduceSum(v, 2);
    EXPECT_EQ(v[0], 3.0);
    EXPECT_EQ(v[1], 19.0);
    double w[1] = {double(rank * 5 - 2)};
    tp.allReduceMax(w, 1);
    EXPECT_EQ(w[0], 3.0);
    double in[2] = {double(rank), double(rank) + 0.5}, out[4];
    tp.allGather(in, out, 2);
    EXPECT_EQ(out[0], 0.0);
    EXPECT_EQ(out[1], 0.5);
    EXPECT_EQ(out[2], 1.0);
    EXPECT_EQ(out[3], 1.5);
    // A NCCL error (a null buffer) becomes an exception naming the call.
    try {
      tp.allReduceSum(nullptr, 4);
      ADD_FAILURE() << "no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("ncclAllReduce"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace train
}  // namespace braid
