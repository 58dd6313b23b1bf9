// FrameConn: see frame_conn.h.
#include "src/tools/switch_server/frame_conn.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace braid {

SharedBytes allocBytes(uint64_t n) {
  return SharedBytes(new char[n ? n : 1], std::default_delete<char[]>());
}

FrameConn::FrameConn(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}

FrameConn::~FrameConn() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {

/// recv() that retries EINTR. Returns >0 bytes, 0 would block, -1 closed/failed.
ssize_t recvSome(int fd, void* p, size_t n, std::string* why) {
  for (;;) {
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) return k;
    if (k == 0) {
      *why = "connection closed";
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    *why = errno == ECONNRESET ? std::string("connection reset") : std::strerror(errno);
    return -1;
  }
}

}  // namespace

FrameConn::ReadResult FrameConn::readSome(Sink* sink, size_t budget, std::string* why) {
  size_t total = 0;
  while (total < budget) {
    if (role == Role::kClosing) {
      char scratch[16384];
      ssize_t k = recvSome(fd_, scratch, sizeof scratch, why);
      if (k < 0) return ReadResult::kClosed;
      if (k == 0) return ReadResult::kWouldBlock;
      total += size_t(k);
      continue;
    }
    if (hdrGot_ < sizeof hdr_) {
      ssize_t k = recvSome(fd_, reinterpret_cast<char*>(&hdr_) + hdrGot_, sizeof hdr_ - hdrGot_,
                           why);
      if (k < 0) return ReadResult::kClosed;
      if (k == 0) return ReadResult::kWouldBlock;
      hdrGot_ += size_t(k);
      total += size_t(k);
      if (hdrGot_ < sizeof hdr_) continue;
      payloadGot_ = 0;
      ctl_.clear();
      target_ = sink->onHeader(this, hdr_);
      if (target_.stop) {
        hdrGot_ = 0;
        return ReadResult::kStopped;
      }
      if (hdr_.len == 0) {
        hdrGot_ = 0;
        if (target_.control && !sink->onControl(this, hdr_, std::string()))
          return ReadResult::kStopped;
      } else if (target_.control) {
        ctl_.resize(hdr_.len);
      }
      continue;
    }
    const uint64_t left = hdr_.len - payloadGot_;
    char* dst = target_.control ? &ctl_[payloadGot_] : target_.data + payloadGot_;
    const size_t want = size_t(std::min<uint64_t>(left, budget - total));
    ssize_t k = recvSome(fd_, dst, want, why);
    if (k < 0) return ReadResult::kClosed;
    if (k == 0) return ReadResult::kWouldBlock;
    payloadGot_ += uint64_t(k);
    total += size_t(k);
    const bool complete = payloadGot_ == hdr_.len;
    if (complete) hdrGot_ = 0;
    if (target_.control) {
      if (complete && !sink->onControl(this, hdr_, std::move(ctl_))) return ReadResult::kStopped;
    } else {
      sink->onData(this, hdr_, uint64_t(k));
    }
  }
  return ReadResult::kMore;
}

void FrameConn::queueControl(uint32_t kind, uint64_t seq, const std::string& payload) {
  OutItem it;
  it.h = wire::FrameHeader{kind, uint32_t(payload.size()), seq};
  it.bytes = payload;
  out_.push_back(std::move(it));
}

void FrameConn::queueData(uint64_t seq, const SharedBytes& keep, const char* p, uint32_t n) {
  OutItem it;
  it.h = wire::FrameHeader{wire::kData, n, seq};
  it.keep = keep;
  it.data = p;
  it.len = n;
  out_.push_back(std::move(it));
}

void FrameConn::queueRaw(std::string bytes) {
  OutItem it;
  it.raw = true;
  it.bytes = std::move(bytes);
  out_.push_back(std::move(it));
}

bool FrameConn::flush(std::string* why) {
  while (!out_.empty()) {
    iovec iov[64];
    int n = 0;
    for (auto it = out_.begin(); it != out_.end() && n + 2 <= 64; ++it) {
      size_t skip = it->done;
      if (it->raw) {
        iov[n++] = {&it->bytes[skip], it->bytes.size() - skip};
        continue;
      }
      if (skip < sizeof it->h) {
        iov[n++] = {reinterpret_cast<char*>(&it->h) + skip, sizeof it->h - skip};
        skip = 0;
      } else {
        skip -= sizeof it->h;
      }
      const char* payload = it->data ? it->data : it->bytes.data();
      const size_t len = it->data ? it->len : it->bytes.size();
      if (len > skip) iov[n++] = {const_cast<char*>(payload) + skip, len - skip};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = size_t(n);
    ssize_t k = ::sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      *why = (errno == EPIPE || errno == ECONNRESET) ? std::string("connection closed")
                                                     : std::strerror(errno);
      return false;
    }
    size_t moved = size_t(k);
    while (moved > 0 && !out_.empty()) {
      OutItem& it = out_.front();
      const size_t take = std::min(moved, it.total() - it.done);
      it.done += take;
      moved -= take;
      if (it.done == it.total()) out_.pop_front();
    }
  }
  return true;
}

}  // namespace braid
