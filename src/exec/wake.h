// Wake: a waiting rank sleeps in the kernel, and the peers it waits for wake it.
//
// Each rank of a communicator with a flag board owns one WakeWord, in the board's
// shared segment (src/exec/board.h), so threads and processes of one host reach it
// alike. Whatever a rank may wait for is published by a peer that rings the word
// afterwards: the board's phases (every other rank's word), FIFO counters and closes
// on local and shm connections (the word of the rank at the other end). A ring costs
// one load of a line nobody writes while the owner is awake; only when the owner
// sleeps does it bump `seq` and call futex_wake.
//
// The handshake (the owner is the only thread that sleeps on its word):
//   owner:  sleeping = 1; fence; s = seq;  one more full look at everything it waits
//           for;  futex_wait(&seq, s)  (returns at once if seq moved);  sleeping = 0
//   peer:   publish (store);  fence;  if (sleeping) { ++seq; futex_wake(&seq) }
// Both fences are sequentially consistent, so either the owner's last look sees the
// publication or the peer sees `sleeping` and moves `seq`, which stops or ends the
// sleep. Sleeps are bounded anyway (the caller's peer checks and timeouts go on).
#pragma once
#include <atomic>
#include <cstdint>

namespace braid {

struct alignas(64) WakeWord {
  std::atomic<uint32_t> seq{0};       ///< moved by every ring that finds the owner asleep
  std::atomic<uint32_t> sleeping{0};  ///< nonzero while the owner is (about to be) asleep
};
static_assert(sizeof(WakeWord) == 64, "a wake word has its cache line to itself");

/// A full (sequentially consistent) fence. ThreadSanitizer cannot model fences (GCC
/// refuses them under -fsanitize=thread): there, a sequentially consistent
/// read-modify-write of one shared word stands in (a full barrier on x86 as well).
inline void wakeFence() {
#if defined(__SANITIZE_THREAD__)
  static std::atomic<uint32_t> word{0};
  word.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

/// Futex wake of everything sleeping on w->seq (a slow path: the owner was asleep).
void wakeRingSlow(WakeWord* w);

/// Wakes w's owner if it sleeps, without the fence (wakeRing's, or one already made
/// after the publishing store).
inline void wakeRingFenced(WakeWord* w) {
  if (w->sleeping.load(std::memory_order_relaxed) != 0) wakeRingSlow(w);
}

/// Wakes w's owner if it sleeps. Call after the store that publishes (any order): the
/// fence here makes that store visible before `sleeping` is read.
inline void wakeRing(WakeWord* w) {
  if (w == nullptr) return;
  wakeFence();
  wakeRingFenced(w);
}

/// The owner's side: sleeps on up to kMaxWords words (a thread driving several
/// communicators waits for any of them; with more, it naps instead).
class Sleeper {
 public:
  static constexpr int kMaxWords = 8;
  /// Forget the words (nothing armed).
  void clear();
  /// Adds a word to wait on; false when there are too many (then do not sleep).
  bool add(WakeWord* w);
  int size() const { return n_; }
  /// Announces the coming sleep: marks every word sleeping and notes its seq. The
  /// caller must then look at everything it waits for once more before sleep().
  void arm();
  bool armed() const { return armed_; }
  /// Sleeps until a word is rung or `timeoutUs` passed; disarms. Returns false when
  /// the kernel cannot do it (no futex_waitv for several words): the caller naps.
  bool sleep(int64_t timeoutUs);
  /// Clears the sleeping marks (something moved after arm()).
  void disarm();

 private:
  WakeWord* words_[kMaxWords] = {};
  uint32_t seen_[kMaxWords] = {};
  int n_ = 0;
  bool armed_ = false;
};

}  // namespace braid
