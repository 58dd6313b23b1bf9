// Communicator creation: ncclGetUniqueId, ncclCommInitRank[Config|Scalable],
// ncclCommInitAll, ncclCommSplit, ncclCommShrink.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "src/config/params.h"
#include "src/core/comm.h"
#include "src/os/cuda_rt.h"
#include "src/diag/flight_recorder.h"
#include "src/exec/board.h"
#include "src/config/error.h"
#include "src/core/group.h"
#include "src/core/init.h"
#include "src/core/machine.h"
#include "src/os/process.h"
#include "transports/collnet/collnet_state.h"

namespace braid {
namespace {

constexpr uint32_t kTagSplit = 0x20000;

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

/// The physical machine: hostname and boot id (NCCL_HOSTID does not change it).
uint64_t machineHash() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  const std::string id = std::string(host) + ":" + boot;
  return fnv1a(id.data(), id.size());
}

uint64_t hostHash() {
  const std::string id = param::kHostId.get();
  return id.empty() ? machineHash() : fnv1a(id.data(), id.size());
}

/// Unique per process, also in a child forked after the parent made a communicator
/// (the pid is mixed in at each call, so such a child never passes for its parent).
uint64_t processToken() {
  static const uint64_t seed = [] {
    std::random_device rd;
    return (uint64_t(rd()) << 32) ^ rd();
  }();
  return seed ^ uint64_t(getpid());
}

/// What every rank must agree on (checked at init).
struct InitRecord {
  PeerInfo info;
  uint64_t fifoCapacity;
  uint32_t fifoSlots;
  uint64_t smallMsgBytes;
  int32_t nChannels;
  int32_t maxChannels;
  int32_t deviceChannels;
  int32_t deviceDirect;  ///< BRAID_DEVICE_DIRECT on this rank (rank 0's applies)
  uint64_t specHash;   ///< NCCL_ALGO and NCCL_PROTO (every rank must choose alike)
  int32_t modelError;  ///< this rank's BRAID_TUNER_MODEL could not be read
  int32_t collnetEnable;  ///< NCCL_COLLNET_ENABLE on this rank
  int32_t check;          ///< param::checkLevel() on this rank (rank 0's applies)
  int64_t boardInline;    ///< flag board inline bytes (rank 0's applies; -1: no board)
  int64_t boardCopyMax;   ///< ... and single-copy limit
  int64_t boardCmaMax;    ///< ... between processes
  CostModel model;
};

/// NCCL_ALGO/NCCL_PROTO as the tuner reads them: case and spaces do not matter.
uint64_t specHash(const CommSettings& s) {
  std::string t = s.algoSpec + "|" + s.protoSpec;
  t.erase(std::remove(t.begin(), t.end(), ' '), t.end());
  std::transform(t.begin(), t.end(), t.begin(), ::tolower);
  return fnv1a(t.data(), t.size());
}

CommSettings readSettings(const ncclConfig_t& cfg) {
  CommSettings s;
  s.blocking = cfg.blocking == NCCL_CONFIG_UNDEF_INT ? true : cfg.blocking != 0;
  int64_t slots = std::max<int64_t>(2, std::min<int64_t>(param::kFifoSlots.get(), 1024));
  int64_t buff = std::max<int64_t>(param::kBuffSize.get(), slots * 64);
  s.geometry.nslots = uint32_t(slots);
  s.geometry.slotBytes = uint64_t(buff / slots) & ~uint64_t(63);  // whole elements of any type
  int64_t minCh = param::kMinNChannels.get(), maxCh = param::kMaxNChannels.get();
  if (cfg.minCTAs != NCCL_CONFIG_UNDEF_INT) minCh = cfg.minCTAs;
  if (cfg.maxCTAs != NCCL_CONFIG_UNDEF_INT) maxCh = cfg.maxCTAs;
  s.nChannels = int(std::max<int64_t>(1, std::min<int64_t>(std::max(minCh, int64_t(1)),
                                                          std::max<int64_t>(maxCh, 1))));
  s.nChannels = std::min(s.nChannels, 32);
  s.maxChannels = int(std::max<int64_t>(s.nChannels, std::min<int64_t>(maxCh, 32)));
  s.deviceChannels = int(std::max<int64_t>(1, std::min<int64_t>(param::kDeviceNChannels.get(), 32)));
  s.timeoutMs = int(param::kTimeoutMs.get());
  s.bootstrapTimeoutMs = int(param::kBootstrapTimeoutMs.get());
  s.peerCheckMs = int(std::max<int64_t>(1, param::kPeerCheckMs.get()));
  s.spinUs = int(std::max<int64_t>(0, param::kSpinUs.get()));
  s.sleepMode = int(std::min<int64_t>(2, std::max<int64_t>(0, param::kSleep.get())));
  s.smallMsgBytes = uint64_t(std::max<int64_t>(0, param::kSmallMsgBytes.get()));
  s.cmaMinBytes = uint64_t(std::max<int64_t>(1, param::kCmaMinBytes.get()));
  s.streamStores = param::kStreamStores.get();
  const int64_t outBytes = param::kStreamOutputBytes.get();
  s.streamOutputBytes = outBytes <= 0 ? UINT64_MAX : uint64_t(outBytes);
  s.forcedTransport = param::kTransport.get();
  std::transform(s.forcedTransport.begin(), s.forcedTransport.end(), s.forcedTransport.begin(),
                 ::tolower);
  if (s.forcedTransport == "auto") s.forcedTransport.clear();
  s.netName = cfg.netName && cfg.netName != NCCL_CONFIG_UNDEF_PTR ? std::string(cfg.netName)
                                                                 : param::kNet.get();
  // BRAID_TRANSPORT=socket: the net transport over sockets unless a net is named.
  if (s.netName.empty() && s.forcedTransport == "socket") s.netName = "Socket";
  s.algoSpec = param::kAlgo.get();
  s.protoSpec = param::kProto.get();
  s.shmDisable = param::kShmDisable.get();
  s.p2pDisable = param::kP2pDisable.get();
  if (cfg.commName) s.commName = cfg.commName;
  return s;
}

ncclResult_t readConfig(const ncclConfig_t* user, ncclConfig_t* out, const char* call) {
  ncclConfig_t def = NCCL_CONFIG_INITIALIZER;
  *out = def;
  if (user == nullptr) return ncclSuccess;
  if (user->magic != def.magic || user->size < offsetof(ncclConfig_t, cgaClusterSize))
    return setError(ncclInvalidArgument, nullptr,
                    "%s: config was not initialised with NCCL_CONFIG_INITIALIZER (magic 0x%x, "
                    "size %zu)",
                    call, user->magic, user->size);
  memcpy(out, user, std::min(user->size, sizeof(ncclConfig_t)));
  if (out->blocking != NCCL_CONFIG_UNDEF_INT && out->blocking != 0 && out->blocking != 1)
    return setError(ncclInvalidArgument, nullptr, "%s: config->blocking must be 0 or 1, not %d",
                    call, out->blocking);
  // The 2.30 fields (NCCL_CONFIG_UNDEF_INT: the default), with NCCL 2.30's ranges. A
  // 2.28 config (smaller size) leaves them at the initializer's values.
  if (out->graphUsageMode != NCCL_CONFIG_UNDEF_INT &&
      (out->graphUsageMode < 0 || out->graphUsageMode > 2))
    return setError(ncclInvalidArgument, nullptr, "%s: config->graphUsageMode must be 0, 1 or "
                    "2, not %d", call, out->graphUsageMode);
  if (out->numRmaCtx != NCCL_CONFIG_UNDEF_INT && out->numRmaCtx < 0)
    return setError(ncclInvalidArgument, nullptr, "%s: config->numRmaCtx must be >= 0, not %d",
                    call, out->numRmaCtx);
  if (out->maxP2pPeers != NCCL_CONFIG_UNDEF_INT && out->maxP2pPeers <= 0)
    return setError(ncclInvalidArgument, nullptr, "%s: config->maxP2pPeers must be >= 1, not "
                    "%d", call, out->maxP2pPeers);
  if (out->graphStreamOrdering != NCCL_CONFIG_UNDEF_INT && out->graphStreamOrdering != 0 &&
      out->graphStreamOrdering != 1)
    return setError(ncclInvalidArgument, nullptr, "%s: config->graphStreamOrdering must be 0 "
                    "or 1, not %d", call, out->graphStreamOrdering);
  return ncclSuccess;
}

const char* transportEnvMismatch(const CommSettings& s) {
  const std::string& f = s.forcedTransport;
  if (!f.empty() && f != "local" && f != "shm" && !s.forcedNet()) return f.c_str();
  return nullptr;
}

/// The body of every initialisation; sets comm->asyncError when it finishes.
ncclResult_t commInit(Comm* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t cfg,
                      int cudaDev) {
  auto finish = [comm](ncclResult_t r) {
    comm->asyncError.store(r);
    return r;
  };
  logSetThreadRank(rank);
  static std::once_flag banner;
  std::call_once(banner, [] {
    logMessage(LogLevel::kVersion, kLogInit, __FILE__, __LINE__,
               "Braid %s (NCCL API %d.%d.%d), host executor%s, transports local/shm/socket%s",
               BRAID_VERSION_STRING, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
               cudart::available() ? " + CUDA executor" : "",
               cudart::available() ? "/p2p" : "");
  });
  comm->rank = rank;
  comm->nranks = nranks;
  comm->cudaDev = cudaDev;
  // Nonblocking init runs on its own thread: make the communicator's device current.
  if (cudaDev >= 0 && cudart::available()) (void)cudart::setDevice(cudaDev);
  comm->settings = readSettings(cfg);
  if (const char* bad = transportEnvMismatch(comm->settings))
    return finish(setError(ncclInvalidArgument, comm,
                           "BRAID_TRANSPORT='%s' is not one of auto, local, shm, net, socket", bad));
  BootstrapOptions opts;
  opts.timeoutMs = comm->settings.bootstrapTimeoutMs;
  opts.abortFlag = &comm->abortFlag;
  ncclResult_t r = Bootstrap::create(id, rank, nranks, opts, &comm->bootstrap);
  if (r != ncclSuccess) return finish(r);

  std::vector<InitRecord> all(static_cast<size_t>(nranks));
  InitRecord& me = all[size_t(rank)];
  me.info.rank = rank;
  me.info.pid = getpid();
  me.info.hostHash = hostHash();
  me.info.machineHash = machineHash();
  me.info.processHash = me.info.hostHash ^ processToken();
  me.info.pidNamespace = pidNamespace();
  me.info.cudaDev = cudaDev;
  if (cudaDev >= 0 && cudart::available())
    snprintf(me.info.busId, sizeof(me.info.busId), "%s", cudart::deviceBusId(cudaDev).c_str());
  gethostname(me.info.hostname, sizeof(me.info.hostname) - 1);
  snprintf(me.info.netAddr, sizeof(me.info.netAddr), "%s", comm->bootstrap->localIp());
  me.fifoCapacity = comm->settings.geometry.capacity();
  me.fifoSlots = comm->settings.geometry.nslots;
  me.nChannels = comm->settings.nChannels;
  me.maxChannels = comm->settings.maxChannels;
  me.deviceChannels = comm->settings.deviceChannels;
  me.deviceDirect = param::kDeviceDirect.get() ? 1 : 0;
  me.smallMsgBytes = comm->settings.smallMsgBytes;
  me.specHash = specHash(comm->settings);
  me.collnetEnable = param::kCollNetEnable.get();
  me.check = param::checkLevel();
  // The flag board: with BRAID_BOARD on (and shared memory allowed). Where NCCL_ALGO,
  // NCCL_PROTO or BRAID_TRANSPORT choose the data's way, it moves no data (inline and
  // copy limits 0) but still compares every collective's call (board.h).
  const bool boardWanted = param::kBoard.get() && !comm->settings.shmDisable;
  const bool boardData = comm->settings.algoSpec.empty() && comm->settings.protoSpec.empty() &&
                         comm->settings.forcedTransport.empty();
  me.boardInline =
      !boardWanted ? -1 : boardData ? std::max<int64_t>(0, param::kBoardInlineBytes.get()) : 0;
  me.boardCopyMax = boardData ? std::max<int64_t>(0, param::kBoardCopyMaxBytes.get()) : 0;
  me.boardCmaMax = std::max<int64_t>(0, param::kBoardCmaMaxBytes.get());
  // A bad model file fails every rank (after the exchange, so none waits for it).
  const ncclResult_t modelResult = loadCostModel(comm, &me.model);
  me.modelError = modelResult != ncclSuccess;
  r = comm->bootstrap->allGather(all.data(), sizeof(InitRecord));
  if (r != ncclSuccess) return finish(r);
  for (const InitRecord& o : all) {
    if (o.fifoCapacity != me.fifoCapacity || o.fifoSlots != me.fifoSlots ||
        o.nChannels != me.nChannels || o.maxChannels != me.maxChannels)
      return finish(setError(ncclInvalidUsage, comm,
                             "ncclCommInitRank: rank %d uses NCCL_BUFFSIZE/BRAID_FIFO_SLOTS/"
                             "min/max channels %llu/%u/%d/%d but rank %d uses %llu/%u/%d/%d; "
                             "they must match",
                             o.info.rank, static_cast<unsigned long long>(o.fifoCapacity),
                             o.fifoSlots, o.nChannels, o.maxChannels, rank,
                             static_cast<unsigned long long>(me.fifoCapacity), me.fifoSlots,
                             me.nChannels, me.maxChannels));
    if (o.deviceChannels != me.deviceChannels)
      return finish(setError(ncclInvalidUsage, comm,
                             "ncclCommInitRank: rank %d uses BRAID_DEVICE_NCHANNELS=%d but "
                             "rank %d uses %d; it must be the same on every rank",
                             o.info.rank, o.deviceChannels, rank, me.deviceChannels));
    if (o.modelError)
      return finish(modelResult != ncclSuccess
                        ? modelResult
                        : setError(ncclInvalidArgument, comm,
                                   "ncclCommInitRank: rank %d could not read its "
                                   "BRAID_TUNER_MODEL (see its log)", o.info.rank));
    if (o.specHash != me.specHash)
      return finish(setError(ncclInvalidUsage, comm,
                             "ncclCommInitRank: rank %d has other NCCL_ALGO/NCCL_PROTO than "
                             "rank %d (here '%s'/'%s'); they must be the same on every rank",
                             o.info.rank, rank, comm->settings.algoSpec.c_str(),
                             comm->settings.protoSpec.c_str()));
    comm->peers.push_back(o.info);
  }
  comm->commHash = fnv1a(&id, sizeof(id));
  // A peer process of this machine that dies while a bootstrap exchange waits for it
  // fails the wait at once (not after BRAID_BOOTSTRAP_TIMEOUT_MS).
  comm->bootstrap->setPeerProbe([peers = comm->peers, me = me.info](int peer, std::string* why) {
    if (peer < 0 || size_t(peer) >= peers.size()) return false;
    const PeerInfo& p = peers[size_t(peer)];
    if (p.machineHash != me.machineHash || p.pidNamespace == 0 ||
        p.pidNamespace != me.pidNamespace || processAlive(pid_t(p.pid), 0))
      return false;
    *why = "rank " + std::to_string(peer) + " (pid " + std::to_string(p.pid) +
           ") on this host exited";
    return true;
  });
  // Every rank must build the same plans: rank 0's small-message threshold applies.
  comm->settings.smallMsgBytes = all[0].smallMsgBytes;
  comm->settings.deviceDirect = all[0].deviceDirect != 0;
  // ... and checks fingerprints if rank 0 does (a collective exchange: all or none),
  // and tags its calls' data if rank 0 does (compared only where both ends tag).
  comm->settings.check = all[0].check >= 2 && nranks > 1;
  comm->settings.tagCalls = all[0].check >= 1;
  if (const int64_t entries = param::kFlightRecorder.get(); entries > 0) {
    comm->recorder = std::make_unique<FlightRecorder>(size_t(std::min<int64_t>(entries, 1 << 20)));
    FrIdentity fid;
    fid.rank = rank;
    fid.nranks = nranks;
    fid.commHash = fnv1a(&id, sizeof(id));
    fid.commName = comm->settings.commName;
    fid.host = me.info.hostname;
    fid.pid = int(me.info.pid);
    fid.timeoutMs = comm->settings.timeoutMs;
    comm->recorder->setIdentity(fid);
  }
  // ... and rank 0's cost model; the layout comes from the host identities.
  comm->model = all[0].model;
  std::vector<int> keys(static_cast<size_t>(nranks), 0);
  keys[size_t(rank)] = intraNodeKey(comm->peers, rank);
  r = comm->bootstrap->allGather(keys.data(), sizeof(int));
  if (r != ncclSuccess) return finish(r);
  comm->layout = std::make_shared<const RankLayout>(makeLayout(comm->peers, keys));
  BRAID_INFO(kLogGraph, "layout: %s", comm->layout->describe().c_str());
  // CollNet: only when some rank asked for it (every rank then takes part in the setup,
  // which goes ahead only if every rank asked).
  int collnetWishes = 0;
  for (const InitRecord& o : all) collnetWishes += o.collnetEnable != 0;
  if (collnetWishes > 0) {
    std::unique_ptr<CollNetState> collnet;
    r = CollNetState::setup(comm, collnetWishes == nranks, &collnet);
    if (r != ncclSuccess) return finish(r);
    comm->collnet = std::move(collnet);
  }
  // The flag board: every rank on one machine and one host id, and rank 0 wants one.
  bool oneHost = nranks > 1 && all[0].boardInline >= 0;
  for (const PeerInfo& p : comm->peers)
    oneHost = oneHost && p.machineHash == me.info.machineHash && p.hostHash == me.info.hostHash;
  if (oneHost) {
    r = Board::setup(comm, uint64_t(all[0].boardInline), uint64_t(all[0].boardCopyMax),
                     uint64_t(all[0].boardCmaMax), &comm->board);
    if (r != ncclSuccess) return finish(r);
  }
  // Waiting ranks spin only while every busy thread of this machine can have a core:
  // its ranks (all host ids: network namespaces share the CPUs), and the proxy thread
  // of each that talks to another host. Otherwise a spinning rank steals the core its
  // peer or its proxy needs, so yield at once.
  if (param::kSpinUs.raw() == nullptr) {
    int threads = 0;
    // Sockets (a proxy thread per rank) between hosts, or forced between local ranks.
    bool remote = comm->settings.forcedNet() || comm->settings.shmDisable;
    for (const PeerInfo& p : comm->peers) {
      threads += p.machineHash == me.info.machineHash;
      remote = remote || p.hostHash != me.info.hostHash;
    }
    if (remote) threads *= 2;
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    if (threads > cpus) comm->settings.spinUs = 0;
  }
  BRAID_INFO(kLogInit, "comm %p rank %d nranks %d pid %d host %s ready (fifo %u x %llu B, %d "
             "channel(s))", static_cast<void*>(comm), rank, nranks, me.info.pid,
             me.info.hostname, me.fifoSlots,
             static_cast<unsigned long long>(comm->settings.geometry.slotBytes),
             comm->settings.nChannels);
  return finish(ncclSuccess);
}

ncclResult_t checkInitArgs(ncclComm_t* out, int nranks, int rank, const char* call) {
  if (out == nullptr) return setError(ncclInvalidArgument, nullptr, "%s: comm is NULL", call);
  if (nranks < 1)
    return setError(ncclInvalidArgument, nullptr, "%s: nranks %d must be at least 1", call, nranks);
  if (rank < 0 || rank >= nranks)
    return setError(ncclInvalidArgument, nullptr, "%s: rank %d is out of range for nranks %d",
                    call, rank, nranks);
  return ncclSuccess;
}

/// Creates a comm that `job` (run now, in a thread or at group end) initialises.
ncclResult_t launchInit(ncclComm_t* out, const ncclConfig_t& cfg,
                        std::function<ncclResult_t(Comm*)> job) {
  auto* comm = new Comm();
  comm->asyncError.store(ncclInProgress);
  *out = asHandle(comm);
  if (inGroup()) {
    groupDeferInit([comm, job] { return job(comm); });
    return ncclSuccess;
  }
  if (cfg.blocking == 0) {
    comm->settings.blocking = false;
    comm->initThread = std::thread([comm, job] { job(comm); });
    return ncclInProgress;
  }
  ncclResult_t r = job(comm);
  if (r != ncclSuccess) {
    delete comm;
    *out = nullptr;
  }
  return r;
}

/// Runs `fn` on the parent's bootstrap in the parent's turn (`ticket`), holding its
/// execution lock, so nothing else uses the parent meanwhile. Aborting the child
/// (if any) stops the wait, on the turn and inside the bootstrap.
ncclResult_t onParentBootstrap(Comm* parent, uint64_t ticket, bool evenIfRevoked, Comm* child,
                               const std::function<ncclResult_t(Bootstrap&)>& fn) {
  TurnGuard turn(parent, ticket);
  const std::atomic<bool>* childAbort = child ? &child->abortFlag : nullptr;
  if (!parent->waitTurn(ticket, evenIfRevoked, childAbort))
    return setError(ncclInvalidUsage, parent, "%s: the parent or the new communicator was "
                    "aborted", parent->who().c_str());
  std::lock_guard<std::mutex> lock(parent->execMutex);
  if (parent->magic.load() != Comm::kMagic || parent->abortFlag.load())
    return setError(ncclInvalidUsage, nullptr, "the parent communicator %p was aborted or "
                    "destroyed", static_cast<void*>(parent));
  struct Lend {
    Bootstrap* b;
    ~Lend() { b->setExtraAbortFlag(nullptr); }
  } lend{parent->bootstrap.get()};
  lend.b->setExtraAbortFlag(childAbort);
  return fn(*lend.b);
}

/// Members of a derived communicator get its id from the leader over the parent's
/// bootstrap. `members` are parent ranks in new-rank order.
ncclResult_t exchangeDerivedId(Comm* parent, uint64_t ticket, bool evenIfRevoked,
                               const std::vector<int>& members, Comm* child,
                               ncclUniqueId* id) {
  return onParentBootstrap(parent, ticket, evenIfRevoked, child, [&](Bootstrap& b) {
    if (members.front() != parent->rank) return b.recv(members.front(), kTagSplit, id, sizeof(*id));
    BRAID_CHECK(bootstrapNewRootId(id));
    for (size_t i = 1; i < members.size(); ++i)
      BRAID_CHECK(b.send(members[i], kTagSplit, id, sizeof(*id)));
    return ncclSuccess;
  });
}

ncclResult_t initDerived(Comm* parent, uint64_t ticket, bool evenIfRevoked,
                         const std::vector<int>& members, Comm* child, ncclConfig_t cfg) {
  ncclUniqueId id;
  ncclResult_t r = exchangeDerivedId(parent, ticket, evenIfRevoked, members, child, &id);
  if (r != ncclSuccess) {
    child->asyncError.store(r);
    return r;
  }
  int newRank = int(std::find(members.begin(), members.end(), parent->rank) - members.begin());
  return commInit(child, int(members.size()), id, newRank, cfg, parent->cudaDev);
}

/// ncclCommSplit's collective part: who goes where, by (color, key, parent rank).
ncclResult_t splitJob(Comm* parent, uint64_t ticket, int color, int key, Comm* child,
                      ncclConfig_t cfg) {
  struct Entry { int color, key, rank; };
  std::vector<Entry> all(static_cast<size_t>(parent->nranks));
  all[size_t(parent->rank)] = {color, key, parent->rank};
  ncclResult_t r = onParentBootstrap(parent, ticket, false, child, [&](Bootstrap& b) {
    return b.allGather(all.data(), sizeof(Entry));
  });
  if (r != ncclSuccess) {
    if (child) {
      child->asyncError.store(r);
      parent->endTurn(ticket + 1);  // the id exchange will not happen
    }
    return r;
  }
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  std::vector<Entry> mine;
  for (const Entry& e : all)
    if (e.color == color) mine.push_back(e);
  std::stable_sort(mine.begin(), mine.end(), [](const Entry& a, const Entry& b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });
  std::vector<int> members;
  for (const Entry& e : mine) members.push_back(e.rank);
  // The id exchange is a second step in the parent's order (issued right after ours).
  return initDerived(parent, ticket + 1, false, members, child, cfg);
}

}  // namespace

// ---- for ncclCommGrow (init.h) ------------------------------------------------------

ncclResult_t readCommConfig(const ncclConfig_t* user, ncclConfig_t* out, const char* call) {
  return readConfig(user, out, call);
}

ncclResult_t initCommRank(Comm* comm, int nranks, const ncclUniqueId& id, int rank,
                          const ncclConfig_t& cfg, int cudaDev) {
  return commInit(comm, nranks, id, rank, cfg, cudaDev);
}

ncclResult_t launchCommInit(ncclComm_t* out, const ncclConfig_t& cfg,
                            std::function<ncclResult_t(Comm*)> job) {
  return launchInit(out, cfg, std::move(job));
}

ncclResult_t runOnParentBootstrap(Comm* parent, uint64_t ticket, Comm* child,
                                  const std::function<ncclResult_t(Bootstrap&)>& fn) {
  return onParentBootstrap(parent, ticket, false, child, fn);
}

}  // namespace braid

using namespace braid;

extern "C" {

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
  if (uniqueId == nullptr)
    return setError(ncclInvalidArgument, nullptr, "ncclGetUniqueId: uniqueId is NULL");
  return bootstrapGetUniqueId(uniqueId);
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config) {
  const char* call = "ncclCommInitRankConfig";
  BRAID_CHECK(checkInitArgs(comm, nranks, rank, call));
  ncclConfig_t cfg;
  BRAID_CHECK(readConfig(config, &cfg, call));
  UniqueIdInfo info;
  BRAID_CHECK(bootstrapDecodeId(commId, &info));
  const int dev = cudart::currentDevice();  // the caller's device, as NCCL binds it
  return launchInit(comm, cfg, [=](Comm* c) { return commInit(c, nranks, commId, rank, cfg, dev); });
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  const char* call = "ncclCommInitRank";
  BRAID_CHECK(checkInitArgs(comm, nranks, rank, call));
  UniqueIdInfo info;
  BRAID_CHECK(bootstrapDecodeId(commId, &info));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  const int dev = cudart::currentDevice();  // the caller's device, as NCCL binds it
  return launchInit(comm, cfg, [=](Comm* c) { return commInit(c, nranks, commId, rank, cfg, dev); });
}

ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  const char* call = "ncclCommInitRankScalable";
  BRAID_CHECK(checkInitArgs(newcomm, nranks, myrank, call));
  if (nId < 1 || commIds == nullptr)
    return setError(ncclInvalidArgument, nullptr, "%s: need nId >= 1 unique ids (nId %d, "
                    "commIds %p)", call, nId, static_cast<void*>(commIds));
  ncclConfig_t cfg;
  BRAID_CHECK(readConfig(config, &cfg, call));
  // One root serves every rank here: the first id's (its creator is rank 0's process).
  ncclUniqueId id = commIds[0];
  UniqueIdInfo info;
  BRAID_CHECK(bootstrapDecodeId(id, &info));
  const int dev = cudart::currentDevice();
  return launchInit(newcomm, cfg, [=](Comm* c) { return commInit(c, nranks, id, myrank, cfg, dev); });
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  if (comms == nullptr)
    return setError(ncclInvalidArgument, nullptr, "ncclCommInitAll: comms is NULL");
  if (ndev < 1)
    return setError(ncclInvalidArgument, nullptr, "ncclCommInitAll: ndev %d must be at least 1",
                    ndev);
  ncclUniqueId id;
  BRAID_CHECK(bootstrapNewRootId(&id));
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  std::vector<Comm*> made(static_cast<size_t>(ndev));
  std::vector<ncclResult_t> res(static_cast<size_t>(ndev), ncclSuccess);
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    made[size_t(i)] = new Comm();
    threads.emplace_back([&, i] {
      res[size_t(i)] = commInit(made[size_t(i)], ndev, id, i, cfg, devlist ? devlist[i] : i);
    });
  }
  for (auto& t : threads) t.join();
  ncclResult_t first = ncclSuccess;
  for (ncclResult_t r : res)
    if (r != ncclSuccess && first == ncclSuccess) first = r;
  for (int i = 0; i < ndev; ++i) {
    if (first != ncclSuccess) {
      delete made[size_t(i)];
      comms[i] = nullptr;
    } else {
      comms[i] = asHandle(made[size_t(i)]);
    }
  }
  return first;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  const char* call = "ncclCommSplit";
  BRAID_CHECK(checkCommUsable(comm, call));
  Comm* parent = asComm(comm);
  if (newcomm == nullptr)
    return setError(ncclInvalidArgument, parent, "%s: newcomm is NULL", call);
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return setError(ncclInvalidArgument, parent,
                    "%s: color %d must be >= 0 or NCCL_SPLIT_NOCOLOR", call, color);
  ncclConfig_t cfg;
  BRAID_CHECK(readConfig(config, &cfg, call));
  // Two places in the parent's issue order: the allgather, then the id exchange
  // (a NOCOLOR rank releases the second at once).
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(parent->issueMu);
    ticket = parent->takeTicket();
    parent->takeTicket();
  }
  if (color == NCCL_SPLIT_NOCOLOR) {
    *newcomm = nullptr;
    auto job = [=] {
      ncclResult_t r = splitJob(parent, ticket, color, key, nullptr, cfg);
      parent->endTurn(ticket + 1);
      return r;
    };
    if (inGroup()) {
      groupDeferInit(job);
      return ncclSuccess;
    }
    return job();
  }
  return launchInit(newcomm, cfg,
                    [=](Comm* c) { return splitJob(parent, ticket, color, key, c, cfg); });
}

ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  const char* call = "ncclCommShrink";
  BRAID_CHECK(checkComm(comm, call));
  Comm* parent = asComm(comm);
  if (newcomm == nullptr) return setError(ncclInvalidArgument, parent, "%s: newcomm is NULL", call);
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return setError(ncclInvalidArgument, parent, "%s: unknown shrinkFlags 0x%x", call, shrinkFlags);
  if (excludeRanksCount < 0 || (excludeRanksCount > 0 && excludeRanksList == nullptr))
    return setError(ncclInvalidArgument, parent, "%s: excludeRanksList is NULL or count %d < 0",
                    call, excludeRanksCount);
  std::vector<bool> excluded(size_t(parent->nranks), false);
  for (int i = 0; i < excludeRanksCount; ++i) {
    int r = excludeRanksList[i];
    if (r < 0 || r >= parent->nranks)
      return setError(ncclInvalidArgument, parent, "%s: excluded rank %d is out of range for "
                      "%d ranks", call, r, parent->nranks);
    if (r == parent->rank)
      return setError(ncclInvalidArgument, parent, "%s: rank %d is in its own excludeRanksList",
                      call, r);
    excluded[size_t(r)] = true;
  }
  ncclConfig_t cfg;
  BRAID_CHECK(readConfig(config, &cfg, call));
  if (shrinkFlags == NCCL_SHRINK_ABORT) {
    parent->revoked.store(true);  // pending work on the parent stops...
    parent->wakeSelf();
    std::lock_guard<std::mutex> lock(parent->execMutex);  // ...and has left
    parent->closeConnections(kFifoSenderAborted);
  }
  std::vector<int> members;
  for (int r = 0; r < parent->nranks; ++r)
    if (!excluded[size_t(r)]) members.push_back(r);
  const uint64_t ticket = parent->issue();
  return launchInit(newcomm, cfg, [=](Comm* c) {
    ncclResult_t r = initDerived(parent, ticket, true, members, c, cfg);
    c->asyncError.store(r);
    return r;
  });
}

}  // extern "C"
