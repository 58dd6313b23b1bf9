// The UCX net's connection handshake: how two UCP workers learn each other's address.
//
//   listen()  (receiver)  a TCP listening socket on this host's address (pickLocalAddress,
//                         NCCL_SOCKET_IFNAME) and a random 64-bit token, both in the
//                         handle, which travels only over the job's bootstrap;
//   connect() (sender)    connects, sends Hello {token, its worker address};
//   accept()  (receiver)  checks the token (a connection without it is dropped with a
//                         WARN and the wait goes on), replies {tag id, its worker
//                         address}; the sender then has both.
// Both sides are state machines over non-blocking sockets: each call moves as far as it
// can without waiting and returns no comm until the handshake is complete. The socket
// then stays open as the connection's liveness wire (see ucx_comm.h).
#pragma once
#include "transports/net_ucx/ucx_api.h"

#if BRAID_HAVE_UCX
#include <cstddef>
#include <cstdint>
#include <list>
#include <string>

#include "braid/net_plugin.h"
#include "src/net/socket.h"

namespace braid {

class UcxWorker;
class UcxComm;
class UcxConnector;

/// The listen handle (copied between ranks by the caller; at most 128 bytes).
struct UcxHandle {
  uint64_t magic;
  uint64_t token;
  uint32_t addrLen;  ///< bytes of `addr` used: a sockaddr_in or sockaddr_in6
  uint8_t addr[28];
  /// The sender's connect in progress, kept in its copy of the handle between
  /// connect() calls (as the contract lets a net do); listen() leaves it null.
  UcxConnector* pending;
};
static_assert(sizeof(UcxHandle) <= NCCL_NET_HANDLE_MAXSIZE, "UCX handle too large");

/// Bytes of one handshake message moving through a non-blocking socket over several
/// calls.
struct UcxWireBuffer {
  std::string bytes;
  size_t done = 0;
  /// Sends the rest of `bytes`: 1 all sent, 0 would block, -1 error (errno says).
  int push(Socket& s);
  /// Receives until `bytes` (pre-sized) is full: 1 full, 0 would block, -1 error/EOF.
  int pull(Socket& s);
  void expect(size_t n) {
    bytes.assign(n, '\0');
    done = 0;
  }
};

/// Sender side of one connection.
class UcxConnector {
 public:
  /// connect() of the net: checks the handle, keeps the handshake under way in
  /// handle->pending between calls, sets *comm once connected. Never blocks.
  static ncclResult_t connect(UcxWorker* worker, UcxHandle* handle, UcxComm** comm);
  /// Drops a handshake given up before connect() returned a comm.
  static void abandon(UcxHandle* handle);

 private:
  UcxConnector(UcxWorker* worker, const UcxHandle& handle);
  /// Moves the handshake on; *comm is set once connected.
  ncclResult_t step(UcxComm** comm);

  enum class Stage { kStart, kConnecting, kSendHello, kRecvReply, kRecvAddress };

  ncclResult_t start();

  UcxWorker* worker_;
  SockAddr target_;
  std::string where_;  ///< target_ as "ip:port", for messages
  uint64_t token_;
  Stage stage_ = Stage::kStart;
  Socket sock_;
  UcxWireBuffer out_, in_;
  uint32_t tagId_ = 0;
};

/// Receiver side: the listening socket and the handshakes under way on it.
class UcxListener {
 public:
  /// Listens and fills *handle.
  static ncclResult_t create(UcxWorker* worker, UcxHandle* handle, UcxListener** out);
  /// Accepts and advances handshakes; *comm is set when one completes. Never blocks.
  ncclResult_t accept(UcxComm** comm);

 private:
  enum class Stage { kRecvHello, kRecvAddress, kSendReply };
  struct Pending {
    Socket sock;
    std::string peer;
    Stage stage = Stage::kRecvHello;
    UcxWireBuffer in, out;
    std::string peerAddress;
    uint32_t tagId = 0;
    int64_t startMs = 0;
  };

  explicit UcxListener(UcxWorker* worker) : worker_(worker) {}
  /// 1 complete (comm created), 0 continues, -1 drop this connection (already logged).
  int advance(Pending& p, UcxComm** comm, ncclResult_t* res);
  void reject(Pending& p, uint32_t status, const char* why);

  UcxWorker* worker_;
  Socket listen_;
  std::string where_;  ///< "ip:port" listened on, for messages
  uint64_t token_ = 0;
  std::list<Pending> pending_;
};

}  // namespace braid
#endif  // BRAID_HAVE_UCX
