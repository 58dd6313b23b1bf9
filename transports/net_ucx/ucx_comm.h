// UcxComm: one connected end of a UCX net connection (a send comm or a recv comm).
//
// Data moves as UCP tag messages: the sender sends on the endpoint to the receiver's
// worker (shared with the other comms between the two workers, see ucx_worker.h) with tag
// (tagId << 32 | user tag), where tagId was chosen by the receiver's worker in the
// handshake; the receiver posts ucp_tag_recv_nbx on its worker for that exact tag. UCX
// matches messages of one endpoint and tag in order, which gives the net contract's
// posting-order matching.
//
// Peer failure, from two independent detectors:
//   - UCX's error handler (endpoints in UCP_ERR_HANDLING_MODE_PEER; both ends attach to
//     an endpoint to the other's worker, so both hear of a failure);
//   - the handshake's TCP socket, kept open as a liveness wire: when the peer process
//     dies its kernel closes it, whatever UCX transport carries the data (UCX's own
//     keepalive over shared memory takes 20 s by default).
// Either one marks the comm failed. Requests still pending a grace period later (data
// the peer sent before it went may still be arriving) complete with ncclRemoteError
// naming the peer address and the UCX status. Receive requests are not tied to an
// endpoint, so UCX alone would let them wait forever; these are cancelled.
#pragma once
#include "transports/net_ucx/ucx_api.h"

#if BRAID_HAVE_UCX
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "nccl.h"
#include "src/net/socket.h"

namespace braid {

class UcxWorker;
class UcxComm;
struct UcxPeer;

/// One isend/irecv, handed to the caller as the opaque request.
struct UcxRequest {
  UcxComm* comm = nullptr;
  bool used = false;       ///< slot taken (until test() reports it, or UCX lets go)
  bool pending = false;    ///< UCX still holds it: its callback has not run
  bool abandoned = false;  ///< reported failed while pending: free the slot in the callback
  bool recv = false;
  void* ucpReq = nullptr;  ///< UCX's request while pending (to cancel receives)
  ucs_status_t status = UCS_OK;
  size_t size = 0;
};

/// A comm's request slots. Allocated apart from the comm: when a comm is closed while
/// UCX still holds some of its requests (sends a vanished receiver never fetches), the
/// slots go to the worker (UcxWorker::adopt) and the comm itself is freed.
struct UcxRequestSlots {
  static constexpr int kCount = 32;  ///< NCCL_NET_MAX_REQUESTS
  UcxRequest slot[kCount];
};

class UcxComm {
 public:

  /// Takes the handshake socket (liveness wire) and attaches to the endpoint to the
  /// peer's worker. Caller holds worker->mu().
  static ncclResult_t create(UcxWorker* worker, bool isSend, Socket wire,
                             const std::string& peerAddress, uint32_t tagId, UcxComm** out);

  ncclResult_t isend(void* data, size_t size, int tag, void** request);
  ncclResult_t irecv(void* data, size_t size, int tag, void** request);
  ncclResult_t test(UcxRequest* req, int* done, int* sizes);
  /// Cancels what is pending, flushes the endpoint if the peer is healthy, closes it
  /// (forced), each step bounded in time, then deletes the comm (or leaves it allocated
  /// if UCX still holds it).
  static ncclResult_t close(UcxComm* comm);

  bool isSend() const { return isSend_; }
  const std::string& peer() const { return peer_; }
  /// UCX's error handler of the shared endpoint reports a failure. Under the lock.
  void peerFailed(ucs_status_t status) { markFailed(status, "peer error reported by UCX"); }

 private:
  UcxComm(UcxWorker* worker, bool isSend, Socket wire, uint32_t tagId);
  ~UcxComm() = default;

  static void onSendDone(void* ucpReq, ucs_status_t status, void* user);
  static void onRecvDone(void* ucpReq, ucs_status_t status, const ucp_tag_recv_info_t* info,
                         void* user);

  UcxRequest* takeSlot();
  ncclResult_t posted(UcxRequest* req, ucs_status_ptr_t st, size_t size, void** request);
  /// First failure wins; later ones are ignored.
  void markFailed(ucs_status_t status, const char* what);
  /// Polls the liveness wire at most every peerCheckMs_. Caller holds the worker lock.
  void checkWire(int64_t now);
  ncclResult_t failureError(const char* op);
  int pendingCount() const;
  bool drainUntil(void* req, int64_t deadlineMs, bool stopIfPeerGone);

  UcxWorker* worker_;
  bool isSend_;
  Socket wire_;
  std::string peer_;  ///< peer's "ip:port" on the wire, for messages
  uint64_t tagBase_;
  UcxPeer* link_ = nullptr;  ///< the endpoint to the peer's worker
  int64_t peerCheckMs_;
  int64_t lastWireCheckMs_ = 0;

  std::atomic<bool> failed_{false};
  ucs_status_t failStatus_ = UCS_OK;
  int64_t failMs_ = 0;
  char failWhat_[96] = {};

  std::unique_ptr<UcxRequestSlots> reqs_;
};

}  // namespace braid
#endif  // BRAID_HAVE_UCX
