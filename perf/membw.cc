// membw: a STREAM-like copy probe, the memory-bandwidth reference the perf numbers are
// quoted against. Copies a buffer of -s bytes (default 256 MiB) with memcpy, split over
// T threads (1 and 2 by default), and reports GB/s counting bytes read + written, the
// median of -n repetitions; -J writes them as JSON too (scripts/run-compare.sh reads it).
//   usage: membw [-s bytes] [-n reps] [-t threads...] [-J file.json]   (--help)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "src/tools/cli.h"

namespace {

double copyOnce(char* dst, const char* src, size_t bytes, int threads) {
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  size_t part = bytes / size_t(threads);
  for (int t = 0; t < threads; ++t) {
    size_t off = part * size_t(t), n = t == threads - 1 ? bytes - off : part;
    pool.emplace_back([=] { memcpy(dst + off, src + off, n); });
  }
  for (auto& th : pool) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t(256) << 20;
  int reps = 9;
  std::vector<int> threadCounts{1, 2};
  std::string json;
  braid::cli::App app("A STREAM-like memcpy bandwidth probe: GB/s counting bytes read + "
                      "written, the median of the repetitions, per thread count.",
                      "membw");
  app.addSize("-s", &bytes, "bytes copied, K/M/G suffixes (default 256M)");
  app.add_option("-n", reps, "repetitions (default 9)")->check(braid::cli::range(1, 1 << 30));
  app.add_option("-t", threadCounts, "thread counts to measure (default 1 2)")
      ->check(braid::cli::range(1, 1024))
      ->multi_option_policy(braid::cli::MultiOptionPolicy::TakeAll);
  app.add_option("-J", json, "write the results as JSON to this file")
      ->check(braid::cli::nonEmpty())
      ->type_name("FILE");
  int exitCode = 0;
  if (!app.parseCommandLine(argc, argv, &exitCode)) return exitCode;
  if (bytes == 0) return app.fail("-s", "must be at least 1 byte");
  std::string rows;
  std::vector<char> src(bytes, 1), dst(bytes, 0);  // touched: no page faults timed
  printf("# membw: memcpy of %zu bytes, GB/s = (read + written) / time, median of %d\n", bytes,
         reps);
  for (int t : threadCounts) {
    std::vector<double> gbps;
    for (int r = 0; r < reps; ++r)
      gbps.push_back(2.0 * double(bytes) / copyOnce(dst.data(), src.data(), bytes, t) / 1e9);
    std::sort(gbps.begin(), gbps.end());
    printf("threads %d  copy %.2f GB/s\n", t, gbps[gbps.size() / 2]);
    char row[160];
    snprintf(row, sizeof(row),
             "%s\n    {\"threads\": %d, \"copy_gbps\": %.6g, \"min_gbps\": %.6g, "
             "\"max_gbps\": %.6g}",
             rows.empty() ? "" : ",", t, gbps[gbps.size() / 2], gbps.front(), gbps.back());
    rows += row;
  }
  if (json.empty()) return 0;
  FILE* f = fopen(json.c_str(), "w");
  if (f == nullptr) {
    fprintf(stderr, "%s: cannot write '%s'\n", argv[0], json.c_str());
    return 1;
  }
  fprintf(f,
          "{\n  \"tool\": \"membw\",\n  \"bytes\": %zu,\n  \"reps\": %d,\n"
          "  \"metric\": \"memcpy GB/s, bytes read + written, median of reps\",\n"
          "  \"results\": [%s\n  ]\n}\n",
          bytes, reps, rows.c_str());
  return fclose(f) == 0 ? 0 : 1;
}
