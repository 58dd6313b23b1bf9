#include "src/exec/engine.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>

#include "src/exec/stream_copy.h"

namespace braid {
namespace {

bool needsRecv(StepKind k) { return stepRecvs(k); }
bool needsSend(StepKind k) { return stepSends(k); }

/// Direct-access reductions work through blocks of this many bytes (sources read from
/// other processes go through bounce buffers), so sources and the partial result stay
/// in cache.
constexpr uint64_t kPeerBlockBytes = 32 << 10;

struct PeerBounce {
  std::vector<char> a, b, acc;
};
PeerBounce& peerBounce() {
  thread_local PeerBounce b;
  if (b.a.size() < kPeerBlockBytes) {
    b.a.resize(kPeerBlockBytes);
    b.b.resize(kPeerBlockBytes);
    b.acc.resize(kPeerBlockBytes);
  }
  return b;
}

/// Holds a zero-copy entry's sender memory for one copy (see FifoReceiver::pinDirect);
/// a no-op for bytes in the FIFO itself.
class DirectPin {
 public:
  explicit DirectPin(FifoReceiver* in)
      : in_(in->frontIsDirect() ? in : nullptr), ok_(!in_ || in_->pinDirect()) {}
  ~DirectPin() {
    if (in_ && ok_) in_->unpinDirect();
  }
  DirectPin(const DirectPin&) = delete;
  DirectPin& operator=(const DirectPin&) = delete;
  /// False: the sender closed the connection; its memory must not be read.
  bool ok() const { return ok_; }

 private:
  FifoReceiver* in_;
  bool ok_;
};

/// Smallest piece stored with non-temporal stores (BRAID_STREAM_STORES).
constexpr uint64_t kStreamMinBytes = 4096;

/// Bounce size for receive steps that send nothing (no slot to fill): stays in L2.
constexpr uint64_t kRecvBounce = 256 << 10;

/// Where a reduction destined for a peer's slot is computed before it is streamed
/// there: small enough to stay in L1.
constexpr uint64_t kStageBytes = 16 << 10;
struct AlignedFree {
  void operator()(char* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using AlignedBuf = std::unique_ptr<char[], AlignedFree>;

char* stageBuffer() {
  thread_local AlignedBuf buf;
  if (!buf) buf.reset(new (std::align_val_t(64)) char[kStageBytes]);
  return buf.get();
}

/// Where remote (other-process) direct entries are pulled to before a reduction: one
/// buffer per executing thread. A step that sends pulls a whole FIFO slot at a time:
/// every output slot of a step but its last must be full, or a ring step of half a
/// FIFO could need more than half the slots (and deadlock).
char* bounceBuffer(uint64_t bytes) {
  thread_local AlignedBuf buf;
  thread_local uint64_t size = 0;
  if (size < bytes) {
    buf.reset(new (std::align_val_t(64)) char[bytes]);
    size = bytes;
  }
  return buf.get();
}

std::string peerName(int peer) {
  return peer == kSwitchPeer ? std::string("the switch") : "rank " + std::to_string(peer);
}

const char* closeReason(uint32_t why) {
  switch (why) {
    case kFifoSenderAborted: return "the sending side aborted";
    case kFifoMismatch: return "that rank found a collective mismatch";
    default: return "the receiving side aborted";
  }
}

}  // namespace

PlanRun::PlanRun(const Plan* plan, PlanBuffers bufs, const Reducer& red, ConnTable* conns,
                 bool allowDirect, const CallTag& tag) {
  start(plan, bufs, red, conns, allowDirect, tag);
}

void PlanRun::start(const Plan* plan, PlanBuffers bufs, const Reducer& red, ConnTable* conns,
                    bool allowDirect, const CallTag& tag) {
  plan_ = plan;
  bufs_ = bufs;
  red_ = red;
  conns_ = conns;
  allowDirect_ = allowDirect;
  streamOut_ = plan->outputElems * red.typeSize() >= conns->streamOutputMinBytes();
  programs_.assign(plan->programs.size(), ProgramState{});
  directUsed_.clear();
  waitPeer_ = -1;
  tag_ = tag;
  error_.clear();
  errorCode_ = ncclSuccess;
  foundMismatch_ = false;
  state_ = plan->programs.empty() ? RunState::kDone : RunState::kRunning;
}

char* PlanRun::regionPtr(const Region& r) const {
  char* base = r.buf == Buf::kSend      ? const_cast<char*>(static_cast<const char*>(bufs_.send))
               : r.buf == Buf::kScratch ? static_cast<char*>(bufs_.scratch)
                                        : static_cast<char*>(bufs_.recv);
  return base + r.offset * red_.typeSize();
}

void PlanRun::fail(const std::string& why, ncclResult_t code) {
  if (state_ == RunState::kError) return;
  state_ = RunState::kError;
  error_ = why;
  errorCode_ = code;
}

void PlanRun::mismatch(int peer, const CallTag& theirs) {
  fail(tagMismatchMessage(tag_, peer, theirs), ncclInvalidUsage);
  foundMismatch_ = true;
}

void PlanRun::failClosed(const char* dir, int peer, uint32_t why) {
  const std::string w = conns_->whyClosed(peer);
  fail(std::string("connection ") + dir + " " + peerName(peer) + " closed: " + closeReason(why) +
           (w.empty() ? w : " (" + w + ")"),
       why == kFifoMismatch ? ncclInvalidUsage : ncclRemoteError);
}

bool PlanRun::progress() {
  if (state_ != RunState::kRunning) return false;
  bool moved = false;
  bool allDone = true;
  for (size_t i = 0; i < programs_.size(); ++i) {
    const Program& prog = plan_->programs[i];
    ProgramState& ps = programs_[i];
    if (ps.step < prog.steps.size()) moved |= progressProgram(prog, ps);
    if (state_ == RunState::kError) return moved;
    if (ps.step < prog.steps.size()) allDone = false;
  }
  if (!allDone) return moved;
  // Zero-copy entries point into our send buffer: done only once all were consumed.
  for (const auto& d : directUsed_) {
    FifoSender* s = d.first;
    if (!s->drained()) {
      if (uint32_t why = s->closed()) failClosed("to", d.second, why);
      return moved;
    }
  }
  state_ = RunState::kDone;
  return true;
}

bool PlanRun::progressProgram(const Program& prog, ProgramState& ps) {
  bool moved = false;
  const size_t index = size_t(&ps - programs_.data());
  while (ps.step < prog.steps.size()) {
    const Step& s = prog.steps[ps.step];
    if (isDirectAccess(s.kind)) {
      if (!directStep(s, index, ps)) return moved;  // waiting, or failed
      ++ps.step;
      moved = true;
      continue;
    }
    moved |= progressStep(s, ps);
    if (state_ == RunState::kError) return moved;
    if (ps.done < s.count() * red_.typeSize()) break;  // blocked mid-step
    ++ps.step;
    ps.done = 0;
    ps.announced = false;
    moved = true;
  }
  return moved;
}

bool PlanRun::progressStep(const Step& s, ProgramState& ps) {
  const size_t ts = red_.typeSize();
  const uint64_t total = s.count() * ts;
  if (ps.done == total) return false;
  FifoSender* out = nullptr;
  FifoReceiver* in = nullptr;
  if (needsSend(s.kind) && !(out = conns_->sender(s.sendPeer, s.channel))) {
    fail("internal error: plan step " + std::string(stepKindName(s.kind)) +
         " sends to " + peerName(s.sendPeer) + " on channel " +
         std::to_string(s.channel) + " but there is no such connection");
    return false;
  }
  if (needsRecv(s.kind) && !(in = conns_->receiver(s.recvPeer, s.channel))) {
    fail("internal error: plan step " + std::string(stepKindName(s.kind)) +
         " receives from " + peerName(s.recvPeer) + " on channel " +
         std::to_string(s.channel) + " but there is no such connection");
    return false;
  }
  if (s.sendPeer == kSwitchPeer && !ps.announced) {
    switch (conns_->announceSwitch(s.channel, plan_->switchOp, total, red_)) {
      case ConnTable::Announce::kOk: ps.announced = true; break;
      case ConnTable::Announce::kRetry: return false;
      case ConnTable::Announce::kNoSwitch:
        fail("internal error: plan step " + std::string(stepKindName(s.kind)) +
             " sends to the switch on channel " + std::to_string(s.channel) +
             " but no switch connection takes " + switchOpName(plan_->switchOp) +
             " messages");
        return false;
    }
  }
  char* src = s.src.buf != Buf::kNone ? regionPtr(s.src) : nullptr;
  char* dst = s.dst.buf != Buf::kNone ? regionPtr(s.dst) : nullptr;
  const uint8_t flags = s.flags;
  const uint64_t start = ps.done;

  switch (s.kind) {
    case StepKind::kCopy:
      emit(dst, nullptr, src, nullptr, total, flags, false, false);
      ps.done = total;
      break;

    case StepKind::kSend: {
      const bool stream = conns_->streamTo(s.sendPeer, s.channel);
      const bool direct = allowDirect_ && s.src.buf == Buf::kSend &&
                          !((flags & kPreOp) && red_.hasPre()) &&
                          total - ps.done >= conns_->directMinBytes(s.sendPeer, s.channel);
      while (ps.done < total) {
        char* slot = out->acquire();
        if (!slot) break;
        if (direct) {
          out->commitDirect(src + ps.done, total - ps.done, tag_);
          ps.done = total;
          noteDirect(out, s.sendPeer);
          break;
        }
        uint64_t n = std::min<uint64_t>(total - ps.done, slice(out));
        emit(nullptr, slot, src + ps.done, nullptr, n, flags & kPreOp, false, stream);
        out->commit(n, tag_);
        ps.done += n;
      }
      break;
    }

    case StepKind::kRecv:
      while (ps.done < total) {
        const char* p;
        uint64_t n = std::min(in->peek(&p), total - ps.done);
        if (n == 0) break;
        if (!tagMatches(in, s.recvPeer)) return true;
        DirectPin pin(in);
        if (!pin.ok()) break;  // reported below as a closed connection
        if (in->frontIsRemote() && flags == 0) {  // one copy, straight into place
          if (!pull(in, s.recvPeer, dst + ps.done, p, n)) return true;
        } else {
          if (in->frontIsRemote() && !pullBounce(in, s.recvPeer, &p, &n, kRecvBounce)) return true;
          emit(dst + ps.done, nullptr, p, nullptr, n, flags, false, false);
        }
        in->release(n);
        ps.done += n;
      }
      break;

    case StepKind::kRecvReduceSend:
    case StepKind::kRecvCopySend:
    case StepKind::kRecvReduceCopySend: {
      const bool stream = conns_->streamTo(s.sendPeer, s.channel);
      const bool reduce = s.kind != StepKind::kRecvCopySend;
      while (ps.done < total) {
        const char* p;
        uint64_t n = std::min(in->peek(&p), total - ps.done);
        if (n == 0) break;
        if (!tagMatches(in, s.recvPeer)) return true;
        char* slot = out->acquire();
        if (!slot) break;
        DirectPin pin(in);
        if (!pin.ok()) break;
        if (!reduce && in->frontIsRemote()) {
          // Straight into place; the final bytes are then forwarded from dst, which no
          // later step writes: as a direct entry where the next rank can read us.
          const bool forwardDirect = s.dst.buf != Buf::kScratch &&
                                     n >= conns_->directMinBytes(s.sendPeer, s.channel);
          if (!forwardDirect) n = std::min<uint64_t>(n, slice(out));
          char* to = dst + ps.done;
          if (!pull(in, s.recvPeer, to, p, n)) return true;
          if (forwardDirect) {
            out->commitDirect(to, n, tag_);
            noteDirect(out, s.sendPeer);
          } else {
            emit(nullptr, slot, to, nullptr, n, 0, false, stream);
            out->commit(n, tag_);
          }
          in->release(n);
          ps.done += n;
          continue;
        }
        n = std::min<uint64_t>(n, slice(out));
        if (in->frontIsRemote() && !pullBounce(in, s.recvPeer, &p, &n, slice(out)))
          return true;
        const bool keep = s.kind != StepKind::kRecvReduceSend;
        emit(keep ? dst + ps.done : nullptr, slot, p, reduce ? src + ps.done : nullptr, n,
             reduce ? flags : 0, reduce, stream);
        out->commit(n, tag_);
        in->release(n);
        ps.done += n;
      }
      break;
    }

    case StepKind::kRecvReduceCopy:
      while (ps.done < total) {
        const char* p;
        uint64_t n = std::min(in->peek(&p), total - ps.done);
        if (n == 0) break;
        if (!tagMatches(in, s.recvPeer)) return true;
        DirectPin pin(in);
        if (!pin.ok()) break;
        if (in->frontIsRemote() && !pullBounce(in, s.recvPeer, &p, &n, kRecvBounce)) return true;
        emit(dst + ps.done, nullptr, p, src + ps.done, n, flags, true, false);
        in->release(n);
        ps.done += n;
      }
      break;
    case StepKind::kSignal:
    case StepKind::kWait:
    case StepKind::kPeerCopy:
    case StepKind::kPeerReduce:
    case StepKind::kPeerPut:
      break;  // directStep runs these (progressProgram)
  }

  if (ps.done < total) {
    // Blocked: report a closed connection instead of waiting on it forever. A closed
    // input may still hold the peer's last bytes: only an empty one is an error, or
    // one whose next bytes are a zero-copy entry (the sender's buffer is gone).
    const char* p;
    if (in && in->closed() && (in->peek(&p) == 0 || in->frontIsDirect()))
      failClosed("from", s.recvPeer, in->closed());
    else if (out && out->closed())
      failClosed("to", s.sendPeer, out->closed());
  }
  return ps.done != start;
}

void PlanRun::emit(char* dst, char* slot, const char* in, const char* local, uint64_t n,
                   uint8_t flags, bool reduce, bool streamSlot) {
  const size_t ts = red_.typeSize();
  // Tiny pieces stay in cache: a partial line of non-temporal stores is flushed to
  // memory on its own, which costs more than the cache-to-cache transfer it avoids.
  const bool big = n >= kStreamMinBytes;
  const bool streamDst = dst && streamOut_ && big;
  streamSlot = slot && streamSlot && big;
  if (!streamDst && !streamSlot) {  // plain stores: the fused kernels
    if (reduce && dst && slot) red_.reduce2(dst, slot, in, local, n / ts, flags);
    else if (reduce) red_.reduce(dst ? dst : slot, in, local, n / ts, flags);
    else if (dst) {
      red_.copy(dst, in, n / ts, flags);
      if (slot) std::memcpy(slot, dst, n);
    } else {
      red_.copy(slot, in, n / ts, flags);
    }
    return;
  }
  auto put = [](char* to, const char* from, uint64_t m, bool stream) {
    if (!to) return;
    if (stream) streamCopy(to, from, m);
    else std::memcpy(to, from, m);
  };
  const bool transforms =
      ((flags & kPreOp) && red_.hasPre()) || ((flags & kPostOp) && red_.hasPost());
  if (!reduce && !transforms) {
    put(dst, in, n, streamDst);  // plain copies: no staging
    put(slot, in, n, streamSlot);
  } else {
    // Compute each piece in an L1-resident stage, then store it where it goes.
    char* stage = stageBuffer();
    for (uint64_t off = 0; off < n; off += kStageBytes) {
      const uint64_t m = std::min(kStageBytes, n - off);
      if (reduce) red_.reduce(stage, in + off, local + off, m / ts, flags);
      else red_.copy(stage, in + off, m / ts, flags);
      put(dst ? dst + off : nullptr, stage, m, streamDst);
      put(slot ? slot + off : nullptr, stage, m, streamSlot);
    }
  }
  streamFence();
}

void PlanRun::noteDirect(FifoSender* out, int peer) {
  for (const auto& d : directUsed_)
    if (d.first == out) return;
  directUsed_.emplace_back(out, peer);
}

bool PlanRun::pull(FifoReceiver* in, int peer, char* dst, const char* remote, uint64_t n) {
  if (int err = in->pullRemote(dst, remote, n)) {
    fail("single-copy read from rank " + std::to_string(peer) + " failed: " +
         std::strerror(err) + " (BRAID_SHM_CMA=0 copies through the FIFO instead)");
    return false;
  }
  return true;
}

bool PlanRun::pullBounce(FifoReceiver* in, int peer, const char** p, uint64_t* n,
                         uint64_t capacity) {
  *n = std::min(*n, capacity);
  char* bounce = bounceBuffer(capacity);
  if (!pull(in, peer, bounce, *p, *n)) return false;
  *p = bounce;
  return true;
}

bool PlanRun::putAt(int p, const Region& dst, uint64_t off, const char* src, uint64_t n) {
  PeerAccess* peers = conns_->peerAccess();
  const uint64_t at = dst.offset * red_.typeSize() + off;
  char* d = p == peers->rank() ? regionPtr(dst) + off : peers->view(p, dst.buf, at);
  if (d) {
    if (d != src) std::memcpy(d, src, n);
    return true;
  }
  if (const int e = peers->write(p, dst.buf, at, src, n)) {
    fail("writing " + std::to_string(n) + " bytes into " + peerName(p) + "'s buffer failed: " +
         std::strerror(e));
    return false;
  }
  return true;
}

bool PlanRun::directStep(const Step& s, size_t prog, ProgramState& ps) {
  PeerAccess* peers = conns_->peerAccess();
  if (!peers) {
    fail("internal error: plan step " + std::string(stepKindName(s.kind)) +
         " needs direct access to the other ranks, which this executor does not have");
    return false;
  }
  const uint64_t ts = red_.typeSize(), bytes = s.count() * ts;
  const int n = peers->nranks(), me = peers->rank();
  switch (s.kind) {
    case StepKind::kSignal:
      peers->signal(prog, bufs_);
      ++ps.signals;
      return true;
    case StepKind::kWait: {
      std::string why;
      ncclResult_t code = ncclRemoteError;
      if (peers->reached(prog, s.recvPeer, ps.signals, &waitPeer_, &why, &code)) {
        waitPeer_ = -1;
        return true;
      }
      if (!why.empty()) fail(why, code);
      return false;
    }
    case StepKind::kPeerCopy: {
      char* dst = regionPtr(s.dst);
      if (const char* v = peers->view(s.recvPeer, s.src.buf, s.src.offset * ts)) {
        if (v != dst) std::memcpy(dst, v, bytes);
        return true;
      }
      if (const int e = peers->read(s.recvPeer, s.src.buf, s.src.offset * ts, dst, bytes)) {
        fail("reading " + std::to_string(bytes) + " bytes of " + peerName(s.recvPeer) +
             "'s buffer failed: " + std::strerror(e));
        return false;
      }
      return true;
    }
    case StepKind::kPeerPut: {
      const char* src = regionPtr(s.src);
      for (int i = 0; i < n; ++i) {
        const int p = (me + i) % n;  // own first, then the others in ring order
        if (directWritesAt(s.kind, s.sendPeer, me, p) && !putAt(p, s.dst, 0, src, bytes))
          return false;
      }
      return true;
    }
    case StepKind::kPeerReduce: {
      if (red_.hasPre()) {  // each rank's own scalar: only the owner of an input has it
        fail("internal error: a direct-access reduction cannot apply PreMulSum's per-rank "
             "scalars");
        return false;
      }
      // Every rank's src, reduced in rank order (every rank computing an element gets
      // the same bits), block by block; with sendPeer kAllPeers each block then goes
      // to every other rank's dst too.
      PeerBounce& pb = peerBounce();
      char* out = regionPtr(s.dst);
      const uint64_t blk = kPeerBlockBytes / ts;
      for (uint64_t e = 0; e < s.count(); e += blk) {
        const uint64_t k = std::min(blk, s.count() - e), off = e * ts;
        const char* s0 = peerBytes(0, s.src, off, k * ts, pb.a.data());
        const char* s1 = s0 && n > 1 ? peerBytes(1, s.src, off, k * ts, pb.b.data()) : nullptr;
        if (!s0 || (n > 1 && !s1)) return false;
        if (n == 1) {
          red_.copy(out + off, s0, k, s.flags & kPostOp);
        } else if (n == 2) {
          red_.reduce(out + off, s1, s0, k, s.flags & kPostOp);
        } else {
          red_.reduce(pb.acc.data(), s1, s0, k, 0);
          for (int p = 2; p < n; ++p) {
            const char* sp = peerBytes(p, s.src, off, k * ts, pb.b.data());
            if (!sp) return false;
            const bool last = p == n - 1;
            red_.reduce(last ? out + off : pb.acc.data(), sp, pb.acc.data(), k,
                        last ? (s.flags & kPostOp) : 0);
          }
        }
        for (int p = 0; s.sendPeer == kAllPeers && p < n; ++p)
          if (p != me && !putAt(p, s.dst, off, out + off, k * ts)) return false;
      }
      return true;
    }
    default:
      break;
  }
  fail("internal error: step " + std::string(stepKindName(s.kind)) + " is not direct access");
  return false;
}

const char* PlanRun::peerBytes(int p, const Region& src, uint64_t off, uint64_t n, char* into) {
  PeerAccess* peers = conns_->peerAccess();
  const uint64_t at = src.offset * red_.typeSize() + off;
  if (p == peers->rank()) return regionPtr(src) + off;
  if (const char* v = peers->view(p, src.buf, at)) return v;
  if (const int e = peers->read(p, src.buf, at, into, n)) {
    fail("reading " + std::to_string(n) + " bytes of " + peerName(p) +
         "'s buffer failed: " + std::strerror(e));
    return nullptr;
  }
  return into;
}

int PlanRun::waitingOn() const {
  if (waitPeer_ >= 0) return waitPeer_;
  for (size_t i = 0; i < programs_.size(); ++i) {
    const Program& prog = plan_->programs[i];
    const ProgramState& ps = programs_[i];
    if (ps.step >= prog.steps.size()) continue;
    const Step& s = prog.steps[ps.step];
    if (needsRecv(s.kind)) {
      const char* p;
      FifoReceiver* in = conns_->receiver(s.recvPeer, s.channel);
      if (in && in->peek(&p) == 0) return s.recvPeer;
    }
    if (needsSend(s.kind)) return s.sendPeer;
  }
  for (const auto& d : directUsed_)
    if (!d.first->drained()) return d.second;  // its reader has not read our data yet
  return -1;
}

std::string PlanRun::describeWait() const {
  for (size_t i = 0; i < programs_.size(); ++i) {
    const Program& prog = plan_->programs[i];
    const ProgramState& ps = programs_[i];
    if (ps.step >= prog.steps.size()) continue;
    const Step& s = prog.steps[ps.step];
    std::string where = " (step " + std::to_string(ps.step + 1) + " of " +
                        std::to_string(prog.steps.size()) + ", " + stepKindName(s.kind) + ", " +
                        std::to_string(ps.done) + "/" +
                        std::to_string(s.count() * red_.typeSize()) + " bytes)";
    if (needsRecv(s.kind)) {
      const char* p;
      FifoReceiver* in = conns_->receiver(s.recvPeer, s.channel);
      if (in && in->peek(&p) == 0)
        return "waiting for data from " + peerName(s.recvPeer) + where;
    }
    if (needsSend(s.kind))
      return "waiting for " + peerName(s.sendPeer) + " to drain its FIFO" + where;
    if (s.kind == StepKind::kWait && waitPeer_ >= 0)
      return "waiting for " + peerName(waitPeer_) + " to signal " + std::to_string(ps.signals) +
             where;
    return "running" + where;
  }
  if (!directUsed_.empty()) return "waiting for peers to read zero-copy data";
  return "done";
}

}  // namespace braid
