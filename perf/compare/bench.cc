// The sweep driver and JSON writer of the peer benchmarks (see bench.h). Timing follows
// perf/common.cc: barrier, `iters` back-to-back operations, time per operation per rank,
// averaged over the ranks (Braid's default -a 1). Each repetition is a whole sweep over
// every case, so repetitions of one size are spread over the run; the JSON reports the
// median over repetitions and keeps every sample.
#include "perf/compare/bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace braid_compare {

namespace {

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<float, FreeDeleter>;

/// Page-aligned, touched host memory of at least one page.
HostBuffer allocate(size_t elems) {
  constexpr size_t kAlign = 4096;
  size_t bytes = elems * sizeof(float);
  bytes = bytes == 0 ? kAlign : (bytes + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, bytes);
  if (p == nullptr) {
    std::fprintf(stderr, "compare bench: out of memory allocating %zu bytes\n", bytes);
    std::exit(1);
  }
  std::memset(p, 0, bytes);
  return HostBuffer(static_cast<float*>(p));
}

/// Input element k of rank r: small integers, so every sum is exact in float.
float inputValue(int r, size_t k) { return static_cast<float>(r + 1 + static_cast<int>(k % 13)); }

float reducedValue(int n, size_t k) {
  return static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(k % 13));
}

/// Expected output element k of rank `rank`; false when the element is not checked.
bool expectedValue(Coll c, const Counts& k, int rank, int n, int root, size_t i, float* v) {
  const size_t per = k.paramCount;
  switch (c) {
    case Coll::kAllReduce:
      *v = reducedValue(n, i);
      return true;
    case Coll::kReduceScatter:
      *v = reducedValue(n, static_cast<size_t>(rank) * per + i);
      return true;
    case Coll::kAllGather:
      *v = inputValue(static_cast<int>(i / per), i % per);
      return true;
    case Coll::kAlltoall:
      *v = inputValue(static_cast<int>(i / per), static_cast<size_t>(rank) * per + i % per);
      return true;
    case Coll::kBroadcast:
      *v = inputValue(root, i);
      return true;
    case Coll::kReduce:
      if (rank != root) return false;
      *v = reducedValue(n, i);
      return true;
  }
  return false;
}

/// Fill the output with NaN, write the input, run once, count wrong output elements.
/// With `corrupt`, the first checked element is damaged before it is compared.
double checkOnce(const Op& op, Coll c, const Counts& k, int rank, int n, int root, bool corrupt) {
  for (size_t i = 0; i < k.recvElems; ++i) op.out[i] = std::nanf("");
  for (size_t i = 0; i < k.sendElems; ++i) op.in[i] = inputValue(rank, i);
  op.run();
  double wrong = 0;
  for (size_t i = 0; i < k.recvElems; ++i) {
    float want = 0;
    if (!expectedValue(c, k, rank, n, root, i, &want)) continue;
    if (corrupt) {
      op.out[i] += 1;
      corrupt = false;
    }
    if (!(op.out[i] == want)) wrong += 1;
  }
  return wrong;
}

/// Results of one case at one size over the repetitions.
struct Cell {
  size_t bytes = 0;
  size_t count = 0;
  std::vector<double> samplesUs;  // one per repetition, averaged over ranks
  double wrong = 0;
  bool checked = false;
  std::string error;  // non-empty: failed (no further repetitions)
};

using Json = nlohmann::ordered_json;  // keys in the order written, for people reading

/// The place object of Braid's JSON plus the samples; busbw from the median time. NaN
/// and inf are written as null.
Json jsonPlace(const Cell* cell, Coll c, int nranks, double* busOut) {
  if (cell == nullptr || !cell->error.empty() || cell->samplesUs.empty()) return nullptr;
  const double t = median(cell->samplesUs);
  const double alg = t > 0 ? static_cast<double>(cell->bytes) / t / 1e3 : 0;
  const double bus = alg * busBwFactor(c, nranks);
  *busOut = bus;
  Json o;
  o["time_us"] = t;
  o["algbw_gbps"] = alg;
  o["busbw_gbps"] = bus;
  o["wrong"] = cell->checked ? Json(cell->wrong) : Json(nullptr);
  o["samples_us"] = cell->samplesUs;
  return o;
}

/// Everything the JSON file of one (collective, algorithm) needs.
struct FileSpec {
  Coll coll;
  std::string algorithm;
  const std::vector<Cell>* oop = nullptr;
  const std::vector<Cell>* ip = nullptr;
};

bool writeJson(const std::string& path, const FileSpec& f, const BenchOptions& opt, int nranks,
               const std::string& program, const std::string& library) {
  Json j;
  j["tool"] = "braid-compare";
  j["program"] = program;
  j["library"] = library;
  j["algorithm"] = f.algorithm;
  j["variant"] = opt.variant;
  j["collective"] = collName(f.coll);
  j["nranks"] = nranks;
  j["nprocs"] = nranks;
  j["nthreads"] = 1;
  j["ngpus"] = 1;
  j["iters"] = opt.iters;
  j["warmup_iters"] = opt.warmup;
  j["agg_iters"] = 1;
  j["check"] = opt.check;
  j["average"] = 1;
  j["reps"] = opt.reps;
  Json results = Json::array();
  const std::vector<Cell>& base = f.oop != nullptr ? *f.oop : *f.ip;
  double wrongTotal = 0, busSum = 0;
  int busN = 0;
  for (size_t i = 0; i < base.size(); ++i) {
    const Cell* o = f.oop != nullptr ? &(*f.oop)[i] : nullptr;
    const Cell* p = f.ip != nullptr ? &(*f.ip)[i] : nullptr;
    std::string error;
    for (const Cell* cell : {o, p}) {
      if (cell == nullptr) continue;
      if (cell->checked) wrongTotal += cell->wrong;
      if (!cell->error.empty()) error += (error.empty() ? "" : "; ") + cell->error;
    }
    double bo = -1, bi = -1;
    Json row;
    row["size"] = base[i].bytes;
    row["count"] = base[i].count;
    row["type"] = "float";
    row["redop"] = collReduces(f.coll) ? "sum" : "none";
    row["root"] = collRooted(f.coll) ? opt.root : -1;
    row["out_of_place"] = jsonPlace(o, f.coll, nranks, &bo);
    row["in_place"] = jsonPlace(p, f.coll, nranks, &bi);
    if (!error.empty()) row["error"] = error;
    for (double b : {bo, bi}) {
      if (b >= 0) {
        busSum += b;
        ++busN;
      }
    }
    results.push_back(std::move(row));
  }
  j["results"] = std::move(results);
  j["wrong_total"] = wrongTotal;
  j["avg_busbw_gbps"] = busN ? busSum / busN : 0;
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (out == nullptr) {
    std::fprintf(stderr, "%s: cannot write JSON file '%s'\n", program.c_str(), path.c_str());
    return false;
  }
  const std::string text = j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  bool ok = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  ok = std::fclose(out) == 0 && ok;
  if (!ok) std::fprintf(stderr, "%s: error writing '%s'\n", program.c_str(), path.c_str());
  return ok;
}

/// Measure one case at one size in one repetition; every rank calls sumDoubles once.
void measureCell(Backend& be, const BenchOptions& opt, const Case& cs, const Buffers& bufs,
                 size_t requested, int rep, Cell* cell) {
  const int n = be.size();
  const Counts k = collCounts(cs.coll, requested, sizeof(float), n);
  cell->bytes = k.count * sizeof(float);
  cell->count = k.count;
  // A case that failed in an earlier repetition failed on every rank (the failure flag
  // is summed), so every rank skips it alike.
  if (!cell->error.empty()) return;
  double v[3] = {0, 0, 0};  // time, failed ranks, wrong elements
  std::string error;
  const bool doCheck = rep == 0 && opt.check > 0;
  try {
    const Op op = cs.prepare(bufs, k, opt.root);
    for (int w = 0; w < opt.warmup; ++w) op.run();
    be.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < opt.iters; ++it) op.run();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    v[0] = s * 1e6 / opt.iters;
    if (doCheck) v[2] = checkOnce(op, cs.coll, k, be.rank(), n, opt.root, opt.corrupt);
  } catch (const std::exception& e) {
    error = e.what();
    v[1] = 1;
  }
  be.sumDoubles(v, 3);
  if (v[1] > 0) {
    cell->error = error.empty() ? "failed on another rank" : error;
    // Keep the message single-line and short for the table.
    for (char& ch : cell->error) {
      if (ch == '\n' || ch == '\r') ch = ' ';
    }
    if (cell->error.size() > 300) cell->error.resize(300);
    cell->samplesUs.clear();
    return;
  }
  cell->samplesUs.push_back(v[0] / n);
  if (doCheck) {
    cell->checked = true;
    cell->wrong = v[2];
  }
}

}  // namespace

int runBench(Backend& be, const BenchOptions& opt, const std::vector<Case>& cases,
             const std::string& program, const std::string& library) {
  const int n = be.size();
  const std::vector<size_t> sizes = sweepSizes(opt);
  size_t sendMax = 1, recvMax = 1;
  for (const Case& cs : cases) {
    const Counts k = collCounts(cs.coll, opt.maxBytes, sizeof(float), n);
    sendMax = std::max(sendMax, k.sendElems);
    recvMax = std::max(recvMax, k.recvElems);
  }
  HostBuffer send = allocate(sendMax);
  HostBuffer recv = allocate(recvMax);
  const Buffers bufs{send.get(), recv.get()};
  std::vector<std::vector<Cell>> cells(cases.size(), std::vector<Cell>(sizes.size()));
  const bool printer = be.rank() == 0;
  for (int rep = 0; rep < opt.reps; ++rep) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const Case& cs = cases[c];
      for (size_t s = 0; s < sizes.size(); ++s) {
        Cell& cell = cells[c][s];
        measureCell(be, opt, cs, bufs, sizes[s], rep, &cell);
        if (!printer) continue;
        if (!cell.error.empty()) {
          std::printf("%-14s %-16s %-3s %12zu  error: %s\n", collName(cs.coll),
                      cs.algorithm.c_str(), cs.inPlace ? "ip" : "oop", cell.bytes,
                      cell.error.c_str());
        } else {
          const double t = cell.samplesUs.back();
          const double bus =
              t > 0 ? static_cast<double>(cell.bytes) / t / 1e3 * busBwFactor(cs.coll, n) : 0;
          std::printf("%-14s %-16s %-3s %12zu  rep %d  %10.2f us  busbw %7.3f GB/s%s\n",
                      collName(cs.coll), cs.algorithm.c_str(), cs.inPlace ? "ip" : "oop",
                      cell.bytes, rep, t, bus,
                      cell.checked && cell.wrong > 0 ? "  WRONG RESULTS" : "");
        }
        std::fflush(stdout);
      }
    }
  }
  int rc = 0;
  for (const std::vector<Cell>& row : cells) {
    for (const Cell& cell : row) {
      if (cell.checked && cell.wrong > 0) rc = 1;
    }
  }
  if (!printer || opt.jsonPrefix.empty()) return rc;
  // One file per (collective, algorithm): out-of-place and in-place cases share it.
  std::map<std::string, FileSpec> files;
  for (size_t c = 0; c < cases.size(); ++c) {
    const Case& cs = cases[c];
    std::string name = collName(cs.coll);
    if (cs.algorithm != "default") name += "." + cs.algorithm;
    FileSpec& f = files[name];
    f.coll = cs.coll;
    f.algorithm = cs.algorithm;
    (cs.inPlace ? f.ip : f.oop) = &cells[c];
  }
  for (const auto& entry : files) {
    if (!writeJson(opt.jsonPrefix + entry.first + ".json", entry.second, opt, n, program,
                   library)) {
      rc = 1;
    }
  }
  return rc;
}

}  // namespace braid_compare
