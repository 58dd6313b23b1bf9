#include "src/config/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "src/config/params.h"

namespace braid {
namespace {

struct SubsysName {
  const char* name;
  uint32_t bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kLogInit},   {"COLL", kLogColl},   {"P2P", kLogP2p},       {"SHM", kLogShm},
    {"NET", kLogNet},     {"GRAPH", kLogGraph}, {"TUNING", kLogTuning}, {"ENV", kLogEnv},
    {"ALLOC", kLogAlloc}, {"CALL", kLogCall},   {"PROXY", kLogProxy},   {"BOOTSTRAP", kLogBootstrap},
    {"REG", kLogReg},     {"PLAN", kLogPlan},   {"EXEC", kLogExec},     {"ALL", kLogAll},
};

/// Read without the lock on every log call (inited, level, subsys: atomics, so that
/// ncclResetDebugInit on one thread and logging on another do not race); written and
/// the output used under mu.
struct LogState {
  std::mutex mu;
  std::atomic<bool> inited{false};
  std::atomic<LogLevel> level{LogLevel::kNone};
  std::atomic<uint32_t> subsys{kLogInit | kLogEnv};
  FILE* out = stdout;
  char host[64] = {};
};

LogState& state() {
  static LogState* s = new LogState();  // leaked: usable from any destructor
  return *s;
}

thread_local int tlsRank = -1;

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::toupper);
  return s;
}

uint32_t parseSubsys(const std::string& text) {
  std::string s = upper(text);
  bool negate = !s.empty() && s[0] == '^';
  if (negate) s.erase(0, 1);
  uint32_t mask = 0;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const auto& n : kSubsysNames)
      if (tok == n.name) mask |= n.bit;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return negate ? ~mask : mask;
}

void initLocked(LogState& s) {
  std::string lvl = upper(param::kDebug.get());
  LogLevel level = LogLevel::kNone;
  if (lvl == "VERSION") level = LogLevel::kVersion;
  else if (lvl == "WARN") level = LogLevel::kWarn;
  else if (lvl == "INFO") level = LogLevel::kInfo;
  else if (lvl == "TRACE") level = LogLevel::kTrace;
  s.level.store(level, std::memory_order_relaxed);
  s.subsys.store(parseSubsys(param::kDebugSubsys.get()), std::memory_order_relaxed);
  gethostname(s.host, sizeof(s.host) - 1);
  if (char* dot = strchr(s.host, '.')) *dot = '\0';
  if (s.out != stdout && s.out != stderr) fclose(s.out);
  s.out = stdout;
  std::string file = param::kDebugFile.get();
  if (!file.empty()) {
    std::string path;
    for (size_t i = 0; i < file.size(); ++i) {
      if (file[i] == '%' && i + 1 < file.size()) {
        char c = file[++i];
        if (c == 'h') path += s.host;
        else if (c == 'p') path += std::to_string(getpid());
        else if (c == '%') path += '%';
        else { path += '%'; path += c; }
      } else {
        path += file[i];
      }
    }
    if (FILE* f = fopen(path.c_str(), "w")) s.out = f;
  }
  s.inited.store(true, std::memory_order_release);
}

LogState& ready() {
  LogState& s = state();
  if (!s.inited.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!s.inited.load(std::memory_order_relaxed)) initLocked(s);
  }
  return s;
}

}  // namespace

bool logEnabled(LogLevel level, uint32_t subsys) {
  LogState& s = ready();
  if (level > s.level.load(std::memory_order_relaxed)) return false;
  return level <= LogLevel::kWarn || (s.subsys.load(std::memory_order_relaxed) & subsys) != 0;
}

void logMessage(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt,
                ...) {
  if (!logEnabled(level, subsys)) return;
  LogState& s = state();
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* tag = level == LogLevel::kWarn ? "WARN" : level == LogLevel::kTrace ? "TRACE" : "INFO";
  const char* base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char rank[16] = "";
  if (tlsRank >= 0) snprintf(rank, sizeof(rank), " [%d]", tlsRank);
  std::lock_guard<std::mutex> lock(s.mu);
  if (level == LogLevel::kTrace)
    fprintf(s.out, "%s:%d:%ld%s NCCL %s %s:%d %s\n", s.host, getpid(), long(syscall(SYS_gettid)),
            rank, tag, base, line, msg);
  else
    fprintf(s.out, "%s:%d:%ld%s NCCL %s %s\n", s.host, getpid(), long(syscall(SYS_gettid)), rank,
            tag, msg);
  fflush(s.out);
}

void logSetThreadRank(int rank) { tlsRank = rank; }

void logReinit() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  initLocked(s);
}

}  // namespace braid
