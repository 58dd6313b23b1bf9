// Fuzzes the topology file format (NCCL_TOPO_FILE): the XML reader (src/topo/xml.cc)
// and the topology reader on top of it (src/topo/topology_xml.cc), then what the
// library computes from a topology it accepted (paths, summary, ring search).
//
// Input: the file's text.
// Oracles: writeXml of a parsed document parses again to the same text; a topology
// that loads writes XML that loads again to the same XML (as topology.h promises);
// errors name the source and a line; paths and rings stay inside the topology.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "src/topo/search.h"
#include "src/topo/summary.h"
#include "src/topo/topology.h"
#include "src/topo/xml.h"
#include "tests/fuzz/fuzz_input.h"

using namespace braid::topo;

namespace {

const char kSource[] = "fuzz.xml";

void checkError(const std::string& error) {
  FUZZ_CHECK(error.compare(0, sizeof(kSource) - 1, kSource) == 0);
}

void fuzzXml(const std::string& text) {
  XmlElement root;
  std::string error;
  if (!parseXml(text, kSource, &root, &error)) {
    checkError(error);
    return;
  }
  const std::string once = writeXml(root);
  XmlElement again;
  std::string error2;
  FUZZ_CHECK(parseXml(once, kSource, &again, &error2));
  FUZZ_CHECK(writeXml(again) == once);
}

void useTopology(const Topology& t) {
  const int n = t.size();
  FUZZ_CHECK(n >= 1);
  const TopoSummary s = summarize(t);
  FUZZ_CHECK(!describe(s).empty());
  FUZZ_CHECK(!t.describeTree().empty());
  const int probe = std::min(n, 12);
  for (int a = 0; a < probe; ++a)
    for (int b = 0; b < probe; ++b) {
      const Path p = t.path(a, b);
      FUZZ_CHECK(p.hops >= 0);
      FUZZ_CHECK(!(p.gbps < 0));
    }
  // Rings over the GPUs (at most 6 local ranks: the search is exhaustive up to 9).
  std::vector<int> devs;
  for (int g : t.nodesOfType(NodeType::kGpu)) {
    if (devs.size() >= 6) break;
    devs.push_back(t.node(g).index);
  }
  if (devs.empty()) devs = {-1, -1};
  const std::vector<int> nodes = rankNodes(t, devs);
  FUZZ_CHECK(nodes.size() == devs.size());
  for (int id : nodes) FUZZ_CHECK(id >= -1 && id < n);
  SearchOptions opt;
  opt.nChannels = 2;
  const RingSearch rs = searchRings(t, nodes, opt);
  for (const RingChannel& ch : rs.channels) {  // each ring visits every local rank once
    std::vector<int> sorted = ch.order;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) FUZZ_CHECK(sorted[i] == int(i));
    FUZZ_CHECK(sorted.size() == devs.size());
  }
  const std::vector<int> order = intraNodeOrder(t, devs);
  FUZZ_CHECK(order.size() == devs.size());
}

void fuzzTopology(const std::string& text) {
  std::string error;
  std::optional<Topology> t = Topology::fromXml(text, kSource, &error);
  if (!t) {
    checkError(error);
    return;
  }
  const std::string xml = t->toXml();
  std::string error2;
  std::optional<Topology> t2 = Topology::fromXml(xml, kSource, &error2);
  if (!t2) fprintf(stderr, "re-reading the written topology failed: %s\n", error2.c_str());
  FUZZ_CHECK(t2.has_value());
  FUZZ_CHECK(t2->toXml() == xml);
  useTopology(*t);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzzXml(text);
  fuzzTopology(text);
  return 0;
}
