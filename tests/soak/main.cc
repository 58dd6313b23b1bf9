// braid_soak: random collectives, sizes, types, ops, groups and communicator splits on
// N ranks (threads of this process, or forked processes) for a given time, every result
// checked; RSS, open fds and /dev/shm segments sampled and required flat.
//
//   braid_soak [--mode threads|procs] [--ranks 8] [--seconds 60 | --iterations N]
//              [--seed 1] [--sample-seconds S] [--max-block-bytes 4M]
//              [--rss-tol-mib 8] [--fd-tol 2] [--no-fd-trend] [--transport auto|local|shm|socket] [-v]
//              [--rotate-every 64] [--corrupt-iteration N]
//
// --rotate-every N replaces the main communicator by a split of itself every N
// iterations (0: never; a long-lived communicator's plan cache then grows with every
// distinct count). --corrupt-iteration N: self-test, rank 1 changes one result.
//
// RSS is sampled less the bytes of the test's own live buffers (counted by each rank),
// so what is judged is the library's memory (and this program's fixed overhead).
//
// Exit status: 0 when every op was right, no call failed, nothing grew beyond its
// tolerance and no segment was left in /dev/shm; 1 otherwise; 2 for bad arguments.
#include <malloc.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/soak/rank.h"
#include "tests/soak/sampler.h"

namespace soak {
namespace {

struct Options {
  Config cfg;
  bool procs = false;
  double samplePeriod = 0;  ///< 0: seconds / 100, within [0.5, 10]
  Tolerance tol;
  std::string transport;
};

/// Memory shared by the sampling process and the ranks (forked or not).
struct Shared {
  std::atomic<int> idState{0};  ///< 0 not yet, 1 ready, -1 failed
  ncclUniqueId id;
  RankStats ranks[kMaxRanks];
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "braid_soak: %s\nusage: braid_soak [--mode threads|procs] [--ranks N] "
               "[--seconds S | --iterations N] [--seed N] [--sample-seconds S] "
               "[--max-block-bytes B] [--rss-tol-mib M] [--fd-tol N] [--no-fd-trend] [--transport T] [-v]\n",
               why);
  std::exit(2);
}

double number(const char* s, const char* what) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end && (*end == 'K' || *end == 'k')) v *= 1024, ++end;
  else if (end && (*end == 'M' || *end == 'm')) v *= 1024 * 1024, ++end;
  if (end == s || (end && *end) || v < 0) usage((std::string("bad ") + what).c_str());
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--mode") {
      const std::string m = val();
      if (m != "threads" && m != "procs") usage("--mode is threads or procs");
      o.procs = m == "procs";
    } else if (a == "--ranks") {
      o.cfg.nranks = int(number(val(), "--ranks"));
    } else if (a == "--seconds") {
      o.cfg.seconds = number(val(), "--seconds");
    } else if (a == "--iterations") {
      o.cfg.iterations = uint64_t(number(val(), "--iterations"));
      o.cfg.seconds = 0;
    } else if (a == "--seed") {
      o.cfg.seed = uint64_t(number(val(), "--seed"));
    } else if (a == "--sample-seconds") {
      o.samplePeriod = number(val(), "--sample-seconds");
    } else if (a == "--max-block-bytes") {
      o.cfg.maxBlockBytes = size_t(number(val(), "--max-block-bytes"));
    } else if (a == "--rss-tol-mib") {
      o.tol.rssMiB = number(val(), "--rss-tol-mib");
    } else if (a == "--fd-tol") {
      o.tol.fds = number(val(), "--fd-tol");
    } else if (a == "--no-fd-trend") {
      o.tol.fdTrend = false;
    } else if (a == "--transport") {
      o.transport = val();
    } else if (a == "--rotate-every") {
      o.cfg.rotateEvery = uint64_t(number(val(), "--rotate-every"));
    } else if (a == "--corrupt-iteration") {
      o.cfg.corruptIteration = uint64_t(number(val(), "--corrupt-iteration"));
    } else if (a == "-v") {
      o.cfg.verbose = true;
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (o.cfg.nranks < 1 || o.cfg.nranks > kMaxRanks) usage("--ranks is 1..64");
  if (o.cfg.seconds <= 0 && o.cfg.iterations == 0) usage("give --seconds or --iterations");
  if (o.cfg.maxBlockBytes < 8) usage("--max-block-bytes is at least 8");
  if (o.samplePeriod <= 0)
    o.samplePeriod = std::min(10.0, std::max(0.5, o.cfg.seconds / 100));
  return o;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// RSS of each process less the live test buffers of its ranks (the library's memory
/// and this program's fixed overhead), fds, and the job's /dev/shm segments.
Sample takeSample(const std::vector<pid_t>& pids, double t, const Shared* sh, int nranks) {
  Sample s;
  s.seconds = t;
  for (size_t i = 0; i < pids.size(); ++i) {
    int64_t live = 0;
    for (int r = 0; r < nranks; ++r)
      if (pids.size() == 1 || size_t(r) == i) live += sh->ranks[r].liveBytes.load();
    s.rssMiB.push_back(rssMiB(pids[i]) - double(live) / (1024.0 * 1024.0));
    s.fds.push_back(openFds(pids[i]));
  }
  s.shm = countShmSegments(pids);
  return s;
}

/// Forks one child per rank; rank 0 makes the id after the fork (no library threads in
/// this process before fork()). Returns the pids.
std::vector<pid_t> forkRanks(const Options& o, Shared* sh) {
  std::vector<pid_t> pids;
  for (int r = 0; r < o.cfg.nranks; ++r) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("soak: fork");
      for (pid_t p : pids) kill(p, SIGKILL);
      std::exit(1);
    }
    if (pid == 0) {
      if (r == 0) {
        const ncclResult_t res = ncclGetUniqueId(&sh->id);
        sh->idState.store(res == ncclSuccess ? 1 : -1);
      }
      const auto t0 = std::chrono::steady_clock::now();
      while (sh->idState.load() == 0 && since(t0) < 60) usleep(1000);
      if (sh->idState.load() != 1) {
        std::fprintf(stderr, "soak: rank %d got no unique id\n", r);
        std::fflush(nullptr);
        _exit(3);
      }
      runRank(o.cfg, r, sh->id, &sh->ranks[r]);
      std::fflush(nullptr);
      _exit(0);
    }
    pids.push_back(pid);
  }
  return pids;
}

/// Whether every rank is done: returned from runRank, or (processes) its process is
/// gone (reaped here; a rank that died without finishing is reported).
bool allDone(const Options& o, Shared* sh, const std::vector<pid_t>& pids,
             std::vector<int>* status) {
  bool done = true;
  for (int r = 0; r < o.cfg.nranks; ++r) {
    if (o.procs && (*status)[size_t(r)] == -1) {
      int st = 0;
      if (waitpid(pids[size_t(r)], &st, WNOHANG) == pids[size_t(r)]) {
        (*status)[size_t(r)] = st;
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
          std::fprintf(stderr, "soak: rank %d process ended abnormally (status 0x%x)\n", r, st);
        continue;
      }
    }
    if (o.procs ? (*status)[size_t(r)] == -1 : sh->ranks[r].finished.load() == 0) done = false;
  }
  return done;
}

int run(const Options& o) {
  void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("soak: mmap");
    return 1;
  }
  auto* sh = new (mem) Shared();
  const int n = o.cfg.nranks;
  const double fdsBefore = openFds(getpid());
  const auto t0 = std::chrono::steady_clock::now();
  // Grace beyond the planned time: the stop check comes every 16 iterations, and a stuck
  // collective fails after BRAID_TIMEOUT_MS.
  const double deadline = (o.cfg.seconds > 0 ? o.cfg.seconds : 3600) + 240;
  std::vector<pid_t> pids;
  std::vector<std::thread> threads;
  if (o.procs) {
    pids = forkRanks(o, sh);
  } else {
    if (ncclGetUniqueId(&sh->id) != ncclSuccess) {
      std::fprintf(stderr, "soak: ncclGetUniqueId: %s\n", ncclGetLastError(nullptr));
      return 1;
    }
    pids.push_back(getpid());
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] { runRank(o.cfg, r, sh->id, &sh->ranks[r]); });
  }
  std::vector<Sample> samples;
  double nextSample = 0, nextReport = 60;
  bool hung = false;
  std::vector<int> status(size_t(n), -1);  // processes: wait status once reaped
  while (!allDone(o, sh, pids, &status)) {
    const double t = since(t0);
    bool warm = true;
    for (int r = 0; r < n; ++r) warm = warm && sh->ranks[r].warm.load() != 0;
    if (warm && t >= nextSample) {
      samples.push_back(takeSample(pids, t, sh, n));
      nextSample = t + o.samplePeriod;
    }
    if (!samples.empty() && t >= nextReport) {
      const Sample& s = samples.back();
      double rss = 0;
      for (double v : s.rssMiB) rss += v;
      std::fprintf(stderr, "soak: %.0f s: rank 0 at iteration %llu, %llu ops; RSS %.1f MiB, "
                   "shm %.0f\n", t, (unsigned long long)sh->ranks[0].iterations.load(),
                   (unsigned long long)sh->ranks[0].ops.load(), rss, s.shm);
      nextReport = t + 60;
    }
    if (t > deadline) {
      hung = true;
      std::fprintf(stderr, "soak: HANG: ranks still running after %.0f s:", t);
      for (int r = 0; r < n; ++r)
        if (!sh->ranks[r].finished.load())
          std::fprintf(stderr, " %d (iteration %llu)", r,
                       (unsigned long long)sh->ranks[r].iterations.load());
      std::fprintf(stderr, "\n");
      if (!o.procs) _exit(1);  // threads cannot be cancelled
      for (int r = 0; r < n; ++r)
        if (status[size_t(r)] == -1) kill(pids[size_t(r)], SIGKILL);
      break;
    }
    usleep(20000);
  }
  const double elapsed = since(t0);
  int badExits = 0;
  for (auto& th : threads) th.join();
  if (o.procs) {
    for (int r = 0; r < n; ++r) {
      int& st = status[size_t(r)];
      if (st == -1) waitpid(pids[size_t(r)], &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++badExits;
    }
  }
  // After every communicator is gone (threads) or every rank exited (procs).
  const int leaked = countShmSegments(pids);
  const double fdsAfter = o.procs ? fdsBefore : openFds(getpid());

  uint64_t ops = 0, wrong = 0, errors = 0, groups = 0, splits = 0, childOps = 0, iters = 0,
           rotations = 0;
  for (int r = 0; r < n; ++r) {
    const RankStats& s = sh->ranks[r];
    ops += s.ops.load();
    wrong += s.wrong.load();
    errors += s.errors.load();
    groups += s.groups.load();
    splits += s.splits.load();
    childOps += s.childOps.load();
    rotations = std::max<uint64_t>(rotations, s.rotations.load());
    iters = std::max<uint64_t>(iters, s.iterations.load());
  }
  const Trend tr = analyze(samples, o.tol);
  const bool fdsBack = fdsAfter <= fdsBefore + o.tol.fds;
  const bool pass = !hung && badExits == 0 && wrong == 0 && errors == 0 && tr.flat &&
                    tr.enoughSamples && leaked == 0 && fdsBack;
  std::printf("soak: mode=%s ranks=%d seed=%llu transport=%s seconds=%.1f iterations=%llu "
              "ops=%llu (rank-ops; groups=%llu splits=%llu child-ops=%llu rotations=%llu) wrong=%llu "
              "errors=%llu samples=%zu\n",
              o.procs ? "procs" : "threads", n, (unsigned long long)o.cfg.seed,
              o.transport.empty() ? "auto" : o.transport.c_str(), elapsed,
              (unsigned long long)iters, (unsigned long long)ops, (unsigned long long)groups,
              (unsigned long long)splits, (unsigned long long)childOps,
              (unsigned long long)rotations, (unsigned long long)wrong, (unsigned long long)errors, samples.size());
  std::printf("soak: RSS-less-buffers MiB first=%.1f last=%.1f growth=%+.2f slope=%+.3f/min (tol +%.0f "
              "per process) | fds first=%.0f last=%.0f growth=%+.1f slope=%+.3f/min (tol +%.0f"
              " per process; before init %.0f, after destroy %.0f) | shm first=%.0f last=%.0f "
              "growth=%+.1f slope=%+.3f/min leaked=%d\n",
              tr.rssFirst, tr.rssLast, tr.rssGrowth, tr.rssSlope, o.tol.rssMiB, tr.fdFirst,
              tr.fdLast, tr.fdGrowth, tr.fdSlope, o.tol.fds, fdsBefore, fdsAfter, tr.shmFirst,
              tr.shmLast, tr.shmGrowth, tr.shmSlope, leaked);
  if (!tr.enoughSamples) std::printf("soak: too few samples (%zu < 9)\n", samples.size());
  if (!tr.failures.empty()) std::printf("soak: growth:\n%s", tr.failures.c_str());
  if (!fdsBack) std::printf("soak: fds after destroying every communicator exceed those "
                            "before init\n");
  if (badExits) std::printf("soak: %d rank processes did not exit 0\n", badExits);
  std::printf("soak: %s\n", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace
}  // namespace soak

int main(int argc, char** argv) {
  const soak::Options o = soak::parse(argc, argv);
  // A fixed mmap threshold: large buffers go back to the system when freed, so RSS
  // follows what is live instead of glibc's adaptive heap growth.
  mallopt(M_MMAP_THRESHOLD, 256 * 1024);
  // A stuck collective becomes an error within a minute instead of five.
  setenv("BRAID_TIMEOUT_MS", "60000", 0);
  if (!o.transport.empty()) setenv("BRAID_TRANSPORT", o.transport.c_str(), 1);
  signal(SIGPIPE, SIG_IGN);
  return soak::run(o);
}
