// Stall: the waiting policy of the host executor's progress loops (the batch loop and
// the flag board's fast path). While nothing moves: spin for BRAID_SPIN_US (timed from
// the 64th idle round: a waiting peer is usually microseconds away, and most waits end
// before the clock is read), then yield 1000 times, then nap 20 us at a time. Where the
// ranks outnumber the cores (no spin) the naps end after a few and the rank sleeps in
// the kernel until a peer rings one of the wake words given with wakeOn()
// (src/exec/wake.h): arm, one more look, sleep; each sleep lasts at most
// BRAID_PEER_CHECK_MS. BRAID_SLEEP=2 sleeps right after the spin whatever the spin,
// BRAID_SLEEP=0 never; without wake words (a network in the way, no flag board) the
// naps go on. Every 16th idle round of yielding or napping, and after every sleep, it
// looks at the clock and says when the peers waited on should be checked (every
// BRAID_PEER_CHECK_MS) and when the stall has lasted BRAID_TIMEOUT_MS.
#pragma once
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "src/core/comm.h"
#include "src/exec/progress_assist.h"
#include "src/exec/wake.h"

namespace braid {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

class Stall {
 public:
  /// After the spin: this many yields, then this many 20 us naps, then (where the waits
  /// can be rung) sleep. Measured with the torch backend against sleeping at once and
  /// against napping on (docs/performance.md): the short waits of collectives run as
  /// fast as with naps; only the long ones sleep.
  static constexpr uint64_t kYields = 1000;
  static constexpr uint64_t kNaps = 16;
  explicit Stall(const CommSettings& s) : s_(s) {}
  ~Stall() { sleeper_.disarm(); }
  Stall(const Stall&) = delete;
  Stall& operator=(const Stall&) = delete;
  /// Long stalls sleep on `w` (with the others given) instead of napping, where the
  /// settings allow it (BRAID_SLEEP). Call before the first idle(); null: never sleep.
  void wakeOn(WakeWord* w) {
    // BRAID_SLEEP=1 sleeps only without a spin (the ranks outnumber the cores): where
    // they fit, a futex wake tends to queue the woken rank on its waker's busy CPU,
    // where it waits out the waker's spin (measured: docs/performance.md), while a
    // napping rank wakes on an idle CPU.
    const bool sleeps = s_.sleepMode == 2 || (s_.sleepMode == 1 && s_.spinUs == 0);
    if (w == nullptr || !sleeps || !sleeper_.add(w)) noSleep();
  }
  /// The net proxy's helper scope this loop holds: it stands aside while we sleep.
  void setAssist(const ProgressAssist::Scope* a) { assist_ = a; }
  /// Never sleep (something waited on does not ring a wake word).
  void noSleep() {
    sleeper_.clear();
    canSleep_ = false;
  }
  /// Something moved: the next idle round starts a new stall.
  void moved() {
    idle_ = 0;
    stallStart_ = 0;
    sleeper_.disarm();
  }
  /// One idle round: waits a little. Returns true when the caller should check its
  /// peers now; *timedOut then says whether the stall reached BRAID_TIMEOUT_MS and
  /// *stalledMs how long it has lasted.
  bool idle(bool* timedOut, int64_t* stalledMs) {
    if (++idle_ == 1) {
      spinStartUs_ = 0;  // read the clock only if the spin lasts (most end sooner)
      yields_ = 0;
    }
    if (s_.spinUs > 0 && yields_ == 0) {
      if ((idle_ & 63) != 0) {
        cpuRelax();
        return false;
      }
      const int64_t now = nowUs();
      if (spinStartUs_ == 0) spinStartUs_ = now;
      if (now - spinStartUs_ < s_.spinUs) {
        // A peer woken from a sleep is often queued on its waker's CPU (where no CPU is
        // idle): a spin that never yields keeps it off for the whole spin.
        if (s_.sleepMode == 2) sched_yield();
        return false;
      }
    }
    ++yields_;
    const bool eager = s_.sleepMode == 2;  // BRAID_SLEEP=2: sleep right after the spin
    if (canSleep_ && sleeper_.size() > 0 && (eager || yields_ >= kYields + kNaps)) {
      if (!sleeper_.armed()) {
        if (stallStart_ == 0) stallStart_ = lastCheck_ = nowMs();  // the stall's clock
        sleeper_.arm();  // the caller looks once more, then the next round sleeps
        return false;
      }
      // Until the next peer check or the timeout, whichever comes first.
      int64_t until = lastCheck_ + s_.peerCheckMs;
      if (s_.timeoutMs > 0) until = std::min<int64_t>(until, stallStart_ + s_.timeoutMs);
      const int64_t ms = std::max<int64_t>(1, until - nowMs());
      if (assist_) assist_->pause();
      const bool slept = sleeper_.sleep(ms * 1000);
      if (assist_) assist_->resume();
      if (!slept) noSleep();
      return clockCheck(timedOut, stalledMs);
    }
    if (yields_ < kYields) {
      sched_yield();
    } else {
      struct timespec ts = {0, 20000};  // long stalls: 20 us naps
      nanosleep(&ts, nullptr);
    }
    if ((idle_ & 15) != 0) return false;
    return clockCheck(timedOut, stalledMs);
  }

  static int64_t nowUs() {
    using namespace std::chrono;
    return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
  }
  static int64_t nowMs() {
    using namespace std::chrono;
    return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
  }

 private:
  bool clockCheck(bool* timedOut, int64_t* stalledMs) {
    const int64_t now = nowMs();
    if (stallStart_ == 0) {
      stallStart_ = now;
      lastCheck_ = now;
      return false;
    }
    *stalledMs = now - stallStart_;
    *timedOut = s_.timeoutMs > 0 && *stalledMs >= s_.timeoutMs;
    if (!*timedOut && now - lastCheck_ < s_.peerCheckMs) return false;
    lastCheck_ = now;
    return true;
  }

  const CommSettings& s_;
  Sleeper sleeper_;
  const ProgressAssist::Scope* assist_ = nullptr;
  bool canSleep_ = true;
  uint64_t idle_ = 0, yields_ = 0;
  int64_t spinStartUs_ = 0, stallStart_ = 0, lastCheck_ = 0;
};

}  // namespace braid
