#include "src/exec/board.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>

#include "src/config/log.h"
#include "src/core/comm.h"
#include "src/os/process.h"
#include "src/os/shm_segment.h"

namespace braid {
namespace {

/// Read by peers at init to learn whether process_vm_readv works between us.
const volatile uint64_t kProbeWord = 0x4252414944425244ull;  // "BRAIDBRD"

struct SetupRecord {
  int32_t pid;
  int32_t ok;  ///< round 1: rank 0 made the segment; round 2: mapped it
  int32_t cma;  ///< round 2: could read every other process's probe word
  int32_t pad;
  uint64_t probeAddr;
  uint64_t processHash;
  uint64_t startTime;
  char name[96];  ///< rank 0's segment name
};

size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }

/// The boards mapped in this process, by segment name: ranks of one process share one
/// mapping (one address for one slot, which is also what ThreadSanitizer needs to see
/// the phases' release/acquire pairs).
struct Mapping {
  void* base;
  size_t bytes;
  int users;
};
std::mutex& mappingsMu() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, Mapping>& mappings() {
  static auto* m = new std::map<std::string, Mapping>();  // leaked on purpose: used at exit
  return *m;
}

/// This process's mapping of segment `name`: the one another rank of the process made,
/// else `created` (the creator's own mapping, or null: mapped here by name). An unused
/// `created` is unmapped. MAP_FAILED on failure.
void* mapBoard(const std::string& name, void* created, size_t bytes) {
  std::lock_guard<std::mutex> lock(mappingsMu());
  auto it = mappings().find(name);
  if (it != mappings().end()) {
    if (created) munmap(created, bytes);
    ++it->second.users;
    return it->second.base;
  }
  void* base = created;
  if (!base && openSegment(name.c_str(), bytes, false, &base) != 0) return MAP_FAILED;
  mappings()[name] = Mapping{base, bytes, 1};
  return base;
}

void unmapBoard(const std::string& name) {
  std::lock_guard<std::mutex> lock(mappingsMu());
  auto it = mappings().find(name);
  if (it == mappings().end() || --it->second.users > 0) return;
  munmap(it->second.base, it->second.bytes);
  mappings().erase(it);
}

}  // namespace

ncclResult_t Board::setup(Comm* comm, uint64_t inlineBytes, uint64_t copyMaxBytes,
                          uint64_t cmaMaxBytes, std::unique_ptr<Board>* out) {
  out->reset();
  const int n = comm->nranks, me = comm->rank;
  std::unique_ptr<Board> b(new Board());
  b->nranks_ = n;
  b->rank_ = me;
  b->inlineBytes_ = roundUp(inlineBytes, 64);
  b->copyMaxBytes_ = copyMaxBytes;
  b->areaBytes_ = roundUp(sizeof(CallTag) + b->inlineBytes_, 64);
  b->slotBytes_ = kAreasOffset + kInlineAreas * b->areaBytes_;
  b->wakeOffset_ = b->slotBytes_ * size_t(n);
  b->bytes_ = b->wakeOffset_ + sizeof(WakeWord) * size_t(n);

  std::vector<SetupRecord> recs(static_cast<size_t>(n));
  SetupRecord& mine = recs[size_t(me)];
  std::memset(&mine, 0, sizeof mine);
  mine.pid = int32_t(getpid());
  mine.probeAddr = uint64_t(reinterpret_cast<uintptr_t>(&kProbeWord));
  mine.processHash = comm->peers[size_t(me)].processHash;
  mine.startTime = processStartTime(getpid());
  void* created = nullptr;
  if (me == 0) {
    std::random_device rd;
    // Named like the shm transport's segments, so a survivor's cleanup finds it if we die
    // before unlinking it (removeDeadOwnersSegments).
    std::snprintf(mine.name, sizeof mine.name, "/braid-%d-%016llx-r0-board-%08x", int(getpid()),
                  static_cast<unsigned long long>(comm->commHash), unsigned(rd()));
    const int err = createSegment(mine.name, b->bytes_, false, &created);
    if (err)
      BRAID_WARN("%s: could not create the flag board %s (%s); collectives use the FIFOs",
                 comm->who().c_str(), mine.name, std::strerror(err));
    mine.ok = err == 0;
  }
  ncclResult_t r = comm->bootstrap->allGather(recs.data(), sizeof(SetupRecord));
  if (r != ncclSuccess) {
    if (created) {
      munmap(created, b->bytes_);
      shm_unlink(mine.name);
    }
    return r;
  }
  if (!recs[0].ok) return ncclSuccess;  // every rank sees it: none uses a board
  char name[sizeof mine.name];
  std::memcpy(name, recs[0].name, sizeof name);
  name[sizeof name - 1] = '\0';
  void* base = mapBoard(name, created, b->bytes_);
  // Which peers share our address space, and whether we can read the others'.
  b->pids_.assign(size_t(n), 0);
  b->starts_.assign(size_t(n), 0);
  bool cma = true;
  for (int p = 0; p < n; ++p) {
    const SetupRecord& o = recs[size_t(p)];
    if (o.processHash == mine.processHash) continue;
    b->allLocal_ = false;
    b->copyMaxBytes_ = std::min(copyMaxBytes, cmaMaxBytes);
    b->pids_[size_t(p)] = pid_t(o.pid);
    b->starts_[size_t(p)] = o.startTime;
    uint64_t word = 0;
    cma = cma && b->read(p, &word, o.probeAddr, sizeof word) == 0 && word == kProbeWord;
  }
  SetupRecord round2 = mine;
  round2.ok = base != MAP_FAILED;
  round2.cma = cma;
  recs[size_t(me)] = round2;
  r = comm->bootstrap->allGather(recs.data(), sizeof(SetupRecord));
  if (me == 0) shm_unlink(name);  // everyone has mapped it (or given up) by now
  bool allMapped = true, allCma = true;
  for (const SetupRecord& o : recs) {
    allMapped = allMapped && o.ok;
    allCma = allCma && o.cma;
  }
  if (r != ncclSuccess || !allMapped) {
    if (base != MAP_FAILED) unmapBoard(name);
    if (r == ncclSuccess)
      BRAID_INFO(kLogShm, "%s: a rank could not map the flag board; collectives use the FIFOs",
                 comm->who().c_str());
    return r;
  }
  b->base_ = static_cast<char*>(base);
  b->name_ = name;
  b->singleCopy_ = allCma;
  BRAID_INFO(kLogShm, "%s: flag board %s (%zu B; inline %llu B per rank, single copy %s)",
             comm->who().c_str(), name, b->bytes_,
             static_cast<unsigned long long>(b->inlineBytes_),
             allCma ? "up to the copy limit" : "not possible (process_vm_readv refused)");
  *out = std::move(b);
  return ncclSuccess;
}

Board::~Board() {
  if (base_) unmapBoard(name_);
}

bool Board::allReached(uint64_t phase, int* lagging, int* failedRank) const {
  for (int r = 0; r < nranks_; ++r) {
    if (r == rank_) continue;
    const Slot& s = slot(r);
    if (s.phase.load(std::memory_order_acquire) >= phase) continue;
    if (s.failed.load(std::memory_order_relaxed) != 0) *failedRank = r;
    *lagging = r;
    return false;
  }
  return true;
}

void Board::markFailed(ncclResult_t code) {
  slot(rank_).failed.store(uint32_t(code == ncclSuccess ? ncclInternalError : code),
                           std::memory_order_release);
  wakeOthers();
}

bool Board::peerAlive(int r, std::string* why) const {
  const pid_t pid = pids_[size_t(r)];
  if (pid == 0 || processAlive(pid, starts_[size_t(r)])) return true;
  *why = "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") on this host exited";
  return false;
}

int Board::read(int r, void* dst, uint64_t remote, uint64_t n) const {
  if (pids_.empty() || pids_[size_t(r)] == 0) {
    std::memcpy(dst, reinterpret_cast<const void*>(uintptr_t(remote)), size_t(n));
    return 0;
  }
  return readProcessMemory(pids_[size_t(r)], remote, dst, n);
}

int Board::write(int r, uint64_t remote, const void* src, uint64_t n) const {
  if (pids_.empty() || pids_[size_t(r)] == 0) {
    std::memcpy(reinterpret_cast<void*>(uintptr_t(remote)), src, size_t(n));
    return 0;
  }
  return writeProcessMemory(pids_[size_t(r)], remote, src, n);
}

}  // namespace braid
