// braid_fault_campaign: many short jobs of 4 ranks as processes over host memory, each
// with one injected fault (tests/reliability/fault_job.h), and a table of outcomes.
//
//   braid_fault_campaign [--timeout-ms 5000] [--bootstrap-timeout-ms T]
//                        [--only NAME[,NAME...]] [--list] [--switch PATH] [-v]
//
// --timeout-ms sets BRAID_TIMEOUT_MS of every job; --bootstrap-timeout-ms sets
// BRAID_BOOTSTRAP_TIMEOUT_MS (default: the same value; 0 leaves the library default).
//
// NAME is a job name as --list prints it (kind.transport.coll.phase[.rVICTIM]).
// Exit status 0 when every job is acceptable (JobResult::ok): no hang, no leaked
// segment, no wrong data, and every survivor of a killed or reset rank failed within
// 2 x BRAID_TIMEOUT_MS; 1 otherwise; 2 for bad arguments.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/reliability/fault_job.h"

#ifndef BRAID_SWITCH_BIN
#define BRAID_SWITCH_BIN "braid-switch"
#endif

namespace fault {
namespace {

std::vector<FaultSpec> campaign(int timeoutMs, int bootstrapTimeoutMs) {
  const std::vector<std::string> colls = {"allreduce", "allgather", "reducescatter",
                                          "broadcast", "alltoall",  "sendrecv"};
  std::vector<FaultSpec> jobs;
  auto add = [&](const std::string& kind, const std::string& transport, const std::string& coll,
                 const std::string& phase, int victim) {
    FaultSpec f;
    f.kind = kind;
    f.transport = transport;
    f.coll = coll;
    f.phase = phase;
    f.victim = victim;
    f.timeoutMs = timeoutMs;
    f.bootstrapTimeoutMs = bootstrapTimeoutMs;
    jobs.push_back(f);
  };
  int i = 0;
  for (const char* t : {"shm", "socket"})
    for (const auto& c : colls)
      for (const char* p : {"before", "mid", "after"}) add("kill", t, c, p, i++ % 4);
  for (const char* t : {"shm", "socket"})
    for (const auto& c : colls) add("kill", t, c, "setup", i++ % 4);
  for (const char* t : {"shm", "socket"})
    for (const char* c : {"allreduce", "broadcast", "alltoall", "sendrecv"})
      add("stop", t, c, "mid", i++ % 4);
  for (const auto& c : colls)
    for (const char* p : {"before", "mid", "after"}) add("reset", "socket", c, p, i++ % 4);
  for (const auto& c : colls) add("unlink-setup", "shm", c, "setup", 0);
  for (const char* c : {"allreduce", "alltoall", "sendrecv"}) add("unlink-mid", "shm", c, "mid", 0);
  for (int rep = 0; rep < 2; ++rep)
    for (const char* a : {"collnet_chain", "collnet_direct"}) add("switch", "auto", a, "mid", 0);
  return jobs;
}

struct Row {
  int runs = 0, okRuns = 0, survivors = 0, failedInTime = 0, completed = 0, named = 0, victim = 0,
      failed = 0, hangs = 0, leaked = 0, wrong = 0, notInjected = 0;
  double maxError = 0;
};

std::string rowKey(const FaultSpec& f) {
  if (f.kind == "switch") return "switch killed (" + f.coll + ")";
  if (f.kind == "kill") return "rank SIGKILL, " + f.transport + ", " + f.phase;
  if (f.kind == "stop") return "rank SIGSTOP (alive, silent), " + f.transport + ", " + f.phase;
  if (f.kind == "reset") return "TCP reset, " + f.transport + ", " + f.phase;
  if (f.kind == "unlink-setup") return "shm segments removed at setup";
  return "shm segments removed mid-run (new comm)";
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "braid_fault_campaign: %s\nusage: braid_fault_campaign [--timeout-ms MS]"
               " [--bootstrap-timeout-ms MS] [--only NAME[,NAME...]] [--list]"
               " [--switch PATH] [-v]\n", why);
  std::exit(2);
}

}  // namespace
}  // namespace fault

int main(int argc, char** argv) {
  using namespace fault;
  int timeoutMs = 5000, bootstrapTimeoutMs = -1;
  std::set<std::string> only;
  bool list = false, verbose = false;
  std::string switchBin = BRAID_SWITCH_BIN;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--timeout-ms") {
      timeoutMs = std::atoi(val().c_str());
      if (timeoutMs < 100) usage("--timeout-ms is at least 100");
    } else if (a == "--bootstrap-timeout-ms") {
      bootstrapTimeoutMs = std::atoi(val().c_str());
    } else if (a == "--only") {
      std::stringstream ss(val());
      std::string item;
      while (std::getline(ss, item, ',')) only.insert(item);
    } else if (a == "--list") {
      list = true;
    } else if (a == "--switch") {
      switchBin = val();
    } else if (a == "-v") {
      verbose = true;
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  signal(SIGPIPE, SIG_IGN);
  std::vector<FaultSpec> jobs;
  if (bootstrapTimeoutMs < 0) bootstrapTimeoutMs = timeoutMs;
  for (const auto& f : campaign(timeoutMs, bootstrapTimeoutMs))
    if (only.empty() || only.count(f.name())) jobs.push_back(f);
  if (list) {
    for (const auto& f : jobs) std::printf("%s\n", f.name().c_str());
    return 0;
  }
  if (jobs.size() < only.size()) usage("--only names a job that does not exist (see --list)");

  std::vector<std::string> order;
  std::map<std::string, Row> rows;
  int bad = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& f : jobs) {
    const JobResult r = runJob(f, switchBin);
    const bool ok = r.ok(f);
    bad += !ok;
    std::printf("%-42s %s survivors=%d failed=%d in-2x=%d completed=%d max=%.2fs named=%d "
                "victim=%d hung=%d leaked=%d wrong=%d%s%s%s\n",
                f.name().c_str(), ok ? "ok  " : "BAD ", r.survivors, r.failed, r.failedInTime,
                r.completed, r.maxErrorSeconds, r.namedPeer, r.namedVictim, r.hung, r.leaked, r.wrong,
                r.faultInjected ? "" : " (no fault took effect)",
                (verbose || !ok) && !r.sampleError.empty() ? " | " : "",
                (verbose || !ok) ? r.sampleError.substr(0, 200).c_str() : "");
    if (verbose || !ok) std::printf("%s", r.details.c_str());
    std::fflush(stdout);
    const std::string key = rowKey(f);
    if (!rows.count(key)) order.push_back(key);
    Row& row = rows[key];
    ++row.runs;
    row.okRuns += ok;
    row.survivors += r.survivors;
    row.failed += r.failed;
    row.failedInTime += r.failedInTime;
    row.completed += r.completed;
    row.named += r.namedPeer;
    row.victim += r.namedVictim;
    row.hangs += r.hung;
    row.leaked += r.leaked;
    row.wrong += r.wrong;
    row.notInjected += !r.faultInjected;
    row.maxError = std::max(row.maxError, r.maxErrorSeconds);
  }
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\nfault campaign: 4 ranks as processes, host memory, BRAID_TIMEOUT_MS=%d, "
              "BRAID_BOOTSTRAP_TIMEOUT_MS=%d, hang cap %d ms after the fault, %zu jobs in "
              "%.0f s\n\n", timeoutMs, bootstrapTimeoutMs, 4 * timeoutMs, jobs.size(), took);
  std::printf("| fault | runs | survivors | failed within 2x timeout | completed (no effect) |"
              " max s to error | error names a peer (the victim) | hangs | leaked segments |"
              " wrong data | ok runs |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
  Row total;
  for (const auto& key : order) {
    const Row& r = rows[key];
    std::printf("| %s | %d | %d | %d | %d | %.2f | %d/%d (%d) | %d | %d | %d | %d |\n",
                key.c_str(), r.runs, r.survivors, r.failedInTime, r.completed, r.maxError,
                r.named, r.failed, r.victim, r.hangs, r.leaked, r.wrong, r.okRuns);
    total.runs += r.runs;
    total.survivors += r.survivors;
    total.failedInTime += r.failedInTime;
    total.completed += r.completed;
    total.named += r.named;
    total.victim += r.victim;
    total.failed += r.failed;
    total.hangs += r.hangs;
    total.leaked += r.leaked;
    total.wrong += r.wrong;
    total.okRuns += r.okRuns;
    total.maxError = std::max(total.maxError, r.maxError);
  }
  std::printf("| **all** | %d | %d | %d | %d | %.2f | %d/%d (%d) | %d | %d | %d | %d |\n",
              total.runs, total.survivors, total.failedInTime, total.completed, total.maxError,
              total.named, total.failed, total.victim, total.hangs, total.leaked, total.wrong,
              total.okRuns);
  std::printf("\nfault campaign: %s (%d of %zu jobs not acceptable)\n", bad ? "FAIL" : "PASS",
              bad, jobs.size());
  return bad ? 1 : 0;
}
