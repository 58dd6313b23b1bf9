#include "transports/collnet/collnet_port.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "transports/collnet/collnet_proxy.h"

namespace braid {
namespace {

void* allocFifo(const FifoGeometry& g) {
  void* mem = ::operator new(FifoLayout::bytesFor(g.nslots, g.slotBytes), std::align_val_t(64));
  FifoLayout::init(mem, g.nslots, g.slotBytes);
  return mem;
}

ncclRedOp_t switchRedOp(const Reducer& red) {
  switch (red.kind()) {
    case Reducer::Kind::kSum: return ncclSum;  // also Avg and PreMulSum: see announce()
    case Reducer::Kind::kProd: return ncclProd;
    case Reducer::Kind::kMax: return ncclMax;
    case Reducer::Kind::kMin: return ncclMin;
  }
  return ncclSum;
}

}  // namespace

CollNetPort::CollNetPort(const CollNetPortConfig& cfg) : cfg_(cfg) {
  // At least 2: a plan keeps up to patterns::kSwitchDepth (3) messages outstanding, of
  // which the send FIFO holds only one for sure (a message is at most half a FIFO,
  // rounded to whole slots); the others must be in staging.
  cfg_.inflight = std::max(2, std::min(cfg_.inflight, kMaxInflight));
  sendMem_ = allocFifo(cfg_.geometry);
  recvMem_ = allocFifo(cfg_.geometry);
  fromExec_.attach(sendMem_);
  toExec_.attach(recvMem_);
}

CollNetPort::~CollNetPort() {
  for (Flight& f : flights_) {
    release(f.in);
    release(f.out);
  }
  ::operator delete(sendMem_, std::align_val_t(64));
  ::operator delete(recvMem_, std::align_val_t(64));
}

ConnTable::Announce CollNetPort::announce(SwitchOp op, uint64_t bytes, const Reducer& red) {
  if (op == SwitchOp::kNone) return ConnTable::Announce::kNoSwitch;
  const uint64_t tail = qTail_.load(std::memory_order_relaxed);
  if (tail - qHead_.load(std::memory_order_acquire) >= kQueueSlots)
    return ConnTable::Announce::kRetry;
  Msg& m = queue_[tail % kQueueSlots];
  m.op = op;
  m.type = red.type();
  m.redop = switchRedOp(red);
  // Avg reaches the switch as a sum and is divided here; PreMulSum's scaling was
  // applied by the sender's executor (kPreOp), so it is a sum too.
  m.avg = red.kind() == Reducer::Kind::kSum && red.hasPost();
  m.bytes = bytes;
  qTail_.store(tail + 1, std::memory_order_release);
  CollNetProxy::get().wake();  // a napping proxy looks at once
  return ConnTable::Announce::kOk;
}

bool CollNetPort::progress() {
  if (failed()) return false;
  if (fromExec_.closed() || toExec_.closed()) {
    fail("the executor closed the connection");
    return false;
  }
  bool moved = deliver();
  moved |= complete();
  moved |= deliver();
  moved |= fill();
  return moved;
}

bool CollNetPort::drained() const {
  return failed() || delivered_.load(std::memory_order_acquire) ==
                         qTail_.load(std::memory_order_acquire);
}

std::string CollNetPort::reason() const {
  std::lock_guard<std::mutex> lk(reasonMu_);
  return reason_;
}

void CollNetPort::fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lk(reasonMu_);
    if (failed_.load(std::memory_order_relaxed)) return;
    reason_ = cfg_.name + ": " + why;
  }
  failed_.store(true, std::memory_order_release);
  fromExec_.close(kFifoReceiverAborted);
  toExec_.close(kFifoSenderAborted);
}

bool CollNetPort::ensure(Buffer& b, size_t bytes) {
  if (b.cap >= bytes && b.ptr) return true;
  release(b);
  const size_t cap = std::max<size_t>(bytes, 4096);
  b.ptr = static_cast<char*>(::operator new(cap, std::align_val_t(64)));
  b.cap = cap;
  ncclResult_t r = cfg_.coll->regMr(cfg_.collComm, b.ptr, cap, NCCL_PTR_HOST, &b.mhandle);
  if (r != ncclSuccess) {
    b.mhandle = nullptr;
    fail(std::string("regMr of a ") + std::to_string(cap) + "-byte staging buffer failed: " +
         ncclGetErrorString(r));
    return false;
  }
  return true;
}

void CollNetPort::release(Buffer& b) {
  if (!b.ptr) return;
  if (b.mhandle) cfg_.coll->deregMr(cfg_.collComm, b.mhandle);
  ::operator delete(b.ptr, std::align_val_t(64));
  b = Buffer{};
}

bool CollNetPort::fill() {
  bool moved = false;
  const uint64_t inflight = uint64_t(cfg_.inflight);
  while (posted_ < qTail_.load(std::memory_order_acquire) &&
         posted_ - delivered_.load(std::memory_order_relaxed) < inflight) {
    Flight& f = flights_[posted_ % inflight];
    if (!fillActive_) {
      f.msg = queue_[posted_ % kQueueSlots];
      f.got = 0;
      f.delivered = 0;
      f.outBytes = 0;
      f.req = nullptr;
      if (!ensure(f.in, f.msg.bytes)) return moved;
      fillActive_ = true;
    }
    while (f.got < f.msg.bytes) {
      const char* p;
      uint64_t n = std::min(fromExec_.peek(&p), f.msg.bytes - f.got);
      if (n == 0) break;
      std::memcpy(f.in.ptr + f.got, p, n);
      fromExec_.release(n);
      f.got += n;
      moved = true;
    }
    if (f.got < f.msg.bytes || !post(f)) break;
    fillActive_ = false;
    ++posted_;
    qHead_.store(posted_, std::memory_order_release);
    moved = true;
  }
  return moved;
}

bool CollNetPort::post(Flight& f) {
  const Msg& m = f.msg;
  const uint64_t group = uint64_t(cfg_.groupSize);
  const size_t ts = dataTypeSize(m.type);
  uint64_t outBytes = m.bytes;
  if (m.op == SwitchOp::kAllGather) outBytes = m.bytes * group;
  if (m.op == SwitchOp::kReduceScatter) {
    if (m.bytes % (group * ts) != 0) {
      fail("a reduce-scatter message of " + std::to_string(m.bytes) +
           " bytes does not split into " + std::to_string(group) + " parts (plan bug)");
      return false;
    }
    outBytes = m.bytes / group;
  }
  if (!ensure(f.out, outBytes)) return false;
  void* req = nullptr;
  ncclResult_t r = ncclSuccess;
  const char* call = "";
  switch (m.op) {
    case SwitchOp::kAllReduce:
      call = "iallreduce";
      r = cfg_.coll->iallreduce(cfg_.collComm, f.in.ptr, f.out.ptr, m.bytes / ts, m.type,
                                m.redop, f.in.mhandle, f.out.mhandle, &req);
      break;
    case SwitchOp::kAllGather: {
      call = "iallgather";
      ncclNetSGE_v11_t part{f.out.mhandle, f.out.ptr, outBytes};
      r = cfg_.coll->iallgather(cfg_.collComm, f.in.ptr, 1, &part, m.bytes, 0, outBytes,
                                f.in.mhandle, &req);
      break;
    }
    case SwitchOp::kReduceScatter: {
      call = "ireducescatter";
      ncclNetSGE_v11_t part{f.in.mhandle, f.in.ptr, m.bytes};
      r = cfg_.coll->ireducescatter(cfg_.collComm, 1, &part, f.out.ptr, outBytes, 0, m.bytes,
                                    m.type, m.redop, f.out.mhandle, &req);
      break;
    }
    case SwitchOp::kNone:
      fail("a message with no switch operation (plan bug)");
      return false;
  }
  if (r != ncclSuccess) {
    fail(std::string(call) + " of " + std::to_string(m.bytes) + " bytes failed: " +
         ncclGetErrorString(r));
    return false;
  }
  if (!req) return false;  // the collnet is busy: post again later
  f.req = req;
  f.outBytes = outBytes;
  return true;
}

bool CollNetPort::complete() {
  bool moved = false;
  const uint64_t inflight = uint64_t(cfg_.inflight);
  while (completed_ < posted_) {
    Flight& f = flights_[completed_ % inflight];
    int done = 0, size = 0;
    ncclResult_t r = cfg_.coll->test(f.req, &done, &size);
    if (r != ncclSuccess) {
      fail(std::string("a switch operation failed: ") + ncclGetErrorString(r) +
           " (the collnet's log line says why)");
      return moved;
    }
    if (!done) break;
    f.req = nullptr;
    if (f.msg.avg) {
      const Reducer avg(f.msg.type, ncclAvg, cfg_.commRanks);
      avg.copy(f.out.ptr, f.out.ptr, f.outBytes / avg.typeSize(), kPostOp);
    }
    ++completed_;
    moved = true;
  }
  return moved;
}

bool CollNetPort::deliver() {
  bool moved = false;
  const uint64_t inflight = uint64_t(cfg_.inflight);
  uint64_t d = delivered_.load(std::memory_order_relaxed);
  while (d < completed_) {
    Flight& f = flights_[d % inflight];
    while (f.delivered < f.outBytes) {
      char* slot = toExec_.acquire();
      if (!slot) return moved;
      const uint64_t n = std::min<uint64_t>(toExec_.slotBytes(), f.outBytes - f.delivered);
      std::memcpy(slot, f.out.ptr + f.delivered, n);
      toExec_.commit(n);
      f.delivered += n;
      moved = true;
    }
    delivered_.store(++d, std::memory_order_release);
    moved = true;
  }
  return moved;
}

}  // namespace braid
