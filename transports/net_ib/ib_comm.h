// IbComm: one direction of an IB net connection, the sender's or the receiver's end.
//
// Protocol (RC queue pairs, NCCL_IB_QPS_PER_CONNECTION of them):
//  - the receiver's irecv of n buffers (multi-receive, n <= kMaxRecvs) writes n
//    FifoEntry {addr, rkey, size, tag, nreqs, seq} into slot seq % kSlots of the
//    sender's FIFO with RDMA WRITE WITH IMMEDIATE on QP 0; the sender learns of it from
//    the receive completion (which also guarantees the entries are wholly in memory,
//    which a plain write polled in memory would not);
//  - the sender's isend waits (request NULL) for its slot, takes the first entry not yet
//    sent whose tag matches and RDMA WRITEs WITH IMMEDIATE the data straight into the
//    receiver's buffer, one part on every QP (parts may be empty). A single-buffer
//    request's immediates carry the part sizes; in a multi-buffer one they name the
//    entry, and an RDMA WRITE of the message's size into the receiver's size table goes
//    first on QP 0. The slot is done once all n entries were sent, so on every QP the
//    parts of one slot arrive before the next slot's (RC keeps a QP's order): the
//    receiver counts n completions per slot and QP;
//  - the receiver's request completes when every part of every entry has arrived; a
//    size write went before the data on QP 0, so the sizes are in memory by then.
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

constexpr int kSlots = 32;    ///< outstanding requests per comm (NCCL_NET_MAX_REQUESTS)
constexpr int kMaxQps = 16;   ///< NCCL_IB_QPS_PER_CONNECTION upper bound
constexpr int kMaxRecvs = 8;  ///< buffers per receive request (maxRecvs)

/// A posted receive buffer, as the receiver announces it to the sender.
struct FifoEntry {
  uint64_t addr;
  uint32_t rkey;
  uint32_t size;  ///< posted size (messages are at most 2 GiB - 1)
  int32_t tag;
  uint32_t nreqs;  ///< buffers in this receive request (all its entries say the same)
  uint64_t seq;    ///< request number; checks that both sides agree
};
static_assert(sizeof(FifoEntry) == 32, "FIFO entries are written whole");

/// Each comm's registered control region, the same layout on both sides: the FIFO
/// (written by the receiver into the sender's), then the size table (written by the
/// sender into the receiver's; the sender's own copy is the source of those writes).
struct ControlRegion {
  FifoEntry fifo[kSlots][kMaxRecvs];
  uint32_t sizes[kSlots][kMaxRecvs];
};

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
  uint64_t fifoAddr;  ///< the side's ControlRegion
  uint32_t fifoRkey;
  uint32_t pad2;
};

class IbComm;

struct IbRequest {
  IbComm* comm = nullptr;
  bool used = false;
  int partsLeft = 0;  ///< completions still to come
  int slot = 0;       ///< FIFO slot
  int nreqs = 1;      ///< receiver: buffers of this request
  uint64_t size = 0;  ///< bytes sent (sender), received (receiver, single buffer)
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
  /// n buffers (1 <= n <= kMaxRecvs), each matched by a send with its tag.
  ncclResult_t irecv(int n, void** data, const size_t* sizes, const int* tags, IbMr** mrs,
                     IbRequest** req);
  /// sizes: one per buffer of the request (receiver), one (sender); may be null.
  ncclResult_t test(IbRequest* req, int* done, int* sizes);
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
  // Sender: the FIFO the receiver writes, the sizes it writes from; receiver: the
  // entries it writes from, the sizes the sender writes.
  ControlRegion* ctl_ = nullptr;
  ibv_mr* ctlMr_ = nullptr;
  uint64_t remoteCtlAddr_ = 0;  // the peer's ControlRegion
  uint32_t remoteCtlRkey_ = 0;
  Socket sock_;
  std::string peer_ = "?";
  IbRequest reqs_[kSlots][kMaxRecvs];  // receiver: [slot][0]; sender: one per entry
  uint64_t seq_ = 0;          // next request number (FIFO slot)
  uint32_t sentMask_ = 0;     // sender: entries of slot seq_ already sent
  uint64_t fifoArrived_ = 0;  // sender: FIFO slots received
  uint64_t fifoPosted_ = 0;   // receiver: FIFO writes posted / completed
  uint64_t fifoDone_ = 0;
  uint64_t qpSlot_[kMaxQps] = {};  // receiver: slots whose parts all came, per QP
  int qpCount_[kMaxQps] = {};      // receiver: parts of the next slot seen, per QP
  ncclResult_t failed_ = ncclSuccess;
  std::string failMessage_;
  int64_t nextPeerCheckMs_ = 0;
  int64_t peerGoneSinceMs_ = -1;
};

}  // namespace ib
}  // namespace braid
#endif  // BRAID_HAVE_IBVERBS
