// The DP x TP x PP mesh: rank order, the groups ncclCommSplit makes on 8 thread ranks,
// and the pipeline partition of layers.
#include <gtest/gtest.h>

#include <string>

#include "tests/training_parallel/ranks.h"
#include "training/dist/process_group.h"
#include "training/parallel/mesh.h"

namespace bt = braid::train;

namespace {

// ---- mesh -----------------------------------------------------------------------------------

TEST(Mesh, RankOrderTensorFastestPipelineSlowest) {
  const bt::MeshShape s{2, 2, 2};
  EXPECT_EQ(s.size(), 8);
  for (int r = 0; r < 8; ++r) EXPECT_EQ(bt::meshRank(s, bt::meshCoord(s, r)), r);
  const bt::MeshCoord c = bt::meshCoord(s, 6);  // (pp 1, dp 1, tp 0)
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.tp, 0);
  const bt::MeshShape odd{3, 1, 2};
  for (int r = 0; r < 6; ++r) EXPECT_EQ(bt::meshRank(odd, bt::meshCoord(odd, r)), r);
  EXPECT_EQ(s.describe(), "dp=2 x tp=2 x pp=2");
}

TEST(Mesh, StageLayersCoverTheModel) {
  for (int layers = 1; layers <= 9; ++layers)
    for (int P = 1; P <= layers; ++P) {
      int next = 0;
      for (int s = 0; s < P; ++s) {
        int f, l;
        bt::stageLayers(layers, P, s, &f, &l);
        EXPECT_EQ(f, next);
        EXPECT_GE(l, f);
        EXPECT_LE(l - f + 1, (layers + P - 1) / P);
        next = l + 1;
      }
      EXPECT_EQ(next, layers);
    }
}

TEST(Mesh, SplitsEightRanksIntoTwoByTwoByTwo) {
  const bt::MeshShape shape{2, 2, 2};
  tp_test::runRanks(8, [&](int rank, int, ncclComm_t world) {
    bt::ProcessGroup pg(world);
    bt::Mesh mesh(pg, shape);
    const bt::MeshCoord c = mesh.coord();
    EXPECT_EQ(bt::meshRank(shape, c), rank);
    struct {
      ncclComm_t comm;
      int coord;
    } axes[] = {{mesh.tp().comm(), c.tp}, {mesh.dp().comm(), c.dp}, {mesh.pp().comm(), c.pp}};
    // Sum the world ranks over each group: the members are exactly the ranks that
    // differ from this one along that axis only.
    const int stride[] = {1, shape.tp, shape.tp * shape.dp};
    for (int a = 0; a < 3; ++a) {
      int n = 0, r = -1;
      ASSERT_EQ(ncclCommCount(axes[a].comm, &n), ncclSuccess);
      ASSERT_EQ(ncclCommUserRank(axes[a].comm, &r), ncclSuccess);
      EXPECT_EQ(n, 2);
      EXPECT_EQ(r, axes[a].coord);
      double v = rank, sum = 0;
      ASSERT_EQ(ncclAllReduce(&v, &sum, 1, ncclFloat64, ncclSum, axes[a].comm, nullptr), ncclSuccess);
      const int base = rank - axes[a].coord * stride[a];
      EXPECT_EQ(sum, double(2 * base + stride[a])) << "axis " << a << " rank " << rank;
    }
    // The model-parallel group: the 4 ranks of this replica (same dp), rank pp*TP+tp.
    EXPECT_EQ(mesh.mp().size(), 4);
    EXPECT_EQ(mesh.mp().rank(), c.pp * shape.tp + c.tp);
    const double members = mesh.mp().allReduceScalar(rank);
    EXPECT_EQ(members, c.dp == 0 ? 0 + 1 + 4 + 5 : 2 + 3 + 6 + 7);
  });
}

TEST(Mesh, RejectsAShapeThatDoesNotMatchTheWorld) {
  tp_test::runRanks(2, [&](int, int, ncclComm_t world) {
    bt::ProcessGroup pg(world);
    try {
      bt::Mesh mesh(pg, bt::MeshShape{2, 2, 1});
      ADD_FAILURE() << "a 4-rank mesh on 2 ranks was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("needs 4 ranks"), std::string::npos) << e.what();
    }
    EXPECT_THROW(bt::Mesh(pg, bt::MeshShape{0, 2, 1}), std::invalid_argument);
  });
}

}  // namespace
