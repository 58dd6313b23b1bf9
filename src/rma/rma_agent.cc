// The one-sided progress agent (rma_agent.h).
#include "src/rma/rma_agent.h"

#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>
#include <unordered_map>
#include <vector>

#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/registration.h"
#include "src/os/cuda_rt.h"
#include "src/net/socket.h"

namespace braid {
namespace {

/// A payload not applied within this long after its frame arrived breaks the connection.
constexpr int kPayloadTimeoutSec = 60;

/// Per process. A forked child gets a fresh one (the parent's threads are not there).
struct Agent {
  pid_t pid = 0;
  std::mutex mu;
  std::map<std::string, std::string> listening;  ///< ip -> "ip:port"
  std::unordered_map<uint64_t, std::shared_ptr<AgentTarget>> targets;
};

Agent& agent() {
  static std::mutex mu;
  static Agent* a = nullptr;  // leaked on purpose: its threads live until exit
  std::lock_guard<std::mutex> lock(mu);
  if (a == nullptr || a->pid != getpid()) {
    a = new Agent();
    a->pid = getpid();
  }
  return *a;
}

std::shared_ptr<AgentTarget> lookup(Agent& a, uint64_t token) {
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.targets.find(token);
  return it == a.targets.end() ? nullptr : it->second;
}

enum class ReadResult { kOk, kEof, kError };

/// Reads exactly n bytes from a blocking fd with SO_RCVTIMEO set. An idle connection
/// (timeouts before the first byte) waits on when `idleOk`.
ReadResult readExact(int fd, void* data, size_t n, bool idleOk) {
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::recv(fd, p + done, n - done, 0);
    if (got > 0) {
      done += size_t(got);
      continue;
    }
    if (got == 0) return ReadResult::kEof;
    if (errno == EINTR) continue;
    if ((errno == EAGAIN || errno == EWOULDBLOCK) && idleOk && done == 0) continue;
    return ReadResult::kError;
  }
  return ReadResult::kOk;
}

bool discard(int fd, uint64_t bytes) {
  char buf[65536];
  while (bytes > 0) {
    const size_t piece = size_t(std::min<uint64_t>(bytes, sizeof buf));
    if (readExact(fd, buf, piece, false) != ReadResult::kOk) return false;
    bytes -= piece;
  }
  return true;
}

/// Applies one put frame's payload to the target's window. False: drop the connection.
bool applyPut(int fd, AgentTarget& t, int origin, const AgentFrame& f, std::string* why) {
  std::lock_guard<std::mutex> lock(t.mu);
  if (!t.alive) return discard(fd, f.bytes);  // the communicator is going away
  void* dst = reinterpret_cast<void*>(f.addr);
  const Registration* w = findRegistration(t.comm, dst, size_t(f.bytes));
  if (w == nullptr || !w->window) {
    *why = "a put from rank " + std::to_string(origin) + " names " + std::to_string(f.bytes) +
           " bytes at 0x" + std::to_string(f.addr) + ", not inside a live window";
    return false;
  }
  if (w->kind == MemKind::kHost) return readExact(fd, dst, size_t(f.bytes), false) == ReadResult::kOk;
  cudart::DeviceScope scope;
  if (scope.enter(w->device) != ncclSuccess) return false;
  std::vector<char> bounce(size_t(std::min<uint64_t>(f.bytes, 4 << 20)));
  for (uint64_t done = 0; done < f.bytes; done += bounce.size()) {
    const size_t piece = size_t(std::min<uint64_t>(bounce.size(), f.bytes - done));
    if (readExact(fd, bounce.data(), piece, false) != ReadResult::kOk) return false;
    if (cudart::copyToDevice(static_cast<char*>(dst) + done, bounce.data(), piece) != ncclSuccess) {
      *why = "copying a put into device window failed: " + cudart::lastError();
      return false;
    }
  }
  return true;
}

/// Serves one origin's connection until it closes.
void serve(int fd) {
  struct timeval tv = {kPayloadTimeoutSec, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  AgentHello h;
  if (readExact(fd, &h, sizeof h, false) != ReadResult::kOk || h.magic != AgentHello::kMagic) {
    ::close(fd);
    return;
  }
  std::shared_ptr<AgentTarget> t = lookup(agent(), h.token);
  if (!t || t->secret != h.secret || h.origin < 0 || h.origin >= t->nranks) {
    BRAID_WARN("rma agent: refused a connection (unknown communicator, wrong job secret or "
               "bad rank %d)", int(h.origin));
    ::close(fd);
    return;
  }
  const int origin = h.origin;
  std::string why;
  for (;;) {
    AgentFrame f;
    ReadResult r = readExact(fd, &f, sizeof f, true);
    if (r != ReadResult::kOk) {
      why = r == ReadResult::kEof ? "closed" : std::strerror(errno);
      break;
    }
    if (f.kind == AgentFrame::kPut) {
      if (!applyPut(fd, *t, origin, f, &why)) {
        if (why.empty()) why = "reading a put's payload failed";
        BRAID_WARN("rma agent: %s; dropping the connection", why.c_str());
        break;
      }
    } else if (f.kind != AgentFrame::kSignal) {
      why = "bad frame kind " + std::to_string(f.kind);
      BRAID_WARN("rma agent: %s from rank %d; dropping the connection", why.c_str(), origin);
      break;
    }
    std::lock_guard<std::mutex> lock(t->mu);
    if (!t->alive) continue;
    reinterpret_cast<std::atomic<uint64_t>*>(static_cast<char*>(t->sigBase) + size_t(origin) * 64)
        ->fetch_add(1, std::memory_order_acq_rel);
  }
  {
    std::lock_guard<std::mutex> lock(t->mu);
    // A connection closed by its origin's communicator teardown is not a failure unless
    // someone still waits for it; waits check this flag only when signals are missing.
    if (t->alive) t->dead[origin].store(true);
  }
  ::close(fd);
}

void acceptLoop(Socket* listener) {
  for (;;) {
    Socket s;
    if (listener->accept(&s, -1, nullptr) != ncclSuccess) {
      ::usleep(10000);
      continue;
    }
    int fd = ::dup(s.fd());
    if (fd < 0) continue;
    std::thread(serve, fd).detach();
  }
}

}  // namespace

ncclResult_t agentServe(const char* ip, uint64_t token, std::shared_ptr<AgentTarget> target,
                        std::string* addr) {
  Agent& a = agent();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.listening.find(ip);
  if (it == a.listening.end()) {
    SockAddr want;
    const std::string text = std::string(std::strchr(ip, ':') ? "[" : "") + ip +
                             (std::strchr(ip, ':') ? "]" : "") + ":0";
    if (!SockAddr::parse(text, &want))
      return setError(ncclInternalError, nullptr, "rma agent: cannot parse address '%s'",
                      text.c_str());
    auto* listener = new Socket();  // leaked with the agent
    listener->setLabel("rma agent");
    SockAddr bound;
    BRAID_CHECK(listener->listen(want, &bound));
    std::thread(acceptLoop, listener).detach();
    it = a.listening.emplace(ip, bound.toString()).first;
    BRAID_INFO(kLogNet, "rma agent: pid %d listening on %s", int(getpid()), it->second.c_str());
  }
  a.targets[token] = std::move(target);
  *addr = it->second;
  return ncclSuccess;
}

void agentForget(uint64_t token) {
  Agent& a = agent();
  std::lock_guard<std::mutex> lock(a.mu);
  a.targets.erase(token);
}

}  // namespace braid
