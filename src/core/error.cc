#include "src/core/error.h"

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>

namespace braid {
namespace {

thread_local std::string tlsLastError;

struct CommErrors {
  std::mutex mu;
  std::unordered_map<const Comm*, std::string> byComm;
};
CommErrors& commErrors() {
  static CommErrors* e = new CommErrors();  // leaked on purpose: used at exit
  return *e;
}

}  // namespace

ncclResult_t setError(ncclResult_t code, Comm* comm, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  BRAID_WARN("%s", msg);
  tlsLastError = msg;
  if (comm) {
    CommErrors& e = commErrors();
    std::lock_guard<std::mutex> lock(e.mu);
    e.byComm[comm] = msg;
  }
  return code;
}

const char* lastError(Comm* comm) {
  if (comm) {
    CommErrors& e = commErrors();
    std::lock_guard<std::mutex> lock(e.mu);
    auto it = e.byComm.find(comm);
    if (it != e.byComm.end()) return it->second.c_str();
  }
  return tlsLastError.c_str();
}

void forgetErrors(Comm* comm) {
  CommErrors& e = commErrors();
  std::lock_guard<std::mutex> lock(e.mu);
  e.byComm.erase(comm);
}

}  // namespace braid
