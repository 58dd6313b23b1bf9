// The BraidSwitch collnet: an ncclCollNet_v11_t whose "network" is braid-switch (the
// daemon, src/tools/switch_server/; the two share wire.h): in-network all-reduce,
// all-gather and reduce-scatter of host buffers, done by a software switch that node
// heads reach over TCP.
//
//   devices:  1 when BRAID_SWITCH names a switch (HOST:PORT), else 0.
//   listen:   no socket: the handle carries this process's switch address and a
//             random token (rank 0's token, mixed with the communicator's id, names
//             the group on the switch).
//   connect:  collective and blocking: each member says hello to the switch its own
//             handle names, with the job secret, its rank and the group's layout
//             (which ranks use which switch); returns when the switch answers that
//             the whole group is there, or fails with the switch's reason after
//             BRAID_SWITCH_TIMEOUT_MS. Members naming several switches form a
//             two-level tree through those switches' common parent.
//   data:     SwitchClient (switch_client.h): operations complete in posting order.
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "src/bootstrap/unique_id.h"
#include "src/config/log.h"
#include "src/config/params.h"
#include "src/config/error.h"
#include "src/reduce/reducer.h"
#include "transports/net/builtin_nets.h"
#include "transports/collnet_switch/switch_client.h"
#include "transports/collnet_switch/wire.h"

namespace braid {
namespace {

constexpr uint64_t kHandleMagic = 0x4843544957534442ull;  // "BDSWITCH" in memory
constexpr uint32_t kHandleVersion = 1;

struct SwitchHandle {
  uint64_t magic;
  uint32_t version;
  uint32_t reserved;
  uint64_t token;
  char addr[104];  ///< the switch this member uses, "host:port"
};
static_assert(sizeof(SwitchHandle) <= NCCL_NET_HANDLE_MAXSIZE, "handle too large");

struct Ctx {
  uint64_t commId = 0;
  ncclDebugLogger_t log = nullptr;
  uint64_t secret = 0;
};

struct ListenComm {
  Ctx* ctx = nullptr;
  SwitchHandle handle{};
};

struct CollComm {
  Ctx* ctx = nullptr;
  int rank = 0;
  int nranks = 0;
  std::unique_ptr<SwitchClient> client;
};

/// Logs a failure through the communicator's logger (WARN) and records it as this
/// thread's last error. Returns code.
ncclResult_t report(const Ctx* ctx, ncclResult_t code, const std::string& msg) {
  if (msg.empty()) return code;
  const std::string line = "BraidSwitch collnet: " + msg;
  if (ctx && ctx->log)
    ctx->log(NCCL_LOG_WARN, NCCL_NET | NCCL_COLL, __FILE__, __LINE__, "%s", line.c_str());
  else
    BRAID_WARN("%s", line.c_str());
  return noteError(code, "%s", line.c_str());
}

int hostMarker;  ///< what regMr hands out: host memory needs no registration

ncclResult_t cInit(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction) {
  auto* c = new Ctx();
  c->commId = commId;
  c->log = logFunction;
  *ctx = c;
  return ncclSuccess;
}

ncclResult_t cDevices(int* ndev) {
  *ndev = param::kSwitch.get().empty() ? 0 : 1;
  return ncclSuccess;
}

ncclResult_t cGetProperties(int dev, ncclNetProperties_v11_t* p) {
  const std::string addr = param::kSwitch.get();
  if (dev != 0 || addr.empty())
    return report(nullptr, ncclInvalidArgument,
                  "no device " + std::to_string(dev) + " (BRAID_SWITCH is " +
                      (addr.empty() ? "unset)" : "'" + addr + "')"));
  // Names live as long as the process (one per switch address ever seen).
  static std::mutex mu;
  static std::set<std::string> names;
  const char* name;
  {
    std::lock_guard<std::mutex> lk(mu);
    name = names.insert("braid-switch@" + addr).first->c_str();
  }
  *p = ncclNetProperties_v11_t{};
  p->name = const_cast<char*>(name);
  p->pciPath = nullptr;
  p->guid = 0;
  p->ptrSupport = NCCL_PTR_HOST;
  p->regIsGlobal = 1;
  p->forceFlush = 0;
  p->speed = 10000;
  p->port = 0;
  p->latency = 5;
  p->maxComms = 65536;
  p->maxRecvs = 1;
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->netDeviceVersion = 0;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = 0;
  p->maxP2pBytes = size_t(1) << 30;
  p->maxCollBytes = size_t(1) << 30;  // test() reports sizes as int
  p->maxMultiRequestSize = 1;
  return ncclSuccess;
}

ncclResult_t cListen(void* ctx, int dev, void* handle, void** listenComm) {
  auto* c = static_cast<Ctx*>(ctx);
  const std::string addr = param::kSwitch.get();
  if (dev != 0 || addr.empty())
    return report(c, ncclInvalidUsage, "listen on device " + std::to_string(dev) +
                                           ": BRAID_SWITCH names no switch");
  auto* l = new ListenComm();
  l->ctx = c;
  l->handle.magic = kHandleMagic;
  l->handle.version = kHandleVersion;
  while (l->handle.token == 0) l->handle.token = bootstrapRandomSecret();
  if (addr.size() >= sizeof l->handle.addr) {
    delete l;
    return report(c, ncclInvalidArgument, "BRAID_SWITCH '" + addr + "' is too long");
  }
  std::snprintf(l->handle.addr, sizeof l->handle.addr, "%s", addr.c_str());
  std::memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
  std::memcpy(handle, &l->handle, sizeof l->handle);
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t cConnect(void* handles[], int nranks, int rank, void* listenComm, void** collComm) {
  *collComm = nullptr;
  auto* l = static_cast<ListenComm*>(listenComm);
  Ctx* ctx = l ? l->ctx : nullptr;
  if (!l || !handles || nranks < 1 || rank < 0 || rank >= nranks ||
      uint32_t(nranks) > wire::kMaxRanks)
    return report(ctx, ncclInvalidArgument,
                  "connect: bad arguments (rank " + std::to_string(rank) + " of " +
                      std::to_string(nranks) + ")");
  // The layout: switches numbered in order of their lowest rank.
  Hello hello;
  hello.leafOf.resize(size_t(nranks));
  std::vector<std::string> switches;
  std::string mine;
  uint64_t token0 = 0;
  for (int r = 0; r < nranks; ++r) {
    SwitchHandle h;
    if (!handles[r])
      return report(ctx, ncclInvalidArgument, "connect: handle of rank " + std::to_string(r) + " is NULL");
    std::memcpy(&h, handles[r], sizeof h);
    h.addr[sizeof h.addr - 1] = '\0';
    if (h.magic != kHandleMagic || h.version != kHandleVersion)
      return report(ctx, ncclInvalidArgument,
                    "connect: the handle of rank " + std::to_string(r) + " is not a BraidSwitch handle");
    if (r == 0) token0 = h.token;
    if (r == rank) mine = h.addr;
    size_t k = 0;
    while (k < switches.size() && switches[k] != h.addr) ++k;
    if (k == switches.size()) switches.push_back(h.addr);
    hello.leafOf[size_t(r)] = uint16_t(k);
  }
  if (switches.size() > 65535)
    return report(ctx, ncclInvalidArgument, "connect: too many switches");
  hello.msg.magic = wire::kMagic;
  hello.msg.version = wire::kVersion;
  hello.msg.flags = 0;
  hello.msg.groupId = mixGroupId(token0, ctx->commId);
  hello.msg.secret = ctx->secret;
  hello.msg.nranks = uint32_t(nranks);
  hello.msg.rank = uint32_t(rank);
  hello.msg.nleaves = uint32_t(switches.size());
  const int timeoutMs = int(std::max<int64_t>(1, param::kSwitchTimeoutMs.get()));
  std::unique_ptr<SwitchClient> client;
  std::string why;
  ncclResult_t r = SwitchClient::connect(mine, hello, timeoutMs, &client, &why);
  if (r != ncclSuccess)
    return report(ctx, r, "rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                              ": " + why);
  auto* cc = new CollComm();
  cc->ctx = ctx;
  cc->rank = rank;
  cc->nranks = nranks;
  cc->client = std::move(client);
  cc->client->user = cc;
  *collComm = cc;
  return ncclSuccess;
}

bool supported(ncclDataType_t type, ncclRedOp_t op) {
  const bool typeOk = static_cast<int>(type) >= 0 && static_cast<int>(type) < ncclNumTypes;
  return typeOk && (op == ncclSum || op == ncclProd || op == ncclMax || op == ncclMin);
}

ncclResult_t cReduceSupport(ncclDataType_t type, ncclRedOp_t op, int* ok) {
  *ok = supported(type, op) ? 1 : 0;
  return ncclSuccess;
}

ncclResult_t cRegMr(void* collComm, void* data, size_t size, int type, void** mhandle) {
  auto* cc = static_cast<CollComm*>(collComm);
  if (type != NCCL_PTR_HOST)
    return report(cc ? cc->ctx : nullptr, ncclInvalidUsage,
                  "regMr: only host memory can be used (type " + std::to_string(type) + ")");
  *mhandle = &hostMarker;
  return ncclSuccess;
}

ncclResult_t cRegMrDmaBuf(void* collComm, void*, size_t, int, uint64_t, int, void**) {
  auto* cc = static_cast<CollComm*>(collComm);
  return report(cc ? cc->ctx : nullptr, ncclInternalError,
                "regMrDmaBuf: dma-buf registration is not supported (host memory only)");
}

ncclResult_t cDeregMr(void*, void*) { return ncclSuccess; }

ncclResult_t post(CollComm* cc, const wire::OpDesc& d, const std::vector<iovec>& in,
                  uint64_t inLen, const std::vector<iovec>& out, uint64_t outLen,
                  void** request) {
  SwitchRequest* q = nullptr;
  std::string why;
  ncclResult_t r = cc->client->post(d, in, inLen, out, outLen, &q, &why);
  *request = q;
  if (r != ncclSuccess) return report(cc->ctx, r, "rank " + std::to_string(cc->rank) + ": " + why);
  return ncclSuccess;
}

ncclResult_t checkWindow(CollComm* cc, const wire::OpDesc& d, const char* what) {
  std::string why;
  if (!OpShape::validate(d, uint32_t(cc->nranks), &why))
    return report(cc->ctx, ncclInvalidArgument, std::string(what) + ": " + why);
  return ncclSuccess;
}

ncclResult_t cIallreduce(void* collComm, void* send, void* recv, size_t count,
                         ncclDataType_t type, ncclRedOp_t op, void*, void*, void** request) {
  auto* cc = static_cast<CollComm*>(collComm);
  *request = nullptr;
  if (!supported(type, op))
    return report(cc->ctx, ncclInvalidArgument,
                  "iallreduce: datatype " + std::to_string(int(type)) + " / op " +
                      std::to_string(int(op)) + " is not reduced by the switch");
  wire::OpDesc d{};
  d.coll = wire::kAllReduce;
  d.dtype = uint32_t(type);
  d.redop = uint32_t(op);
  d.count = count;
  BRAID_CHECK(checkWindow(cc, d, "iallreduce"));
  const uint64_t bytes = uint64_t(count) * dataTypeSize(type);
  std::vector<iovec> in, out;
  if (bytes) {
    in.push_back({send, size_t(bytes)});
    out.push_back({recv, size_t(bytes)});
  }
  return post(cc, d, in, bytes, out, bytes, request);
}

/// SGE list -> iovecs (empty parts dropped); false if the sizes do not add up.
bool partsToIov(int n, const ncclNetSGE_v11_t* parts, uint64_t expect, std::vector<iovec>* v) {
  uint64_t sum = 0;
  for (int i = 0; i < n; ++i) {
    sum += parts[i].size;
    if (parts[i].size) v->push_back({parts[i].address, parts[i].size});
  }
  return sum == expect;
}

ncclResult_t cIallgather(void* collComm, void* send, int nRecvParts, ncclNetSGE_v11_t* recvParts,
                         size_t bytesPerRank, size_t windowOffset, size_t windowBytes, void*,
                         void** request) {
  auto* cc = static_cast<CollComm*>(collComm);
  *request = nullptr;
  wire::OpDesc d{};
  d.coll = wire::kAllGather;
  d.bytesPerRank = bytesPerRank;
  d.windowOffset = windowOffset;
  d.windowBytes = windowBytes;
  BRAID_CHECK(checkWindow(cc, d, "iallgather"));
  std::vector<iovec> in, out;
  if (nRecvParts < 0 || (nRecvParts > 0 && !recvParts) ||
      !partsToIov(nRecvParts, recvParts, windowBytes, &out))
    return report(cc->ctx, ncclInvalidArgument,
                  "iallgather: the receive parts do not add up to the window's " +
                      std::to_string(windowBytes) + " bytes");
  const Span mine = OpShape(d, uint32_t(cc->nranks)).input(uint32_t(cc->rank));
  if (mine.len) in.push_back({static_cast<char*>(send) + mine.off, size_t(mine.len)});
  return post(cc, d, in, mine.len, out, windowBytes, request);
}

ncclResult_t cIreducescatter(void* collComm, int nSendParts, ncclNetSGE_v11_t* sendParts,
                             void* recv, size_t bytesPerRank, size_t windowOffset,
                             size_t windowBytes, ncclDataType_t type, ncclRedOp_t op, void*,
                             void** request) {
  auto* cc = static_cast<CollComm*>(collComm);
  *request = nullptr;
  if (!supported(type, op))
    return report(cc->ctx, ncclInvalidArgument,
                  "ireducescatter: datatype " + std::to_string(int(type)) + " / op " +
                      std::to_string(int(op)) + " is not reduced by the switch");
  wire::OpDesc d{};
  d.coll = wire::kReduceScatter;
  d.dtype = uint32_t(type);
  d.redop = uint32_t(op);
  d.bytesPerRank = bytesPerRank;
  d.windowOffset = windowOffset;
  d.windowBytes = windowBytes;
  BRAID_CHECK(checkWindow(cc, d, "ireducescatter"));
  std::vector<iovec> in, out;
  if (nSendParts < 0 || (nSendParts > 0 && !sendParts) ||
      !partsToIov(nSendParts, sendParts, windowBytes, &in))
    return report(cc->ctx, ncclInvalidArgument,
                  "ireducescatter: the send parts do not add up to the window's " +
                      std::to_string(windowBytes) + " bytes");
  const Span part = OpShape(d, uint32_t(cc->nranks)).output(uint32_t(cc->rank));
  if (part.len) {
    // Window-relative -> relative to this member's block.
    const uint64_t at = part.off + windowOffset - uint64_t(cc->rank) * bytesPerRank;
    out.push_back({static_cast<char*>(recv) + at, size_t(part.len)});
  }
  return post(cc, d, in, windowBytes, out, part.len, request);
}

SwitchRequest flushDone;  ///< iflush's request: host memory needs no flush

ncclResult_t cIflush(void*, void*, int, void*, void** request) {
  *request = &flushDone;
  return ncclSuccess;
}

ncclResult_t cTest(void* request, int* done, int* size) {
  if (request == &flushDone) {
    *done = 1;
    if (size) *size = 0;
    return ncclSuccess;
  }
  auto* q = static_cast<SwitchRequest*>(request);
  if (!q || !q->owner) return report(nullptr, ncclInvalidArgument, "test: not a request");
  SwitchClient* client = q->owner;
  std::string why;
  ncclResult_t r = client->test(q, done, size, &why);
  if (r != ncclSuccess) {
    auto* cc = static_cast<CollComm*>(client->user);
    return report(cc ? cc->ctx : nullptr, r,
                  why.empty() ? std::string() : "rank " + std::to_string(cc ? cc->rank : -1) + ": " + why);
  }
  return ncclSuccess;
}

ncclResult_t cCloseColl(void* collComm) {
  auto* cc = static_cast<CollComm*>(collComm);
  if (!cc) return ncclSuccess;
  cc->client->close();
  delete cc;
  return ncclSuccess;
}

ncclResult_t cCloseListen(void* listenComm) {
  delete static_cast<ListenComm*>(listenComm);
  return ncclSuccess;
}

ncclResult_t cMakeVDevice(int*, ncclNetVDeviceProps_v11_t*) {
  return report(nullptr, ncclInvalidUsage, "makeVDevice: the switch has no virtual devices");
}

ncclResult_t cFinalize(void* ctx) {
  delete static_cast<Ctx*>(ctx);
  return ncclSuccess;
}

ncclCollNet_v11_t makeTable() {
  ncclCollNet_v11_t t{};
  t.name = "BraidSwitch";
  t.init = cInit;
  t.devices = cDevices;
  t.getProperties = cGetProperties;
  t.listen = cListen;
  t.connect = cConnect;
  t.reduceSupport = cReduceSupport;
  t.regMr = cRegMr;
  t.regMrDmaBuf = cRegMrDmaBuf;
  t.deregMr = cDeregMr;
  t.iallreduce = cIallreduce;
  t.iallgather = cIallgather;
  t.ireducescatter = cIreducescatter;
  t.iflush = cIflush;
  t.test = cTest;
  t.closeColl = cCloseColl;
  t.closeListen = cCloseListen;
  t.makeVDevice = cMakeVDevice;
  t.finalize = cFinalize;
  return t;
}

}  // namespace

const ncclCollNet_v11_t* switchCollNet() {
  static const ncclCollNet_v11_t table = makeTable();
  return &table;
}

void switchCollNetSetJobSecret(void* ctx, uint64_t secret) {
  if (ctx) static_cast<Ctx*>(ctx)->secret = secret;
}

}  // namespace braid
