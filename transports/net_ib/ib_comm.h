// IbComm: one direction of an IB net connection, the sender's or the receiver's end.
//
// Protocol (RC queue pairs, NCCL_IB_QPS_PER_CONNECTION of them):
//  - the receiver's irecv writes a FifoEntry {addr, rkey, size, tag, seq} into slot
//    seq % kSlots of the sender's FIFO with RDMA WRITE WITH IMMEDIATE on QP 0; the
//    sender learns of it from the receive completion (which also guarantees the entry
//    is wholly in memory, which a plain write polled in memory would not);
//  - the sender's isend waits (request NULL) for its entry, then RDMA WRITEs WITH
//    IMMEDIATE the message straight into the receiver's buffer, one part on every QP
//    (parts may be empty); each immediate carries its part's size;
//  - the receiver's request completes when every QP has delivered its part: parts of
//    one QP arrive in posting order, so the k-th completion on QP q belongs to the k-th
//    request; the size is the sum of the immediates.
// The TCP socket used for setup stays open: a peer that dies closes it, which ends
// requests that would otherwise wait for ever, and TCP keepalive covers a host that
// vanishes without closing it (the QPs only fail when something is in
// flight, and then only after the retry timeout).
//
// Completions can also be waited for: each comm's CQ has a completion channel whose
// descriptor the proxy polls when it sleeps (pollFd() arms it).
//
// Thread safety: a comm is used by one thread at a time (the net contract); comms are
// independent of each other apart from their device's registration cache (locked).
#pragma once
#include "transports/net_ib/ibv_api.h"
#ifdef BRAID_HAVE_IBVERBS
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"
#include "src/net/socket.h"
#include "transports/net_ib/ib_device.h"
#include "transports/net_ib/ib_mr_cache.h"

namespace braid {
namespace ib {

constexpr int kSlots = 32;   ///< outstanding requests per comm (NCCL_NET_MAX_REQUESTS)
constexpr int kMaxQps = 16;  ///< NCCL_IB_QPS_PER_CONNECTION upper bound

/// A posted receive buffer, as the receiver announces it to the sender.
struct FifoEntry {
  uint64_t addr;
  uint32_t rkey;
  uint32_t size;  ///< posted size (messages are at most 2 GiB - 1)
  int32_t tag;
  uint32_t pad;
  uint64_t seq;  ///< request number; checks that both sides agree
};
static_assert(sizeof(FifoEntry) == 32, "FIFO entries are written whole");

/// What each side tells the other over the socket during setup.
struct ConnInfo {
  uint64_t magic;
  uint64_t token;  ///< the listen handle's secret (sender to receiver only)
  uint32_t nqps;
  uint32_t mtu;  ///< ibv_mtu of the sender's / receiver's port
  uint32_t qpn[kMaxQps];
  uint8_t gid[16];
  uint16_t lid;
  uint8_t linkLayer;
  uint8_t pad[5];
  uint64_t fifoAddr;  ///< sender's FIFO (sender to receiver only)
  uint32_t fifoRkey;
  uint32_t pad2;
};

class IbComm;

struct IbRequest {
  IbComm* comm = nullptr;
  bool used = false;
  int partsLeft = 0;  ///< completions still to come
  uint64_t size = 0;  ///< bytes received (receiver) or sent (sender)
};

class IbComm {
 public:
  IbComm(const IbDevice* dev, bool isSend, int trafficClass)
      : dev_(dev), isSend_(isSend), trafficClass_(trafficClass) {}
  ~IbComm();
  IbComm(const IbComm&) = delete;
  IbComm& operator=(const IbComm&) = delete;

  // ---- setup (ib_setup.cc drives these) ----
  /// CQ, nqps QPs in INIT with receives posted, and this side's FIFO memory.
  ncclResult_t create(int nqps);
  /// This side's addressing and FIFO, for the peer.
  void describe(ConnInfo* info) const;
  /// Moves the QPs to RTR and RTS towards the peer described by `peer`.
  ncclResult_t connectTo(const ConnInfo& peer);
  /// Takes the setup socket, kept open to notice a dead peer.
  void adoptSocket(Socket sock);
  Socket& socket() { return sock_; }
  const std::string& peer() const { return peer_; }
  int nqps() const { return static_cast<int>(qps_.size()); }
  const IbDevice* device() const { return dev_; }

  // ---- data path ----
  ncclResult_t isend(void* data, size_t size, int tag, IbMr* mr, IbRequest** req);
  ncclResult_t irecv(void* data, size_t size, int tag, IbMr* mr, IbRequest** req);
  ncclResult_t test(IbRequest* req, int* done, int* size);
  /// Before the caller sleeps: the completion channel's descriptor, armed for the next
  /// completion; kNetPollReady (builtin_nets.h) when completions arrived meanwhile.
  int pollFd();

 private:
  ncclResult_t postRecvs(int qp, int count);
  ncclResult_t progress();
  ncclResult_t checkPeer();
  ncclResult_t fail(ncclResult_t code, const std::string& message);
  ncclResult_t failWc(const ibv_wc& wc);
  std::string where() const;

  const IbDevice* dev_;
  const bool isSend_;
  const int trafficClass_;
  ibv_cq* cq_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;
  unsigned unackedEvents_ = 0;
  uint64_t completions_ = 0;  // work completions polled (pollFd's "anything new?")
  std::vector<ibv_qp*> qps_;
  // Sender: the FIFO the receiver writes; receiver: the entries it writes from.
  FifoEntry* fifo_ = nullptr;
  ibv_mr* fifoMr_ = nullptr;
  uint64_t remoteFifoAddr_ = 0;  // receiver only
  uint32_t remoteFifoRkey_ = 0;
  Socket sock_;
  std::string peer_ = "?";
  IbRequest reqs_[kSlots];
  uint64_t seq_ = 0;          // next request number
  uint64_t fifoArrived_ = 0;  // sender: FIFO entries received
  uint64_t fifoPosted_ = 0;   // receiver: FIFO writes posted / completed
  uint64_t fifoDone_ = 0;
  uint64_t partSeq_[kMaxQps] = {};  // receiver: parts seen per QP
  ncclResult_t failed_ = ncclSuccess;
  std::string failMessage_;
  int64_t nextPeerCheckMs_ = 0;
  int64_t peerGoneSinceMs_ = -1;
};

}  // namespace ib
}  // namespace braid
#endif  // BRAID_HAVE_IBVERBS
