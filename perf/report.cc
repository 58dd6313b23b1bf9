// The nccl-tests table and the JSON file (see report.h).
#include "perf/report.h"

#include <cmath>
#include <cstdio>
#include <utility>

namespace braid_perf {
namespace {

/// A value in a 7-wide column with as many decimals as fit (nccl-tests style).
std::string fmtTime(double us) {
  char buf[32];
  if (us < 1e4)
    std::snprintf(buf, sizeof(buf), "%7.2f", us);
  else if (us < 1e5)
    std::snprintf(buf, sizeof(buf), "%7.1f", us);
  else
    std::snprintf(buf, sizeof(buf), "%7.0f", us);
  return buf;
}

std::string fmtPlace(const PlaceResult& p) {
  char buf[128];
  if (!p.valid) {
    std::snprintf(buf, sizeof(buf), "  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
  } else if (!p.checked) {
    std::snprintf(buf, sizeof(buf), "  %s  %6.2f  %6.2f  %5s", fmtTime(p.timeUs).c_str(), p.algBw,
                  p.busBw, "N/A");
  } else {
    std::snprintf(buf, sizeof(buf), "  %s  %6.2f  %6.2f  %5.0f", fmtTime(p.timeUs).c_str(), p.algBw,
                  p.busBw, p.wrong);
  }
  return buf;
}

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

/// JSON has no NaN/inf: write null for them.
std::string jsonNumber(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string jsonPlace(const PlaceResult& p) {
  if (!p.valid) return "null";
  return "{\"time_us\": " + jsonNumber(p.timeUs) + ", \"algbw_gbps\": " + jsonNumber(p.algBw) +
         ", \"busbw_gbps\": " + jsonNumber(p.busBw) +
         ", \"wrong\": " + (p.checked ? jsonNumber(p.wrong) : std::string("null")) + "}";
}

}  // namespace

Report::Report(std::string program, std::string collective, const Options& opt, int nranks,
               int nprocs)
    : program_(std::move(program)),
      collective_(std::move(collective)),
      opt_(opt),
      nranks_(nranks),
      nprocs_(nprocs) {}

void Report::printHeader(const std::vector<RankRecord>& ranks, int version) const {
  std::printf(
      "# nccl-tests-compatible Braid perf: %s (library version %d, %d ranks, %d processes)\n",
      program_.c_str(), version, nranks_, nprocs_);
  std::printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: ", opt_.nThreads, opt_.nGpus,
              opt_.minBytes, opt_.maxBytes);
  if (opt_.stepFactor > 1)
    std::printf("%g(factor)", opt_.stepFactor);
  else
    std::printf("%zu(bytes)", opt_.stepBytes);
  std::printf(" warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d\n", opt_.warmup,
              opt_.iters, opt_.aggIters, opt_.check, opt_.graph);
  if (opt_.device != 0) {
    std::printf(
        "# Buffers: device memory (cudaMalloc), one CUDA stream per rank, time to "
        "cudaStreamSynchronize\n");
  }
  std::printf("#\n# Using devices\n");
  for (const RankRecord& r : ranks) {
    std::printf("#  Rank %2d Group %2d Pid %6d on %10.*s device %2d [%s]\n", r.rank, r.group, r.pid,
                static_cast<int>(sizeof(r.host)), r.host, r.device,
                r.device < 0 ? "host memory" : "cuda device");
  }
  std::printf("#\n");
  std::printf("#%62s%s%23s%s\n", "", "out-of-place", "", "in-place");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
              "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
              "busbw", "#wrong");
  std::printf("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "(B)",
              "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
              "");
  std::fflush(stdout);
}

void Report::addRow(const Row& row) {
  rows_.push_back(row);
  std::printf("%12zu  %12zu  %8s  %6s  %6d%s%s\n", row.bytes, row.count, typeName(row.type),
              opName(row.op), row.root, fmtPlace(row.outOfPlace).c_str(),
              fmtPlace(row.inPlace).c_str());
  std::fflush(stdout);
}

double Report::totalWrong() const {
  double total = 0;
  for (const Row& r : rows_) {
    if (r.outOfPlace.valid && r.outOfPlace.checked) total += r.outOfPlace.wrong;
    if (r.inPlace.valid && r.inPlace.checked) total += r.inPlace.wrong;
  }
  return total;
}

double Report::avgBusBw() const {
  double sum = 0;
  int n = 0;
  for (const Row& r : rows_) {
    for (const PlaceResult* p : {&r.outOfPlace, &r.inPlace}) {
      if (!p->valid) continue;
      sum += p->busBw;
      ++n;
    }
  }
  return n ? sum / n : 0;
}

void Report::printFooter() const {
  const double wrong = totalWrong();
  std::printf("# Out of bounds values : %.0f %s\n", wrong, wrong > 0 ? "FAILED" : "OK");
  std::printf("# Avg bus bandwidth    : %g \n#\n", avgBusBw());
  std::fflush(stdout);
}

bool Report::writeJson(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "%s: cannot write JSON file '%s'\n", program_.c_str(), path.c_str());
    return false;
  }
  std::fprintf(f, "{\n  \"tool\": \"braid-perf\",\n  \"program\": \"%s\",\n",
               jsonEscape(program_).c_str());
  std::fprintf(f, "  \"collective\": \"%s\",\n  \"nranks\": %d,\n  \"nprocs\": %d,\n",
               jsonEscape(collective_).c_str(), nranks_, nprocs_);
  std::fprintf(f,
               "  \"nthreads\": %d,\n  \"ngpus\": %d,\n  \"iters\": %d,\n  \"warmup_iters\": %d,\n"
               "  \"agg_iters\": %d,\n  \"check\": %d,\n  \"average\": %d,\n",
               opt_.nThreads, opt_.nGpus, opt_.iters, opt_.warmup, opt_.aggIters, opt_.check,
               opt_.average);
  if (opt_.device != 0) std::fprintf(f, "  \"memory\": \"device\",\n");
  std::fprintf(f, "  \"results\": [");
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    std::fprintf(f,
                 "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", \"redop\": \"%s\", "
                 "\"root\": %d,\n     \"out_of_place\": %s,\n     \"in_place\": %s}",
                 i ? "," : "", r.bytes, r.count, typeName(r.type), opName(r.op), r.root,
                 jsonPlace(r.outOfPlace).c_str(), jsonPlace(r.inPlace).c_str());
  }
  std::fprintf(f, "\n  ],\n  \"wrong_total\": %s,\n  \"avg_busbw_gbps\": %s\n}\n",
               jsonNumber(totalWrong()).c_str(), jsonNumber(avgBusBw()).c_str());
  const bool ok = std::fclose(f) == 0;
  if (!ok) std::fprintf(stderr, "%s: error writing '%s'\n", program_.c_str(), path.c_str());
  return ok;
}

}  // namespace braid_perf
