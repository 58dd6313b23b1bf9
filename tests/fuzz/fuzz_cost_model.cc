// Fuzzes cost-model files (BRAID_TUNER_MODEL, read by loadCostModel in src/core/machine.cc
// through CostModel::parse in algorithms/cost.cc), then the tuner's predictions with the
// model it accepted, for every algorithm, over a layout and a message the input picks.
//
// Input: nranks-1 (1 byte, mod 16), one node id per rank (1 byte each, mod 4), the
// message size (5 bytes), channels (1 byte), chunk and slice exponents (1 byte each),
// then the model file's text.
// Oracles: a rejected file leaves the model unchanged and says which line; an accepted
// one has every field positive and finite, and toString() parses back to itself; no
// prediction is NaN.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/plan.h"
#include "algorithms/registry.h"
#include "tests/fuzz/fuzz_input.h"

using namespace braid;
using braid_fuzz::FuzzInput;

namespace {

bool sameModel(const CostModel& a, const CostModel& b) { return a.toString() == b.toString(); }

bool positiveFinite(double v) { return v > 0 && std::isfinite(v); }

void checkModel(const CostModel& m) {
  FUZZ_CHECK(positiveFinite(m.intra.alphaUs) && positiveFinite(m.intra.gbps));
  FUZZ_CHECK(positiveFinite(m.inter.alphaUs) && positiveFinite(m.inter.gbps));
  FUZZ_CHECK(positiveFinite(m.nicGbps) && positiveFinite(m.reduceGbps));
  FUZZ_CHECK(positiveFinite(m.stepUs) && positiveFinite(m.sliceUs));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const int nranks = 1 + in.byte() % 16;
  std::vector<int> nodes(static_cast<size_t>(nranks));
  for (int& n : nodes) n = in.byte() % 4;
  uint64_t bytes = 0;
  for (int i = 0; i < 5; ++i) bytes = (bytes << 8) | in.byte();  // up to 1 TiB
  const int channels = 1 + in.byte() % 32;
  const uint64_t chunk = uint64_t(1) << (10 + in.byte() % 14);
  const uint64_t slice = uint64_t(1) << (8 + in.byte() % 14);
  const std::string text = in.rest();

  CostModel model;
  const CostModel before = model;
  std::string err;
  if (!model.parse(text, &err)) {
    FUZZ_CHECK(sameModel(model, before));
    FUZZ_CHECK(err.compare(0, 5, "line ") == 0);
    return 0;
  }
  checkModel(model);
  CostModel again;
  std::string err2;
  FUZZ_CHECK(again.parse(model.toString(), &err2));
  FUZZ_CHECK(sameModel(again, model));

  const RankLayout layout = RankLayout::fromNodes(nodes);
  CostQuery q;
  q.nranks = nranks;
  q.bytes = bytes;
  q.layout = &layout;
  q.nChannels = channels;
  q.chunkBytes = chunk;
  q.sliceBytes = slice;
  q.model = &model;
  for (const Algorithm& a : allAlgorithms()) {
    q.coll = a.coll;
    const double us = predictUs(a.name, q);
    if (std::isnan(us))
      fprintf(stderr, "predictUs(%s) is NaN for %d ranks (%s), %llu bytes\n", a.name, nranks,
              layout.describe().c_str(), static_cast<unsigned long long>(bytes));
    FUZZ_CHECK(!std::isnan(us));
  }
  return 0;
}
