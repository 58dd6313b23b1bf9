// Command line, sizes and the nccl-tests count rules of the peer benchmarks (see bench.h).
// The count rules and busbw factors are those of perf/table.cc; tests/compare checks that
// both give the same numbers for every collective, size and rank count.
#include <getopt.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "perf/compare/bench.h"
#include "perf/options.h"

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

void usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [options]   (ranks from the launcher: mpirun or braidrun)\n"
               "  -b <size>   smallest size, K/M/G suffixes (default 8)\n"
               "  -e <size>   largest size (default 1M)\n"
               "  -f <x>      multiplicative step (default 2); -i <size> additive step when -f 1\n"
               "  -n <n>      timed iterations per size and repetition (default 20)\n"
               "  -w <n>      warmup iterations per size and repetition (default 5)\n"
               "  -N <n>      repetitions of the whole sweep; the median is reported (default 3)\n"
               "  -c <0|1>    check the results once, in the first repetition (default 1)\n"
               "  -r <root>   root of broadcast and reduce (default 0)\n"
               "  -I <0|1>    also measure the in-place form where it exists (default 0)\n"
               "  -C <list>   collectives, comma separated: all_reduce reduce_scatter all_gather\n"
               "              alltoall broadcast reduce (default: all)\n"
               "  -A <list>   algorithms, comma separated (benchmark specific; default: all)\n"
               "  -J <prefix> write <prefix><collective>[.<algorithm>].json per collective\n"
               "  -L <label>  free-form label stored as \"variant\" in the JSON\n"
               "  -S <dir>    rendezvous directory (gloo_bench; must be new and empty per launch)\n"
               "  -K 1        corrupt one checked element (tests: proves the check can fail)\n"
               "Sizes, the count column and busbw follow nccl-tests and Braid's perf suite.\n",
               program);
}

bool parseInt(const char* text, int lo, int hi, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

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
  for (size_t bytes = o.minBytes; bytes <= o.maxBytes;) {
    out.push_back(bytes);
    size_t next = o.stepFactor > 1 ? static_cast<size_t>(static_cast<double>(bytes) * o.stepFactor)
                                   : bytes + o.stepBytes;
    if (next <= bytes) next = bytes + 1;
    bytes = next;
  }
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
  *exitCode = 2;
  optind = 1;
  int c;
  int flag = 0;
  while ((c = getopt(argc, argv, "b:e:i:f:n:w:N:c:r:I:C:A:J:L:S:K:h")) != -1) {
    bool ok = true;
    const std::string arg = optarg ? optarg : "";
    switch (c) {
      case 'b':
        ok = braid_perf::parseSize(arg, &opt->minBytes);
        break;
      case 'e':
        ok = braid_perf::parseSize(arg, &opt->maxBytes);
        break;
      case 'i':
        ok = braid_perf::parseSize(arg, &opt->stepBytes) && opt->stepBytes > 0;
        break;
      case 'f': {
        char* end = nullptr;
        opt->stepFactor = std::strtod(optarg, &end);
        ok = end != optarg && *end == '\0' && opt->stepFactor >= 1;
        break;
      }
      case 'n':
        ok = parseInt(optarg, 1, 1 << 30, &opt->iters);
        break;
      case 'w':
        ok = parseInt(optarg, 0, 1 << 30, &opt->warmup);
        break;
      case 'N':
        ok = parseInt(optarg, 1, 1 << 20, &opt->reps);
        break;
      case 'c':
        ok = parseInt(optarg, 0, 1, &opt->check);
        break;
      case 'r':
        ok = parseInt(optarg, 0, 1 << 24, &opt->root);
        break;
      case 'I':
        ok = parseInt(optarg, 0, 1, &flag);
        opt->inPlace = flag != 0;
        break;
      case 'C':
        opt->colls.clear();
        for (const std::string& name : splitList(arg)) {
          Coll coll;
          if (!parseColl(name, &coll)) {
            ok = false;
            break;
          }
          opt->colls.push_back(coll);
        }
        ok = ok && !opt->colls.empty();
        break;
      case 'A':
        opt->algorithms = splitList(arg);
        ok = !opt->algorithms.empty();
        break;
      case 'K':
        ok = parseInt(optarg, 0, 1, &flag);
        opt->corrupt = flag != 0;
        break;
      case 'J':
        opt->jsonPrefix = arg;
        ok = !arg.empty();
        break;
      case 'L':
        opt->variant = arg;
        break;
      case 'S':
        opt->store = arg;
        ok = !arg.empty();
        break;
      case 'h':
        usage(program);
        *exitCode = 0;
        return false;
      default:
        usage(program);
        return false;
    }
    if (!ok) {
      std::fprintf(stderr, "%s: bad value '%s' for -%c\n", program, arg.c_str(), c);
      usage(program);
      return false;
    }
  }
  if (optind < argc) {
    std::fprintf(stderr, "%s: unexpected argument '%s'\n", program, argv[optind]);
    usage(program);
    return false;
  }
  if (opt->maxBytes < opt->minBytes) {
    std::fprintf(stderr, "%s: maxbytes (%zu) is below minbytes (%zu)\n", program, opt->maxBytes,
                 opt->minBytes);
    return false;
  }
  if (opt->colls.empty()) opt->colls = allColls();
  return true;
}

}  // namespace braid_compare
