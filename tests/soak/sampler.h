// Resource samples of a soak job: resident memory and open file descriptors of each of
// its processes, and the shared-memory segments (/dev/shm/braid-<pid>-...) those
// processes created. Flatness: after warm-up, the median of the last third of the
// samples may exceed the median of the middle third by at most a stated tolerance.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace soak {

struct Sample {
  double seconds = 0;           ///< since the job started
  std::vector<double> rssMiB;   ///< per process: private resident memory (resident - shared)
  std::vector<double> fds;      ///< per process
  double shm = 0;               ///< segments of the job's processes in /dev/shm
};

/// Segments in /dev/shm named braid-<pid>-... or braid-rma-<pid>-... for `pids`.
int countShmSegments(const std::vector<pid_t>& pids);
/// Resident set of `pid` in MiB (-1: gone).
double rssMiB(pid_t pid);
/// Open descriptors of `pid` (-1: gone).
double openFds(pid_t pid);

struct Tolerance {
  double rssMiB = 8;  ///< per process
  double fds = 2;     ///< per process
  /// Judge the trend of open fds during the run (else only fds after destroying every
  /// communicator against those before init).
  bool fdTrend = true;
  double shm = 0;     ///< whole job
};

/// Flatness verdict and the summary figures.
struct Trend {
  bool enoughSamples = false;
  bool flat = true;
  std::string failures;  ///< one line per series that grew beyond its tolerance
  // Totals over the processes: first sample, last sample, least-squares slope per
  // minute over the last two thirds, and growth (last-third median - middle-third median).
  double rssFirst = 0, rssLast = 0, rssSlope = 0, rssGrowth = 0;
  double fdFirst = 0, fdLast = 0, fdSlope = 0, fdGrowth = 0;
  double shmFirst = 0, shmLast = 0, shmSlope = 0, shmGrowth = 0;
};

Trend analyze(const std::vector<Sample>& samples, const Tolerance& tol);

}  // namespace soak
