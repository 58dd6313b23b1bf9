// The registry of ncclCommRegister / ncclCommWindowRegister records (registration.h).
#include "src/core/registration.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "src/config/log.h"
#include "src/config/error.h"
#include "src/device/lsa_window.h"

namespace braid {
namespace {

/// One communicator's records, by start address (several may start at one address).
using RangeMap = std::multimap<uintptr_t, std::unique_ptr<Registration>>;

struct CommRecords {
  RangeMap byStart;
  /// The largest size ever registered here: a lookup stops walking down once records
  /// start too far below the address to reach it.
  size_t maxSize = 0;
};

struct RegistrationTable {
  std::mutex mu;
  std::unordered_map<const Comm*, CommRecords> byComm;
  /// Every live record, for validating a handle before touching it.
  std::unordered_map<const Registration*, const Comm*> live;
  /// Every live window by the handle its owner was given (Registration::handle).
  std::unordered_map<const void*, const Registration*> windows;
  std::atomic<size_t> total{0};
};

RegistrationTable& registrations() {
  static RegistrationTable* r = new RegistrationTable();  // never destroyed: used from atexit paths too
  return *r;
}

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

bool Registration::covers(const void* p, size_t bytes) const {
  uintptr_t b = addr(buff), q = addr(p);
  return q >= b && q - b <= size && bytes <= size - (q - b);
}

ncclResult_t addRegistration(Comm* comm, void* buff, size_t size, bool window, int winFlags,
                             Registration** out) {
  auto r = std::make_unique<Registration>();
  r->comm = comm;
  r->buff = buff;
  r->size = size;
  r->window = window;
  r->winFlags = winFlags;
  r->kind = cudart::pointerKind(buff, &r->device);
  if (r->kind == MemKind::kDevice && size > 0) {
    if (cudart::ipcGetHandle(buff, r->ipcHandle, &r->ipcOffset) == ncclSuccess) {
      r->hasIpc = true;
    } else {
      BRAID_INFO(kLogReg, "register %p (%zu bytes, device %d): no CUDA IPC handle (%s); peers "
                 "will reach it through staging", buff, size, r->device,
                 cudart::lastError().c_str());
    }
  }
  r->handle = r.get();
  if (window && r->kind == MemKind::kDevice && cudart::available()) {
    // The device API's handle must exist now: a grouped registration returns it before
    // the exchange has run.
    std::unique_ptr<LsaWindow> lsa;
    BRAID_CHECK(LsaWindow::create(r->device, r.get(), &lsa));
    r->handle = lsa->handle();
    r->lsa = std::move(lsa);
  }
  BRAID_INFO(kLogReg, "%s %p + %zu bytes: %s memory%s", window ? "window" : "register", buff,
             size, memKindName(r->kind), r->hasIpc ? ", IPC handle kept" : "");
  RegistrationTable& g = registrations();
  std::lock_guard<std::mutex> lock(g.mu);
  Registration* raw = r.get();
  CommRecords& recs = g.byComm[comm];
  recs.byStart.emplace(addr(buff), std::move(r));
  if (size > recs.maxSize) recs.maxSize = size;
  g.live.emplace(raw, comm);
  if (window) g.windows.emplace(raw->handle, raw);
  g.total.fetch_add(1, std::memory_order_release);
  *out = raw;
  return ncclSuccess;
}

ncclResult_t removeRegistration(Comm* comm, const void* handle, bool window, const char* call) {
  RegistrationTable& g = registrations();
  std::unique_ptr<Registration> dead;  // destroyed after the lock is released
  {
    std::lock_guard<std::mutex> lock(g.mu);
    const Registration* named = static_cast<const Registration*>(handle);
    if (window) {
      auto w = g.windows.find(handle);
      named = w == g.windows.end() ? nullptr : w->second;
    }
    auto l = g.live.find(named);
    if (l != g.live.end() && l->second == comm && l->first->window == window) {
      const Registration* r = l->first;
      RangeMap& m = g.byComm[comm].byStart;
      auto range = m.equal_range(addr(r->buff));
      for (auto it = range.first; it != range.second; ++it) {
        if (it->second.get() != r) continue;
        dead = std::move(it->second);
        m.erase(it);
        break;
      }
      if (m.empty()) g.byComm.erase(comm);
      if (window) g.windows.erase(handle);
      g.live.erase(l);
      g.total.fetch_sub(1, std::memory_order_release);
    }
  }
  if (dead == nullptr) {
    if (window)
      return setError(ncclInvalidArgument, comm,
                      "%s: win %p was not registered on this communicator (or was deregistered "
                      "already)", call, handle);
    return setError(ncclInvalidArgument, comm,
                    "%s: handle %p was not returned by ncclCommRegister on this communicator "
                    "(or was deregistered already)", call, handle);
  }
  return ncclSuccess;
}

const Registration* findRegistration(const Comm* comm, const void* p, size_t bytes) {
  RegistrationTable& g = registrations();
  if (g.total.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(g.mu);
  auto c = g.byComm.find(comm);
  if (c == g.byComm.end()) return nullptr;
  const RangeMap& m = c->second.byStart;
  const size_t reach = c->second.maxSize;
  const Registration* best = nullptr;
  // Records starting at or below p, at most maxSize below it, may cover it.
  for (auto it = m.upper_bound(addr(p)); it != m.begin();) {
    --it;
    if (addr(p) - it->first > reach) break;
    const Registration* r = it->second.get();
    if (!r->covers(p, bytes)) continue;
    if (r->hasIpc) return r;
    if (best == nullptr) best = r;
  }
  return best;
}

const Registration* findWindow(const void* handle) {
  RegistrationTable& g = registrations();
  if (handle == nullptr || g.total.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(g.mu);
  auto w = g.windows.find(handle);
  return w == g.windows.end() ? nullptr : w->second;
}

size_t registrationCount(const Comm* comm) {
  RegistrationTable& g = registrations();
  std::lock_guard<std::mutex> lock(g.mu);
  auto c = g.byComm.find(comm);
  return c == g.byComm.end() ? 0 : c->second.byStart.size();
}

void forgetRegistrations(const Comm* comm) {
  RegistrationTable& g = registrations();
  RangeMap dead;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    auto c = g.byComm.find(comm);
    if (c == g.byComm.end()) return;
    dead = std::move(c->second.byStart);
    g.byComm.erase(c);
    for (auto& kv : dead) {
      g.live.erase(kv.second.get());
      if (kv.second->window) g.windows.erase(kv.second->handle);
    }
    g.total.fetch_sub(dead.size(), std::memory_order_release);
  }
  if (!dead.empty())
    BRAID_INFO(kLogReg, "communicator %p destroyed with %zu registration(s) still live: freed",
               static_cast<const void*>(comm), dead.size());
}

}  // namespace braid
