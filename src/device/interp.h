// The CUDA executor's plan interpreter (host and device code): one block runs one
// DevProgram of each work of a launch, step by step, with the StepKind semantics of the
// host executor (src/exec/engine.cc):
//
//   kSend               slot <- pre(src)                    (kPreOp only)
//   kRecv               dst  <- post(pre(in))
//   kRecvReduceSend     slot <- post(in OP pre(src))
//   kRecvReduceCopy     dst  <- post(in OP pre(src))
//   kRecvReduceCopySend dst, slot <- post(in OP pre(src))
//   kRecvCopySend       dst, slot <- in                     (no pre/post)
//   kCopy               dst  <- post(pre(src))
//
// A step's bytes stream through the FIFOs in pieces: an output slot takes at most
// min(slotBytes, sliceBytes) bytes and is filled completely (possibly from several
// input pieces) before it is published, except for the step's last slot; an input
// slot may be consumed in parts (a byte stream: the two ends need not slice alike).
//
// Thread 0 waits for FIFO space and data and hands each piece to the block through
// shared memory; all threads compute it; after a barrier thread 0 publishes (fence,
// then release stores of tail/head). While waiting it checks, every
// Block::kCheckEvery polls, DevControl::abort / ::error and the FIFO's closed word, and
// gives up (DevControl::error = 1, return false) instead of hanging.
//
// The Block policy (src/device/kernels/kernel_impl.cuh for the GPU,
// tests/device_emu/emulate.cc for the tests' host emulation) supplies, besides dev_fifo.h's counter operations:
//   int tid() const; int nthreads() const; void sync();   // the block's threads
//   PieceShared& sh();                                     // block-shared scratch
//   void* cacheMem();                                      // kConnCacheBytes, 16-aligned, shared
//   static T ld<T>(const T*); static void st<T>(T*, T);   // data (T: 1/2/4/8 bytes)
//   static Vec16 ld16(const void*); static void st16(void*, Vec16);
//   static void stFlag(uint32_t*, uint32_t);              // DevControl::error
//   static void bump(uint64_t*);                          // DevControl counters (+1)
//   static void pause(uint32_t polls);                    // between polls
//   static void fenceGpu();                               // before a barrier arrival
//   static uint32_t ldAcquireGpu(const uint32_t*); static void stReleaseGpu(uint32_t*, uint32_t);
//   static uint32_t arrive(uint32_t*, uint32_t n);        // atomic +n (acq_rel), returns the old value
//   static void reset(uint32_t*);                         // release store of 0
//   PeerBufs& peerBufs();                                  // block-shared (direct access)
//   static uint64_t ldAcquireGpu64(const uint64_t*); static void stReleaseGpu64(uint64_t*, uint64_t);
//   static constexpr int kUnroll; static constexpr uint32_t kCheckEvery;
//
// Direct-access steps (kSignal .. kPeerPut: no FIFO; DevPlanImage::peers) run with the
// same roles: a signal waits for the block (every thread's accesses done), then thread 0
// announces the buffers (first signal of the run) and release-stores the program's
// count in its DevPeerSlot (GPU scope when every rank is on this GPU, system scope
// otherwise); a wait is thread 0 polling the peers' counts with acquire loads (the
// abort checks as above), and the first wait for every rank also copies every rank's
// announced buffers into block-shared memory; data steps are every thread's share of
// the copy or reduction (src/device/interp_peers.h), then a barrier.
#pragma once
#include <cstdint>
#include <new>
#include <type_traits>

#include "src/device/dev_fifo.h"
#include "src/device/dev_launch.h"
#include "src/device/hd.h"
#include "src/device/interp_data.h"
#include "src/device/interp_peers.h"
#include "src/device/reduce_ops.h"

namespace braid {
namespace devinterp {

/// Bytes of block-shared memory the Block policy provides at cacheMem() (thread 0's
/// FIFO states, a ConnCache).
constexpr size_t kConnCacheBytes = 768;

/// What thread 0 hands the block for one piece.
struct PieceShared {
  char* dst;
  char* slot;
  const char* in;
  const char* local;
  uint64_t bytes;
  uint32_t stop;
};

// ---- the interpreter ------------------------------------------------------------------------

/// Thread 0's FIFO ends for one program run (states persist from step to step: a
/// receiver may stop in the middle of a slot).
template <class Block>
struct ConnCache {
  static constexpr int kN = 8;
  DevSender<Block> snd[kN];
  DevReceiver<Block> rcv[kN];
  uint16_t sndId[kN];
  uint16_t rcvId[kN];
  int nSnd = 0, nRcv = 0, nextSnd = 0, nextRcv = 0;

  BRAID_HD DevSender<Block>* sender(const DevConn* conns, uint16_t id) {
    for (int i = 0; i < nSnd; ++i)
      if (sndId[i] == id) return &snd[i];
    int i = nSnd < kN ? nSnd++ : (nextSnd++ % kN);  // a sender's state is all in memory
    sndId[i] = id;
    snd[i].attach(&conns[id]);
    return &snd[i];
  }
  /// nullptr if every cached receiver is in the middle of a slot (cannot be evicted).
  BRAID_HD DevReceiver<Block>* receiver(const DevConn* conns, uint16_t id) {
    for (int i = 0; i < nRcv; ++i)
      if (rcvId[i] == id) return &rcv[i];
    int i = -1;
    if (nRcv < kN) {
      i = nRcv++;
    } else {
      for (int k = 0; k < kN && i < 0; ++k) {
        const int j = (nextRcv + k) % kN;
        if (rcv[j].offset == 0) i = j;
      }
      if (i < 0) return nullptr;
      nextRcv = i + 1;
    }
    rcvId[i] = id;
    rcv[i].attach(&conns[id]);
    return &rcv[i];
  }
  /// Whether no receiver stopped in the middle of a slot.
  BRAID_HD bool allConsumed() const {
    for (int i = 0; i < nRcv; ++i)
      if (rcv[i].offset != 0) return false;
    return true;
  }
};

template <class Tr, DevRed R, class Block>
class Interp {
 public:
  using S = typename Tr::Storage;

  BRAID_HD Interp(Block& b, const DevLaunch& l) : b_(b), l_(l), ctl_(l.control) {}

  /// Runs block `block` of the launch: for every work whose block range holds it, its
  /// program (block - firstBlock); a grid barrier before each work that starts a stage
  /// (DevWork::newStage). Returns false if it gave up.
  BRAID_HD bool run(uint32_t block) {
    if (b_.tid() == 0) {
      if (block == 0) Block::bump(&ctl_->started);
      gen_ = Block::ldAcquireGpu(l_.barrier + 1);  // before this block's first arrival
    }
    stages_ = 1;
    for (uint32_t w = 1; w < l_.nWorks; ++w) stages_ += l_.works[w].newStage ? 1u : 0u;
    bool ok = true;
    for (uint32_t w = 0; w < l_.nWorks && ok; ++w) {
      const DevWork& work = l_.works[w];
      if (w > 0 && work.newStage) {
        ok = gridBarrier();
        if (!ok) break;
      }
      // The work's programs run on blocks [firstBlock, firstBlock + nPrograms).
      if (block >= work.firstBlock && block - work.firstBlock < work.plan->nPrograms)
        ok = runProgram(work, block - work.firstBlock);
      b_.sync();
    }
    if (b_.tid() == 0) finish();
    return ok;
  }

 private:
  // ---- block-wide helpers ----
  /// Thread 0's flag to every thread.
  BRAID_HD bool shareFlag(bool v) {
    if (b_.tid() == 0) b_.sh().stop = v ? 1u : 0u;
    b_.sync();
    const bool r = b_.sh().stop != 0;
    b_.sync();
    return r;
  }
  /// Thread 0: whether the launch must stop (abort or another block's error).
  BRAID_HD bool mustStop() const {
    return Block::ldFlag(&ctl_->abort) != 0 || Block::ldFlag(&ctl_->error) != 0;
  }
  /// Thread 0: gives up.
  BRAID_HD bool giveUp() const {
    Block::stFlag(&ctl_->error, 1);
    return false;
  }

  // The grid barrier (DevLaunch::barrier): word 0 counts the arrivals of this launch,
  // word 1 counts launches. Every block arrives exactly stages_ times: once per barrier
  // and once at its end (a block that gives up adds its missing arrivals at once), so
  // barrier e (1-based) is passed when word 0 reaches e * nBlocks, and the block whose
  // arrival makes it stages_ * nBlocks is the last: it bumps word 1 and zeroes word 0
  // for the next launch (no block of this launch reads them any more). The words stay
  // consistent when blocks give up, so the next launch (a graph replay) starts clean.

  /// All blocks of the launch meet. False (every thread) if the launch must stop.
  BRAID_HD bool gridBarrier() {
    bool ok = true;
    if (b_.tid() == 0) {
      const uint32_t* count = l_.barrier;
      Block::fenceGpu();  // this block's writes before the arrival
      Block::arrive(l_.barrier, 1);
      const uint32_t target = ++arrivals_ * l_.nBlocks;
      for (uint32_t i = 1; Block::ldAcquireGpu(count) < target; ++i) {
        if (i % Block::kCheckEvery == 0 && mustStop()) break;
        Block::pause(i);
      }
      // Another block may have given up (and arrived for all its barriers at once).
      if (mustStop()) ok = giveUp();
    }
    return !shareFlag(!ok);
  }
  /// Thread 0 at the end of the launch: the remaining arrivals; the last block counts
  /// the launch finished.
  BRAID_HD void finish() {
    const uint32_t add = stages_ - arrivals_;
    const uint32_t total = stages_ * l_.nBlocks;
    Block::fenceGpu();
    if (Block::arrive(l_.barrier, add) + add == total) {
      Block::stReleaseGpu(l_.barrier + 1, gen_ + 1);
      Block::reset(l_.barrier);
      Block::bump(&ctl_->finished);
    }
  }

  BRAID_HD char* base(const DevWork& w, uint8_t buf) const {
    if (buf == uint8_t(Buf::kSend)) return const_cast<char*>(w.send);
    if (buf == uint8_t(Buf::kRecv)) return w.recv;
    if (buf == uint8_t(Buf::kScratch)) return w.scratch;
    return nullptr;
  }

  BRAID_HD bool runProgram(const DevWork& w, uint32_t index) {
    const DevPlanImage* img = w.plan;
    const DevProgram& prog = img->programs[index];
    if (b_.tid() == 0 && img->peers.areas != nullptr) {
      // This program's signals continue from where its slot is (dev_peers.h).
      PeerBufs& st = b_.peerBufs();
      st.base = Block::ldVolatile(&img->peers.areas[img->peers.rank]->slot[index].signals);
      st.posted = 0;
      st.announced = st.known = 0;
    }
    // Thread 0's FIFO states live in block-shared memory (not in every thread's stack).
    static_assert(sizeof(ConnCache<Block>) <= kConnCacheBytes, "grow kConnCacheBytes");
    if (b_.tid() == 0) new (b_.cacheMem()) ConnCache<Block>();
    ConnCache<Block>& cache = *static_cast<ConnCache<Block>*>(b_.cacheMem());
    // The PreMulSum scalar, as one element.
    S scalar{};
    const bool hasPre = w.scalarMode != kDevScalarNone;
    if (w.scalarMode == kDevScalarPointer) {
      scalar = Block::template ld<S>(static_cast<const S*>(w.scalarPtr));
    } else if (w.scalarMode == kDevScalarImmediate) {
      union {
        uint64_t u;
        S s;
      } bits;
      bits.u = w.scalarBits;
      scalar = bits.s;
    }
    for (uint32_t i = 0; i < prog.nSteps; ++i) {
      const DevStep& s = img->steps[prog.firstStep + i];
      const bool ok = s.kind >= uint8_t(StepKind::kSignal)
                          ? runDirect(w, img, s, index, hasPre, scalar)
                          : runStep(w, img, s, cache, hasPre, scalar);
      if (!ok) return false;
    }
    // A stream is consumed whole by the steps of one work: a slot left half read
    // would corrupt the next work's data (a plan bug).
    return !shareFlag(b_.tid() == 0 && !cache.allConsumed() && !giveUp());
  }

  BRAID_HD static bool sends(uint8_t k) {
    return k == uint8_t(StepKind::kSend) || k == uint8_t(StepKind::kRecvReduceSend) ||
           k == uint8_t(StepKind::kRecvReduceCopySend) || k == uint8_t(StepKind::kRecvCopySend);
  }

  BRAID_HD bool runStep(const DevWork& w, const DevPlanImage* img, const DevStep& s,
                        ConnCache<Block>& cache, bool hasPre, S scalar) {
    const uint8_t k = s.kind;
    const uint64_t total = s.bytes;
    char* src = s.srcBuf != uint8_t(Buf::kNone) ? base(w, s.srcBuf) + s.srcOff : nullptr;
    char* dst = s.dstBuf != uint8_t(Buf::kNone) ? base(w, s.dstBuf) + s.dstOff : nullptr;
    const bool reduce = k == uint8_t(StepKind::kRecvReduceSend) ||
                        k == uint8_t(StepKind::kRecvReduceCopy) ||
                        k == uint8_t(StepKind::kRecvReduceCopySend);
    const uint8_t flags = k == uint8_t(StepKind::kSend)          ? uint8_t(s.flags & kPreOp)
                          : k == uint8_t(StepKind::kRecvCopySend) ? uint8_t(0)
                                                                  : s.flags;
    const devred::DevOp<Tr, R> op(hasPre, scalar, w.avg != 0, int(w.nranks), flags);
    if (R == DevRed::kNone && (reduce || !op.copyIsIdentity())) {
      // A copy-only kernel cannot reduce: the launcher picked the wrong kernel.
      return !shareFlag(b_.tid() == 0 && !giveUp());
    }
    if (k == uint8_t(StepKind::kCopy)) {
      runPiece(b_, op, dst, nullptr, src, nullptr, total, false);
      b_.sync();
      return true;
    }
    const bool needOut = sends(k);
    const bool needIn = k != uint8_t(StepKind::kSend);
    const bool keepDst = k != uint8_t(StepKind::kSend) && k != uint8_t(StepKind::kRecvReduceSend);

    // Thread 0's state for this step.
    DevSender<Block>* out = nullptr;
    DevReceiver<Block>* in = nullptr;
    char* slot = nullptr;
    uint64_t fill = 0, target = 0, slice = 0;
    if (b_.tid() == 0) {
      bool bad = (needOut && s.sendConn >= img->nConns) || (needIn && s.recvConn >= img->nConns);
      if (!bad && needOut) {
        out = cache.sender(img->conns, s.sendConn);
        slice = out->slotBytes();
        if (img->sliceBytes && img->sliceBytes < slice) slice = img->sliceBytes;
      }
      if (!bad && needIn) bad = (in = cache.receiver(img->conns, s.recvConn)) == nullptr;
      b_.sh().stop = bad ? 1u : 0u;
      if (bad) giveUp();
    }
    b_.sync();
    const bool badStep = b_.sh().stop != 0;
    b_.sync();
    if (badStep) return false;

    uint32_t pieces = 0;
    for (uint64_t done = 0; done < total;) {
      if (b_.tid() == 0) {
        PieceShared& sh = b_.sh();
        bool ok = true;
        if (needOut && !slot) {
          ok = waitSlot(out, &slot);
          fill = 0;
          target = minU(slice, total - done);
        }
        uint64_t n = needOut ? target - fill : total - done;
        const char* p = src + done;
        if (ok && needIn) {
          uint64_t avail = 0;
          ok = waitData(in, &p, &avail);
          n = minU(n, avail);
        }
        sh.stop = ok ? 0u : 1u;
        sh.in = p;
        sh.local = reduce ? src + done : nullptr;
        sh.dst = keepDst ? dst + done : nullptr;
        sh.slot = needOut ? slot + fill : nullptr;
        sh.bytes = n;
      }
      b_.sync();
      const PieceShared piece = b_.sh();
      if (piece.stop) return false;  // every thread: thread 0 has set the error
      runPiece(b_, op, piece.dst, piece.slot, piece.in, piece.local, piece.bytes, reduce);
      b_.sync();
      if (b_.tid() == 0) {
        if (needIn) in->release(piece.bytes);
        if (needOut) {
          fill += piece.bytes;
          if (fill == target) {
            out->commit(fill);
            slot = nullptr;
          }
        }
        if (++pieces % 16 == 0) Block::bump(&ctl_->progress);
      }
      done += piece.bytes;
    }
    if (b_.tid() == 0 && pieces % 16 != 0) Block::bump(&ctl_->progress);
    return true;
  }

  // ---- direct-access steps (see the top of this file) ----

  /// Thread 0: waits until every rank of `mask` (but this one) has posted `target`
  /// signals of program `index`. False if the launch must stop.
  BRAID_HD bool waitPeers(const DevPeerTable& pt, uint32_t index, uint32_t mask, uint64_t target) {
    for (uint32_t m = mask & ~(1u << pt.rank); m; m &= m - 1) {
      const uint64_t* count = &pt.areas[lowBit(m)]->slot[index].signals;
      for (uint32_t i = 1;; ++i) {
        const uint64_t v = pt.sysScope ? Block::ldAcquire(count) : Block::ldAcquireGpu64(count);
        if (v >= target) break;
        if (i % Block::kCheckEvery == 0 && mustStop()) return giveUp();
        Block::pause(i);
      }
    }
    return true;
  }

  BRAID_HD bool runDirect(const DevWork& w, const DevPlanImage* img, const DevStep& s,
                          uint32_t index, bool hasPre, S scalar) {
    const DevPeerTable& pt = img->peers;
    const uint8_t k = s.kind;
    const uint32_t all = pt.nranks >= 32 ? ~0u : (1u << pt.nranks) - 1;
    if (pt.areas == nullptr || index >= uint32_t(kDevMaxPrograms) ||
        pt.nranks > uint32_t(kDevMaxDirectRanks) || (hasPre && k == uint8_t(StepKind::kPeerReduce)) ||
        (R == DevRed::kNone && k == uint8_t(StepKind::kPeerReduce)))
      return !shareFlag(b_.tid() == 0 && !giveUp());  // an image or kernel the plan cannot use
    if (k == uint8_t(StepKind::kSignal)) {
      b_.sync();  // every thread's accesses of the previous steps are done
      if (b_.tid() == 0) {
        PeerBufs& st = b_.peerBufs();
        DevPeerSlot* me = &pt.areas[pt.rank]->slot[index];
        if (!st.announced) {
          Block::stPlain(&me->send, uint64_t(addr(w.send)));
          Block::stPlain(&me->recv, uint64_t(addr(w.recv)));
          st.announced = 1;
        }
        const uint64_t count = st.base + ++st.posted;
        if (pt.sysScope) Block::stRelease(&me->signals, count);
        else Block::stReleaseGpu64(&me->signals, count);
      }
      return true;
    }
    if (k == uint8_t(StepKind::kWait)) {
      bool ok = true;
      if (b_.tid() == 0) {
        PeerBufs& t = b_.peerBufs();
        const bool every = s.recvConn == kDevAllPeers;
        ok = waitPeers(pt, index, every ? all : 1u << s.recvConn, t.base + t.posted);
        if (ok && every && !t.known) {
          for (uint32_t r = 0; r < pt.nranks; ++r) {
            const DevPeerSlot* slot = &pt.areas[r]->slot[index];
            t.send[r] = r == pt.rank ? uint64_t(addr(w.send)) : Block::ldVolatile(&slot->send);
            t.recv[r] = r == pt.rank ? uint64_t(addr(w.recv)) : Block::ldVolatile(&slot->recv);
          }
          t.scratch = uint64_t(addr(w.scratch));
          t.known = 1;
        }
      }
      return !shareFlag(!ok);
    }
    // A data step: its sources and destinations, then every thread's share.
    const PeerBufs& t = b_.peerBufs();
    PeerMove m;
    m.srcBuf = s.srcBuf;
    m.dstBuf = s.dstBuf;
    m.srcOff = s.srcOff;
    m.dstOff = s.dstOff;
    m.bytes = s.bytes;
    const uint32_t me = 1u << pt.rank;
    const uint32_t others = s.sendConn == kDevAllPeers ? all : s.sendConn < 32 ? 1u << s.sendConn : 0u;
    if (k == uint8_t(StepKind::kPeerReduce)) {
      m.srcMask = all;
      m.dstMask = me | others;
      const devred::DevOp<Tr, R> red(false, scalar, false, int(w.nranks), 0);
      const devred::DevOp<Tr, R> post(false, scalar, w.avg != 0, int(w.nranks),
                                      uint8_t(s.flags & kPostOp));
      peerReduce(b_, t, m, red, post);
    } else {
      m.srcMask = k == uint8_t(StepKind::kPeerCopy) ? 1u << s.recvConn : me;
      m.dstMask = k == uint8_t(StepKind::kPeerCopy) ? me : others;
      // A put's own destination that is its source (in place) is left as it is.
      if (k == uint8_t(StepKind::kPeerPut) && (m.dstMask & me) &&
          t.at(int(pt.rank), m.dstBuf, m.dstOff) == t.at(int(pt.rank), m.srcBuf, m.srcOff))
        m.dstMask &= ~me;
      if (m.dstMask) peerPut(b_, t, m);
    }
    b_.sync();  // the next step may read what this one wrote, in other threads
    if (b_.tid() == 0) Block::bump(&ctl_->progress);
    return true;
  }

  /// Thread 0: waits for a free slot of `out`.
  BRAID_HD bool waitSlot(DevSender<Block>* out, char** slot) {
    for (uint32_t i = 1;; ++i) {
      if ((*slot = out->tryAcquire()) != nullptr) return true;
      if (i % Block::kCheckEvery == 0 && (mustStop() || out->closed() != 0)) return giveUp();
      Block::pause(i);
    }
  }
  /// Thread 0: waits for bytes at the front of `in`. A closed FIFO ends the wait only
  /// once it is empty (its last bytes are still good).
  BRAID_HD bool waitData(DevReceiver<Block>* in, const char** p, uint64_t* avail) {
    for (uint32_t i = 1;; ++i) {
      const uint64_t n = in->peek(p);
      if (n == UINT64_MAX) return giveUp();  // a direct entry: not on this path
      if (n != 0) {
        *avail = n;
        return true;
      }
      if (i % Block::kCheckEvery == 0 && (mustStop() || in->closed() != 0)) return giveUp();
      Block::pause(i);
    }
  }

  Block& b_;
  const DevLaunch& l_;
  DevControl* ctl_;
  uint32_t gen_ = 0;       ///< thread 0: DevLaunch::barrier[1] when the block started
  uint32_t arrivals_ = 0;  ///< thread 0: arrivals at the grid barrier so far
  uint32_t stages_ = 1;    ///< stages of the launch (works with newStage, the first too)
};

/// Runs block `block` of launch l with the block policy b (every thread of the block
/// calls this). Returns false if the block gave up.
template <class Tr, DevRed R, class Block>
BRAID_HD bool runDevBlock(Block& b, const DevLaunch& l, uint32_t block) {
  Interp<Tr, R, Block> interp(b, l);
  return interp.run(block);
}

}  // namespace devinterp
}  // namespace braid
