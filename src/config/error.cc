#include "src/config/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace braid {
namespace {

constexpr size_t kMsgBytes = 1024;

/// Fixed buffers: a pointer ncclGetLastError returned stays valid (its text may be
/// replaced by a later error, but the memory is never freed while the comm lives).
thread_local char tlsLastError[kMsgBytes] = "";
// KeepThreadError scopes open on this thread, and the message they restore (saved by
// the first error recorded inside them).
thread_local int tlsKeepDepth = 0;
thread_local bool tlsKeepSaved = false;
thread_local char tlsKeptError[kMsgBytes];

void recordThreadError(const char* msg) {
  if (tlsKeepDepth > 0 && !tlsKeepSaved) {
    memcpy(tlsKeptError, tlsLastError, kMsgBytes);
    tlsKeepSaved = true;
  }
  memcpy(tlsLastError, msg, kMsgBytes);
}

struct CommErrors {
  std::mutex mu;
  std::unordered_map<const Comm*, std::unique_ptr<char[]>> byComm;
};
CommErrors& commErrors() {
  static CommErrors* e = new CommErrors();  // leaked on purpose: used at exit
  return *e;
}

}  // namespace

KeepThreadError::KeepThreadError() {
  if (tlsKeepDepth++ == 0) tlsKeepSaved = false;
}

KeepThreadError::~KeepThreadError() {
  if (--tlsKeepDepth == 0 && tlsKeepSaved) memcpy(tlsLastError, tlsKeptError, kMsgBytes);
}

ncclResult_t setError(ncclResult_t code, Comm* comm, const char* fmt, ...) {
  char msg[kMsgBytes];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  BRAID_WARN("%s", msg);
  recordThreadError(msg);
  if (comm) {
    CommErrors& e = commErrors();
    std::lock_guard<std::mutex> lock(e.mu);
    std::unique_ptr<char[]>& buf = e.byComm[comm];
    if (!buf) buf.reset(new char[kMsgBytes]);
    memcpy(buf.get(), msg, sizeof(msg));
  }
  return code;
}

ncclResult_t noteError(ncclResult_t code, const char* fmt, ...) {
  char msg[kMsgBytes];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  BRAID_INFO(kLogNet, "%s", msg);
  recordThreadError(msg);
  return code;
}

const char* lastError(Comm* comm) {
  if (comm) {
    CommErrors& e = commErrors();
    std::lock_guard<std::mutex> lock(e.mu);
    auto it = e.byComm.find(comm);
    if (it != e.byComm.end()) return it->second.get();
  }
  return tlsLastError;
}

void forgetErrors(Comm* comm) {
  CommErrors& e = commErrors();
  std::lock_guard<std::mutex> lock(e.mu);
  e.byComm.erase(comm);
}

}  // namespace braid
