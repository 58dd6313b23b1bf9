// Command line, sizes and the nccl-tests count rules of the peer benchmarks (see bench.h).
// The count rules and busbw factors are those of perf/table.cc; tests/compare checks that
// both give the same numbers for every collective, size and rank count.
#include <algorithm>
#include <sstream>

#include "perf/compare/bench.h"
#include "perf/options.h"
#include "src/tools/cli.h"

namespace braid_compare {

namespace {

struct CollName {
  Coll coll;
  const char* name;
};
constexpr CollName kNames[] = {
    {Coll::kAllReduce, "all_reduce"}, {Coll::kReduceScatter, "reduce_scatter"},
    {Coll::kAllGather, "all_gather"}, {Coll::kAlltoall, "alltoall"},
    {Coll::kBroadcast, "broadcast"},  {Coll::kReduce, "reduce"},
};

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

}  // namespace

const char* collName(Coll c) {
  for (const CollName& n : kNames) {
    if (n.coll == c) return n.name;
  }
  return "unknown";
}

bool parseColl(const std::string& name, Coll* out) {
  for (const CollName& n : kNames) {
    if (name == n.name) {
      *out = n.coll;
      return true;
    }
  }
  return false;
}

std::vector<Coll> allColls() {
  std::vector<Coll> out;
  for (const CollName& n : kNames) out.push_back(n.coll);
  return out;
}

Counts collCounts(Coll c, size_t bytes, size_t eltSize, int nranks) {
  Counts k;
  const size_t n = static_cast<size_t>(nranks);
  switch (c) {
    case Coll::kAllReduce:
    case Coll::kBroadcast:
    case Coll::kReduce:  // countsSameSize
      k.count = bytes / eltSize;
      k.sendElems = k.recvElems = k.paramCount = k.count;
      break;
    case Coll::kAllGather:  // countsGather: the size is the whole output
      k.paramCount = bytes / eltSize / n;
      k.count = k.paramCount * n;
      k.sendElems = k.paramCount;
      k.recvElems = k.count;
      break;
    case Coll::kReduceScatter:  // countsScatter: the size is the whole input
      k.paramCount = bytes / eltSize / n;
      k.count = k.paramCount * n;
      k.sendElems = k.count;
      k.recvElems = k.paramCount;
      break;
    case Coll::kAlltoall:  // countsAlltoall: n blocks in and out
      k.paramCount = bytes / eltSize / n;
      k.count = k.paramCount * n;
      k.sendElems = k.recvElems = k.count;
      break;
  }
  return k;
}

double busBwFactor(Coll c, int nranks) {
  switch (c) {
    case Coll::kAllReduce:
      return 2.0 * (nranks - 1) / nranks;
    case Coll::kReduceScatter:
    case Coll::kAllGather:
    case Coll::kAlltoall:
      return static_cast<double>(nranks - 1) / nranks;
    case Coll::kBroadcast:
    case Coll::kReduce:
      return 1.0;
  }
  return 1.0;
}

bool collRooted(Coll c) { return c == Coll::kBroadcast || c == Coll::kReduce; }

bool collReduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}

std::vector<size_t> sweepSizes(const BenchOptions& o) {
  std::vector<size_t> out;
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes; bytes = braid_perf::nextSweepSize(o, bytes))
    out.push_back(bytes);
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

bool parseBenchOptions(int argc, char** argv, const char* program, BenchOptions* opt,
                       int* exitCode) {
  braid::cli::App app("A peer benchmark of Braid's comparison (perf/compare/README.md); ranks "
                      "from the launcher: mpirun or braidrun.",
                      program);
  app.footer(
      "Sizes take K/M/G suffixes. Defaults: -b 8 -e 1M -f 2 (-i 1M when -f is 1) -n 20 -w 5.\n"
      "Sizes, the count column and busbw follow nccl-tests and Braid's perf suite.");
  braid_perf::addSweepOptions(app, opt);
  app.add_option("-N", opt->reps,
                 "repetitions of the whole sweep; the median is reported (default 3)")
      ->check(braid::cli::range(1, 1 << 20));
  app.add_option("-c", opt->check, "1: check the results once, in the first repetition (default 1)")
      ->check(braid::cli::range(0, 1));
  app.add_option("-r", opt->root, "root of broadcast and reduce (default 0)")
      ->check(braid::cli::range(0, 1 << 24));
  app.add_option_function<int>("-I", [opt](int v) { opt->inPlace = v != 0; },
                               "1: also measure the in-place form where it exists (default 0)")
      ->check(braid::cli::range(0, 1));
  app.addRead<std::vector<Coll>>(
         "-C", &opt->colls,
         [](const std::string& text, std::vector<Coll>* out) {
           out->clear();
           for (const std::string& name : splitList(text)) {
             out->emplace_back();
             if (!parseColl(name, &out->back())) return false;
           }
           return !out->empty();
         },
         "collective names (see --help)",
         "collectives, comma separated: all_reduce reduce_scatter all_gather alltoall "
         "broadcast reduce (default: all)")
      ->type_name("LIST");
  app.addRead<std::vector<std::string>>(
         "-A", &opt->algorithms,
         [](const std::string& text, std::vector<std::string>* out) {
           *out = splitList(text);
           return !out->empty();
         },
         "algorithm names", "algorithms, comma separated (benchmark specific; default: all)")
      ->type_name("LIST");
  app.add_option("-J", opt->jsonPrefix,
                 "write <prefix><collective>[.<algorithm>].json per collective")
      ->check(braid::cli::nonEmpty())
      ->type_name("PREFIX");
  app.add_option("-L", opt->variant, "free-form label stored as \"variant\" in the JSON")
      ->type_name("LABEL");
  app.add_option("-S", opt->store,
                 "rendezvous directory (gloo_bench; must be new and empty per launch)")
      ->check(braid::cli::nonEmpty())
      ->type_name("DIR");
  app.add_option_function<int>("-K", [opt](int v) { opt->corrupt = v != 0; },
                               "1: corrupt one checked element (tests: proves the check can fail)")
      ->check(braid::cli::range(0, 1));
  if (!braid_perf::parseSweepCommandLine(app, argc, argv, *opt, exitCode)) return false;
  if (opt->stepBytes == 0) {
    *exitCode = app.fail("--stepbytes", "the step must be at least 1 byte");
    return false;
  }
  if (opt->colls.empty()) opt->colls = allColls();
  return true;
}

}  // namespace braid_compare
