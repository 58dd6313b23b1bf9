#include "src/core/comm_registry.h"

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_set>

namespace braid {
namespace {

struct CommTable {
  std::mutex mu;
  std::unordered_set<const void*> comms;
  /// Bumped whenever a communicator is freed: threads' cached answers are then stale.
  std::atomic<uint64_t> generation{1};
};

CommTable& commTable() {
  static auto* r = new CommTable();  // leaked on purpose: used at exit
  return *r;
}

/// A thread's last few handles found in the registry, valid for one generation.
struct Recent {
  static constexpr int kSlots = 4;
  uint64_t generation = 0;
  const void* handles[kSlots] = {};
  int next = 0;
};

}  // namespace

void registerComm(const void* comm) {
  CommTable& r = commTable();
  std::lock_guard<std::mutex> lock(r.mu);
  r.comms.insert(comm);
}

void unregisterComm(const void* comm) {
  CommTable& r = commTable();
  std::lock_guard<std::mutex> lock(r.mu);
  r.comms.erase(comm);
  r.generation.fetch_add(1, std::memory_order_acq_rel);
}

bool knownComm(const void* handle) {
  if (handle == nullptr) return false;
  thread_local Recent recent;
  CommTable& r = commTable();
  const uint64_t gen = r.generation.load(std::memory_order_acquire);
  if (recent.generation == gen) {
    for (const void* h : recent.handles)
      if (h == handle) return true;
  } else {
    recent = Recent();
    recent.generation = gen;
  }
  bool found;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    found = r.comms.count(handle) != 0;
  }
  if (found) {
    recent.handles[recent.next] = handle;
    recent.next = (recent.next + 1) % Recent::kSlots;
  }
  return found;
}

}  // namespace braid
