// Local transport: two ranks in the same process.
//
// The FIFO lives on the heap inside a reference-counted block that both ends hold, so
// either end may be destroyed first. setupRecv parks the block in a process-wide
// registry under a fresh id and puts {pid, id} in the descriptor; connectSend takes it
// out of the registry (a block is attached at most once). The receiver's resource also
// removes it from the registry, in case the sender never came.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <unordered_map>

#include "src/config/error.h"
#include "src/exec/transport.h"

namespace braid {
namespace {

/// Heap memory holding one FIFO, freed when the last end lets go.
class LocalBlock {
 public:
  explicit LocalBlock(size_t bytes) : mem_(std::aligned_alloc(64, roundUp(bytes))) {}
  ~LocalBlock() { std::free(mem_); }
  LocalBlock(const LocalBlock&) = delete;
  LocalBlock& operator=(const LocalBlock&) = delete;
  void* mem() const { return mem_; }

 private:
  static size_t roundUp(size_t b) { return (b + 63) & ~size_t(63); }
  void* mem_;
};

/// Blocks created by setupRecv and not yet attached by a sender, by id.
class LocalRegistry {
 public:
  static LocalRegistry& get() {
    static LocalRegistry* r = new LocalRegistry();  // never destroyed: used at exit
    return *r;
  }
  uint64_t add(std::shared_ptr<LocalBlock> b) {
    std::lock_guard<std::mutex> lk(mu_);
    uint64_t id = ++next_;
    blocks_.emplace(id, std::move(b));
    return id;
  }
  /// Removes and returns the block (nullptr if unknown or already taken).
  std::shared_ptr<LocalBlock> take(uint64_t id) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = blocks_.find(id);
    if (it == blocks_.end()) return nullptr;
    auto b = std::move(it->second);
    blocks_.erase(it);
    return b;
  }
  void drop(uint64_t id) { take(id); }

 private:
  std::mutex mu_;
  uint64_t next_ = 0;
  std::unordered_map<uint64_t, std::shared_ptr<LocalBlock>> blocks_;
};

struct LocalDesc {
  uint64_t magic;
  int64_t pid;
  uint64_t id;
  uint64_t slotBytes;
  uint32_t nslots;
  int32_t rank;
};
static_assert(sizeof(LocalDesc) <= ConnDescriptor::kBytes, "descriptor too large");
constexpr uint64_t kLocalMagic = 0x4c41434f4c444952ull;

/// Holds one end's share of the block.
class LocalResource : public ConnResource {
 public:
  LocalResource(std::shared_ptr<LocalBlock> block, uint64_t registryId)
      : block_(std::move(block)), registryId_(registryId) {}
  ~LocalResource() override {
    if (registryId_) LocalRegistry::get().drop(registryId_);
  }

 private:
  std::shared_ptr<LocalBlock> block_;
  uint64_t registryId_;  ///< receiver side: registry entry to drop if never attached
};

class LocalTransport : public Transport {
 public:
  TransportId id() const override { return TransportId::kLocal; }
  const char* name() const override { return "local"; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return self.processHash == peer.processHash;
  }

  ncclResult_t setupRecv(const ConnectContext& ctx, RecvSide* out,
                         ConnDescriptor* desc) override {
    const FifoGeometry& g = ctx.geometry;
    if (g.nslots == 0 || g.slotBytes == 0)
      return setError(ncclInvalidArgument, nullptr,
                      "local transport: FIFO geometry %u slots x %llu bytes is empty",
                      g.nslots, (unsigned long long)g.slotBytes);
    auto block = std::make_shared<LocalBlock>(FifoLayout::bytesFor(g.nslots, g.slotBytes));
    if (!block->mem())
      return setError(ncclSystemError, nullptr,
                      "local transport: cannot allocate %zu bytes of FIFO for rank %d",
                      FifoLayout::bytesFor(g.nslots, g.slotBytes),
                      ctx.peer ? ctx.peer->rank : -1);
    FifoLayout::init(block->mem(), g.nslots, g.slotBytes);
    out->fifo.attach(block->mem());
    uint64_t id = LocalRegistry::get().add(block);
    out->res = std::make_unique<LocalResource>(std::move(block), id);

    LocalDesc d{};
    d.magic = kLocalMagic;
    d.pid = getpid();
    d.id = id;
    d.slotBytes = g.slotBytes;
    d.nslots = g.nslots;
    d.rank = ctx.self ? ctx.self->rank : -1;
    *desc = ConnDescriptor{};
    desc->transport = uint32_t(TransportId::kLocal);
    std::memcpy(desc->data, &d, sizeof d);
    return ncclSuccess;
  }

  ncclResult_t connectSend(const ConnectContext& ctx, const ConnDescriptor& desc,
                           SendSide* out) override {
    LocalDesc d;
    std::memcpy(&d, desc.data, sizeof d);
    int peer = ctx.peer ? ctx.peer->rank : d.rank;
    if (desc.transport != uint32_t(TransportId::kLocal) || d.magic != kLocalMagic)
      return setError(ncclInternalError, nullptr,
                      "local transport: descriptor from rank %d is not a local one "
                      "(transport id %u)", peer, desc.transport);
    if (d.pid != getpid())
      return setError(ncclInvalidUsage, nullptr,
                      "local transport: rank %d is in process %lld, not this one (%d); "
                      "the local transport only connects ranks of one process",
                      peer, (long long)d.pid, int(getpid()));
    auto block = LocalRegistry::get().take(d.id);
    if (!block)
      return setError(ncclInternalError, nullptr,
                      "local transport: FIFO %llu of rank %d is unknown or already attached",
                      (unsigned long long)d.id, peer);
    out->fifo.attach(block->mem());
    out->allowDirect = true;
    out->res = std::make_unique<LocalResource>(std::move(block), 0);
    return ncclSuccess;
  }
};

}  // namespace

Transport& localTransport() {
  static LocalTransport t;
  return t;
}

}  // namespace braid
