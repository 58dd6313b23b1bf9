#include "src/device/cuda_executor.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "src/config/log.h"
#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/tuner.h"
#include "src/os/cuda_rt.h"
#include "src/device/dev_kernel.h"
#include "src/device/device_comm.h"
#include "src/device/launch_plan.h"
#include "src/exec/batch.h"
#include "src/exec/connect.h"
#include "src/reduce/reducer.h"

namespace braid {
namespace {

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

/// One op on its way to a launch.
struct DevOp {
  const OpRecord* op = nullptr;
  std::shared_ptr<const Plan> plan;
  CompiledPlan own;               ///< a plan not kept by the comm (send/recv) ...
  CompiledPlan* kept = nullptr;   ///< ... or the comm's cached one
  CompiledPlan& cp() { return kept ? *kept : own; }
  const CompiledPlan& cp() const { return kept ? *kept : own; }
  DevRed red = DevRed::kNone;
  size_t scratchBytes = 0;
};

/// One communicator's ops of the batch, in launch order, and its launches.
struct CommLaunches {
  Comm* comm = nullptr;
  std::vector<size_t> ops;        ///< indices into the batch's DevOps, in launch order
  std::vector<LaunchSpec> specs;  ///< over `ops`
};

DevWork workOf(const DevOp& d, uint16_t firstBlock, bool newStage) {
  const OpRecord& op = *d.op;
  DevWork w;
  w.plan = d.cp().image;
  w.send = static_cast<const char*>(op.sendbuff);
  w.recv = static_cast<char*>(op.recvbuff);
  w.nranks = uint32_t(op.comm->nranks);
  w.avg = op.op == ncclAvg ? 1 : 0;
  if (int(op.op) >= int(ncclNumOps) && reduces(op.coll)) {
    const UserRedOp& u = op.userOp;
    if (u.residence == ncclScalarHostImmediate) {
      w.scalarMode = kDevScalarImmediate;
      std::memcpy(&w.scalarBits, u.immediate, std::min(sizeof(w.scalarBits),
                                                       sizeof(u.immediate)));
    } else {
      w.scalarMode = kDevScalarPointer;
      w.scalarPtr = u.ptr;
    }
  }
  w.firstBlock = firstBlock;
  w.newStage = newStage ? 1 : 0;
  return w;
}

/// Enqueues one planned launch of c's ops (cl.ops indexes `all`).
ncclResult_t launch(const CommLaunches& cl, const std::vector<DevOp>& all,
                    const LaunchSpec& spec) {
  Comm* c = cl.comm;
  DeviceComm& d = *c->device;
  char* scratch = nullptr;
  BRAID_CHECK(d.scratch(spec.scratchBytes, &scratch));
  DevLaunch l;
  for (size_t k = 0; k < spec.count; ++k) {
    const DevOp& op = all[cl.ops[spec.first + k]];
    l.works[k] = workOf(op, spec.firstBlock[k], spec.newStage[k] != 0);
    l.works[k].scratch = op.scratchBytes ? scratch + spec.scratchOffset[k] : nullptr;
  }
  l.nWorks = uint32_t(spec.count);
  l.nBlocks = spec.nBlocks;
  l.control = d.controlDev();
  l.barrier = d.barrier();
  const cudaStream_t s = spec.streams.front();
  const std::vector<cudaStream_t> others(spec.streams.begin() + 1, spec.streams.end());
  BRAID_CHECK(d.beforeLaunch(s, others));
  BRAID_CHECK(launchDevKernel(l, spec.type, spec.red, s));
  BRAID_CHECK(d.afterLaunch(s, others));
  BRAID_INFO(kLogColl, "%s: launched %u works on %u blocks (stream %p)", c->who().c_str(),
             l.nWorks, l.nBlocks, static_cast<void*>(s));
  return ncclSuccess;
}

ncclResult_t deviceState(Comm* c) {
  if (c->cudaDev < 0)
    return setError(ncclInvalidUsage, c,
                    "%s: device buffers, but the communicator has no GPU (no device was "
                    "current when it was created)", c->who().c_str());
  BRAID_CHECK(cudart::setDevice(c->cudaDev));
  if (c->device) return ncclSuccess;
  auto d = std::make_unique<DeviceComm>(c);
  BRAID_CHECK(d->init());
  c->device = std::move(d);
  return ncclSuccess;
}

LaunchItem itemOf(const DevOp& d, uint32_t nPrograms) {
  LaunchItem it;
  it.coll = d.op->coll;
  it.peer = d.op->root;
  it.isSend = d.op->isSend;
  it.nPrograms = nPrograms;
  it.type = d.op->type;
  it.red = d.red;
  it.stream = d.op->stream;
  it.scratchBytes = d.scratchBytes;
  return it;
}

/// Plans and compiles every op, and packs each communicator's ops into launches;
/// nothing is made yet, so a refusal here leaves the communicators usable.
ncclResult_t planOps(const std::vector<const OpRecord*>& ops, const std::vector<Comm*>& comms,
                     std::vector<DevOp>* out, std::vector<CommLaunches>* launches) {
  for (const OpRecord* op : ops) {
    Comm* c = op->comm;
    BRAID_CHECK(deviceState(c));
    DevOp d;
    d.op = op;
    PlanArgs args = planArgsFor(c, *op);
    // Direct access between thread ranks of this GPU; never for PreMulSum (its scalar
    // is each rank's own: only the owner of an input may scale it).
    args.peerAccess = c->device->directAccess() &&
                      !(reduces(op->coll) && int(op->op) >= int(ncclNumOps));
    BRAID_CHECK(makePlan(c, args, &d.plan, true));
    d.red = devRedFor(op->op, reduces(op->coll));
    d.scratchBytes = size_t(d.plan->scratchElems) * dataTypeSize(op->type);
    std::string why;
    CompiledPlan* cp = nullptr;
    if (!c->device->compiled(d.plan, dataTypeSize(op->type), op->coll != Coll::kSendRecv,
                             &d.own, &cp, &why))
      return setError(ncclInvalidUsage, c, "%s: %s: plan %s cannot run on the GPU: %s",
                      c->who().c_str(), op->call, d.plan->algorithm.c_str(), why.c_str());
    if (cp != &d.own) d.kept = cp;
    out->push_back(std::move(d));
  }
  for (Comm* c : comms) {
    std::vector<size_t> mine;
    std::vector<LaunchItem> group;
    for (size_t i = 0; i < out->size(); ++i) {
      const DevOp& d = (*out)[i];
      if (d.op->comm != c) continue;
      mine.push_back(i);
      group.push_back(itemOf(d, uint32_t(d.cp().dev.programs.size())));
    }
    // One launch per kernel where the group allows (see kernelOrder).
    CommLaunches cl;
    cl.comm = c;
    std::vector<LaunchItem> items;
    for (size_t k : kernelOrder(group)) {
      cl.ops.push_back(mine[k]);
      items.push_back(group[k]);
    }
    std::string why;
    if (!planLaunches(items, &cl.specs, &why))
      return setError(ncclInvalidUsage, c, "%s: %s", c->who().c_str(), why.c_str());
    launches->push_back(std::move(cl));
  }
  return ncclSuccess;
}

/// Tags of the direct-access area exchange on the bootstrap (apart from the Connector's).
constexpr uint32_t kTagPeerAreas = 0x30000;

/// Every rank's DevPeerArea address, for the comms whose ops of this batch include a
/// direct-access plan and that have not exchanged them yet (all ranks of such a comm
/// run the same op, so they all get here): every comm's sends first, then the
/// receives, so one thread may drive every rank of a comm.
ncclResult_t exchangePeerAreas(const std::vector<DevOp>& ops, cudart::DeviceScope& scope) {
  std::vector<Comm*> need;
  for (const DevOp& d : ops) {
    Comm* c = d.op->comm;
    if (d.cp().dev.direct && !c->device->peersReady() &&
        std::find(need.begin(), need.end(), c) == need.end())
      need.push_back(c);
  }
  for (Comm* c : need) {
    const uint64_t mine = c->device->peerAreaAddress();
    for (int p = 0; p < c->nranks; ++p)
      if (p != c->rank) BRAID_CHECK(c->bootstrap->send(p, kTagPeerAreas, &mine, sizeof mine));
  }
  for (Comm* c : need) {
    std::vector<uint64_t> areas(size_t(c->nranks), 0);
    areas[size_t(c->rank)] = c->device->peerAreaAddress();
    for (int p = 0; p < c->nranks; ++p)
      if (p != c->rank)
        BRAID_CHECK(c->bootstrap->recv(p, kTagPeerAreas, &areas[size_t(p)], sizeof(uint64_t)));
    for (int p = 0; p < c->nranks; ++p)
      if (areas[size_t(p)] == 0)
        return setError(ncclInternalError, c, "%s: rank %d has no direct-access area",
                        c->who().c_str(), p);
    BRAID_CHECK(scope.enter(c->cudaDev));
    BRAID_CHECK(c->device->setPeerAreas(areas));
  }
  return ncclSuccess;
}

/// Makes the device connections the plans need (all ranks together) and the images.
ncclResult_t connectOps(std::vector<DevOp>& ops, cudart::DeviceScope& scope) {
  BRAID_CHECK(exchangePeerAreas(ops, scope));
  Connector connector(true);
  for (const DevOp& d : ops) connector.note(d.op->comm, *d.plan);
  {
    cudart::CaptureRelaxed relaxed;  // connection setup allocates and maps memory
    BRAID_CHECK(connector.connect());
  }
  for (DevOp& d : ops) {
    BRAID_CHECK(scope.enter(d.op->comm->cudaDev));
    CompiledPlan& cp = d.cp();
    if (cp.image == nullptr)
      BRAID_CHECK(d.op->comm->device->image(cp.dev, d.plan->algorithm.c_str(), &cp.image,
                                            &cp.imageHost));
  }
  return ncclSuccess;
}

}  // namespace

ncclResult_t executeDeviceOps(const std::vector<const OpRecord*>& ops) {
  if (ops.empty()) return ncclSuccess;
  std::vector<Comm*> comms;
  for (const OpRecord* op : ops)
    if (std::find(comms.begin(), comms.end(), op->comm) == comms.end()) comms.push_back(op->comm);
  cudart::DeviceScope scope;  // the caller's device again on every exit path
  std::vector<DevOp> devOps;
  std::vector<CommLaunches> launches;
  // Refused while planning: nothing made, the communicators stay usable.
  BRAID_CHECK(planOps(ops, comms, &devOps, &launches));
  ncclResult_t r = connectOps(devOps, scope);
  for (const CommLaunches& cl : launches) {
    if (r == ncclSuccess) r = scope.enter(cl.comm->cudaDev);
    cl.comm->opCount += cl.ops.size();
    for (size_t k = 0; r == ncclSuccess && k < cl.specs.size(); ++k)
      r = launch(cl, devOps, cl.specs[k]);
  }
  if (r != ncclSuccess)
    for (Comm* c : comms) c->fatal(r);
  return r;
}

}  // namespace braid
