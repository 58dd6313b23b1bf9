// ProgressAssist: lets executors drive a background progress engine while they wait.
//
// The net transport's proxy thread (transports/net/net_proxy.h) moves FIFO slots to and
// from the network. A hop from the executor to that thread and back costs a wake-up
// each way when the proxy sleeps, and CPU time on hosts with few cores when it spins.
// So an executor with nothing else to do progresses the proxy's connections itself
// (help(), which never blocks: it skips when another thread is progressing), and runs
// one last pass when it leaves (a send published just before is posted at once). The
// proxy learns from waiting() that executors are driving and then only naps, covering
// what they leave.
//
// One engine registers (the net proxy, when it starts); with none registered every call
// is a load and a branch.
#pragma once
#include <atomic>
#include <cstdint>

namespace braid {

class ProgressAssist {
 public:
  /// Moves what it can; true if anything happened. Must not block.
  using HelpFn = bool (*)();
  static void registerEngine(HelpFn fn) { fn_.store(fn, std::memory_order_release); }
  /// In a child of fork(): no engine, and no executor is waiting (those threads were
  /// not copied).
  static void resetInForkChild() {
    fn_.store(nullptr, std::memory_order_relaxed);
    waiting_.store(0, std::memory_order_relaxed);
  }
  /// Executors inside a wait loop now.
  static int waiting() { return waiting_.load(std::memory_order_relaxed); }
  /// Counts wait loops entered: the engine compares it to tell that executors came
  /// and went since it last looked.
  static uint64_t entries() { return entries_.load(std::memory_order_relaxed); }

  /// Held by an executor for the length of its wait loop.
  class Scope {
   public:
    Scope() : fn_(ProgressAssist::fn_.load(std::memory_order_acquire)) {
      if (!fn_) return;
      waiting_.fetch_add(1, std::memory_order_relaxed);
      entries_.fetch_add(1, std::memory_order_relaxed);
    }
    ~Scope() {
      if (!fn_) return;
      fn_();
      waiting_.fetch_sub(1, std::memory_order_relaxed);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    bool help() const { return fn_ && fn_(); }
    /// Around a sleep of the executor (src/exec/stall.h): while it sleeps it drives
    /// nothing, so the proxy must not count on it (it would only nap, not sleep on its
    /// doorbells).
    void pause() const {
      if (fn_) waiting_.fetch_sub(1, std::memory_order_relaxed);
    }
    void resume() const {
      if (fn_) waiting_.fetch_add(1, std::memory_order_relaxed);
    }

   private:
    HelpFn fn_;
  };

 private:
  static inline std::atomic<HelpFn> fn_{nullptr};
  static inline std::atomic<int> waiting_{0};
  static inline std::atomic<uint64_t> entries_{0};
};

}  // namespace braid
