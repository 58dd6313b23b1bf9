#include "src/diag/flight_recorder.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "src/config/log.h"
#include "src/config/params.h"
#include "src/exec/op.h"
#include "src/reduce/reducer.h"

namespace braid {
namespace {

// ---- the process's live recorders, for SIGUSR1 -------------------------------------
// Never destroyed (used from the dumper thread at exit); a fork's child starts afresh
// (forgetAfterFork): the parent's recorders and a lock some parent thread held are not its.
std::mutex* gRegistryMutex = new std::mutex;
std::vector<const FlightRecorder*>* gRegistry = new std::vector<const FlightRecorder*>;
std::mutex& registryMutex() { return *gRegistryMutex; }
std::vector<const FlightRecorder*>& registry() { return *gRegistry; }

sem_t gDumpSem;
pid_t gDumperPid = 0;  ///< the process whose dumper thread runs (a fork's child has none)

void forgetAfterFork() {
  gRegistryMutex = new std::mutex;  // the parent's may be held by a thread that is gone
  gRegistry = new std::vector<const FlightRecorder*>;
  gDumperPid = 0;
}
const int gAtFork = pthread_atfork(nullptr, nullptr, forgetAfterFork);

/// A temporary file name no other dump (thread, process) uses at the same time.
std::string tmpName(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp" + std::to_string(getpid()) + "-" + std::to_string(counter.fetch_add(1));
}

void onDumpSignal(int) {
  const int saved = errno;
  sem_post(&gDumpSem);  // async-signal-safe; the dumper thread does the work
  errno = saved;
}

/// Installs the SIGUSR1 handler (only where nobody else handles it) and starts the
/// thread that dumps on it. Called with registryMutex() held.
void armSignalLocked() {
  if (!param::kFlightRecorderSignal.get() || gDumperPid == getpid()) return;
  struct sigaction old;
  if (sigaction(SIGUSR1, nullptr, &old) != 0) return;
  const bool ours = (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == onDumpSignal;
  if (!ours && old.sa_handler != SIG_DFL) {
    BRAID_INFO(kLogInit, "flight recorder: SIGUSR1 has a handler already; not taking it");
    gDumperPid = getpid();
    return;
  }
  (void)gAtFork;
  sem_init(&gDumpSem, 0, 0);  // first use in this process (or a fork's child: afresh)
  gDumperPid = getpid();
  std::thread([] {
    for (;;) {
      while (sem_wait(&gDumpSem) != 0) {
      }
      FlightRecorder::dumpAll("signal");
    }
  }).detach();
  if (!ours) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = onDumpSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  }
}

void copyText(char* dst, size_t n, const char* src) {
  if (!src) src = "";
  const size_t len = strnlen(src, n - 1);
  memcpy(dst, src, len);
  dst[len] = '\0';
}

std::string opName(int32_t op) {
  if (op >= int32_t(ncclNumOps)) return "premulsum";
  return redOpName(ncclRedOp_t(op));
}

/// "#42 ncclAllReduce count 1024 float sum" and the like, for the log summary.
std::string describeEntry(const FrEntry& e) {
  char buf[320];
  const Coll c = Coll(e.coll);
  int n = snprintf(buf, sizeof(buf), "#%" PRIu64 " %s count %" PRIu64 " %s", e.seq, e.call,
                   e.count, dataTypeName(ncclDataType_t(e.type)));
  if (c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter)
    n += snprintf(buf + n, sizeof(buf) - size_t(n), " %s", opName(e.op).c_str());
  if (c == Coll::kSendRecv)
    snprintf(buf + n, sizeof(buf) - size_t(n), " %s rank %d", e.isSend ? "to" : "from", e.root);
  else if (c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather ||
           c == Coll::kScatter)
    snprintf(buf + n, sizeof(buf) - size_t(n), " root %d", e.root);
  return buf;
}

std::string peerName(int peer) {
  if (peer == -2) return "the switch";
  return "rank " + std::to_string(peer);
}

}  // namespace

const char* frStateName(FrState s) {
  switch (s) {
    case FrState::kQueued: return "queued";
    case FrState::kStarted: return "started";
    case FrState::kLaunched: return "launched";
    case FrState::kDone: return "done";
    case FrState::kFailed: return "failed";
  }
  return "?";
}

int64_t frNowUs() {
  // The coarse clock (a few ms of resolution, a few ns to read): enough to say who has
  // waited how long, cheap enough to stamp every operation three times.
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return int64_t(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

FlightRecorder::FlightRecorder(size_t capacity) : ring_(std::max<size_t>(capacity, 1)) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry().push_back(this);
  armSignalLocked();
}

FlightRecorder::~FlightRecorder() {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto& r = registry();
  r.erase(std::remove(r.begin(), r.end(), this), r.end());
}

void FlightRecorder::setIdentity(const FrIdentity& id) {
  std::lock_guard<std::mutex> lock(mu_);
  id_ = id;
}

void FlightRecorder::queued(OpRecord* op) { record(op, nullptr); }

void FlightRecorder::queuedStarted(OpRecord* op, const char* algorithm) { record(op, algorithm); }

void FlightRecorder::record(OpRecord* op, const char* startedWith) {
  const int64_t now = frNowUs();
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t seq = next_++;
  FrEntry& e = ring_[seq % ring_.size()];
  e.seq = seq;
  e.collSeq = op->collSeq;  // numbered by the issuer (Comm::collSeqNext)
  if (e.collSeq >= 0) nextColl_ = e.collSeq + 1;
  e.call = op->call;
  e.coll = uint8_t(op->coll);
  e.mem = uint8_t(op->mem);
  e.isSend = op->isSend;
  e.state = FrState::kQueued;
  e.count = op->count;
  e.type = int32_t(op->type);
  e.op = int32_t(op->op);
  e.root = op->root;
  e.waitingOn = kFrNoPeer;
  e.queuedUs = now;
  e.startedUs = e.endedUs = 0;
  e.algo[0] = '\0';
  e.detail[0] = '\0';
  if (startedWith) {
    e.state = FrState::kStarted;
    e.startedUs = now;
    copyText(e.algo, sizeof(e.algo), startedWith);
  }
  op->frSeq = seq;
}

FrEntry* FlightRecorder::find(uint64_t seq) {
  FrEntry& e = ring_[seq % ring_.size()];
  return e.seq == seq && seq < next_ ? &e : nullptr;
}

void FlightRecorder::started(uint64_t seq, const char* algorithm, bool launched) {
  const int64_t now = frNowUs();
  std::lock_guard<std::mutex> lock(mu_);
  FrEntry* e = find(seq);
  if (!e) return;
  e->state = launched ? FrState::kLaunched : FrState::kStarted;
  e->startedUs = now;
  copyText(e->algo, sizeof(e->algo), algorithm);
}

void FlightRecorder::finished(uint64_t seq, bool ok, const char* detail) {
  const int64_t now = frNowUs();
  std::lock_guard<std::mutex> lock(mu_);
  FrEntry* e = find(seq);
  if (!e || e->state == FrState::kDone || e->state == FrState::kFailed) return;
  e->state = ok ? FrState::kDone : FrState::kFailed;
  e->endedUs = now;
  if (detail) copyText(e->detail, sizeof(e->detail), detail);
}

void FlightRecorder::waiting(uint64_t seq, int peer, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  FrEntry* e = find(seq);
  if (!e) return;
  e->waitingOn = peer;
  copyText(e->detail, sizeof(e->detail), what.c_str());
}

bool FlightRecorder::outstanding() const {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t first = next_ > ring_.size() ? next_ - ring_.size() : 0;
  for (uint64_t s = first; s < next_; ++s) {
    const FrState st = ring_[s % ring_.size()].state;
    if (st == FrState::kQueued || st == FrState::kStarted) return true;
  }
  return false;
}

std::string FlightRecorder::toJson(const char* reason) const {
  const int64_t now = frNowUs();
  std::lock_guard<std::mutex> lock(mu_);
  // ordered_json: the keys stay in this order, for people reading the file.
  nlohmann::ordered_json j;
  j["format"] = "braid-flight-record";
  j["version"] = 1;
  j["reason"] = reason;
  j["time_us"] = now;
  j["rank"] = id_.rank;
  j["nranks"] = id_.nranks;
  char hash[24];
  snprintf(hash, sizeof(hash), "%016" PRIx64, id_.commHash);
  j["comm"] = hash;
  j["comm_name"] = id_.commName;
  j["host"] = id_.host;
  j["pid"] = int64_t(id_.pid);
  j["timeout_ms"] = int64_t(id_.timeoutMs);
  j["ops_issued"] = int64_t(next_);
  j["collectives_issued"] = nextColl_;
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  const uint64_t first = next_ > ring_.size() ? next_ - ring_.size() : 0;
  for (uint64_t s = first; s < next_; ++s) {
    const FrEntry& e = ring_[s % ring_.size()];
    nlohmann::ordered_json o;
    o["seq"] = int64_t(e.seq);
    o["coll_seq"] = e.collSeq;
    o["call"] = e.call;
    o["count"] = int64_t(e.count);
    o["type"] = dataTypeName(ncclDataType_t(e.type));
    const Coll c = Coll(e.coll);
    if (c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter)
      o["op"] = opName(e.op);
    if (c == Coll::kSendRecv) o["peer"] = int64_t(e.root);
    else if (c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather ||
             c == Coll::kScatter)
      o["root"] = int64_t(e.root);
    o["memory"] = e.mem == uint8_t(MemKind::kDevice) ? "device" : "host";
    o["state"] = frStateName(e.state);
    if (e.algo[0]) o["algorithm"] = std::string(e.algo);
    o["queued_us"] = e.queuedUs;
    if (e.startedUs) o["started_us"] = e.startedUs;
    if (e.endedUs) o["ended_us"] = e.endedUs;
    if (e.waitingOn != kFrNoPeer && e.state != FrState::kDone)
      o["waiting_on"] = int64_t(e.waitingOn);
    if (e.detail[0]) o["detail"] = std::string(e.detail);
    entries.push_back(std::move(o));
  }
  j["entries"] = std::move(entries);
  // Invalid UTF-8 (a communicator name, a detail) is replaced, never an exception.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string FlightRecorder::summaryLocked(int64_t nowUs) const {
  // The last op done, then every op not done (at most a few), for one WARN line.
  std::string out;
  const uint64_t first = next_ > ring_.size() ? next_ - ring_.size() : 0;
  const FrEntry* lastDone = nullptr;
  int shown = 0, more = 0;
  std::string pending;
  for (uint64_t s = first; s < next_; ++s) {
    const FrEntry& e = ring_[s % ring_.size()];
    if (e.state == FrState::kDone || e.state == FrState::kLaunched) {
      lastDone = &e;
      continue;
    }
    if (shown >= 4) {
      ++more;
      continue;
    }
    ++shown;
    char buf[160];
    const int64_t since = e.startedUs ? e.startedUs : e.queuedUs;
    snprintf(buf, sizeof(buf), " %s %.1f s ago", frStateName(e.state),
             double(nowUs - since) / 1e6);
    pending += "; " + describeEntry(e) + buf;
    if (e.waitingOn != kFrNoPeer && e.state != FrState::kDone)
      pending += ", waiting on " + peerName(e.waitingOn);
  }
  out = lastDone ? "last done " + describeEntry(*lastDone) : std::string("nothing done yet");
  out += pending;
  if (more) out += "; and " + std::to_string(more) + " more";
  return out;
}

std::string flightRecorderDir() {
  const std::string dir = param::kFlightRecorderDir.get();
  if (!dir.empty()) return dir;
  return "/tmp/braid-flight-recorder-" + std::to_string(unsigned(geteuid()));
}

bool prepareFlightRecorderDir(const std::string& dir, bool own, std::string* why) {
  // The default directory is this user's alone; one the user chose is made as any
  // directory is (the umask decides: a team may share it).
  if (mkdir(dir.c_str(), own ? 0700 : 0777) != 0 && errno != EEXIST) {
    *why = std::string("cannot make the directory: ") + std::strerror(errno);
    return false;
  }
  // A directory the user chose is the user's business; the default one, in a shared
  // /tmp, must be ours alone (another user could have made it first).
  if (!own) return true;
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    *why = std::string("cannot look at it: ") + std::strerror(errno);
    return false;
  }
  if (!S_ISDIR(st.st_mode)) {
    *why = "it is not a directory (a link?)";
    return false;
  }
  if (st.st_uid != geteuid()) {
    *why = "it belongs to user " + std::to_string(unsigned(st.st_uid));
    return false;
  }
  if ((st.st_mode & 077) != 0 && chmod(dir.c_str(), 0700) != 0) {
    *why = "it is open to other users and chmod failed";
    return false;
  }
  return true;
}

std::string FlightRecorder::defaultPath() const {
  const std::string dir = flightRecorderDir();
  char name[96];
  std::lock_guard<std::mutex> lock(mu_);
  snprintf(name, sizeof(name), "/braid-fr-%016" PRIx64 "-rank%d.json", id_.commHash, id_.rank);
  return dir + name;
}

std::string FlightRecorder::dump(const char* reason, const std::string& pathIn) const {
  const std::string path = pathIn.empty() ? defaultPath() : pathIn;
  const std::string json = toJson(reason);
  std::string summary;
  FrIdentity id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    summary = summaryLocked(frNowUs());
    id = id_;
  }
  // Make the directory (one level, ours alone) and write through a temporary name, so
  // a reader never sees half a file.
  const size_t slash = path.rfind('/');
  std::string why;
  const bool dirOk =
      slash == std::string::npos || slash == 0 ||
      prepareFlightRecorderDir(path.substr(0, slash),
                               pathIn.empty() && param::kFlightRecorderDir.get().empty(), &why);
  std::lock_guard<std::mutex> dumping(dumpMu_);  // one dump of this record at a time
  const std::string tmp = tmpName(path);
  FILE* f = dirOk ? fopen(tmp.c_str(), "w") : nullptr;
  bool ok = f != nullptr;
  if (f) {
    ok = fwrite(json.data(), 1, json.size(), f) == json.size();
    ok = (fclose(f) == 0) && ok;
    ok = ok && rename(tmp.c_str(), path.c_str()) == 0;
    if (!ok) unlink(tmp.c_str());
  }
  logMessage(LogLevel::kWarn, kLogAll, __FILE__, __LINE__,
             "flight recorder (%s): comm %016" PRIx64 " rank %d of %d: %s; %s %s", reason,
             id.commHash, id.rank, id.nranks, summary.c_str(),
             ok ? "record written to" : "could not write the record to", path.c_str());
  if (!dirOk)
    logMessage(LogLevel::kWarn, kLogAll, __FILE__, __LINE__,
               "flight recorder: not writing into %s: %s (set BRAID_FLIGHT_RECORDER_DIR)",
               path.substr(0, slash).c_str(), why.c_str());
  return ok ? path : std::string();
}

void FlightRecorder::dumpAll(const char* reason) {
  std::lock_guard<std::mutex> lock(registryMutex());
  for (const FlightRecorder* r : registry()) r->dump(reason);
}

}  // namespace braid
