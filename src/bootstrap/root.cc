// The bootstrap root thread: accept ranks, check their secret and numbering, and once
// all nranks arrived send each of them the table of listen addresses.
#include "src/bootstrap/root.h"

#include <poll.h>
#include <sys/socket.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "src/bootstrap/wire.h"
#include "src/bootstrap/wire_check.h"
#include "src/config/log.h"
#include "src/config/error.h"

namespace braid {
namespace {

std::atomic<int> gRootsRunning{0};

constexpr int kReplyTimeoutMs = 2000;  // small replies: fit in the socket buffer

// A connection whose hello is still being read.
struct Pending {
  Socket sock;
  wire::RootHello hello{};
  size_t got = 0;
};

// A rank that joined and waits for the table.
struct Member {
  Socket sock;
  int rank = -1;
  char addr[wire::kAddrLen] = {};
};

class Root {
 public:
  Root(Socket listener, uint64_t secret, int timeoutMs)
      : listener_(std::move(listener)), secret_(secret), timeoutMs_(timeoutMs) {
    where_ = listener_.localAddress();
  }

  void run() {
    int64_t deadline = timeoutMs_ > 0 ? monotonicMs() + timeoutMs_ : -1;
    while (nranks_ < 0 || int(members_.size()) < nranks_) {
      if (deadline >= 0 && monotonicMs() >= deadline) {
        std::string msg = "bootstrap root at " + where_ + ": gave up after " +
                          std::to_string(timeoutMs_) + " ms without a new rank: " + summary() +
                          " (was every rank started with the same unique id and nranks?)";
        BRAID_WARN("%s", msg.c_str());
        failAll(msg);
        return;
      }
      std::vector<pollfd> fds;
      fds.push_back({listener_.fd(), POLLIN, 0});
      for (auto& p : pending_) fds.push_back({p->sock.fd(), POLLIN, 0});
      for (auto& m : members_) fds.push_back({m->sock.fd(), POLLIN, 0});
      int n = ::poll(fds.data(), fds.size(), 50);
      if (n < 0) {
        if (errno == EINTR) continue;
        std::string msg = "bootstrap root at " + where_ + ": poll failed: " + strerror(errno);
        BRAID_WARN("%s", msg.c_str());
        failAll(msg);
        return;
      }
      if (n == 0) continue;
      // A member's socket becoming readable means it left (it sends nothing more).
      for (size_t i = 0; i < members_.size(); ++i) {
        if (fds[1 + pending_.size() + i].revents == 0) continue;
        int rank = members_[i]->rank;
        members_.erase(members_.begin() + long(i));
        std::string msg = "bootstrap root at " + where_ + ": rank " + std::to_string(rank) +
                          " left before all ranks joined (" + summary() + ")";
        BRAID_WARN("%s", msg.c_str());
        failAll(msg);
        return;
      }
      // Progress the pending hellos (back to front, so erasing keeps indexes valid).
      for (size_t i = pending_.size(); i-- > 0;) {
        if (fds[1 + i].revents == 0) continue;
        if (readHello(pending_[i].get())) {
          std::unique_ptr<Pending> p = std::move(pending_[i]);
          pending_.erase(pending_.begin() + long(i));
          if (p->sock.valid() && admit(std::move(*p)) && timeoutMs_ > 0)
            deadline = monotonicMs() + timeoutMs_;
        } else if (!pending_[i]->sock.valid()) {
          pending_.erase(pending_.begin() + long(i));
        }
      }
      if (fds[0].revents != 0) acceptAll();
    }
    sendTables();
  }

 private:
  void acceptAll() {
    for (;;) {
      int fd = ::accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN (listener is nonblocking) or a transient error
      auto p = std::make_unique<Pending>();
      p->sock = Socket(fd);
      p->sock.setLabel("bootstrap root");
      p->sock.setNoDelay();
      pending_.push_back(std::move(p));
    }
  }

  // Reads what is available; true when the hello is complete. Closes on EOF/error.
  bool readHello(Pending* p) {
    char* dst = reinterpret_cast<char*>(&p->hello);
    ssize_t n = p->sock.tryRecv(dst + p->got, sizeof(p->hello) - p->got);
    if (n < 0) {
      p->sock.close();  // a port scanner or a rank that gave up: not an error here
      return false;
    }
    p->got += size_t(n);
    if (p->got < sizeof(p->hello)) return false;
    if (p->hello.magic != wire::kHelloMagic) {
      BRAID_WARN("bootstrap root at %s: dropped a connection from %s that is not a Braid rank",
                 where_.c_str(), p->sock.peerAddress().c_str());
      p->sock.close();
    }
    return true;
  }

  // Checks a complete hello; keeps the rank as a member or replies with an error.
  bool admit(Pending p) {
    const wire::RootHello& h = p.hello;
    const std::string from = p.sock.peerAddress();
    switch (wire::checkHello(h, secret_, nranks_, byRank_)) {
      case wire::kOk:
        break;
      case wire::kSecretMismatch:
        BRAID_WARN("bootstrap root at %s: rejected rank %d (of %d) from %s: its unique id "
                   "belongs to another job (secret mismatch)",
                   where_.c_str(), h.rank, h.nranks, from.c_str());
        reply(&p.sock, wire::kSecretMismatch,
              "the unique id belongs to another job (secret mismatch)");
        return false;
      case wire::kBadNranks: {
        std::string msg = "ncclCommInitRank: rank " + std::to_string(h.rank) +
                          " was given nranks=" + std::to_string(h.nranks) + " but rank " +
                          std::to_string(firstRank_) + " nranks=" + std::to_string(nranks_) +
                          " for the same unique id";
        BRAID_WARN("bootstrap root at %s: %s", where_.c_str(), msg.c_str());
        reply(&p.sock, wire::kBadNranks, msg);
        return false;
      }
      case wire::kDuplicateRank: {
        std::string msg = "ncclCommInitRank: rank " + std::to_string(h.rank) +
                          " joined twice with the same unique id (second time from " + from + ")";
        BRAID_WARN("bootstrap root at %s: %s", where_.c_str(), msg.c_str());
        reply(&p.sock, wire::kDuplicateRank, msg);
        return false;
      }
      default:  // kBadRank
        reply(&p.sock, wire::kBadRank,
              "ncclCommInitRank: rank " + std::to_string(h.rank) + " is outside [0, " +
                  std::to_string(h.nranks) + ")");
        return false;
    }
    if (nranks_ < 0) {  // the first rank sets the job's size
      nranks_ = h.nranks;
      firstRank_ = h.rank;
      byRank_.assign(size_t(nranks_), -1);
    }
    auto m = std::make_unique<Member>();
    m->sock = std::move(p.sock);
    m->rank = h.rank;
    memcpy(m->addr, h.addr, sizeof(m->addr));
    m->addr[sizeof(m->addr) - 1] = '\0';
    byRank_[size_t(h.rank)] = int(members_.size());
    members_.push_back(std::move(m));
    BRAID_INFO(kLogBootstrap, "bootstrap root at %s: rank %d joined (%zu of %d)", where_.c_str(),
               h.rank, members_.size(), nranks_);
    return true;
  }

  // Best effort, without blocking or logging: a rejected rank that already left does not
  // matter, and a short reply always fits in an empty socket buffer.
  void reply(Socket* s, int32_t status, const std::string& msg) {
    std::string buf(sizeof(wire::RootReply) + msg.size(), '\0');
    wire::RootReply r{wire::kReplyMagic, status, uint32_t(msg.size()), 0};
    memcpy(&buf[0], &r, sizeof(r));
    memcpy(&buf[sizeof(r)], msg.data(), msg.size());
    size_t done = 0;
    const int64_t end = monotonicMs() + kReplyTimeoutMs;
    while (done < buf.size()) {
      ssize_t n = s->trySend(buf.data() + done, buf.size() - done);
      if (n < 0) break;
      done += size_t(n);
      if (n == 0 && waitFd(s->fd(), POLLOUT, end, nullptr) != WaitResult::kReady) break;
    }
    s->close();
  }

  void failAll(const std::string& msg) {
    for (auto& m : members_) reply(&m->sock, wire::kGaveUp, msg);
    members_.clear();
  }

  void sendTables() {
    std::vector<char> table(size_t(nranks_) * wire::kAddrLen, 0);
    for (auto& m : members_) memcpy(&table[size_t(m->rank) * wire::kAddrLen], m->addr, wire::kAddrLen);
    wire::RootReply r{wire::kReplyMagic, wire::kOk, uint32_t(table.size()), 0};
    const int timeoutMs = timeoutMs_ > 0 ? timeoutMs_ : -1;
    for (auto& m : members_) {
      if (m->sock.sendAll(&r, sizeof(r), timeoutMs, nullptr) != ncclSuccess ||
          m->sock.sendAll(table.data(), table.size(), timeoutMs, nullptr) != ncclSuccess)
        BRAID_WARN("bootstrap root at %s: could not send the rank table to rank %d", where_.c_str(),
                   m->rank);
      m->sock.close();
    }
    BRAID_INFO(kLogBootstrap, "bootstrap root at %s: all %d ranks joined; done", where_.c_str(),
               nranks_);
  }

  std::string summary() const {
    if (nranks_ < 0) return "no rank arrived";
    std::string missing;
    int shown = 0, count = 0;
    for (int r = 0; r < nranks_; ++r) {
      if (byRank_[size_t(r)] >= 0) continue;
      ++count;
      if (shown < 16) {
        missing += (shown ? ", " : "") + std::to_string(r);
        ++shown;
      }
    }
    if (count > shown) missing += ", ...";
    return std::to_string(members_.size()) + " of " + std::to_string(nranks_) +
           " ranks arrived; missing rank(s) " + missing;
  }

  Socket listener_;
  uint64_t secret_;
  int timeoutMs_;
  std::string where_;
  int nranks_ = -1;
  int firstRank_ = -1;
  std::vector<int> byRank_;  // rank -> index in members_, -1 if absent
  std::vector<std::unique_ptr<Pending>> pending_;
  std::vector<std::unique_ptr<Member>> members_;
};

}  // namespace

ncclResult_t bootstrapStartRoot(Socket listener, uint64_t secret, int timeoutMs) {
  if (!listener.valid())
    return setError(ncclInternalError, nullptr, "bootstrap: root started without a listener");
  listener.setNonBlocking(true);
  auto root = std::make_unique<Root>(std::move(listener), secret, timeoutMs);
  gRootsRunning.fetch_add(1);
  try {
    std::thread([r = root.get()]() {
      std::unique_ptr<Root> owned(r);
      owned->run();
      owned.reset();  // close every socket before counting the thread as gone
      gRootsRunning.fetch_sub(1);
    }).detach();
    root.release();
  } catch (const std::system_error& e) {
    gRootsRunning.fetch_sub(1);
    return setError(ncclSystemError, nullptr, "bootstrap: cannot start the root thread: %s",
                    e.what());
  }
  return ncclSuccess;
}

int bootstrapRootsRunning() { return gRootsRunning.load(); }

}  // namespace braid
