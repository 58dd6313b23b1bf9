// SwitchClient: see switch_client.h.
#include "transports/collnet_switch/switch_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "src/config/error.h"
#include "src/net/socket.h"

namespace braid {

namespace {

constexpr uint64_t kFrameMax = uint64_t(1) << 20;  ///< input bytes per kData frame
constexpr int kMaxIov = 32;

/// iovecs for bytes [offset, offset + maxBytes) of the pieces `segs`.
int sliceIov(const std::vector<iovec>& segs, uint64_t offset, uint64_t maxBytes, iovec* iov,
             int maxIov) {
  int n = 0;
  for (const iovec& s : segs) {
    if (maxBytes == 0 || n == maxIov) break;
    if (offset >= s.iov_len) {
      offset -= s.iov_len;
      continue;
    }
    const uint64_t take = std::min<uint64_t>(s.iov_len - offset, maxBytes);
    iov[n++] = {static_cast<char*>(s.iov_base) + offset, size_t(take)};
    maxBytes -= take;
    offset = 0;
  }
  return n;
}

std::string lastErrorText() {
  const char* e = lastError(nullptr);
  return e && *e ? std::string(e) : std::string("unknown error");
}

}  // namespace

ncclResult_t SwitchClient::connect(const std::string& addr, const Hello& hello, int timeoutMs,
                                   std::unique_ptr<SwitchClient>* out, std::string* why) {
  SockAddr sa;
  if (!SockAddr::parse(addr, &sa)) {
    *why = "bad switch address '" + addr + "' (HOST:PORT expected)";
    return ncclInvalidArgument;
  }
  const int64_t deadline = monotonicMs() + timeoutMs;
  auto left = [&] { return int(std::max<int64_t>(1, deadline - monotonicMs())); };
  Socket s;
  s.setLabel("BraidSwitch collnet");
  if (s.connect(sa, timeoutMs, nullptr) != ncclSuccess) {
    *why = "cannot reach switch " + addr + ": " + lastErrorText();
    return ncclSystemError;
  }
  const std::string bytes = hello.encode();
  if (s.sendAll(bytes.data(), bytes.size(), left(), nullptr) != ncclSuccess) {
    *why = "switch " + addr + ": sending the hello failed: " + lastErrorText();
    return ncclSystemError;
  }
  wire::FrameHeader h;
  ncclResult_t r = s.recvAll(&h, sizeof h, left(), nullptr);
  if (r == ncclRemoteError) {
    *why = "switch " + addr + " went away before the group formed (" + lastErrorText() + ")";
    return ncclRemoteError;
  }
  if (r != ncclSuccess) {
    *why = "switch " + addr + ": no answer within " + std::to_string(timeoutMs) +
           " ms (the group did not form: " + lastErrorText() + ")";
    return ncclSystemError;
  }
  if (h.kind == wire::kRefuse || h.kind == wire::kFail) {
    std::string reason(std::min<size_t>(h.len, wire::kMaxReasonBytes), '\0');
    if (h.len > wire::kMaxReasonBytes ||
        s.recvAll(&reason[0], reason.size(), left(), nullptr) != ncclSuccess)
      reason = "(no reason given)";
    *why = "switch " + addr + " refused: " + reason;
    return ncclRemoteError;
  }
  if (h.kind != wire::kWelcome || h.len != 0) {
    *why = "switch " + addr + ": unexpected answer to the hello (not a braid-switch?)";
    return ncclRemoteError;
  }
  s.setNonBlocking(true);
  s.setNoDelay();
  out->reset(new SwitchClient(s.release(), addr));
  return ncclSuccess;
}

SwitchClient::~SwitchClient() { close(); }

void SwitchClient::close() {
  std::lock_guard<std::mutex> lk(mu_);
  if (fd_ < 0) return;
  if (!failed_ && !txActive_ && txSeq_ == postSeq_) {
    // Nothing half-sent: a goodbye frame tells the switch this is a clean close.
    wire::FrameHeader bye{wire::kBye, 0, 0};
    size_t sent = 0;
    const int64_t deadline = monotonicMs() + 1000;
    while (sent < sizeof bye) {
      ssize_t k = ::send(fd_, reinterpret_cast<char*>(&bye) + sent, sizeof bye - sent,
                         MSG_DONTWAIT | MSG_NOSIGNAL);
      if (k > 0) {
        sent += size_t(k);
        continue;
      }
      if (k < 0 && errno == EINTR) continue;
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && monotonicMs() < deadline) {
        pollfd p{fd_, POLLOUT, 0};
        ::poll(&p, 1, 50);
        continue;
      }
      break;
    }
    ::shutdown(fd_, SHUT_WR);
  }
  ::close(fd_);
  fd_ = -1;
  if (!failed_) {
    failed_ = true;
    failCode_ = ncclInvalidUsage;
    why_ = "the connection to switch " + addr_ + " was closed";
  }
}

void SwitchClient::fail(ncclResult_t code, std::string why) {
  if (failed_) return;
  failed_ = true;
  failCode_ = code;
  why_ = std::move(why);
}

SwitchRequest* SwitchClient::find(uint64_t seq) {
  if (seq >= postSeq_) return nullptr;
  SwitchRequest& q = reqs_[seq % kSlots];
  return q.used && q.seq == seq ? &q : nullptr;
}

ncclResult_t SwitchClient::post(const wire::OpDesc& d, const std::vector<iovec>& in,
                                uint64_t inLen, const std::vector<iovec>& out, uint64_t outLen,
                                SwitchRequest** request, std::string* why) {
  std::lock_guard<std::mutex> lk(mu_);
  *request = nullptr;
  if (failed_) {
    *why = why_;
    return failCode_;
  }
  SwitchRequest& q = reqs_[postSeq_ % kSlots];
  if (q.used) return ncclSuccess;  // all slots busy: the caller tries again
  q.owner = this;
  q.seq = postSeq_++;
  q.used = true;
  q.done = false;
  q.reported = false;
  q.desc = d;
  q.in = in;
  q.inLen = inLen;
  q.out = out;
  q.outLen = outLen;
  q.outGot = 0;
  progress();
  *request = &q;
  return ncclSuccess;
}

ncclResult_t SwitchClient::test(SwitchRequest* r, int* done, int* size, std::string* why) {
  std::lock_guard<std::mutex> lk(mu_);
  *done = 0;
  if (!r->used) {
    *why = "test() of a request that is not outstanding";
    return ncclInvalidUsage;
  }
  progress();
  if (r->done) {
    *done = 1;
    if (size) *size = int(r->outLen);
    r->used = false;
    return ncclSuccess;
  }
  if (failed_) {
    *why = r->reported ? std::string() : why_;
    r->reported = true;
    return failCode_;
  }
  return ncclSuccess;
}

void SwitchClient::progress() {
  if (failed_ || fd_ < 0) return;
  pumpRecv();
  const uint64_t before = txBytes_;
  pumpSend();
  // Sending may have let the switch answer; look again only if something went out.
  if (txBytes_ != before) pumpRecv();
}

void SwitchClient::pumpSend() {
  while (!failed_ && txSeq_ < postSeq_) {
    SwitchRequest& q = reqs_[txSeq_ % kSlots];
    if (!txActive_) {
      wire::FrameHeader h{};
      if (!txOpSent_) {
        h = wire::FrameHeader{wire::kOp, uint32_t(sizeof(wire::OpDesc)), q.seq};
        std::memcpy(txHdr_ + sizeof h, &q.desc, sizeof q.desc);
        txHdrLen_ = sizeof h + sizeof q.desc;
        txDataLeft_ = 0;
        txIsOp_ = true;
      } else if (txInSent_ < q.inLen) {
        txDataLeft_ = std::min(q.inLen - txInSent_, kFrameMax);
        h = wire::FrameHeader{wire::kData, uint32_t(txDataLeft_), q.seq};
        txHdrLen_ = sizeof h;
        txIsOp_ = false;
      } else {
        ++txSeq_;
        txOpSent_ = false;
        txInSent_ = 0;
        continue;
      }
      std::memcpy(txHdr_, &h, sizeof h);
      txHdrSent_ = 0;
      txActive_ = true;
    }
    iovec iov[kMaxIov + 1];
    int n = 0;
    if (txHdrSent_ < txHdrLen_) iov[n++] = {txHdr_ + txHdrSent_, txHdrLen_ - txHdrSent_};
    n += sliceIov(q.in, txInSent_, txDataLeft_, iov + n, kMaxIov);
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = size_t(n);
    ssize_t k = ::sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      fail(ncclRemoteError, "switch " + addr_ + " went away (sending: " +
                                std::string(errno == EPIPE || errno == ECONNRESET
                                                ? "connection closed"
                                                : std::strerror(errno)) + ")");
      return;
    }
    size_t moved = size_t(k);
    txBytes_ += moved;
    const size_t h = std::min(moved, txHdrLen_ - txHdrSent_);
    txHdrSent_ += h;
    moved -= h;
    txInSent_ += moved;
    txDataLeft_ -= moved;
    if (txHdrSent_ == txHdrLen_ && txDataLeft_ == 0) {
      txActive_ = false;
      if (txIsOp_) txOpSent_ = true;
    }
  }
}

void SwitchClient::pumpRecv() {
  while (!failed_) {
    ssize_t k;
    if (rxHdrGot_ < sizeof rxHdr_) {
      k = ::recv(fd_, reinterpret_cast<char*>(&rxHdr_) + rxHdrGot_, sizeof rxHdr_ - rxHdrGot_,
                 MSG_DONTWAIT);
    } else if (rxReq_) {
      iovec iov[kMaxIov];
      int n = sliceIov(rxReq_->out, rxReq_->outGot, rxDataLeft_, iov, kMaxIov);
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = size_t(n);
      k = ::recvmsg(fd_, &msg, MSG_DONTWAIT);
    } else {
      k = ::recv(fd_, &rxCtl_[rxCtlGot_], rxCtl_.size() - rxCtlGot_, MSG_DONTWAIT);
    }
    if (k == 0) {
      fail(ncclRemoteError, "switch " + addr_ + " closed the connection (did it stop?)");
      return;
    }
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      fail(ncclRemoteError, "switch " + addr_ + " went away (" +
                                std::string(errno == ECONNRESET ? "connection reset"
                                                                : std::strerror(errno)) + ")");
      return;
    }
    if (rxHdrGot_ < sizeof rxHdr_) {
      rxHdrGot_ += size_t(k);
      if (rxHdrGot_ < sizeof rxHdr_) continue;
      SwitchRequest* q = find(rxHdr_.seq);
      const wire::FrameHeader& h = rxHdr_;
      if (h.kind == wire::kData && q && !q->done && h.len <= q->outLen - q->outGot) {
        rxReq_ = q;
        rxDataLeft_ = h.len;
        if (h.len == 0) {
          rxReq_ = nullptr;
          rxHdrGot_ = 0;
        }
      } else if (h.kind == wire::kDone && h.len == 0 && q && !q->done && q->outGot == q->outLen) {
        q->done = true;
        rxHdrGot_ = 0;
      } else if (h.kind == wire::kFail && h.len <= wire::kMaxReasonBytes) {
        rxCtl_.assign(h.len, '\0');
        rxCtlGot_ = 0;
        if (h.len == 0) fail(ncclRemoteError, "switch " + addr_ + ": the group failed");
      } else {
        fail(ncclRemoteError, "switch " + addr_ + ": protocol error (frame kind " +
                                  std::to_string(h.kind) + ", " + std::to_string(h.len) +
                                  " bytes, op #" + std::to_string(h.seq) + ")");
      }
      continue;
    }
    if (rxReq_) {
      rxReq_->outGot += uint64_t(k);
      rxDataLeft_ -= uint64_t(k);
      if (rxDataLeft_ == 0) {
        rxReq_ = nullptr;
        rxHdrGot_ = 0;
      }
      continue;
    }
    rxCtlGot_ += size_t(k);
    if (rxCtlGot_ == rxCtl_.size()) fail(ncclRemoteError, rxCtl_);
  }
}

}  // namespace braid
