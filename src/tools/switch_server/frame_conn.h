// FrameConn: one non-blocking TCP connection of a switch (to a member, a leaf switch
// or its parent), speaking frames (transports/collnet_switch/wire.h). Reading hands each frame to a Sink as it
// arrives: data payloads land straight where the sink says, piece by piece (so the
// switch can reduce what has arrived before the rest comes), control payloads are
// collected whole. Writing keeps a queue of frames; data frames point into shared
// buffers that the queue keeps alive.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "transports/collnet_switch/wire.h"

namespace braid {

class SwitchGroup;

using SharedBytes = std::shared_ptr<char>;
SharedBytes allocBytes(uint64_t n);

class FrameConn {
 public:
  enum class Role { kHello, kPort, kUp, kClosing };

  /// Where a frame's payload goes (returned by Sink::onHeader).
  struct Target {
    char* data = nullptr;  ///< data frames: the payload lands here
    bool control = false;  ///< collect the payload and call onControl
    bool stop = false;     ///< the sink dealt with the connection: stop reading it
  };
  class Sink {
   public:
    virtual ~Sink() = default;
    virtual Target onHeader(FrameConn* c, const wire::FrameHeader& h) = 0;
    /// `n` more payload bytes of data frame `h` landed (consecutively after earlier ones).
    virtual void onData(FrameConn* c, const wire::FrameHeader& h, uint64_t n) = 0;
    /// A frame with a control payload is complete. Returns false to stop reading.
    virtual bool onControl(FrameConn* c, const wire::FrameHeader& h, std::string payload) = 0;
  };

  enum class ReadResult { kWouldBlock, kMore, kClosed, kStopped };

  FrameConn(int fd, std::string peer);
  ~FrameConn();
  FrameConn(const FrameConn&) = delete;
  FrameConn& operator=(const FrameConn&) = delete;

  int fd() const { return fd_; }
  const std::string& peer() const { return peer_; }

  /// Reads frames until the socket would block (kWouldBlock), `budget` bytes were read
  /// (kMore), the peer closed or failed (kClosed, *why set) or the sink stopped it.
  /// A connection in Role::kClosing reads and drops everything.
  ReadResult readSome(Sink* sink, size_t budget, std::string* why);

  void queueControl(uint32_t kind, uint64_t seq, const std::string& payload);
  /// A data frame of n bytes at p, kept alive by `keep`.
  void queueData(uint64_t seq, const SharedBytes& keep, const char* p, uint32_t n);
  /// Bytes of frames already encoded (a hello).
  void queueRaw(std::string bytes);
  bool wantsWrite() const { return !out_.empty(); }
  /// Writes what the socket takes; false when it failed (*why set).
  bool flush(std::string* why);

  // Owner's bookkeeping (the server).
  Role role = Role::kHello;
  SwitchGroup* group = nullptr;
  int port = -1;                 ///< index of the port in `group`
  bool connecting = false;       ///< outgoing connect in progress (kUp)
  bool dead = false;             ///< to be destroyed at the end of the loop pass
  bool shutSent = false;         ///< kClosing: write side shut after the last frame
  int64_t deadlineMs = -1;       ///< hello / closing deadline (-1: none)

 private:
  struct OutItem {
    wire::FrameHeader h{};
    std::string bytes;  ///< control payload, or (raw) whole frames
    bool raw = false;
    SharedBytes keep;
    const char* data = nullptr;
    size_t len = 0;
    size_t done = 0;    ///< bytes of header + payload written
    size_t total() const { return raw ? bytes.size() : sizeof h + (data ? len : bytes.size()); }
  };

  int fd_;
  std::string peer_;
  // reader
  wire::FrameHeader hdr_{};
  size_t hdrGot_ = 0;
  Target target_;
  uint64_t payloadGot_ = 0;
  std::string ctl_;
  // writer
  std::deque<OutItem> out_;
};

}  // namespace braid
