// Fifo: the one-directional byte stream under every connection.
//
// A FifoRegion is plain memory (heap for the local transport, a POSIX shared memory
// segment for shm, a proxy-owned buffer for networks) holding a ring of slots and two
// counters. The sender fills slots and publishes `tail`; the receiver consumes bytes
// and publishes `head` once a slot is fully consumed. Slot boundaries carry no meaning:
// the stream is a byte stream, so the two ends may slice differently and a proxy may
// re-slice (network transports). A slot may instead carry a pointer to the sender's
// memory ("direct" entries, same address space only): the receiver reads from there.
//
// A "remote" direct entry (shm transport, processes of one host) carries an address
// in the sender's process: the receiver pulls the bytes with process_vm_readv (one
// copy, by the kernel, instead of the sender's copy in plus the receiver's copy out).
//
// Memory ordering: the sender writes slot data and SlotInfo, then stores tail with
// release; the receiver loads tail with acquire before reading. Symmetrically for head.
//
// Every slot carries the CallTag of the call that wrote it (src/exec/call_tag.h): the
// receiver compares it with its own call before it uses the bytes. Across a network
// the tag travels as a trailer after the payload: such FIFOs keep room for it at the
// end of every slot (FifoHeader::slotCapacity < slotBytes).
//
// Doorbell (FIFOs whose far end is a proxy thread of this process: the net transport):
// a proxy about to sleep sets `proxyAsleep`, then looks at the counters once more; the
// executor, after moving a counter or closing, wakes it through `proxyWakeFd` (an
// eventfd) when it finds it asleep. Both sides use sequentially consistent operations
// there, so either the proxy sees the new counter or the executor sees it asleep.
//
// Wake word (FIFOs between ranks of one host with a flag board: local and shm
// connections): each end may hold the WakeWord of the rank at the other end
// (src/exec/wake.h, set by the connector), and rings it after every counter it moves
// and when it closes, so a peer sleeping in the kernel for this FIFO wakes up.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>

#include <errno.h>
#include <sys/types.h>
#include <unistd.h>

#include "src/exec/call_tag.h"
#include "src/exec/wake.h"
#include "src/os/process.h"

namespace braid {

struct SlotInfo {
  uint64_t bytes;   ///< payload bytes in this slot
  uint64_t direct;  ///< 0, or the sender-side address the payload lives at
  CallTag tag;      ///< the call that wrote it (untagged: not compared)
};
static_assert(sizeof(SlotInfo) == 32, "SlotInfo is shared with other processes and GPUs");

/// Shared header, at the start of the region. Counters on their own cache lines.
struct FifoHeader {
  alignas(64) std::atomic<uint64_t> tail;    ///< slots published by the sender
  alignas(64) std::atomic<uint64_t> head;    ///< slots released by the receiver
  alignas(64) std::atomic<uint32_t> closed;  ///< nonzero: an end aborted (value = reason)
  std::atomic<uint32_t> directReaders;       ///< receivers copying from a direct entry now
  uint32_t nslots;
  uint32_t hasDoorbell;  ///< nonzero: the fields below are in use (set before sharing)
  uint64_t slotBytes;     ///< distance between slots
  uint64_t magic;
  uint64_t slotCapacity;  ///< payload bytes a sender may put in one slot (<= slotBytes)
  alignas(64) std::atomic<uint32_t> proxyAsleep;  ///< set by a proxy about to sleep
  int32_t proxyWakeFd;  ///< its eventfd (read only after seeing proxyAsleep set)
};

/// Executor side of the doorbell: call after a seq_cst store of a counter or `closed`.
inline void fifoRingDoorbell(FifoHeader* h) {
  if (h->proxyAsleep.load(std::memory_order_seq_cst) == 0) return;
  if (h->proxyAsleep.exchange(0, std::memory_order_seq_cst) == 0) return;
  uint64_t one = 1;
  ssize_t n = ::write(h->proxyWakeFd, &one, sizeof one);
  (void)n;  // a full eventfd counter still wakes the poller
}

/// Stores a FIFO counter: with release, or sequentially consistent and ringing the
/// doorbell where the FIFO has one.
/// Then rings `peer` (the wake word of the rank at the other end, or null).
inline void fifoPublish(FifoHeader* h, std::atomic<uint64_t>& counter, uint64_t value,
                        WakeWord* peer) {
  if (!h->hasDoorbell) {
    counter.store(value, std::memory_order_release);
  } else {
    counter.store(value, std::memory_order_seq_cst);
    fifoRingDoorbell(h);
  }
  wakeRing(peer);
}

/// Closes a FIFO end (see FifoClose), waking a sleeping proxy or peer.
inline void fifoClose(FifoHeader* h, uint32_t why, WakeWord* peer) {
  // The first reason stays: a comm that failed on a collective mismatch and is then
  // aborted must still tell its peers (and its net proxy, which then delivers what was
  // published: net_conn.cc) that it was a mismatch.
  uint32_t open = 0;  // kFifoOpen
  h->closed.compare_exchange_strong(open, why, std::memory_order_seq_cst);
  if (h->hasDoorbell) fifoRingDoorbell(h);
  wakeRing(peer);
}

enum FifoClose : uint32_t {
  kFifoOpen = 0,
  kFifoSenderAborted = 1,
  kFifoReceiverAborted = 2,
  kFifoMismatch = 3,  ///< an end found a collective mismatch (its comm failed for it)
};

/// Geometry and placement of a FIFO within a region of memory.
class FifoLayout {
 public:
  static constexpr uint64_t kMagic = 0x4252414944464946ull;  // "BRAIDFIF"
  static size_t bytesFor(uint32_t nslots, uint64_t slotBytes) {
    return dataOffset(nslots) + size_t(nslots) * slotBytes;
  }
  static size_t dataOffset(uint32_t nslots) {
    size_t o = sizeof(FifoHeader) + sizeof(SlotInfo) * nslots;
    return (o + 63) & ~size_t(63);
  }
  /// Initialise a region of bytesFor(...) bytes (creator side only). Senders fill at
  /// most `capacity` bytes of each slot (0: all of it; less where a network transport
  /// appends the tag after the payload).
  static FifoHeader* init(void* mem, uint32_t nslots, uint64_t slotBytes,
                          uint64_t capacity = 0) {
    auto* h = new (mem) FifoHeader();
    h->tail.store(0, std::memory_order_relaxed);
    h->head.store(0, std::memory_order_relaxed);
    h->closed.store(0, std::memory_order_relaxed);
    h->directReaders.store(0, std::memory_order_relaxed);
    h->proxyAsleep.store(0, std::memory_order_relaxed);
    h->proxyWakeFd = -1;
    h->hasDoorbell = 0;
    h->nslots = nslots;
    h->slotBytes = slotBytes;
    h->magic = kMagic;
    h->slotCapacity = capacity ? capacity : slotBytes;
    // Published to the other end by the descriptor exchange (a syscall or a mutex),
    // which orders these stores before the peer's first look.
    return h;
  }
};

/// Sender-side view of a FIFO.
class FifoSender {
 public:
  FifoSender() = default;
  explicit FifoSender(void* mem) { attach(mem); }
  void attach(void* mem) {
    h_ = static_cast<FifoHeader*>(mem);
    slots_ = reinterpret_cast<SlotInfo*>(h_ + 1);
    data_ = static_cast<char*>(mem) + FifoLayout::dataOffset(h_->nslots);
    tail_ = h_->tail.load(std::memory_order_relaxed);
    headCache_ = h_->head.load(std::memory_order_acquire);
  }
  bool valid() const { return h_ != nullptr; }
  /// Payload bytes one slot takes.
  uint64_t slotBytes() const { return h_->slotCapacity; }
  uint64_t capacityBytes() const { return h_->slotCapacity * h_->nslots; }

  /// A free slot to write up to slotBytes() into, or nullptr if the FIFO is full.
  char* acquire() {
    if (tail_ - headCache_ >= h_->nslots) {
      headCache_ = h_->head.load(std::memory_order_acquire);
      if (tail_ - headCache_ >= h_->nslots) return nullptr;
    }
    return data_ + (tail_ % h_->nslots) * h_->slotBytes;
  }
  /// Publish the slot returned by acquire() holding `bytes` bytes of call `tag`.
  void commit(uint64_t bytes, const CallTag& tag = CallTag()) { publish(bytes, 0, tag); }
  /// Publish a direct entry: `bytes` bytes the receiver reads at `ptr` (same process).
  /// Requires a free slot (acquire() != nullptr).
  void commitDirect(const void* ptr, uint64_t bytes, const CallTag& tag = CallTag()) {
    publish(bytes, reinterpret_cast<uint64_t>(ptr), tag);
  }
  /// True when the receiver has released every published slot.
  bool drained() {
    headCache_ = h_->head.load(std::memory_order_acquire);
    return headCache_ == tail_;
  }
  uint64_t published() const { return tail_; }
  uint32_t closed() const { return h_->closed.load(std::memory_order_acquire); }
  void close(uint32_t why) { fifoClose(h_, why, peerWake_); }
  /// The receiving rank's wake word, rung after every publish and close (null: none).
  void setPeerWake(WakeWord* w) { peerWake_ = w; }
  /// Closes the FIFO and waits until no receiver is still copying from one of our
  /// direct entries: afterwards our buffers are not read any more, so a failed op
  /// may return them to the user. (Receivers refuse direct entries once closed.)
  /// readerGone() is asked now and then: a reader in another process that died while
  /// pinned never unpins, and cannot touch our memory any more either.
  template <class ReaderGone>
  void closeAndFence(uint32_t why, ReaderGone readerGone) {
    fifoClose(h_, why, peerWake_);
    for (uint32_t i = 1; h_->directReaders.load(std::memory_order_seq_cst) != 0; ++i) {
      if (i % 1024 == 0 && readerGone()) return;
      std::this_thread::yield();
    }
  }
  void closeAndFence(uint32_t why) {
    closeAndFence(why, [] { return false; });
  }

 private:
  void publish(uint64_t bytes, uint64_t direct, const CallTag& tag) {
    SlotInfo& s = slots_[tail_ % h_->nslots];
    s.bytes = bytes;
    s.direct = direct;
    s.tag = tag;
    ++tail_;
    fifoPublish(h_, h_->tail, tail_, peerWake_);
  }
  FifoHeader* h_ = nullptr;
  WakeWord* peerWake_ = nullptr;
  SlotInfo* slots_ = nullptr;
  char* data_ = nullptr;
  uint64_t tail_ = 0;
  uint64_t headCache_ = 0;
};

/// Receiver-side view of a FIFO. Consumes bytes; a slot may be consumed in parts.
class FifoReceiver {
 public:
  FifoReceiver() = default;
  explicit FifoReceiver(void* mem) { attach(mem); }
  void attach(void* mem) {
    h_ = static_cast<FifoHeader*>(mem);
    slots_ = reinterpret_cast<SlotInfo*>(h_ + 1);
    data_ = static_cast<char*>(mem) + FifoLayout::dataOffset(h_->nslots);
    head_ = h_->head.load(std::memory_order_relaxed);
    tailCache_ = h_->tail.load(std::memory_order_acquire);
    offset_ = 0;
  }
  bool valid() const { return h_ != nullptr; }

  /// Readable contiguous bytes at the front of the stream: sets *ptr, returns length
  /// (0 if nothing is available).
  uint64_t peek(const char** ptr) {
    if (head_ == tailCache_) {
      tailCache_ = h_->tail.load(std::memory_order_acquire);
      if (head_ == tailCache_) return 0;
      // New data: fetch the slot's first line while its SlotInfo is read (both are
      // usually in the writer's cache; two misses in parallel instead of in a row).
      __builtin_prefetch(data_ + (head_ % h_->nslots) * h_->slotBytes + offset_);
    }
    const SlotInfo& s = slots_[head_ % h_->nslots];
    const char* base = s.direct ? reinterpret_cast<const char*>(s.direct)
                                : data_ + (head_ % h_->nslots) * h_->slotBytes;
    *ptr = base + offset_;
    return s.bytes - offset_;
  }
  /// Consume `bytes` (at most what peek() returned).
  void release(uint64_t bytes) {
    offset_ += bytes;
    if (offset_ == slots_[head_ % h_->nslots].bytes) {
      offset_ = 0;
      ++head_;
      fifoPublish(h_, h_->head, head_, peerWake_);
    }
  }
  uint32_t closed() const { return h_->closed.load(std::memory_order_acquire); }
  void close(uint32_t why) { fifoClose(h_, why, peerWake_); }
  /// The sending rank's wake word, rung after every release and close (null: none).
  void setPeerWake(WakeWord* w) { peerWake_ = w; }

  /// After a successful peek(): the tag of the call that wrote the front bytes.
  const CallTag& frontTag() const { return slots_[head_ % h_->nslots].tag; }
  /// After a successful peek(): whether the front bytes live in the sender's memory.
  bool frontIsDirect() const { return slots_[head_ % h_->nslots].direct != 0; }
  /// Pins the sender's memory behind a direct entry for one copy. False if the sender
  /// closed the FIFO (its buffer may be gone): do not read it then.
  bool pinDirect() {
    h_->directReaders.fetch_add(1, std::memory_order_seq_cst);
    if (h_->closed.load(std::memory_order_seq_cst) == 0) return true;
    unpinDirect();
    return false;
  }
  void unpinDirect() { h_->directReaders.fetch_sub(1, std::memory_order_release); }

  /// Direct entries of this FIFO live in process `pid` (0: in our own address space).
  void setRemotePid(pid_t pid) { remotePid_ = pid; }
  /// After a successful peek(): whether the front bytes live in another process, so
  /// they must be pulled with pullRemote() instead of read through the pointer.
  bool frontIsRemote() const { return remotePid_ != 0 && frontIsDirect(); }
  /// Copies n bytes at `src` (a pointer peek() returned for a remote entry; pin it
  /// first) into dst. Returns 0, or the errno of process_vm_readv.
  int pullRemote(char* dst, const char* src, uint64_t n) const {
    return readProcessMemory(remotePid_, uint64_t(uintptr_t(src)), dst, n);
  }

 private:
  FifoHeader* h_ = nullptr;
  SlotInfo* slots_ = nullptr;
  char* data_ = nullptr;
  uint64_t head_ = 0;
  uint64_t tailCache_ = 0;
  uint64_t offset_ = 0;
  pid_t remotePid_ = 0;
  WakeWord* peerWake_ = nullptr;
};

}  // namespace braid
