#include "transports/collnet/local_collnet.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <vector>

#include "src/reduce/reducer.h"

namespace braid {
namespace {

constexpr uint64_t kMagic = 0x4c4f43414c434f4cull;  // "LOCALCOL"

struct Handle {
  uint64_t magic;
  uint64_t token;
};

enum class Kind { kAllReduce, kAllGather, kReduceScatter };

struct Op {
  Kind kind;
  const char* send = nullptr;        // allreduce, allgather
  char* recv = nullptr;              // allreduce, reducescatter
  std::vector<ncclNetSGE_v11_t> parts;  // allgather: recvParts; reducescatter: sendParts
  size_t count = 0;                  // allreduce: elements
  size_t bytesPerRank = 0;
  size_t windowOffset = 0, windowBytes = 0;
  ncclDataType_t type = ncclInt8;
  ncclRedOp_t redop = ncclSum;
  bool done = false;
  ncclResult_t result = ncclSuccess;
  int size = 0;
};

struct Group {
  explicit Group(int n) : members(size_t(n)) {}
  std::mutex mu;
  std::vector<std::map<uint64_t, Op>> members;  // per member: seq -> op not yet collected
  int closed = 0;
};

struct Comm {
  std::shared_ptr<Group> group;
  int rank = 0;
  int nranks = 1;
  uint64_t posted = 0;
};

struct Request {
  Comm* comm;
  uint64_t seq;
};

std::mutex registryMu;
std::map<uint64_t, std::weak_ptr<Group>>& registry() {
  static auto* m = new std::map<uint64_t, std::weak_ptr<Group>>;
  return *m;
}

// Copies bytes [from, from+n) of a scatter list into dst.
void gatherParts(const std::vector<ncclNetSGE_v11_t>& parts, size_t from, size_t n, char* dst) {
  size_t at = 0;
  for (const ncclNetSGE_v11_t& p : parts) {
    if (n == 0) return;
    if (from < at + p.size) {
      const size_t off = from - at, m = std::min(n, p.size - off);
      std::memcpy(dst, static_cast<char*>(p.address) + off, m);
      dst += m;
      from += m;
      n -= m;
    }
    at += p.size;
  }
}
// Copies src into bytes [from, from+n) of a scatter list.
void scatterParts(const std::vector<ncclNetSGE_v11_t>& parts, size_t from, size_t n,
                  const char* src) {
  size_t at = 0;
  for (const ncclNetSGE_v11_t& p : parts) {
    if (n == 0) return;
    if (from < at + p.size) {
      const size_t off = from - at, m = std::min(n, p.size - off);
      std::memcpy(static_cast<char*>(p.address) + off, src, m);
      src += m;
      from += m;
      n -= m;
    }
    at += p.size;
  }
}

bool sameShape(const Op& a, const Op& b) {
  return a.kind == b.kind && a.count == b.count && a.bytesPerRank == b.bytesPerRank &&
         a.windowOffset == b.windowOffset && a.windowBytes == b.windowBytes &&
         a.type == b.type && a.redop == b.redop;
}

// Computes one operation for all members (ops[i]: member i's). Under the group's mutex.
void compute(const std::vector<Op*>& ops) {
  const int n = int(ops.size());
  for (Op* o : ops)
    if (!sameShape(*o, *ops[0])) {
      for (Op* x : ops) {
        x->done = true;
        x->result = ncclInvalidUsage;
      }
      return;
    }
  const Op& o0 = *ops[0];
  const Reducer red(o0.type, o0.redop == ncclAvg ? ncclSum : o0.redop, n);
  const size_t ts = red.typeSize();
  std::vector<char> acc;
  auto reduceOver = [&](auto inputOf, size_t bytes) {
    acc.assign(bytes, 0);
    if (bytes == 0) return;
    std::memcpy(acc.data(), inputOf(0), bytes);
    for (int i = 1; i < n; ++i) red.reduce(acc.data(), acc.data(), inputOf(i), bytes / ts, 0);
  };
  switch (o0.kind) {
    case Kind::kAllReduce: {
      const size_t bytes = o0.count * ts;
      reduceOver([&](int i) { return ops[size_t(i)]->send; }, bytes);
      for (Op* o : ops) {
        if (bytes) std::memcpy(o->recv, acc.data(), bytes);
        o->size = int(bytes);
      }
      break;
    }
    case Kind::kAllGather: {
      for (Op* o : ops) {
        size_t g0 = o0.windowOffset, left = o0.windowBytes, out = 0;
        while (left > 0) {
          const size_t member = g0 / o0.bytesPerRank, off = g0 % o0.bytesPerRank;
          const size_t m = std::min(left, o0.bytesPerRank - off);
          scatterParts(o->parts, out, m, ops[member]->send + off);
          g0 += m;
          out += m;
          left -= m;
        }
        o->size = int(o0.windowBytes);
      }
      break;
    }
    case Kind::kReduceScatter: {
      std::vector<std::vector<char>> inputs(ops.size());
      for (int i = 0; i < n; ++i) {
        inputs[size_t(i)].resize(o0.windowBytes);
        gatherParts(ops[size_t(i)]->parts, 0, o0.windowBytes, inputs[size_t(i)].data());
      }
      reduceOver([&](int i) { return inputs[size_t(i)].data(); }, o0.windowBytes);
      for (int i = 0; i < n; ++i) {
        Op* o = ops[size_t(i)];
        const size_t blockLo = size_t(i) * o0.bytesPerRank, blockHi = blockLo + o0.bytesPerRank;
        const size_t lo = std::max(blockLo, o0.windowOffset);
        const size_t hi = std::min(blockHi, o0.windowOffset + o0.windowBytes);
        o->size = 0;
        if (lo < hi) {
          std::memcpy(o->recv + (lo - blockLo), acc.data() + (lo - o0.windowOffset), hi - lo);
          o->size = int(hi - lo);
        }
      }
      break;
    }
  }
  for (Op* o : ops) o->done = true;
}

ncclResult_t post(void* collComm, Op op, void** request) {
  auto* c = static_cast<Comm*>(collComm);
  Group& g = *c->group;
  std::lock_guard<std::mutex> lk(g.mu);
  g.members[size_t(c->rank)].emplace(c->posted, std::move(op));
  *request = new Request{c, c->posted++};
  return ncclSuccess;
}

ncclResult_t lcInit(void** ctx, uint64_t, ncclDebugLogger_t) {
  *ctx = nullptr;
  return ncclSuccess;
}
ncclResult_t lcDevices(int* ndev) {
  *ndev = 1;
  return ncclSuccess;
}
ncclResult_t lcGetProperties(int dev, ncclNetProperties_v11_t* props) {
  if (dev != 0) return ncclInvalidArgument;
  std::memset(props, 0, sizeof(*props));
  static char name[] = "local";
  props->name = name;
  props->ptrSupport = NCCL_PTR_HOST;
  props->speed = 100000;
  props->latency = 0;
  props->maxComms = 1 << 20;
  props->maxRecvs = 1;
  props->maxP2pBytes = size_t(1) << 40;
  props->maxCollBytes = size_t(1) << 40;
  return ncclSuccess;
}
ncclResult_t lcListen(void*, int, void* handle, void** listenComm) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  Handle h{kMagic, salt ^ (++counter * 0x9E3779B97F4A7C15ull)};
  std::memcpy(handle, &h, sizeof h);
  *listenComm = new int(0);
  return ncclSuccess;
}
ncclResult_t lcConnect(void* handles[], int nranks, int rank, void*, void** collComm) {
  Handle h;
  std::memcpy(&h, handles[0], sizeof h);
  if (h.magic != kMagic || nranks < 1 || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  std::shared_ptr<Group> g;
  {
    std::lock_guard<std::mutex> lk(registryMu);
    auto& slot = registry()[h.token];
    g = slot.lock();
    if (!g) {
      g = std::make_shared<Group>(nranks);
      slot = g;
    }
  }
  if (int(g->members.size()) != nranks) return ncclInvalidUsage;
  *collComm = new Comm{g, rank, nranks, 0};
  return ncclSuccess;
}
ncclResult_t lcReduceSupport(ncclDataType_t type, ncclRedOp_t op, int* supported) {
  *supported = dataTypeSize(type) != 0 && (op == ncclSum || op == ncclProd || op == ncclMax ||
                                           op == ncclMin);
  return ncclSuccess;
}
ncclResult_t lcRegMr(void*, void*, size_t, int type, void** mhandle) {
  if (type != NCCL_PTR_HOST) return ncclInvalidArgument;
  *mhandle = nullptr;
  return ncclSuccess;
}
ncclResult_t lcRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return ncclInvalidUsage;
}
ncclResult_t lcDeregMr(void*, void*) { return ncclSuccess; }
ncclResult_t lcIallreduce(void* collComm, void* send, void* recv, size_t count,
                          ncclDataType_t type, ncclRedOp_t op, void*, void*, void** request) {
  Op o;
  o.kind = Kind::kAllReduce;
  o.send = static_cast<const char*>(send);
  o.recv = static_cast<char*>(recv);
  o.count = count;
  o.type = type;
  o.redop = op;
  return post(collComm, std::move(o), request);
}
ncclResult_t lcIallgather(void* collComm, void* send, int nParts, ncclNetSGE_v11_t* parts,
                          size_t bytesPerRank, size_t windowOffset, size_t windowBytes, void*,
                          void** request) {
  Op o;
  o.kind = Kind::kAllGather;
  o.send = static_cast<const char*>(send);
  o.parts.assign(parts, parts + nParts);
  o.bytesPerRank = bytesPerRank;
  o.windowOffset = windowOffset;
  o.windowBytes = windowBytes;
  if (bytesPerRank == 0 && windowBytes) return ncclInvalidArgument;
  return post(collComm, std::move(o), request);
}
ncclResult_t lcIreducescatter(void* collComm, int nParts, ncclNetSGE_v11_t* parts, void* recv,
                              size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                              ncclDataType_t type, ncclRedOp_t op, void*, void** request) {
  Op o;
  o.kind = Kind::kReduceScatter;
  o.parts.assign(parts, parts + nParts);
  o.recv = static_cast<char*>(recv);
  o.bytesPerRank = bytesPerRank;
  o.windowOffset = windowOffset;
  o.windowBytes = windowBytes;
  o.type = type;
  o.redop = op;
  return post(collComm, std::move(o), request);
}
ncclResult_t lcIflush(void*, void*, int, void*, void** request) {
  *request = nullptr;  // nothing to flush in host memory: reported done at once
  return ncclSuccess;
}
ncclResult_t lcTest(void* request, int* done, int* size) {
  if (!request) {
    *done = 1;
    if (size) *size = 0;
    return ncclSuccess;
  }
  auto* req = static_cast<Request*>(request);
  Group& g = *req->comm->group;
  std::lock_guard<std::mutex> lk(g.mu);
  auto& mineMap = g.members[size_t(req->comm->rank)];
  Op& mine = mineMap.at(req->seq);
  if (!mine.done) {
    std::vector<Op*> ops;
    for (auto& m : g.members) {
      auto it = m.find(req->seq);
      if (it == m.end()) break;
      ops.push_back(&it->second);
    }
    if (ops.size() != g.members.size()) {
      *done = 0;
      // A member closed before posting this one: it never will.
      return g.closed ? ncclRemoteError : ncclSuccess;
    }
    compute(ops);
  }
  *done = 1;
  if (size) *size = mine.size;
  const ncclResult_t result = mine.result;
  mineMap.erase(req->seq);
  delete req;
  return result;
}
ncclResult_t lcCloseColl(void* collComm) {
  auto* c = static_cast<Comm*>(collComm);
  {
    std::lock_guard<std::mutex> lk(c->group->mu);
    ++c->group->closed;
  }
  delete c;
  return ncclSuccess;
}
ncclResult_t lcCloseListen(void* listenComm) {
  delete static_cast<int*>(listenComm);
  return ncclSuccess;
}
ncclResult_t lcMakeVDevice(int*, ncclNetVDeviceProps_v11_t*) { return ncclInvalidUsage; }
ncclResult_t lcFinalize(void*) { return ncclSuccess; }

const ncclCollNet_v11_t kLocal = {
    "Local",        lcInit,          lcDevices,        lcGetProperties, lcListen,
    lcConnect,      lcReduceSupport, lcRegMr,          lcRegMrDmaBuf,   lcDeregMr,
    lcIallreduce,   lcIallgather,    lcIreducescatter, lcIflush,        lcTest,
    lcCloseColl,    lcCloseListen,   lcMakeVDevice,    lcFinalize,
};

}  // namespace

const ncclCollNet_v11_t* localCollNet() { return &kLocal; }

}  // namespace braid
