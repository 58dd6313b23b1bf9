// Mesh: the 3D device mesh DP x TP x PP of a training job, made from the world
// communicator with ncclCommSplit.
//
// Rank order (Megatron's): tensor parallelism fastest, then data parallelism, then
// pipeline stages slowest:
//
//     world rank = (pp * DP + dp) * TP + tp
//
// so the ranks of one TP group are adjacent (on one node, where the all-reduces of every
// layer are cheapest), and pipeline stages, which only exchange activations with their
// neighbours, are the farthest apart. On 8 ranks with DP = TP = PP = 2: stage 0 holds
// ranks 0..3 (dp 0: {0, 1}, dp 1: {2, 3}), stage 1 holds ranks 4..7.
//
// Every rank belongs to exactly one group per axis; its rank in that group is its
// coordinate on the axis (the split key), so "TP rank", "DP rank" and "stage" are the
// group ranks.
#pragma once
#include <memory>
#include <string>

#include "training/dist/process_group.h"

namespace braid {
namespace train {

/// The extent of each axis of the mesh.
struct MeshShape {
  int dp = 1;  ///< data-parallel replicas
  int tp = 1;  ///< tensor-parallel ranks per layer
  int pp = 1;  ///< pipeline stages
  int size() const { return dp * tp * pp; }
  std::string describe() const;  ///< "dp=2 x tp=2 x pp=1"
};

/// A rank's position in the mesh.
struct MeshCoord {
  int dp = 0, tp = 0, pp = 0;
};

/// World rank of a coordinate: (pp * DP + dp) * TP + tp.
int meshRank(const MeshShape& shape, const MeshCoord& c);
/// Coordinate of a world rank (inverse of meshRank).
MeshCoord meshCoord(const MeshShape& shape, int rank);

/// The process groups of one rank of the mesh (training/dist/process_group.h). Owns
/// the split groups, not the world group (which must outlive the Mesh).
class Mesh {
 public:
  /// Collective over every rank of `world` (all must pass the same shape): checks that
  /// shape.size() equals the world size (std::invalid_argument naming both otherwise)
  /// and makes the TP, DP, PP and model-parallel groups with four ncclCommSplit calls
  /// (DistError on failure).
  Mesh(ProcessGroup& world, const MeshShape& shape);
  Mesh(const Mesh&) = delete;
  Mesh& operator=(const Mesh&) = delete;

  const MeshShape& shape() const { return shape_; }
  const MeshCoord& coord() const { return coord_; }
  int worldRank() const { return world_.rank(); }
  int worldSize() const { return world_.size(); }

  ProcessGroup& world() { return world_; }
  ProcessGroup& tp() { return *tp_; }  ///< ranks sharing (dp, pp); rank = coord.tp
  ProcessGroup& dp() { return *dp_; }  ///< ranks sharing (tp, pp); rank = coord.dp
  ProcessGroup& pp() { return *pp_; }  ///< ranks sharing (dp, tp); rank = coord.pp
  /// Model-parallel group: the TP x PP ranks of one replica (sharing dp), rank =
  /// pp * TP + tp. The gradient norm of one replica is summed over it.
  ProcessGroup& mp() { return *mp_; }

  /// Abandons the TP, DP, PP and MP groups after a peer failure (ProcessGroup::abandon:
  /// revoked, aborted on destruction). Not the world group, which the Mesh does not own.
  void abandon();

  bool firstStage() const { return coord_.pp == 0; }
  bool lastStage() const { return coord_.pp == shape_.pp - 1; }

 private:
  ProcessGroup& world_;
  MeshShape shape_;
  MeshCoord coord_;
  std::unique_ptr<ProcessGroup> tp_, dp_, pp_, mp_;
};

/// Pipeline partition: model layers [0, numLayers) cut into `stages` contiguous ranges
/// as even as possible (earlier stages get the extra layers). Writes
/// stage `stage`'s inclusive range to [*first, *last]. Requires numLayers >= stages.
void stageLayers(int numLayers, int stages, int stage, int* first, int* last);

}  // namespace train
}  // namespace braid
