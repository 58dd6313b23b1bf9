// braid-sim: the cost model at scale. Describes a machine (nodes x ranks per node, link
// latencies and bandwidths: a preset, a BRAID_TUNER_MODEL-style file, or a topology
// XML) and prints, per collective and size, every algorithm's predicted time and bus
// bandwidth and the tuner's choice. No ranks run: this is the model the tuner uses,
// applied to machines we do not have (docs/performance.md compares it with published
// NCCL figures).
//
//   braid-sim --nodes 128 --ranks-per-node 8 --preset h100 --coll all_reduce -b 8 -e 8G
//   braid-sim --nodes 1 --ranks-per-node 8 --topo topologies/dgx-h100.xml
//   braid-sim --help     (the command line is read with CLI11: src/tools/cli.h)
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/cost.h"
#include "algorithms/registry.h"
#include "src/core/machine.h"
#include "src/core/tuner.h"
#include "src/topo/summary.h"
#include "src/topo/topology.h"
#include "src/tools/cli.h"

namespace braid {
namespace {

struct Options {
  int nodes = 128, perNode = 8, channels = 0;
  std::string preset = "h100", modelFile, topoFile;
  std::vector<std::string> colls = {"all_reduce"};
  size_t minBytes = 8, maxBytes = size_t(8) << 30, factor = 8;
  bool csv = false;
  bool collnet = false;  ///< an aggregation switch serves the job (CollNet algorithms)
};

const char* kCollNames[] = {"all_reduce", "all_gather", "reduce_scatter", "alltoall",
                            "broadcast", "reduce"};
const Coll kColls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter,
                       Coll::kAllToAll, Coll::kBroadcast, Coll::kReduce};

/// nccl-tests' bus bandwidth factor.
double busFactor(Coll c, int n) {
  switch (c) {
    case Coll::kAllReduce: return 2.0 * (n - 1) / n;
    case Coll::kAllGather: case Coll::kReduceScatter: case Coll::kAllToAll:
      return double(n - 1) / n;
    default: return 1.0;
  }
}

CostModel h100Model() {
  // Assumptions (docs/performance.md): a step costs ~1 us of kernel/proxy work, NVLink
  // ~0.5 us, InfiniBand ~5 us; NVLink4 450 GB/s per direction; 400 Gb/s = 50 GB/s per
  // NIC, one per GPU; reductions at HBM speed.
  CostModel m;
  m.intra.alphaUs = 0.5;
  m.intra.gbps = 450;
  m.inter.alphaUs = 5;
  m.inter.gbps = 50;
  m.nicGbps = 400;
  m.reduceGbps = 3000;
  m.stepUs = 1.0;
  m.sliceUs = 0.01;
  return m;
}

int run(const Options& o) {
  CostModel model = o.preset == "host" ? defaultCostModel(0) : h100Model();
  if (!o.topoFile.empty()) {
    std::string err;
    std::optional<topo::Topology> t = topo::Topology::load(o.topoFile, &err);
    if (!t) {
      fprintf(stderr, "braid-sim: %s\n", err.c_str());
      return 2;
    }
    const topo::TopoSummary s = topo::summarize(*t);
    if (s.gpuGpuGbps > 0) model.intra.gbps = s.gpuGpuGbps;
    if (s.nicGbps > 0) model.inter.gbps = s.nicGbps;
    if (s.totalNicGbps > 0) model.nicGbps = s.totalNicGbps;
    printf("# topology %s: %s\n", o.topoFile.c_str(), topo::describe(s).c_str());
  }
  if (!o.modelFile.empty()) {
    std::ifstream f(o.modelFile);
    std::stringstream text;
    text << f.rdbuf();
    std::string err;
    if (!f || !model.parse(text.str(), &err)) {
      fprintf(stderr, "braid-sim: model '%s': %s\n", o.modelFile.c_str(),
              f ? err.c_str() : "cannot read");
      return 2;
    }
  }
  std::vector<int> nodeIds;
  for (int node = 0; node < o.nodes; ++node)
    for (int i = 0; i < o.perNode; ++i) nodeIds.push_back(node);
  const int n = int(nodeIds.size());
  auto layout = std::make_shared<RankLayout>(RankLayout::fromNodes(nodeIds));
  const int channels = o.channels > 0 ? o.channels : std::min(o.perNode, 8);
  printf("# %d nodes x %d ranks = %d ranks, %d channel(s); model:", o.nodes, o.perNode, n,
         channels);
  for (char ch : model.toString()) putchar(ch == '\n' ? ' ' : ch);
  printf("\n");

  for (const std::string& name : o.colls) {
    Coll coll = Coll::kCount;
    for (size_t i = 0; i < sizeof(kColls) / sizeof(kColls[0]); ++i)
      if (name == kCollNames[i]) coll = kColls[i];
    std::vector<const Algorithm*> algos = algorithmsFor(coll);
    printf("\n## %s\n\n", name.c_str());
    if (o.csv) {
      printf("bytes");
      for (const Algorithm* a : algos) printf(",%s_us,%s_busbw", a->name, a->name);
      printf(",tuner,tuner_us\n");
    } else {
      printf("| size |");
      for (const Algorithm* a : algos) printf(" %s us | %s GB/s |", a->name, a->name);
      printf(" tuner |\n|---|");
      for (size_t i = 0; i < algos.size(); ++i) printf("---|---|");
      printf("---|\n");
    }
    for (size_t bytes = o.minBytes; bytes <= o.maxBytes;
         bytes = std::max(bytes + 1, bytes * o.factor)) {
      TuneInput in;
      in.args.coll = coll;
      in.args.nranks = n;
      in.args.typeSize = 4;
      const bool perRank = coll == Coll::kAllGather || coll == Coll::kReduceScatter ||
                           coll == Coll::kAllToAll;
      in.args.count = std::max<uint64_t>(1, bytes / 4 / (perRank ? uint64_t(n) : 1));
      in.args.layout = layout;
      in.args.collnet = o.collnet && (coll == Coll::kAllReduce || coll == Coll::kAllGather ||
                                      coll == Coll::kReduceScatter);
      in.model = model;
      in.minChannels = in.maxChannels = channels;
      const uint64_t size = in.args.count * 4 * (perRank ? uint64_t(n) : 1);
      std::vector<TuneChoice> ranked = rankChoices(in);
      if (o.csv) printf("%llu", static_cast<unsigned long long>(size));
      else printf("| %llu |", static_cast<unsigned long long>(size));
      for (const Algorithm* a : algos) {
        double best = -1;  // this algorithm's best protocol
        for (const TuneChoice& c : ranked)
          if (c.algo == a && std::isfinite(c.us) && (best < 0 || c.us < best)) best = c.us;
        if (best < 0) {
          printf(o.csv ? ",," : " - | - |");
          continue;
        }
        const double busbw = double(size) / best / 1e3 * busFactor(coll, n);
        if (o.csv) printf(",%.2f,%.2f", best, busbw);
        else printf(" %.1f | %.1f |", best, busbw);
      }
      const TuneChoice* pick = ranked.empty() ? nullptr : &ranked.front();
      if (o.csv)
        printf(",%s/%s,%.2f\n", pick ? pick->algo->name : "-", pick ? pick->protocol : "-",
               pick ? pick->us : 0.0);
      else
        printf(" %s/%s |\n", pick ? pick->algo->name : "-", pick ? pick->protocol : "-");
    }
  }
  return 0;
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) {
  braid::Options o;
  braid::cli::App app(
      "Prints each algorithm's predicted time (us) and busbw (GB/s) and the tuner's choice "
      "on a described machine: the tuner's cost model, no ranks run.",
      "braid-sim");
  app.footer(
      "Presets: h100 = NVLink4 450 GB/s per GPU and direction inside a node, one 400 Gb/s\n"
      "NIC per GPU; host = this project's measured shm/TCP defaults. --model overrides\n"
      "(key=value lines, see BRAID_TUNER_MODEL); --topo takes NVLink and NIC speeds from\n"
      "a topology XML. --collnet: an aggregation switch (SHARP, braid-switch) serves the\n"
      "job, so the in-network algorithms (collnet_*) compete too.");
  app.add_option("--nodes", o.nodes, "nodes (default 128)")->check(braid::cli::range(1, 1 << 20));
  app.add_option("--ranks-per-node", o.perNode, "ranks per node (default 8)")
      ->check(braid::cli::range(1, 1 << 20));
  app.add_option("--preset", o.preset, "h100 or host (default h100)")
      ->check(braid::cli::isMember({"h100", "host"}));
  app.add_option("--model", o.modelFile, "cost model file (key=value lines)")->type_name("FILE");
  app.add_option("--topo", o.topoFile, "topology XML (NVLink and NIC speeds)")
      ->type_name("FILE.xml");
  app.add_option("--channels", o.channels, "channels (default: ranks per node, at most 8)")
      ->check(braid::cli::range(1, 1 << 16));
  std::vector<std::string> collNames(std::begin(braid::kCollNames), std::end(braid::kCollNames));
  collNames.push_back("all");
  app.add_option_function<std::string>(
         "--coll",
         [&o](const std::string& c) {
           if (c == "all")
             o.colls.assign(std::begin(braid::kCollNames), std::end(braid::kCollNames));
           else
             o.colls = {c};
         },
         "all_reduce all_gather reduce_scatter alltoall broadcast reduce, or all (default "
         "all_reduce)")
      ->check(braid::cli::isMember(collNames))
      ->type_name("COLL");
  app.addSize("-b", &o.minBytes, "smallest size, K/M/G suffixes (default 8)");
  app.addSize("-e", &o.maxBytes, "largest size (default 8G)");
  app.addSize("-f", &o.factor, "size factor, at least 2 (default 8)")->type_name("FACTOR");
  app.add_flag("--csv", o.csv, "CSV instead of markdown tables");
  app.add_flag("--collnet", o.collnet, "an aggregation switch serves the job");
  int exitCode = 0;
  if (!app.parseCommandLine(argc, argv, &exitCode)) return exitCode;
  if (o.factor < 2) return app.fail("-f", "the factor must be at least 2");
  if (o.minBytes > o.maxBytes) return app.fail("-e", "the largest size is below -b");
  if (int64_t(o.nodes) * o.perNode > 1 << 20) return app.fail("--nodes", "at most 1M ranks");
  return braid::run(o);
}
