// Wake words: futex calls (src/exec/wake.h). The words live in shared memory that
// several processes map, so the futexes are not process-private.
#include "src/exec/wake.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace braid {
namespace {

long futex(std::atomic<uint32_t>* addr, int op, uint32_t val, const struct timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), op, val, ts, nullptr, 0);
}

#ifdef SYS_futex_waitv
/// Set once futex_waitv (Linux 5.16+) turned out to be missing.
std::atomic<bool> gNoWaitv{false};
#endif

}  // namespace

void wakeRingSlow(WakeWord* w) {
  // `sleeping` stays set until the owner clears it: a ring clearing it could leave the
  // owner to sleep through the next publication (its last look may have seen this one
  // without being unblocked by it). Rings until then each cost a system call.
  w->seq.fetch_add(1, std::memory_order_seq_cst);
  futex(&w->seq, FUTEX_WAKE, INT_MAX, nullptr);
}

namespace {
/// Whether a futex wait's result means it waited (or had no need to): woken, the value
/// had moved, timed out, interrupted. Anything else (a sandbox refusing the call, EPERM
/// from a seccomp filter) means this thread cannot sleep that way.
bool waited(long r) { return r >= 0 || errno == EAGAIN || errno == ETIMEDOUT || errno == EINTR; }
}  // namespace

void Sleeper::clear() {
  disarm();
  n_ = 0;
}

bool Sleeper::add(WakeWord* w) {
  for (int i = 0; i < n_; ++i)
    if (words_[i] == w) return true;
  if (n_ == kMaxWords) return false;
  words_[n_++] = w;
  return true;
}

void Sleeper::arm() {
  for (int i = 0; i < n_; ++i) words_[i]->sleeping.store(1, std::memory_order_relaxed);
  wakeFence();
  // Acquire: a ring that moved seq before this load also published before it, and the
  // caller's last look must see that.
  for (int i = 0; i < n_; ++i) seen_[i] = words_[i]->seq.load(std::memory_order_acquire);
  armed_ = true;
}

void Sleeper::disarm() {
  if (!armed_) return;
  for (int i = 0; i < n_; ++i) words_[i]->sleeping.store(0, std::memory_order_relaxed);
  armed_ = false;
}

bool Sleeper::sleep(int64_t timeoutUs) {
  if (!armed_ || n_ == 0) return false;
  bool slept = true;
  if (n_ == 1) {
    struct timespec ts = {time_t(timeoutUs / 1000000), long(timeoutUs % 1000000) * 1000};
    slept = waited(futex(&words_[0]->seq, FUTEX_WAIT, seen_[0], &ts));
  } else {
#ifdef SYS_futex_waitv
    if (!gNoWaitv.load(std::memory_order_relaxed)) {
      struct futex_waitv waiters[kMaxWords] = {};
      for (int i = 0; i < n_; ++i) {
        waiters[i].val = seen_[i];
        waiters[i].uaddr = reinterpret_cast<uintptr_t>(&words_[i]->seq);
        waiters[i].flags = FUTEX_32;
      }
      struct timespec now;
      clock_gettime(CLOCK_MONOTONIC, &now);
      int64_t ns = int64_t(now.tv_nsec) + timeoutUs * 1000;
      struct timespec until = {now.tv_sec + time_t(ns / 1000000000), long(ns % 1000000000)};
      const long r = syscall(SYS_futex_waitv, waiters, unsigned(n_), 0u, &until, CLOCK_MONOTONIC);
      if (!waited(r)) {
        gNoWaitv.store(true, std::memory_order_relaxed);
        slept = false;
      }
    } else {
      slept = false;
    }
#else
    slept = false;
#endif
  }
  disarm();
  return slept;
}

}  // namespace braid
