// IbComm: queue pairs and the data path of one IB net connection (see ib_comm.h).
#include "transports/net_ib/ib_comm.h"
#ifdef BRAID_HAVE_IBVERBS
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstddef>
#include <cstring>

#include "src/config/log.h"
#include "src/config/params.h"
#include "src/config/error.h"
#include "transports/net/builtin_nets.h"

namespace braid {
namespace ib {
namespace {

// Work request ids: kind in the top byte, a QP index or request slot below.
enum WrKind : uint64_t { kWrRecv = 1, kWrData = 2, kWrFifo = 3, kWrSize = 4 };
constexpr uint64_t wrId(WrKind kind, uint64_t low) { return (uint64_t(kind) << 56) | low; }
constexpr WrKind wrKind(uint64_t id) { return WrKind(id >> 56); }
constexpr uint64_t wrLow(uint64_t id) { return id & 0xffffffu; }

// Parts of a message are cut on this boundary so that every QP's part but the last
// is a whole number of cache lines.
constexpr size_t kPartAlign = 128;
// How often test() looks at the setup socket, and how long after the peer closed it
// a request may still complete (its last completion can trail the peer's close).
constexpr int64_t kPeerCheckMs = 10;
constexpr int64_t kPeerGraceMs = 1000;

const char* wcKindName(uint64_t id) {
  switch (wrKind(id)) {
    case kWrRecv: return "receive";
    case kWrData: return "RDMA write of data";
    case kWrFifo: return "RDMA write of a FIFO entry";
    case kWrSize: return "RDMA write of a message size";
  }
  return "work request";
}

// Completion statuses that describe our own side's mistake or resources rather than
// the peer or the fabric.
bool localStatus(ibv_wc_status s) {
  return s == IBV_WC_LOC_LEN_ERR || s == IBV_WC_LOC_QP_OP_ERR || s == IBV_WC_LOC_EEC_OP_ERR ||
         s == IBV_WC_LOC_PROT_ERR || s == IBV_WC_MW_BIND_ERR || s == IBV_WC_LOC_ACCESS_ERR ||
         s == IBV_WC_LOC_RDD_VIOL_ERR || s == IBV_WC_FATAL_ERR;
}

bool inRegion(const IbMr* mr, const void* data, size_t size) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(data);
  return a >= mr->begin && a + size <= mr->end;
}

}  // namespace

IbComm::~IbComm() {
  const IbvApi* api = ibvApi();
  // Destroying a QP flushes its outstanding work at once: closing never waits on a peer.
  for (ibv_qp* qp : qps_)
    if (qp) api->destroyQp(qp);
  if (cq_) {
    if (unackedEvents_) api->ackCqEvents(cq_, unackedEvents_);  // destroy waits for acks
    api->destroyCq(cq_);
  }
  if (channel_) api->destroyCompChannel(channel_);
  if (ctlMr_) api->deregMr(ctlMr_);
  std::free(ctl_);
}

ncclResult_t IbComm::create(int nqps) {
  const IbvApi* api = ibvApi();
  // Sends: per entry a size write and a data write (QP 0); receives: one immediate per
  // entry and QP (receiver), one FIFO write per slot (sender).
  const int sendDepth = 2 * kSlots * kMaxRecvs;
  const int recvDepth = isSend_ ? kSlots : kSlots * kMaxRecvs;
  // A completion channel to sleep on; without one (never seen) the proxy naps.
  channel_ = api->createCompChannel(dev_->ctx);
  if (channel_) {
    const int fl = fcntl(channel_->fd, F_GETFL);
    fcntl(channel_->fd, F_SETFL, fl | O_NONBLOCK);
    fcntl(channel_->fd, F_SETFD, FD_CLOEXEC);
  } else {
    BRAID_INFO(kLogNet, "IB %s: ibv_create_comp_channel failed (%s): polling only",
               dev_->name.c_str(), strerror(errno));
  }
  cq_ = api->createCq(dev_->ctx, nqps * (sendDepth + recvDepth) + 16, nullptr, channel_, 0);
  if (!cq_)
    return setError(ncclSystemError, nullptr, "IB %s: ibv_create_cq failed: %s", dev_->name.c_str(),
                    strerror(errno));
  for (int q = 0; q < nqps; ++q) {
    ibv_qp_init_attr init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = sendDepth;
    init.cap.max_recv_wr = recvDepth;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    ibv_qp* qp = api->createQp(dev_->pd, &init);
    if (!qp)
      return setError(ncclSystemError, nullptr, "IB %s: ibv_create_qp failed: %s",
                      dev_->name.c_str(), strerror(errno));
    qps_.push_back(qp);
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = uint8_t(dev_->port);
    attr.qp_access_flags = kIbAccess;
    int rc = api->modifyQp(qp, &attr,
                           IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc != 0)
      return setError(ncclSystemError, nullptr, "IB %s: QP to INIT failed: %s", dev_->name.c_str(),
                      strerror(rc));
  }
  const size_t ctlBytes = (sizeof(ControlRegion) + 4095) & ~size_t(4095);
  ctl_ = static_cast<ControlRegion*>(std::aligned_alloc(4096, ctlBytes));
  if (!ctl_) return setError(ncclSystemError, nullptr, "IB: out of memory for the FIFO");
  std::memset(static_cast<void*>(ctl_), 0, ctlBytes);
  ctlMr_ = api->regMr(dev_->pd, ctl_, sizeof(ControlRegion), kIbAccess);
  if (!ctlMr_)
    return setError(ncclSystemError, nullptr, "IB %s: ibv_reg_mr of the FIFO failed: %s",
                    dev_->name.c_str(), strerror(errno));
  // Receives are posted before the peer can write: the sender's for FIFO entries (QP 0),
  // the receiver's for data parts (every QP).
  if (isSend_) return postRecvs(0, recvDepth);
  for (int q = 0; q < nqps; ++q) BRAID_CHECK(postRecvs(q, recvDepth));
  return ncclSuccess;
}

void IbComm::describe(ConnInfo* info) const {
  info->nqps = uint32_t(qps_.size());
  info->mtu = uint32_t(dev_->activeMtu);
  for (size_t q = 0; q < qps_.size(); ++q) info->qpn[q] = qps_[q]->qp_num;
  std::memcpy(info->gid, dev_->gid.raw, 16);
  info->lid = dev_->lid;
  info->linkLayer = dev_->linkLayer;
  info->fifoAddr = reinterpret_cast<uintptr_t>(ctl_);
  info->fifoRkey = ctlMr_->rkey;
}

ncclResult_t IbComm::connectTo(const ConnInfo& peer) {
  const IbvApi* api = ibvApi();
  const bool global = dev_->roce() || peer.linkLayer == IBV_LINK_LAYER_ETHERNET;
  const ibv_mtu mtu = ibv_mtu(std::min<uint32_t>(uint32_t(dev_->activeMtu), peer.mtu));
  for (size_t q = 0; q < qps_.size(); ++q) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = mtu;
    attr.dest_qp_num = peer.qpn[q];
    attr.rq_psn = 0;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.port_num = uint8_t(dev_->port);
    attr.ah_attr.sl = uint8_t(param::kIbSl.get());
    if (global) {
      attr.ah_attr.is_global = 1;
      std::memcpy(attr.ah_attr.grh.dgid.raw, peer.gid, 16);
      attr.ah_attr.grh.sgid_index = uint8_t(dev_->gidIndex);
      attr.ah_attr.grh.hop_limit = 255;
      attr.ah_attr.grh.traffic_class = uint8_t(trafficClass_);
    } else {
      attr.ah_attr.dlid = peer.lid;
    }
    int rc = api->modifyQp(qps_[q], &attr,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                               IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc != 0)
      return setError(
          ncclSystemError, nullptr, "IB %s: QP to RTR towards %s (QPN 0x%x, %s %s) failed: %s",
          dev_->name.c_str(), peer_.c_str(), peer.qpn[q], global ? "GID" : "LID",
          global ? gidToString(attr.ah_attr.grh.dgid).c_str() : std::to_string(peer.lid).c_str(),
          strerror(rc));
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = uint8_t(param::kIbTimeout.get());
    attr.retry_cnt = uint8_t(param::kIbRetryCnt.get());
    attr.rnr_retry = 7;  // receives are replenished as completions are polled
    attr.sq_psn = 0;
    attr.max_rd_atomic = 1;
    rc = api->modifyQp(qps_[q], &attr,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    if (rc != 0)
      return setError(ncclSystemError, nullptr, "IB %s: QP to RTS towards %s failed: %s",
                      dev_->name.c_str(), peer_.c_str(), strerror(rc));
  }
  remoteCtlAddr_ = peer.fifoAddr;
  remoteCtlRkey_ = peer.fifoRkey;
  BRAID_INFO(kLogNet, "IB %s: %s %s over %zu QP(s), MTU %d", dev_->name.c_str(),
             isSend_ ? "sending to" : "receiving from", peer_.c_str(), qps_.size(),
             128 << int(mtu));
  return ncclSuccess;
}

void IbComm::adoptSocket(Socket sock) {
  sock_ = std::move(sock);
  peer_ = sock_.peerAddress();
  // A peer host that vanishes sends no FIN; keepalive probes turn that into a socket
  // error within about 25 s, which checkPeer() reports, even with nothing in flight on
  // the QPs (which only fail when they have something to retransmit).
  int on = 1, idle = 10, interval = 5, count = 3;
  setsockopt(sock_.fd(), SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(sock_.fd(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(sock_.fd(), IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  setsockopt(sock_.fd(), IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

ncclResult_t IbComm::postRecvs(int qp, int count) {
  for (int i = 0; i < count; ++i) {
    // No scatter list: RDMA WRITE WITH IMMEDIATE only consumes the receive for its
    // immediate; the data has already gone where the writer pointed it.
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = wrId(kWrRecv, uint64_t(qp));
    int rc = ibv_post_recv(qps_[qp], &wr, &bad);
    if (rc != 0)
      return fail(ncclSystemError, "IB " + dev_->name + ": ibv_post_recv failed: " + strerror(rc));
  }
  return ncclSuccess;
}

std::string IbComm::where() const {
  return "IB " + dev_->name + (isSend_ ? " send to " : " receive from ") + peer_;
}

ncclResult_t IbComm::fail(ncclResult_t code, const std::string& message) {
  if (failed_ == ncclSuccess) {
    failed_ = code;
    failMessage_ = message;
  }
  return setError(failed_, nullptr, "%s", failMessage_.c_str());
}

ncclResult_t IbComm::failWc(const ibv_wc& wc) {
  char detail[160];
  snprintf(detail, sizeof(detail), " (status %d, vendor error 0x%x, QP 0x%x)", int(wc.status),
           wc.vendor_err, wc.qp_num);
  return fail(localStatus(wc.status) ? ncclSystemError : ncclRemoteError,
              where() + ": " + wcKindName(wc.wr_id) +
                  " failed: " + ibvApi()->wcStatusStr(wc.status) + detail);
}

ncclResult_t IbComm::progress() {
  ibv_wc wcs[16];
  for (;;) {
    int n = ibv_poll_cq(cq_, 16, wcs);
    if (n < 0) return fail(ncclSystemError, where() + ": ibv_poll_cq failed");
    completions_ += uint64_t(n);
    for (int i = 0; i < n; ++i) {
      const ibv_wc& wc = wcs[i];
      if (wc.status != IBV_WC_SUCCESS) return failWc(wc);
      const uint64_t low = wrLow(wc.wr_id);
      switch (wrKind(wc.wr_id)) {
        case kWrRecv:
          if (isSend_) {
            ++fifoArrived_;
          } else {
            const uint32_t imm = ntohl(wc.imm_data);
            IbRequest& r = reqs_[qpSlot_[low] % kSlots][0];
            if (!r.used || r.partsLeft <= 0 || (r.nreqs > 1 && int(imm) >= r.nreqs))
              return fail(ncclInternalError, where() + ": data arrived for no posted receive");
            if (r.nreqs == 1) r.size += imm;  // a part's size; else the entry it is for
            --r.partsLeft;
            if (++qpCount_[low] == r.nreqs) {
              qpCount_[low] = 0;
              ++qpSlot_[low];
            }
          }
          BRAID_CHECK(postRecvs(int(low), 1));
          break;
        case kWrData: --reqs_[low / kMaxRecvs][low % kMaxRecvs].partsLeft; break;
        case kWrFifo: ++fifoDone_; break;
        case kWrSize: break;  // unsignaled: completions only report errors
      }
    }
    if (n < 16) return ncclSuccess;
  }
}

ncclResult_t IbComm::checkPeer() {
  if (!sock_.valid()) return ncclSuccess;
  const int64_t now = monotonicMs();
  if (now < nextPeerCheckMs_) return ncclSuccess;
  nextPeerCheckMs_ = now + kPeerCheckMs;
  char byte;
  ssize_t n = ::recv(sock_.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  const bool gone = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
  if (!gone) return ncclSuccess;
  if (peerGoneSinceMs_ < 0) peerGoneSinceMs_ = now;
  if (now - peerGoneSinceMs_ < kPeerGraceMs) return ncclSuccess;
  return fail(ncclRemoteError, where() +
                                   ": the peer closed its connection with requests outstanding "
                                   "(process exited or comm closed)");
}

ncclResult_t IbComm::isend(void* data, size_t size, int tag, IbMr* mr, IbRequest** req) {
  *req = nullptr;
  if (failed_ != ncclSuccess) return fail(failed_, failMessage_);
  if (!isSend_) return setError(ncclInvalidUsage, nullptr, "IB: isend on a receive comm");
  if (size > size_t(INT_MAX))
    return setError(ncclInvalidArgument, nullptr,
                    "%s: message of %zu bytes is above maxP2pBytes (2 GiB - 1)", where().c_str(),
                    size);
  const int slot = int(seq_ % kSlots);
  if (fifoArrived_ <= seq_) {
    BRAID_CHECK(progress());
    if (fifoArrived_ <= seq_) return checkPeer();  // receiver has not posted yet
  }
  // The receive completion of the entries' write was polled: they are in memory
  // (ibv_poll_cq's provider orders the DMA before the completion it returns). Only the
  // compiler must not hoist the reads above the poll; a thread fence would also be
  // refused by TSan builds (-Werror=tsan).
  std::atomic_signal_fence(std::memory_order_acquire);
  FifoEntry es[kMaxRecvs];
  std::memcpy(&es[0], const_cast<const FifoEntry*>(&ctl_->fifo[slot][0]), sizeof(FifoEntry));
  if (es[0].seq != seq_)
    return fail(ncclInternalError, where() + ": FIFO out of step (entry " +
                                       std::to_string(es[0].seq) + ", expected " +
                                       std::to_string(seq_) + ")");
  const int n = int(es[0].nreqs);
  if (n < 1 || n > kMaxRecvs)
    return fail(ncclInternalError,
                where() + ": FIFO entry announces " + std::to_string(n) + " receive buffers");
  std::memcpy(&es[1], const_cast<const FifoEntry*>(&ctl_->fifo[slot][1]),
              sizeof(FifoEntry) * size_t(n - 1));
  // The first buffer not sent yet whose tag matches (as NCCL's IB net matches).
  int i = 0;
  while (i < n && ((sentMask_ >> i & 1u) || es[i].tag != tag)) ++i;
  if (i == n) {
    std::string posted;
    for (int k = 0; k < n; ++k)
      if (!(sentMask_ >> k & 1u)) posted += (posted.empty() ? "" : ", ") + std::to_string(es[k].tag);
    return setError(ncclInvalidUsage, nullptr,
                    "%s: send tag %d does not match the receive tag(s) still open in this "
                    "request: %s", where().c_str(), tag, posted.c_str());
  }
  const FifoEntry& e = es[i];
  IbRequest& r = reqs_[slot][i];
  if (r.used) return ncclSuccess;  // its previous use is still in flight: try again
  if (size > e.size)
    return setError(ncclInvalidUsage, nullptr,
                    "%s: message of %zu bytes is larger than the posted receive (%u bytes)",
                    where().c_str(), size, e.size);
  if (size > 0 && (!mr || !inRegion(mr, data, size)))
    return setError(ncclInvalidArgument, nullptr,
                    "%s: isend buffer %p (%zu bytes) is not inside its registered region",
                    where().c_str(), data, size);
  // Multi-buffer: QP 0 carries the size first (RC writes land in order, so the receiver
  // finds it in its table once QP 0's data part has arrived).
  const bool multi = n > 1;
  ctl_->sizes[slot][i] = uint32_t(size);
  ibv_sge sizeSge{};
  sizeSge.addr = reinterpret_cast<uintptr_t>(&ctl_->sizes[slot][i]);
  sizeSge.length = sizeof(uint32_t);
  sizeSge.lkey = ctlMr_->lkey;
  ibv_send_wr sizeWr{};
  sizeWr.wr_id = wrId(kWrSize, uint64_t(slot * kMaxRecvs + i));
  sizeWr.sg_list = &sizeSge;
  sizeWr.num_sge = 1;
  sizeWr.opcode = IBV_WR_RDMA_WRITE;  // unsignaled: the data write after it completes it
  sizeWr.wr.rdma.remote_addr =
      remoteCtlAddr_ + offsetof(ControlRegion, sizes) + (size_t(slot) * kMaxRecvs + i) * 4;
  sizeWr.wr.rdma.rkey = remoteCtlRkey_;
  const size_t nq = qps_.size();
  const size_t part = nq == 1 ? size : ((size + nq - 1) / nq + kPartAlign - 1) & ~(kPartAlign - 1);
  for (size_t q = 0; q < nq; ++q) {
    const size_t off = std::min(size, q * part);
    const size_t len = std::min(part, size - off);
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(data) + off;
    sge.length = uint32_t(len);
    sge.lkey = mr ? mr->mr->lkey : 0;
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = wrId(kWrData, uint64_t(slot * kMaxRecvs + i));
    wr.sg_list = &sge;
    wr.num_sge = len ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(multi ? uint32_t(i) : uint32_t(len));
    wr.wr.rdma.remote_addr = e.addr + off;
    wr.wr.rdma.rkey = e.rkey;
    const bool withSize = multi && q == 0;
    if (withSize) sizeWr.next = &wr;
    int rc = ibv_post_send(qps_[q], withSize ? &sizeWr : &wr, &bad);
    if (rc != 0) return fail(ncclSystemError, where() + ": ibv_post_send failed: " + strerror(rc));
  }
  r.comm = this;
  r.used = true;
  r.partsLeft = int(nq);
  r.slot = slot;
  r.size = size;
  sentMask_ |= 1u << i;
  if (sentMask_ == (1u << n) - 1) {  // every buffer of this receive served: next slot
    sentMask_ = 0;
    ++seq_;
  }
  *req = &r;
  return ncclSuccess;
}

ncclResult_t IbComm::irecv(int n, void** data, const size_t* sizes, const int* tags, IbMr** mrs,
                           IbRequest** req) {
  *req = nullptr;
  if (failed_ != ncclSuccess) return fail(failed_, failMessage_);
  if (isSend_) return setError(ncclInvalidUsage, nullptr, "IB: irecv on a send comm");
  if (n < 1 || n > kMaxRecvs)
    return setError(ncclInvalidArgument, nullptr, "%s: irecv of %d buffers (1 to %d)",
                    where().c_str(), n, kMaxRecvs);
  for (int i = 0; i < n; ++i)
    if (sizes[i] > 0 && (!mrs[i] || !inRegion(mrs[i], data[i], sizes[i])))
      return setError(ncclInvalidArgument, nullptr,
                      "%s: irecv buffer %p (%zu bytes) is not inside its registered region",
                      where().c_str(), data[i], sizes[i]);
  const int slot = int(seq_ % kSlots);
  if (reqs_[slot][0].used) return ncclSuccess;
  if (fifoPosted_ - fifoDone_ >= uint64_t(2 * kSlots - 1)) {
    BRAID_CHECK(progress());
    if (fifoPosted_ - fifoDone_ >= uint64_t(2 * kSlots - 1)) return ncclSuccess;
  }
  FifoEntry* es = ctl_->fifo[slot];
  for (int i = 0; i < n; ++i) {
    es[i].addr = reinterpret_cast<uintptr_t>(data[i]);
    es[i].rkey = mrs[i] ? mrs[i]->mr->rkey : 0;
    es[i].size = uint32_t(std::min<size_t>(sizes[i], UINT32_MAX));
    es[i].tag = tags ? tags[i] : 0;
    es[i].nreqs = uint32_t(n);
    es[i].seq = seq_;
  }
  ibv_sge sge{};
  sge.addr = reinterpret_cast<uintptr_t>(es);
  sge.length = uint32_t(sizeof(FifoEntry) * size_t(n));
  sge.lkey = ctlMr_->lkey;
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = wrId(kWrFifo, uint64_t(slot));
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(uint32_t(slot));
  wr.wr.rdma.remote_addr =
      remoteCtlAddr_ + offsetof(ControlRegion, fifo) + size_t(slot) * kMaxRecvs * sizeof(FifoEntry);
  wr.wr.rdma.rkey = remoteCtlRkey_;
  int rc = ibv_post_send(qps_[0], &wr, &bad);
  if (rc != 0) return fail(ncclSystemError, where() + ": ibv_post_send failed: " + strerror(rc));
  ++fifoPosted_;
  IbRequest& r = reqs_[slot][0];
  r.comm = this;
  r.used = true;
  r.partsLeft = n * int(qps_.size());
  r.slot = slot;
  r.nreqs = n;
  r.size = 0;
  ++seq_;
  *req = &r;
  return ncclSuccess;
}

ncclResult_t IbComm::test(IbRequest* r, int* done, int* sizes) {
  *done = 0;
  if (failed_ != ncclSuccess) return fail(failed_, failMessage_);
  if (r->partsLeft > 0) BRAID_CHECK(progress());
  if (r->partsLeft > 0) return checkPeer();
  *done = 1;
  if (sizes) {
    if (isSend_ || r->nreqs == 1) {
      sizes[0] = int(r->size);
    } else {
      std::atomic_signal_fence(std::memory_order_acquire);  // see isend
      for (int i = 0; i < r->nreqs; ++i)
        sizes[i] = int(*const_cast<const volatile uint32_t*>(&ctl_->sizes[r->slot][i]));
    }
  }
  r->used = false;
  return ncclSuccess;
}

int IbComm::pollFd() {
  if (!channel_) return -1;
  if (failed_ != ncclSuccess) return kNetPollReady;  // test() reports it
  const IbvApi* api = ibvApi();
  // Consume the events of earlier arms (each arm raises at most one), then arm again.
  for (;;) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (api->getCqEvent(channel_, &cq, &ctx) != 0) break;  // EAGAIN: none left
    ++unackedEvents_;
  }
  if (unackedEvents_) {
    api->ackCqEvents(cq_, unackedEvents_);
    unackedEvents_ = 0;
  }
  if (ibv_req_notify_cq(cq_, 0) != 0) return -1;  // the proxy naps instead
  // Completions that came before the arm raise no event: poll once more.
  const uint64_t before = completions_;
  if (progress() != ncclSuccess || completions_ != before) return kNetPollReady;
  return channel_->fd;
}

}  // namespace ib
}  // namespace braid
#endif  // BRAID_HAVE_IBVERBS
