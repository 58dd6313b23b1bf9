// Logging with NCCL's conventions: NCCL_DEBUG (VERSION, WARN, INFO, TRACE),
// NCCL_DEBUG_SUBSYS (comma list, ^ negates, ALL), NCCL_DEBUG_FILE (%h host, %p pid).
// Lines look like NCCL's: "host:pid:tid [rank] NCCL WARN message".
#pragma once
#include <cstdarg>
#include <cstdint>

namespace braid {

enum class LogLevel : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

/// Subsystems, as NCCL_DEBUG_SUBSYS names them (plus our own PLAN and EXEC).
enum LogSubsys : uint32_t {
  kLogInit = 1u << 0,
  kLogColl = 1u << 1,
  kLogP2p = 1u << 2,
  kLogShm = 1u << 3,
  kLogNet = 1u << 4,
  kLogGraph = 1u << 5,
  kLogTuning = 1u << 6,
  kLogEnv = 1u << 7,
  kLogAlloc = 1u << 8,
  kLogCall = 1u << 9,
  kLogProxy = 1u << 10,
  kLogBootstrap = 1u << 11,
  kLogReg = 1u << 12,
  kLogPlan = 1u << 13,
  kLogExec = 1u << 14,
  kLogAll = ~0u,
};

/// True if messages at this level/subsystem would be printed (cheap).
bool logEnabled(LogLevel level, uint32_t subsys);
void logMessage(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt,
                ...) __attribute__((format(printf, 5, 6)));
/// Sets the rank printed in this thread's log lines (-1: none).
void logSetThreadRank(int rank);
/// Re-read NCCL_DEBUG* (tests); normally read once.
void logReinit();

}  // namespace braid

#define BRAID_WARN(...) \
  ::braid::logMessage(::braid::LogLevel::kWarn, ::braid::kLogAll, __FILE__, __LINE__, __VA_ARGS__)
#define BRAID_INFO(subsys, ...)                                                          \
  do {                                                                                   \
    if (::braid::logEnabled(::braid::LogLevel::kInfo, (subsys)))                         \
      ::braid::logMessage(::braid::LogLevel::kInfo, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define BRAID_TRACE(subsys, ...)                                                         \
  do {                                                                                   \
    if (::braid::logEnabled(::braid::LogLevel::kTrace, (subsys)))                        \
      ::braid::logMessage(::braid::LogLevel::kTrace, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
