// The nccl-tests table and the JSON file (see report.h).
#include "perf/report.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

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

/// One place's figures (null where it did not run); NaN and inf are written as null.
nlohmann::ordered_json jsonPlace(const PlaceResult& p) {
  if (!p.valid) return nullptr;
  nlohmann::ordered_json o;
  o["time_us"] = p.timeUs;
  o["algbw_gbps"] = p.algBw;
  o["busbw_gbps"] = p.busBw;
  o["wrong"] = p.checked ? nlohmann::ordered_json(p.wrong) : nlohmann::ordered_json(nullptr);
  return o;
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
  nlohmann::ordered_json j;
  j["tool"] = "braid-perf";
  j["program"] = program_;
  j["collective"] = collective_;
  j["nranks"] = nranks_;
  j["nprocs"] = nprocs_;
  j["nthreads"] = opt_.nThreads;
  j["ngpus"] = opt_.nGpus;
  j["iters"] = opt_.iters;
  j["warmup_iters"] = opt_.warmup;
  j["agg_iters"] = opt_.aggIters;
  j["check"] = opt_.check;
  j["average"] = opt_.average;
  if (opt_.device != 0) j["memory"] = "device";
  nlohmann::ordered_json results = nlohmann::ordered_json::array();
  for (const Row& r : rows_) {
    nlohmann::ordered_json o;
    o["size"] = r.bytes;
    o["count"] = r.count;
    o["type"] = typeName(r.type);
    o["redop"] = opName(r.op);
    o["root"] = r.root;
    o["out_of_place"] = jsonPlace(r.outOfPlace);
    o["in_place"] = jsonPlace(r.inPlace);
    results.push_back(std::move(o));
  }
  j["results"] = std::move(results);
  j["wrong_total"] = totalWrong();
  j["avg_busbw_gbps"] = avgBusBw();
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "%s: cannot write JSON file '%s'\n", program_.c_str(), path.c_str());
    return false;
  }
  const std::string text = j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok) std::fprintf(stderr, "%s: error writing '%s'\n", program_.c_str(), path.c_str());
  return ok;
}

}  // namespace braid_perf
