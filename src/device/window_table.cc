// WindowTable (window_table.h).
#include "src/device/window_table.h"

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "nccl_device/core.h"
#include "src/config/error.h"
#include "src/os/cuda_rt.h"

namespace braid {
namespace {

constexpr int kEntries = 32;  // per node (NVIDIA's ncclDevCommWindowTable)

struct Chain {
  int device = -1;
  std::vector<ncclDevCommWindowTable*> nodes;  ///< device addresses, in chain order
  std::vector<ncclDevCommWindowTable::Entry> entries;  ///< host mirror, nodes * 32
};

struct Tables {
  std::mutex mu;
  std::unordered_map<const Comm*, Chain> byComm;
};

Tables& tables() {
  static Tables* t = new Tables();  // never destroyed: used at exit
  return *t;
}

/// Appends a zeroed node to the chain (linking the previous one to it).
ncclResult_t grow(Chain& ch) {
  cudart::DeviceScope scope;
  BRAID_CHECK(scope.enter(ch.device));
  void* p = nullptr;
  BRAID_CHECK(cudart::deviceAlloc(&p, sizeof(ncclDevCommWindowTable), "window table"));
  ncclResult_t res = cudart::memsetDevice(p, 0, sizeof(ncclDevCommWindowTable));
  auto* node = static_cast<ncclDevCommWindowTable*>(p);
  if (res == ncclSuccess && !ch.nodes.empty())
    res = cudart::copyToDevice(&ch.nodes.back()->next, &node, sizeof node);
  if (res != ncclSuccess) {
    (void)cudart::deviceFree(p);
    return res;
  }
  ch.nodes.push_back(node);
  ch.entries.resize(ch.nodes.size() * kEntries, ncclDevCommWindowTable::Entry{0, 0, nullptr});
  return ncclSuccess;
}

/// Writes entry i of the chain to the device.
ncclResult_t store(const Chain& ch, size_t i) {
  cudart::DeviceScope scope;
  BRAID_CHECK(scope.enter(ch.device));
  return cudart::copyToDevice(&ch.nodes[i / kEntries]->entries[i % kEntries], &ch.entries[i],
                              sizeof(ncclDevCommWindowTable::Entry));
}

Chain& chainOf(const Comm* c, int device, ncclResult_t* res) {
  Chain& ch = tables().byComm[c];
  *res = ncclSuccess;
  if (ch.nodes.empty()) {
    ch.device = device;
    *res = grow(ch);
  }
  return ch;
}

}  // namespace

ncclResult_t windowTableAdd(const Comm* c, int device, const void* base, size_t size,
                            ncclWindow_t handle) {
  Tables& t = tables();
  std::lock_guard<std::mutex> lock(t.mu);
  ncclResult_t res = ncclSuccess;
  Chain& ch = chainOf(c, device, &res);
  BRAID_CHECK(res);
  size_t i = 0;
  while (i < ch.entries.size() && ch.entries[i].window != nullptr) ++i;
  if (i == ch.entries.size()) BRAID_CHECK(grow(ch));
  ch.entries[i] = ncclDevCommWindowTable::Entry{reinterpret_cast<uintptr_t>(base), size, handle};
  return store(ch, i);
}

void windowTableRemove(const Comm* c, ncclWindow_t handle) {
  Tables& t = tables();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.byComm.find(c);
  if (it == t.byComm.end()) return;
  Chain& ch = it->second;
  for (size_t i = 0; i < ch.entries.size(); ++i) {
    if (ch.entries[i].window != handle) continue;
    ch.entries[i] = ncclDevCommWindowTable::Entry{0, 0, nullptr};
    (void)store(ch, i);
  }
}

ncclResult_t windowTableHead(const Comm* c, int device, ncclDevCommWindowTable** out) {
  Tables& t = tables();
  std::lock_guard<std::mutex> lock(t.mu);
  ncclResult_t res = ncclSuccess;
  Chain& ch = chainOf(c, device, &res);
  BRAID_CHECK(res);
  *out = ch.nodes.front();
  return ncclSuccess;
}

void windowTableForget(const Comm* c) {
  Tables& t = tables();
  std::vector<ncclDevCommWindowTable*> nodes;
  int device = -1;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.byComm.find(c);
    if (it == t.byComm.end()) return;
    nodes = std::move(it->second.nodes);
    device = it->second.device;
    t.byComm.erase(it);
  }
  cudart::DeviceScope scope;
  (void)scope.enter(device);
  for (ncclDevCommWindowTable* n : nodes) (void)cudart::deviceFree(n);
}

}  // namespace braid
