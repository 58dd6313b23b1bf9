// The DP x TP x PP mesh (see mesh.h for the rank order).
#include "training/parallel/mesh.h"

#include <stdexcept>
#include <string>

namespace braid {
namespace train {

std::string MeshShape::describe() const {
  return "dp=" + std::to_string(dp) + " x tp=" + std::to_string(tp) +
         " x pp=" + std::to_string(pp);
}

int meshRank(const MeshShape& s, const MeshCoord& c) { return (c.pp * s.dp + c.dp) * s.tp + c.tp; }

MeshCoord meshCoord(const MeshShape& s, int rank) {
  MeshCoord c;
  c.tp = rank % s.tp;
  c.dp = (rank / s.tp) % s.dp;
  c.pp = rank / (s.tp * s.dp);
  return c;
}

Mesh::Mesh(ProcessGroup& world, const MeshShape& shape) : world_(world), shape_(shape) {
  if (shape.dp < 1 || shape.tp < 1 || shape.pp < 1)
    throw std::invalid_argument("mesh: every axis must be >= 1 (" + shape.describe() + ")");
  if (world.size() != shape.size())
    throw std::invalid_argument("mesh: " + shape.describe() + " needs " +
                                std::to_string(shape.size()) + " ranks but the world has " +
                                std::to_string(world.size()));
  coord_ = meshCoord(shape, world.rank());
  const MeshCoord& c = coord_;
  // One split per group; the color names the group (the coordinates its members
  // share), the key orders it (the coordinate along the axis), so the group rank is
  // that coordinate. Every rank makes the calls in the same order.
  tp_ = world.split(c.pp * shape.dp + c.dp, c.tp);
  dp_ = world.split(c.pp * shape.tp + c.tp, c.dp);
  pp_ = world.split(c.dp * shape.tp + c.tp, c.pp);
  mp_ = world.split(c.dp, c.pp * shape.tp + c.tp);
}

void Mesh::abandon() {
  for (auto* g : {tp_.get(), dp_.get(), pp_.get(), mp_.get()})
    if (g) g->abandon();
}

void stageLayers(int numLayers, int stages, int stage, int* first, int* last) {
  const int base = numLayers / stages, extra = numLayers % stages;
  *first = stage * base + (stage < extra ? stage : extra);
  *last = *first + base + (stage < extra ? 1 : 0) - 1;
}

}  // namespace train
}  // namespace braid
