// DevSender / DevReceiver: the FIFO protocol of src/exec/fifo.h over a DevConn, as the
// CUDA executor's kernels (and their host emulation) run it. Bit-compatible with the
// host FifoSender / FifoReceiver: the other end of a connection may be a host thread
// (the net proxy reads and writes the same region with the host classes).
//
// Protocol (the same words, the same meaning):
//  * sender: a free slot exists while tail - head < nslots; it writes the payload and
//    SlotInfo{bytes, direct = 0}, then (after a system-scope fence) stores tail + 1
//    with release semantics;
//  * receiver: data exists while head < tail (tail loaded with acquire); the slot's
//    SlotInfo::bytes may be consumed in several parts (a byte stream); when the whole
//    slot is consumed it stores head + 1 with release semantics.
// Only one thread of a block (thread 0) touches these objects; the others see their
// results through the interpreter's shared state (src/device/interp.h).
//
// The Block policy supplies the memory operations (host: __atomic builtins; device:
// ld.acquire.sys / st.release.sys after __threadfence_system()):
//   static uint64_t ldAcquire(const uint64_t*);   // counters of the other end
//   static uint64_t ldVolatile(const uint64_t*);  // own counters, SlotInfo words
//   static uint32_t ldFlag(const uint32_t*);      // closed / abort words
//   static void stPlain(uint64_t*, uint64_t);     // SlotInfo words
//   static void stRelease(uint64_t*, uint64_t);   // fence (system scope) + release store
#pragma once
#include <cstdint>

#include "src/exec/dev_conn.h"
#include "src/device/hd.h"

namespace braid {

/// The sending end of one connection (thread 0's state).
template <class Block>
struct DevSender {
  const DevConn* conn = nullptr;
  uint64_t tail = 0;       ///< slots published (ours: the value in memory is ours)
  uint64_t headCache = 0;  ///< last head seen

  /// Starts using `c`: its counters in memory are where the last user left them.
  BRAID_HD_INLINE void attach(const DevConn* c) {
    conn = c;
    tail = Block::ldVolatile(c->tail);
    headCache = Block::ldAcquire(c->head);
  }
  /// Payload bytes of one slot.
  BRAID_HD_INLINE uint64_t slotBytes() const { return conn->slotBytes; }
  /// The next free slot, or nullptr if the FIFO is full (re-reads head when it looks so).
  BRAID_HD_INLINE char* tryAcquire() {
    if (tail - headCache >= conn->nslots) {
      headCache = Block::ldAcquire(conn->head);
      if (tail - headCache >= conn->nslots) return nullptr;
    }
    return conn->data + (tail % conn->nslots) * conn->slotBytes;
  }
  /// Publishes the slot tryAcquire() returned, holding `bytes` bytes. Every thread's
  /// writes into the slot must be complete (the caller synchronises the block first).
  BRAID_HD_INLINE void commit(uint64_t bytes) {
    SlotInfo* s = conn->slots + (tail % conn->nslots);
    Block::stPlain(&s->bytes, bytes);
    Block::stPlain(&s->direct, 0);
    ++tail;
    Block::stRelease(conn->tail, tail);
  }
  BRAID_HD_INLINE uint32_t closed() const { return Block::ldFlag(conn->closed); }
};

/// The receiving end of one connection (thread 0's state). A slot may be consumed in
/// parts; `offset` carries the part already consumed from one step to the next.
template <class Block>
struct DevReceiver {
  const DevConn* conn = nullptr;
  uint64_t head = 0;       ///< slots released (ours)
  uint64_t tailCache = 0;  ///< last tail seen
  uint64_t offset = 0;     ///< bytes of slot `head` already consumed
  uint64_t cur = 0;        ///< SlotInfo::bytes of slot `head` (valid while head < tailCache)

  BRAID_HD_INLINE void attach(const DevConn* c) {
    conn = c;
    head = Block::ldVolatile(c->head);
    tailCache = Block::ldAcquire(c->tail);
    offset = 0;
    if (head < tailCache) cur = Block::ldVolatile(&c->slots[head % c->nslots].bytes);
  }
  /// Readable contiguous bytes at the front of the stream (0: none yet); *ptr is set
  /// to them. Returns UINT64_MAX for a slot this path cannot read (a direct entry).
  BRAID_HD_INLINE uint64_t peek(const char** ptr) {
    if (head == tailCache) {
      tailCache = Block::ldAcquire(conn->tail);
      if (head == tailCache) return 0;
      cur = Block::ldVolatile(&conn->slots[head % conn->nslots].bytes);
    }
    const uint64_t i = head % conn->nslots;
    if (Block::ldVolatile(&conn->slots[i].direct) != 0) return UINT64_MAX;
    *ptr = conn->data + i * conn->slotBytes + offset;
    return cur - offset;
  }
  /// Consumes `bytes` (at most what peek() returned). Publishes head when the slot is
  /// done: every thread's reads of it must be complete (the caller synchronises first).
  BRAID_HD_INLINE void release(uint64_t bytes) {
    offset += bytes;
    if (offset < cur) return;
    offset = 0;
    ++head;
    Block::stRelease(conn->head, head);
    if (head < tailCache) cur = Block::ldVolatile(&conn->slots[head % conn->nslots].bytes);
  }
  BRAID_HD_INLINE uint32_t closed() const { return Block::ldFlag(conn->closed); }
};

}  // namespace braid
