// SwitchServer: the braid-switch daemon's engine, also run in-process by tests.
//
// One thread runs a poll() loop over the listening socket, every connection and a
// wake-up eventfd; it serves any number of groups at once. A connection's first frame
// is a hello (protocol_check.h): it joins the group it names (created by its first member),
// admitted when it shows the group's job secret (and, with `secret` set, that one).
// When every member of a group is there the switch answers kWelcome to each (a leaf of
// a two-level tree first joins its parent, as one member standing for its ranks).
// SwitchGroup (switch_group.h) then moves the group's operations. A member that goes
// away fails its group (kFail to the others, naming it); other groups go on.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/net/socket.h"
#include "src/tools/switch_server/frame_conn.h"
#include "src/tools/switch_server/switch_group.h"

namespace braid {

struct SwitchOptions {
  std::string parent;          ///< HOST:PORT of the parent switch; empty: none
  bool requireSecret = false;  ///< admit only `secret` (braid-switch --secret-file)
  uint64_t secret = 0;
  int timeoutMs = 60000;       ///< how long a group may take to gather its members
  size_t pieceBytes = 65536;   ///< granularity of reductions and of results sent
  /// Receives every log line (warn: refusals and failures); null: Braid's logger
  /// (WARN / INFO NET).
  std::function<void(bool warn, const std::string& line)> log;
};

class SwitchServer : private FrameConn::Sink {
 public:
  SwitchServer();
  ~SwitchServer() override;
  SwitchServer(const SwitchServer&) = delete;
  SwitchServer& operator=(const SwitchServer&) = delete;

  /// Listens on listenAddr ("ip:port"; port 0 picks one) and starts serving. Returns
  /// the bound address, or "" on failure (error() says why).
  std::string start(const std::string& listenAddr, const SwitchOptions& options);
  /// Stops serving and closes every connection (members see the switch go away).
  void stop();
  const std::string& address() const { return address_; }
  const std::string& error() const { return error_; }
  /// Groups currently open (forming or formed).
  int groupCount() const { return groupCount_.load(); }
  /// Connections currently open (members, parents, closing ones).
  int connectionCount() const { return connCount_.load(); }

 private:
  // FrameConn::Sink
  FrameConn::Target onHeader(FrameConn* c, const wire::FrameHeader& h) override;
  void onData(FrameConn* c, const wire::FrameHeader& h, uint64_t n) override;
  bool onControl(FrameConn* c, const wire::FrameHeader& h, std::string payload) override;

  void loop();
  void acceptAll();
  void onHello(FrameConn* c, const std::string& payload);
  void refuse(FrameConn* c, const std::string& why);
  void closeConn(FrameConn* c, int64_t graceMs);
  void lostConn(FrameConn* c, const std::string& why);
  void failGroup(SwitchGroup* g, const std::string& why, bool fromUp);
  void groupFormed(SwitchGroup* g);
  void finishGroup(SwitchGroup* g);
  void startUp(SwitchGroup* g);
  void finishConnect(FrameConn* c);
  void timers(int64_t now);
  void sweep();
  void log(bool warn, const std::string& line);
  FrameConn* addConn(int fd, std::string peer);

  SwitchOptions opts_;
  std::string address_;
  std::string error_;
  Socket listener_;
  int wakeFd_ = -1;
  SockAddr parentAddr_;
  bool hasParent_ = false;
  int64_t acceptPausedUntil_ = 0;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> groupCount_{0};
  std::atomic<int> connCount_{0};
  std::vector<std::unique_ptr<FrameConn>> conns_;
  std::map<uint64_t, std::unique_ptr<SwitchGroup>> groups_;
};

}  // namespace braid
