// UcxComm: tag messages over one UCP endpoint, completion through callbacks that run
// inside ucp_worker_progress (under the worker's lock), failure detection and bounded
// close. See ucx_comm.h for the design.
#include "transports/net_ucx/ucx_comm.h"

#if BRAID_HAVE_UCX
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>

#include "src/config/params.h"
#include "src/config/error.h"
#include "transports/net_ucx/ucx_worker.h"

namespace braid {
namespace {

// After a failure is detected, pending requests get this long to complete with data
// that was already on its way (a sender's last messages may trail its exit).
constexpr int64_t kFailGraceMs = 1000;
// Longest close() waits for UCX to release the endpoint and pending requests.
constexpr int64_t kCloseMs = 2000;
// Longest a send comm's close() waits for its flush. Over tcp, UCX 1.13 completes a
// flush only once the peer progresses its worker (a peer that is closing its own comms
// does); a peer busy elsewhere must not hold every send comm's close for long.
constexpr int64_t kFlushMs = 500;
// Progress calls used to drain arrived data before a pending request is failed.
constexpr int kDrainRounds = 64;

// The wire carries nothing after the handshake; TCP keepalive lets it notice a peer
// host that vanished without closing it (power loss, cable): about 10 + 3 * 2 s.
void enableKeepalive(int fd) {
  int on = 1, idle = 10, interval = 2, count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

}  // namespace

UcxComm::UcxComm(UcxWorker* worker, bool isSend, Socket wire, uint32_t tagId)
    : worker_(worker),
      isSend_(isSend),
      wire_(std::move(wire)),
      peer_(wire_.peerAddress()),
      tagBase_(uint64_t(tagId) << 32),
      peerCheckMs_(std::max<int64_t>(10, param::kPeerCheckMs.get())),
      reqs_(new UcxRequestSlots()) {
  for (UcxRequest& r : reqs_->slot) r.comm = this;
  if (wire_.valid()) enableKeepalive(wire_.fd());
}

ncclResult_t UcxComm::create(UcxWorker* worker, bool isSend, Socket wire,
                             const std::string& peerAddress, uint32_t tagId, UcxComm** out) {
  UcxComm* c = new UcxComm(worker, isSend, std::move(wire), tagId);
  ncclResult_t res = worker->attach(peerAddress, c->peer_.c_str(), c, &c->link_);
  if (res != ncclSuccess) {
    delete c;
    return res;
  }
  BRAID_INFO(kLogNet, "UCX net: %s comm %p connected %s peer %s (tag id %u)",
             isSend ? "send" : "recv", static_cast<void*>(c), isSend ? "to" : "from",
             c->peer_.c_str(), tagId);
  *out = c;
  return ncclSuccess;
}

// ---- callbacks (run inside ucp_worker_progress, under the worker lock) -------------

void UcxComm::onSendDone(void* ucpReq, ucs_status_t status, void* user) {
  UcxRequest* req = static_cast<UcxRequest*>(user);
  req->status = status;
  req->pending = false;
  req->ucpReq = nullptr;
  ucxApi()->request_free(ucpReq);  // not through req->comm: it may be gone (close())
  if (req->abandoned) req->used = req->abandoned = false;
}

void UcxComm::onRecvDone(void* ucpReq, ucs_status_t status, const ucp_tag_recv_info_t* info,
                         void* user) {
  UcxRequest* req = static_cast<UcxRequest*>(user);
  req->status = status;
  req->size = (status == UCS_OK && info) ? info->length : 0;
  req->pending = false;
  req->ucpReq = nullptr;
  ucxApi()->request_free(ucpReq);  // not through req->comm: it may be gone (close())
  if (req->abandoned) req->used = req->abandoned = false;
}

// ---- failure ------------------------------------------------------------------------

void UcxComm::markFailed(ucs_status_t status, const char* what) {
  if (failed_.load(std::memory_order_acquire)) return;
  failStatus_ = status;
  failMs_ = monotonicMs();
  snprintf(failWhat_, sizeof(failWhat_), "%s", what);
  failed_.store(true, std::memory_order_release);
  BRAID_INFO(kLogNet, "UCX net: %s comm %p: peer %s failed: %s (%s)", isSend_ ? "send" : "recv",
             static_cast<void*>(this), peer_.c_str(), worker_->api()->status_string(status),
             what);
}

void UcxComm::checkWire(int64_t now) {
  if (failed_.load(std::memory_order_relaxed) || !wire_.valid() ||
      now - lastWireCheckMs_ < peerCheckMs_)
    return;
  lastWireCheckMs_ = now;
  char byte;
  ssize_t n = ::recv(wire_.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) {
    markFailed(UCS_ERR_CONNECTION_RESET,
               "its connection wire closed: the peer closed the comm or exited");
  } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    char what[96];
    snprintf(what, sizeof(what), "its connection wire failed: %s", strerror(errno));
    markFailed(UCS_ERR_CONNECTION_RESET, what);
  }
}

ncclResult_t UcxComm::failureError(const char* op) {
  return setError(ncclRemoteError, nullptr, "UCX net: %s %s peer %s failed: %s (%s)", op,
                  isSend_ ? "to" : "from", peer_.c_str(),
                  worker_->api()->status_string(failStatus_), failWhat_);
}

int UcxComm::pendingCount() const {
  int n = 0;
  for (const UcxRequest& r : reqs_->slot) n += (r.used && r.pending) ? 1 : 0;
  return n;
}

// ---- posting ------------------------------------------------------------------------

UcxRequest* UcxComm::takeSlot() {
  for (UcxRequest& r : reqs_->slot) {
    if (r.used) continue;
    r.used = true;
    r.pending = true;
    r.abandoned = false;
    r.status = UCS_OK;
    r.size = 0;
    r.ucpReq = nullptr;
    return &r;
  }
  return nullptr;
}

ncclResult_t UcxComm::posted(UcxRequest* req, ucs_status_ptr_t st, size_t size, void** request) {
  if (UCS_PTR_IS_ERR(st)) {
    req->used = false;
    ucs_status_t s = UCS_PTR_STATUS(st);
    if (failed_.load(std::memory_order_acquire))
      return failureError(req->recv ? "receive" : "send");
    return setError(ncclRemoteError, nullptr,
                    "UCX net: posting a %zu-byte %s %s peer %s failed: %s", size,
                    req->recv ? "receive" : "send", isSend_ ? "to" : "from", peer_.c_str(),
                    worker_->api()->status_string(s));
  }
  if (st == nullptr) {  // a send completed at once; no callback comes
    req->pending = false;
  } else if (req->pending) {  // else its callback already ran (receives may do so)
    req->ucpReq = st;
  }
  if (!req->recv) req->size = size;
  *request = req;
  return ncclSuccess;
}

ncclResult_t UcxComm::isend(void* data, size_t size, int tag, void** request) {
  *request = nullptr;
  std::lock_guard<std::mutex> lock(worker_->mu());
  if (failed_.load(std::memory_order_acquire) && monotonicMs() - failMs_ >= kFailGraceMs)
    return failureError("send");
  UcxRequest* req = takeSlot();
  if (!req) return ncclSuccess;  // all slots busy: the caller retries
  req->recv = false;
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  p.cb.send = onSendDone;
  p.user_data = req;
  p.memory_type = UCS_MEMORY_TYPE_HOST;  // spares UCX a memory-type lookup per send
  ucs_status_ptr_t st =
      worker_->api()->tag_send_nbx(link_->ep, data, size, tagBase_ | uint32_t(tag), &p);
  return posted(req, st, size, request);
}

ncclResult_t UcxComm::irecv(void* data, size_t size, int tag, void** request) {
  *request = nullptr;
  std::lock_guard<std::mutex> lock(worker_->mu());
  if (failed_.load(std::memory_order_acquire) && monotonicMs() - failMs_ >= kFailGraceMs)
    return failureError("receive");
  UcxRequest* req = takeSlot();
  if (!req) return ncclSuccess;
  req->recv = true;
  ucp_request_param_t p{};
  // No immediate completion: UCX 1.13 can complete a receive of an unexpected
  // multi-fragment message at once without filling recv_info (length 0); the callback
  // always gets the length (and may run before tag_recv_nbx returns).
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                   UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = onRecvDone;
  p.user_data = req;
  p.memory_type = UCS_MEMORY_TYPE_HOST;
  ucs_status_ptr_t st = worker_->api()->tag_recv_nbx(
      worker_->handle(), data, size, tagBase_ | uint32_t(tag), ~ucp_tag_t(0), &p);
  return posted(req, st, size, request);
}

// ---- completion -----------------------------------------------------------------------

ncclResult_t UcxComm::test(UcxRequest* req, int* done, int* sizes) {
  *done = 0;
  const UcxApi* api = worker_->api();
  std::lock_guard<std::mutex> lock(worker_->mu());
  if (req->pending) api->worker_progress(worker_->handle());
  if (req->pending) {
    const int64_t now = monotonicMs();
    checkWire(now);
    if (!failed_.load(std::memory_order_acquire) || now - failMs_ < kFailGraceMs)
      return ncclSuccess;
    // The peer is gone: let whatever already arrived land, then give up on this one.
    for (int i = 0; i < kDrainRounds && req->pending; ++i)
      if (api->worker_progress(worker_->handle()) == 0) break;
    if (req->pending) {
      req->abandoned = true;  // the callback frees the slot
      if (req->recv && req->ucpReq) api->request_cancel(worker_->handle(), req->ucpReq);
      return failureError(req->recv ? "receive" : "send");
    }
  }
  // Completed: report it and free the slot.
  const ucs_status_t status = req->status;
  req->used = false;
  if (status == UCS_OK) {
    *done = 1;
    if (sizes) *sizes = int(req->size);
    return ncclSuccess;
  }
  if (status == UCS_ERR_MESSAGE_TRUNCATED)
    return setError(ncclInternalError, nullptr,
                    "UCX net: a message from peer %s is larger than the posted receive buffer",
                    peer_.c_str());
  if (failed_.load(std::memory_order_acquire)) return failureError(req->recv ? "receive" : "send");
  return setError(ncclRemoteError, nullptr, "UCX net: %s %s peer %s failed: %s",
                  req->recv ? "receive" : "send", isSend_ ? "to" : "from", peer_.c_str(),
                  api->status_string(status));
}

// ---- close ------------------------------------------------------------------------------

// Progresses the worker until `req` (a UCX request or nullptr) completes and no request
// of this comm is pending, or until deadlineMs, or (stopIfPeerGone) until the peer is
// seen gone; the lock is released between rounds so the proxy thread can progress the
// worker's other comms meanwhile. True if all completed.
bool UcxComm::drainUntil(void* req, int64_t deadlineMs, bool stopIfPeerGone) {
  const UcxApi* api = worker_->api();
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(worker_->mu());
      api->worker_progress(worker_->handle());
      if (req && api->request_check_status(req) != UCS_INPROGRESS) {
        api->request_free(req);
        req = nullptr;
      }
      if (!req && pendingCount() == 0) return true;
      const int64_t now = monotonicMs();
      if (stopIfPeerGone) checkWire(now);
      if (now >= deadlineMs || (stopIfPeerGone && failed_.load(std::memory_order_acquire))) {
        if (req) api->request_free(req);  // UCX releases it when it completes
        return false;
      }
    }
    std::this_thread::yield();
  }
}

ncclResult_t UcxComm::close(UcxComm* c) {
  if (!c) return ncclSuccess;
  UcxWorker* w = c->worker_;
  const UcxApi* api = w->api();
  void* flushReq = nullptr;
  bool healthy = false;
  {
    std::lock_guard<std::mutex> lock(w->mu());
    // Stop UCX writing into buffers the caller frees once we return.
    for (UcxRequest& r : c->reqs_->slot) {
      if (!r.used) continue;
      if (!r.pending) {
        r.used = false;
        continue;
      }
      r.abandoned = true;
      if (r.recv && r.ucpReq) api->request_cancel(w->handle(), r.ucpReq);
    }
    // Bypass the rate limit: a peer that has closed its end (or died) gets no flush.
    c->lastWireCheckMs_ = std::numeric_limits<int64_t>::min() / 2;
    c->checkWire(monotonicMs());
    healthy = !c->failed_.load(std::memory_order_acquire);
    if (healthy && c->isSend_) {
      // Make sure what was sent leaves this host: a completed send may still sit in
      // UCX's transport buffers (progressing our worker meanwhile pushes it out). A
      // receive comm sends nothing of ours and is not flushed.
      ucp_request_param_t p{};
      ucs_status_ptr_t st = api->ep_flush_nbx(c->link_->ep, &p);
      if (st != nullptr && !UCS_PTR_IS_ERR(st)) flushReq = st;
    }
  }
  const bool flushed =
      c->drainUntil(flushReq, monotonicMs() + kFlushMs, /*stopIfPeerGone=*/true);
  void* closeReq = nullptr;
  bool lastUser = false;
  {
    std::lock_guard<std::mutex> lock(w->mu());
    lastUser = w->detach(c->link_, c, &closeReq);
  }
  // When this comm was the endpoint's last user, the forced close also completes its
  // pending sends (cancelled); otherwise a healthy peer gets a while to take them, and
  // a failed one none (they end when UCX notices, or when the endpoint closes).
  const int64_t waitMs = (lastUser || healthy) ? kCloseMs : 0;
  const bool released = c->drainUntil(closeReq, monotonicMs() + waitMs, false);
  c->wire_.close();
  if (!released) {
    std::lock_guard<std::mutex> lock(w->mu());
    if (c->pendingCount() > 0) {
      BRAID_INFO(kLogNet, "UCX net: comm %p closed with %d requests UCX still holds (peer %s, "
                 "%s); their slots live on with the worker", static_cast<void*>(c),
                 c->pendingCount(), c->peer_.c_str(), healthy ? "healthy" : "failed");
      w->adopt(std::move(c->reqs_));
    }
  }
  if (!flushed)
    BRAID_INFO(kLogNet, "UCX net: send comm %p: peer %s did not complete the flush within "
               "%lld ms (gone, or not progressing); closed anyway", static_cast<void*>(c),
               c->peer_.c_str(), static_cast<long long>(kFlushMs));
  delete c;
  return ncclSuccess;
}

}  // namespace braid
#endif  // BRAID_HAVE_UCX
