#include "tests/soak/sampler.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace soak {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/// Least-squares slope of y over x (seconds), per minute.
double slopePerMinute(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  if (n < 2) return 0;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) {
    sx += x[i];
    sy += y[i];
    sxx += x[i] * x[i];
    sxy += x[i] * y[i];
  }
  const double d = double(n) * sxx - sx * sx;
  return d == 0 ? 0 : 60.0 * (double(n) * sxy - sx * sy) / d;
}

}  // namespace

int countShmSegments(const std::vector<pid_t>& pids) {
  DIR* d = opendir("/dev/shm");
  if (!d) return 0;
  int n = 0;
  while (dirent* e = readdir(d)) {
    const char* name = e->d_name;
    if (std::strncmp(name, "braid-", 6) != 0) continue;
    const char* p = name + 6;
    if (std::strncmp(p, "rma-", 4) == 0) p += 4;
    const long pid = std::strtol(p, nullptr, 10);
    if (std::find(pids.begin(), pids.end(), pid_t(pid)) != pids.end()) ++n;
  }
  closedir(d);
  return n;
}

double rssMiB(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/statm", int(pid));
  FILE* f = std::fopen(path, "r");
  if (!f) return -1;
  // Private resident memory: resident minus shared pages. The shared-memory FIFOs' pages
  // (touched as traffic reaches more slots and peers, up to NCCL_BUFFSIZE per
  // connection) are not private; segments are counted on their own (shmSegments).
  long size = 0, resident = -1, shared = 0;
  const int got = std::fscanf(f, "%ld %ld %ld", &size, &resident, &shared);
  std::fclose(f);
  if (got != 3) return -1;
  return double(resident - shared) * double(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

double openFds(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd", int(pid));
  DIR* d = opendir(path);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

Trend analyze(const std::vector<Sample>& samples, const Tolerance& tol) {
  Trend t;
  const size_t n = samples.size();
  t.enoughSamples = n >= 9;
  if (n == 0) return t;
  const size_t mid0 = n / 3, last0 = 2 * n / 3;
  const size_t procs = samples.front().rssMiB.size();
  std::vector<double> xs;
  for (size_t i = mid0; i < n; ++i) xs.push_back(samples[i].seconds);

  // Growth of one series (values at sample i from get(i)) and its trend.
  auto study = [&](const std::function<double(size_t)>& get, double tolerance,
                   const std::string& what, double* growth) {
    std::vector<double> mid, last, ys;
    for (size_t i = mid0; i < last0; ++i) mid.push_back(get(i));
    for (size_t i = last0; i < n; ++i) last.push_back(get(i));
    *growth = median(last) - median(mid);
    if (t.enoughSamples && *growth > tolerance) {
      t.flat = false;
      char line[200];
      std::snprintf(line, sizeof line,
                    "%s grew by %.2f (last-third median %.2f vs middle-third %.2f; "
                    "tolerance %.2f)\n",
                    what.c_str(), *growth, median(last), median(mid), tolerance);
      t.failures += line;
    }
  };
  double g = 0;
  for (size_t p = 0; p < procs; ++p) {
    study([&](size_t i) { return samples[i].rssMiB[p]; }, tol.rssMiB,
          "RSS (MiB) of process " + std::to_string(p), &g);
    if (tol.fdTrend)
      study([&](size_t i) { return samples[i].fds[p]; }, tol.fds,
            "open fds of process " + std::to_string(p), &g);
  }
  auto total = [&](size_t i, bool rss) {
    double s = 0;
    for (double v : rss ? samples[i].rssMiB : samples[i].fds) s += v;
    return s;
  };
  study([&](size_t i) { return samples[i].shm; }, tol.shm, "shm segments", &t.shmGrowth);
  std::vector<double> rssY, fdY, shmY;
  for (size_t i = mid0; i < n; ++i) {
    rssY.push_back(total(i, true));
    fdY.push_back(total(i, false));
    shmY.push_back(samples[i].shm);
  }
  t.rssFirst = total(0, true);
  t.rssLast = total(n - 1, true);
  t.fdFirst = total(0, false);
  t.fdLast = total(n - 1, false);
  t.shmFirst = samples.front().shm;
  t.shmLast = samples.back().shm;
  t.rssSlope = slopePerMinute(xs, rssY);
  t.fdSlope = slopePerMinute(xs, fdY);
  t.shmSlope = slopePerMinute(xs, shmY);
  // Totals' growth, for the summary (the verdict is per process).
  std::vector<double> midR, lastR, midF, lastF;
  for (size_t i = mid0; i < last0; ++i) {
    midR.push_back(total(i, true));
    midF.push_back(total(i, false));
  }
  for (size_t i = last0; i < n; ++i) {
    lastR.push_back(total(i, true));
    lastF.push_back(total(i, false));
  }
  t.rssGrowth = median(lastR) - median(midR);
  t.fdGrowth = median(lastF) - median(midF);
  return t;
}

}  // namespace soak
