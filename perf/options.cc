// Command-line parsing of the perf programs (see options.h).
#include "perf/options.h"

#include <getopt.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace braid_perf {
namespace {

void usage(const char* program) {
  std::fprintf(
      stderr,
      "usage: %s [options]\n"
      "  -t,--nthreads <n>        ranks as threads of this process (default 1)\n"
      "  -g,--ngpus <n>           ranks per thread, driven in one group (default 1)\n"
      "  -D,--device <0/1>        1: device buffers (cudaMalloc on device local rank %%\n"
      "                           device count, a CUDA stream per rank); 0: host (default)\n"
      "  -b,--minbytes <size>     smallest size, K/M/G suffixes (default 32M)\n"
      "  -e,--maxbytes <size>     largest size (default 32M)\n"
      "  -i,--stepbytes <size>    additive step (default 1M)\n"
      "  -f,--stepfactor <x>      multiplicative step (default: off)\n"
      "  -n,--iters <n>           timed iterations (default 20)\n"
      "  -w,--warmup_iters <n>    warmup iterations (default 5)\n"
      "  -m,--agg_iters <n>       operations aggregated per group (default 1)\n"
      "  -c,--check <n>           check iterations per size, 0 = off (default 1)\n"
      "  -o,--op <op|all>         sum prod min max avg premulsum (default sum)\n"
      "  -d,--datatype <t|all>    int8 uint8 int32 uint32 int64 uint64 half float\n"
      "                           double bfloat16 f8e4m3 f8e5m2 (default float)\n"
      "  -r,--root <r>            root, -1 = every root (default 0)\n"
      "  -a,--average <0..3>      time over ranks: 0 rank0 1 avg 2 min 3 max (default 1)\n"
      "  -z,--blocking <0/1>      accepted (host calls complete on return)\n"
      "  -N,--run_cycles <n>      repeat the sweep n times, 0 = forever (default 1)\n"
      "  -J,--output_file <f>     write all results as JSON to f\n"
      "  -G,--cudagraph <n>       accepted, ignored\n"
      "  -p -C -R -T -M <v>       accepted for nccl-tests compatibility, ignored\n"
      "Processes: launch with braidrun -n N (or mpirun); world = processes x threads x ngpus.\n",
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

}  // namespace

bool parseSize(const std::string& text, size_t* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || v < 0) return false;
  double mult = 1;
  const std::string suffix(end);
  if (suffix == "K" || suffix == "k")
    mult = 1024.0;
  else if (suffix == "M" || suffix == "m")
    mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "g")
    mult = 1024.0 * 1024 * 1024;
  else if (!suffix.empty())
    return false;
  const double bytes = v * mult;
  if (bytes > 1e18) return false;
  *out = static_cast<size_t>(bytes);
  return true;
}

bool parseOptions(int argc, char** argv, const char* program, Options* opt, int* exitCode) {
  static const option kLong[] = {{"nthreads", required_argument, nullptr, 't'},
                                 {"ngpus", required_argument, nullptr, 'g'},
                                 {"minbytes", required_argument, nullptr, 'b'},
                                 {"maxbytes", required_argument, nullptr, 'e'},
                                 {"stepbytes", required_argument, nullptr, 'i'},
                                 {"stepfactor", required_argument, nullptr, 'f'},
                                 {"iters", required_argument, nullptr, 'n'},
                                 {"warmup_iters", required_argument, nullptr, 'w'},
                                 {"agg_iters", required_argument, nullptr, 'm'},
                                 {"check", required_argument, nullptr, 'c'},
                                 {"op", required_argument, nullptr, 'o'},
                                 {"datatype", required_argument, nullptr, 'd'},
                                 {"root", required_argument, nullptr, 'r'},
                                 {"average", required_argument, nullptr, 'a'},
                                 {"blocking", required_argument, nullptr, 'z'},
                                 {"run_cycles", required_argument, nullptr, 'N'},
                                 {"output_file", required_argument, nullptr, 'J'},
                                 {"cudagraph", required_argument, nullptr, 'G'},
                                 {"parallel_init", required_argument, nullptr, 'p'},
                                 {"report_cputime", required_argument, nullptr, 'C'},
                                 {"local_register", required_argument, nullptr, 'R'},
                                 {"timeout", required_argument, nullptr, 'T'},
                                 {"memory", required_argument, nullptr, 'M'},
                                 {"device", required_argument, nullptr, 'D'},
                                 {"help", no_argument, nullptr, 'h'},
                                 {nullptr, 0, nullptr, 0}};
  *exitCode = 2;
  optind = 1;
  bool factorGiven = false;
  int c;
  while ((c = getopt_long(argc, argv, "t:g:b:e:i:f:n:w:m:c:o:d:r:a:z:N:J:G:p:C:R:T:M:D:h", kLong,
                          nullptr)) != -1) {
    bool ok = true;
    const std::string arg = optarg ? optarg : "";
    switch (c) {
      case 't':
        ok = parseInt(optarg, 1, 1024, &opt->nThreads);
        break;
      case 'g':
        ok = parseInt(optarg, 1, 1024, &opt->nGpus);
        break;
      case 'b':
        ok = parseSize(arg, &opt->minBytes);
        break;
      case 'e':
        ok = parseSize(arg, &opt->maxBytes);
        break;
      case 'i':
        ok = parseSize(arg, &opt->stepBytes);
        break;
      case 'f': {
        char* end = nullptr;
        opt->stepFactor = std::strtod(optarg, &end);
        ok = end != optarg && *end == '\0' && opt->stepFactor >= 1;
        factorGiven = true;
        break;
      }
      case 'n':
        ok = parseInt(optarg, 1, 1 << 30, &opt->iters);
        break;
      case 'w':
        ok = parseInt(optarg, 0, 1 << 30, &opt->warmup);
        break;
      case 'm':
        ok = parseInt(optarg, 1, 1 << 20, &opt->aggIters);
        break;
      case 'c':
        ok = parseInt(optarg, 0, 1 << 20, &opt->check);
        break;
      case 'o':
        opt->ops = parseOps(arg);
        ok = !opt->ops.empty();
        break;
      case 'd':
        opt->types = parseTypes(arg);
        ok = !opt->types.empty();
        break;
      case 'r':
        ok = parseInt(optarg, -1, 1 << 24, &opt->root);
        break;
      case 'a':
        ok = parseInt(optarg, 0, 3, &opt->average);
        break;
      case 'z':
        ok = parseInt(optarg, 0, 1, &opt->blocking);
        break;
      case 'N':
        ok = parseInt(optarg, 0, 1 << 30, &opt->cycles);
        break;
      case 'J':
        opt->jsonPath = arg;
        ok = !arg.empty();
        break;
      case 'G':
        ok = parseInt(optarg, 0, 1 << 30, &opt->graph);
        break;
      case 'D':
        ok = parseInt(optarg, 0, 1, &opt->device);
        break;
      case 'p':
      case 'C':
      case 'R':
      case 'T':
      case 'M':
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
  if (!factorGiven) opt->stepFactor = 1;
  if (opt->stepFactor <= 1 && opt->stepBytes == 0) opt->stepBytes = 1;
  if (opt->maxBytes < opt->minBytes) {
    std::fprintf(stderr, "%s: maxbytes (%zu) is below minbytes (%zu)\n", program, opt->maxBytes,
                 opt->minBytes);
    return false;
  }
  return true;
}

}  // namespace braid_perf
