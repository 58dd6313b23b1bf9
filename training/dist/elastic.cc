// Elastic membership over a shared directory (see elastic.h for the protocol).
#include "training/dist/elastic.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace braid {
namespace train {
namespace {

std::string readFile(const std::string& path, bool* ok) {
  std::ifstream in(path);
  *ok = bool(in);
  if (!in) return "";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Writes `text` to path via a temporary file and rename(2): readers see all or nothing.
void writeAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    if (!out.flush()) throw std::runtime_error("elastic: cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    throw std::runtime_error("elastic: cannot rename " + tmp + ": " + std::strerror(errno));
}

/// Fields of /proc/<pid>/stat after the command name: [0] = state, [19] = start time.
std::vector<std::string> procStat(int pid) {
  bool ok = false;
  const std::string s = readFile("/proc/" + std::to_string(pid) + "/stat", &ok);
  const size_t close = s.rfind(')');
  std::vector<std::string> f;
  if (!ok || close == std::string::npos) return f;
  std::istringstream in(s.substr(close + 1));
  for (std::string x; in >> x;) f.push_back(x);
  return f;
}

/// This kernel and pid namespace: pids are comparable between processes with the same id.
std::string machineId() {
  bool ok = false;
  std::string boot = readFile("/proc/sys/kernel/random/boot_id", &ok);
  boot.erase(std::remove(boot.begin(), boot.end(), '\n'), boot.end());
  char ns[256] = {0};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  std::string id = (boot.empty() ? "unknown" : boot) + "/" + (n > 0 ? std::string(ns, size_t(n)) : "?");
  for (char& c : id)
    if (c == ' ') c = '_';
  return id;
}

struct Beat {
  bool present = false;
  std::string machine;
  int pid = 0;
  int64_t startTime = 0, counter = 0;
  double wall = 0;
};

Beat readBeat(const std::string& path) {
  Beat b;
  bool ok = false;
  std::istringstream in(readFile(path, &ok));
  if (ok && (in >> b.machine >> b.pid >> b.startTime >> b.counter >> b.wall)) b.present = true;
  return b;
}

/// Why a process on this machine is known gone ("" if it may be alive).
std::string processGone(const Beat& b) {
  const std::vector<std::string> f = procStat(b.pid);
  if (f.empty()) return "its process " + std::to_string(b.pid) + " is gone";
  if (f[0] == "Z" || f[0] == "X") return "its process " + std::to_string(b.pid) + " exited (zombie)";
  if (f.size() > 19 && std::to_string(b.startTime) != f[19])
    return "its process " + std::to_string(b.pid) + " is gone (the pid was reused)";
  return "";
}

std::string joinInts(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

std::vector<int> parseInts(const std::string& s) {
  std::istringstream in(s);
  std::vector<int> v;
  for (int x; in >> x;) v.push_back(x);
  return v;
}

/// Parses a decision file; false if absent or incomplete.
bool readDecision(const std::string& path, ElasticDecision* d) {
  bool ok = false;
  const std::string text = readFile(path, &ok);
  if (!ok || text.find("\nend\n") == std::string::npos) return false;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    std::string rest;
    std::getline(ls, rest);
    if (!rest.empty() && rest[0] == ' ') rest.erase(0, 1);
    if (key == "epoch") {
      d->epoch = std::atoi(rest.c_str());
    } else if (key == "failed") {
      d->failed = parseInts(rest);
    } else if (key == "survivors") {
      d->survivors = parseInts(rest);
    } else if (key == "why" || key == "lastbeat") {
      std::istringstream rs(rest);
      int r = -1;
      rs >> r;
      std::string tail;
      std::getline(rs, tail);
      if (!tail.empty() && tail[0] == ' ') tail.erase(0, 1);
      if (key == "why") d->why[r] = tail;
      else d->lastBeatMs[r] = std::atof(tail.c_str());
    }
  }
  return true;
}

}  // namespace

double wallMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

ElasticMembership::ElasticMembership(const ElasticConfig& config, ProcessGroup& world)
    : cfg_(config), me_(world.rank()) {
  if (cfg_.dir.empty()) throw std::invalid_argument("elastic: a shared directory is needed");
  int64_t token = 0;
  if (world.rank() == 0) {
    std::random_device rd;
    token = int64_t((uint64_t(rd()) << 32) ^ uint64_t(rd()) ^ uint64_t(::getpid())) & 0x7fffffffffffLL;
  }
  world.broadcast(&token, 1, 0);
  char hex[32];
  std::snprintf(hex, sizeof(hex), "%012llx", static_cast<long long>(token));
  jobDir_ = cfg_.dir + "/.elastic/" + hex;
  std::error_code ec;
  std::filesystem::create_directories(jobDir_, ec);
  if (ec) throw std::runtime_error("elastic: cannot create " + jobDir_ + ": " + ec.message());
  for (int r = 0; r < world.size(); ++r) members_.push_back(r);
  machine_ = machineId();
  const std::vector<std::string> st = procStat(int(::getpid()));
  startTime_ = st.size() > 19 ? std::atoll(st[19].c_str()) : 0;
  beat();
  thread_ = std::thread([this] { heartbeatLoop(); });
  world.allReduceScalar(0.0);  // every rank's first heartbeat is on disk
}

ElasticMembership::~ElasticMembership() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ElasticMembership::beat() {
  std::ostringstream s;
  s.precision(15);
  s << machine_ << " " << ::getpid() << " " << startTime_ << " " << ++counter_ << " " << wallMs() << "\n";
  try {
    writeAtomically(jobDir_ + "/hb-" + std::to_string(me_), s.str());
  } catch (const std::exception&) {
    // A missed beat is harmless unless the directory stays unwritable for deadAfterMs.
  }
}

void ElasticMembership::heartbeatLoop() {
  while (!stop_) {
    for (int waited = 0; waited < cfg_.heartbeatMs && !stop_; waited += 10)
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(10, cfg_.heartbeatMs)));
    if (!stop_) beat();
  }
}

ElasticDecision ElasticMembership::agree() {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsedMs = [&] {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  ++epoch_;
  const std::string edir = jobDir_ + "/e" + std::to_string(epoch_);
  std::error_code ec;
  std::filesystem::create_directories(edir, ec);
  if (ec) throw std::runtime_error("elastic: cannot create " + edir + ": " + ec.message());
  writeAtomically(edir + "/alive-" + std::to_string(me_), machine_ + " " + std::to_string(::getpid()) + "\n");
  const std::string decisionPath = edir + "/decision";

  struct Watch {
    int64_t counter = -1;
    double since = 0;  // elapsedMs() when the counter was last seen changing
    double wall = 0;
  };
  std::map<int, Watch> watch;
  ElasticDecision d;
  for (;;) {
    if (readDecision(decisionPath, &d)) break;
    // Classify every other member: 1 alive, -1 dead (with a reason), 0 unknown yet.
    std::map<int, int> state;
    std::map<int, std::string> why;
    const double now = elapsedMs();
    for (int m : members_) {
      if (m == me_) {
        state[m] = 1;
        continue;
      }
      if (std::filesystem::exists(edir + "/alive-" + std::to_string(m))) {
        state[m] = 1;
        continue;
      }
      const Beat b = readBeat(jobDir_ + "/hb-" + std::to_string(m));
      Watch& w = watch[m];
      if (b.present && b.counter != w.counter) {
        w.since = now;
        w.counter = b.counter;
        w.wall = b.wall;
      }
      std::string gone = b.present && b.machine == machine_ ? processGone(b) : "";
      if (gone.empty() && now - w.since >= cfg_.deadAfterMs)
        gone = "its heartbeat stopped (unchanged for " + std::to_string(int(now - w.since)) + " ms)";
      if (gone.empty() && now >= cfg_.agreeTimeoutMs)
        gone = "it did not report within " + std::to_string(cfg_.agreeTimeoutMs) + " ms (hung?)";
      state[m] = gone.empty() ? 0 : -1;
      if (!gone.empty()) why[m] = gone;
    }
    int coordinator = -1;
    bool resolved = true;
    for (int m : members_) {
      if (coordinator < 0 && state[m] >= 0) coordinator = m;
      if (state[m] == 0) resolved = false;
    }
    if (coordinator == me_ && resolved) {
      std::ostringstream s;
      s.precision(15);
      std::vector<int> failed, survivors;
      for (int m : members_) (state[m] < 0 ? failed : survivors).push_back(m);
      s << "epoch " << epoch_ << "\nfailed " << joinInts(failed) << "\nsurvivors " << joinInts(survivors)
        << "\ncoordinator " << me_ << "\n";
      for (int f : failed) s << "why " << f << " " << why[f] << "\nlastbeat " << f << " " << watch[f].wall << "\n";
      s << "end\n";
      const std::string tmp = decisionPath + ".tmp" + std::to_string(::getpid());
      {
        std::ofstream out(tmp, std::ios::trunc);
        out << s.str();
        if (!out.flush()) throw std::runtime_error("elastic: cannot write " + tmp);
      }
      // link(2) fails with EEXIST if another coordinator decided first: theirs stands.
      if (::link(tmp.c_str(), decisionPath.c_str()) == 0) d.coordinator = true;
      std::remove(tmp.c_str());
      continue;  // read back whichever decision stands
    }
    if (now > double(cfg_.agreeTimeoutMs) + 2.0 * cfg_.deadAfterMs + 5000)
      throw std::runtime_error("elastic: no decision in " + edir + " after " + std::to_string(int(now)) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  d.seconds = elapsedMs() / 1000;
  if (std::find(d.survivors.begin(), d.survivors.end(), me_) == d.survivors.end())
    throw std::runtime_error("elastic: the survivors of epoch " + std::to_string(d.epoch) + " (" +
                             joinInts(d.survivors) + ") declared this rank (" + std::to_string(me_) +
                             ") failed; stopping");
  for (int f : d.failed) {
    const auto it = std::find(members_.begin(), members_.end(), f);
    if (it == members_.end())
      throw std::runtime_error("elastic: decision " + decisionPath + " names rank " + std::to_string(f) +
                               ", not a member");
    d.excludeCurrent.push_back(int(it - members_.begin()));
  }
  return d;
}

}  // namespace train
}  // namespace braid
