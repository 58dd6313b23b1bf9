#include "src/device/cuda_executor.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "src/config/log.h"
#include "src/core/comm.h"
#include "src/core/error.h"
#include "src/core/tuner.h"
#include "src/device/cuda_rt.h"
#include "src/device/dev_kernel.h"
#include "src/device/device_comm.h"
#include "src/exec/batch.h"
#include "src/exec/connect.h"
#include "src/reduce/reducer.h"

namespace braid {
namespace {

/// Restores the calling thread's current device on every exit path.
class DeviceGuard {
 public:
  DeviceGuard() : saved_(cudart::currentDevice()) {}
  ~DeviceGuard() {
    if (saved_ >= 0) (void)cudart::setDevice(saved_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_;
};

bool reduces(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduce || c == Coll::kReduceScatter;
}

/// One op on its way to a launch.
struct DevOp {
  const OpRecord* op = nullptr;
  std::shared_ptr<const Plan> plan;
  const DevPlanImage* image = nullptr;     ///< device address
  const DevPlanImage* imageHost = nullptr; ///< the same, host view
  DevRed red = DevRed::kNone;
  size_t scratchBytes = 0;
};

/// Launch key: kernels are per (datatype, reduction family); copy-only ops share one.
struct KernelKey {
  ncclDataType_t type = ncclUint8;
  DevRed red = DevRed::kNone;
  bool operator==(const KernelKey& o) const { return type == o.type && red == o.red; }
};

KernelKey keyOf(const DevOp& d) {
  if (d.red == DevRed::kNone) return KernelKey{ncclUint8, DevRed::kNone};
  return KernelKey{d.op->type, d.red};
}

DevWork workOf(const DevOp& d, uint16_t firstBlock, bool newStage) {
  const OpRecord& op = *d.op;
  DevWork w;
  w.plan = d.image;
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

/// Builds and enqueues one communicator's launches.
class LaunchBuilder {
 public:
  explicit LaunchBuilder(Comm* c) : c_(c) {}

  /// Adds a stage: one collective, or a run of send/recv ops side by side.
  ncclResult_t addStage(const DevOp* ops, size_t n) {
    // Block ranges: a collective uses [0, nPrograms); send/recv ops get one range per
    // (peer, direction) lane, as wide as its widest op, so a lane's ops run in order
    // on the same blocks (and connections).
    struct Lane {
      int peer;
      bool isSend;
      uint32_t first, width;
    };
    std::vector<Lane> lanes;
    uint32_t blocks = 0;
    std::vector<uint32_t> firstOf(n);
    if (ops[0].op->coll == Coll::kSendRecv) {
      for (size_t i = 0; i < n; ++i) {
        const OpRecord& op = *ops[i].op;
        auto it = std::find_if(lanes.begin(), lanes.end(), [&](const Lane& l) {
          return l.peer == op.root && l.isSend == op.isSend;
        });
        if (it == lanes.end()) {
          lanes.push_back(Lane{op.root, op.isSend, 0, 0});
          it = lanes.end() - 1;
        }
        it->width = std::max(it->width, ops[i].imageHost->nPrograms);
      }
      for (Lane& l : lanes) {
        l.first = blocks;
        blocks += l.width;
      }
      for (size_t i = 0; i < n; ++i)
        for (const Lane& l : lanes)
          if (l.peer == ops[i].op->root && l.isSend == ops[i].op->isSend) firstOf[i] = l.first;
    } else {
      blocks = ops[0].imageHost->nPrograms;
    }
    if (n > size_t(DevLaunch::kMaxWorks) || blocks > uint32_t(DevLaunch::kMaxBlocks))
      return setError(ncclInvalidUsage, c_,
                      "%s: a group of %zu send/recv ops on device buffers needs %u CUDA "
                      "blocks; one launch takes at most %d ops and %d blocks (split the "
                      "group)", c_->who().c_str(), n, blocks, DevLaunch::kMaxWorks,
                      DevLaunch::kMaxBlocks);
    const KernelKey key = keyOf(ops[0]);
    if (launch_.nWorks > 0 &&
        (!(key == key_) || launch_.nWorks + n > size_t(DevLaunch::kMaxWorks)))
      BRAID_CHECK(flush());
    key_ = key;
    for (size_t i = 0; i < n; ++i) {
      launch_.works[launch_.nWorks] = workOf(ops[i], uint16_t(firstOf[i]), i == 0);
      scratchOf_[launch_.nWorks] = ops[i].scratchBytes;
      ++launch_.nWorks;
      if (std::find(streams_.begin(), streams_.end(), ops[i].op->stream) == streams_.end())
        streams_.push_back(ops[i].op->stream);
    }
    launch_.nBlocks = std::max(launch_.nBlocks, blocks);
    return ncclSuccess;
  }

  /// Enqueues the launch built so far.
  ncclResult_t flush() {
    if (launch_.nWorks == 0) return ncclSuccess;
    DeviceComm& d = *c_->device;
    // Each work's scratch: consecutive 256-byte aligned pieces of the comm's buffer.
    size_t total = 0;
    for (uint32_t i = 0; i < launch_.nWorks; ++i) total += (scratchOf_[i] + 255) & ~size_t(255);
    char* base = nullptr;
    BRAID_CHECK(d.scratch(total, &base));
    for (uint32_t i = 0, off = 0; i < launch_.nWorks; ++i) {
      launch_.works[i].scratch = scratchOf_[i] ? base + off : nullptr;
      off += uint32_t((scratchOf_[i] + 255) & ~size_t(255));
    }
    launch_.control = d.controlDev();
    launch_.barrier = d.barrier();
    const cudaStream_t s = streams_.front();
    std::vector<cudaStream_t> others(streams_.begin() + 1, streams_.end());
    BRAID_CHECK(d.beforeLaunch(s, others));
    BRAID_CHECK(launchDevKernel(launch_, key_.type, key_.red, s));
    BRAID_CHECK(d.afterLaunch(s, others));
    BRAID_INFO(kLogColl, "%s: launched %u works on %u blocks (stream %p)", c_->who().c_str(),
               launch_.nWorks, launch_.nBlocks, static_cast<void*>(s));
    launch_ = DevLaunch();
    streams_.clear();
    return ncclSuccess;
  }

 private:
  Comm* c_;
  DevLaunch launch_;
  KernelKey key_;
  size_t scratchOf_[DevLaunch::kMaxWorks] = {};
  std::vector<cudaStream_t> streams_;
};

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

ncclResult_t prepare(const std::vector<const OpRecord*>& ops, std::vector<DevOp>* out) {
  Connector connector(true);
  for (const OpRecord* op : ops) {
    Comm* c = op->comm;
    BRAID_CHECK(deviceState(c));
    DevOp d;
    d.op = op;
    BRAID_CHECK(makePlan(c, planArgsFor(c, *op), &d.plan, true));
    d.red = devRedFor(op->op, reduces(op->coll));
    d.scratchBytes = size_t(d.plan->scratchElems) * dataTypeSize(op->type);
    connector.note(c, *d.plan);
    out->push_back(std::move(d));
  }
  {
    cudart::CaptureRelaxed relaxed;  // connection setup allocates and maps memory
    BRAID_CHECK(connector.connect());
  }
  for (DevOp& d : *out) {
    BRAID_CHECK(cudart::setDevice(d.op->comm->cudaDev));
    BRAID_CHECK(d.op->comm->device->image(*d.plan, dataTypeSize(d.op->type), &d.image,
                                          &d.imageHost));
  }
  return ncclSuccess;
}

ncclResult_t enqueue(Comm* c, const std::vector<DevOp>& all) {
  BRAID_CHECK(cudart::setDevice(c->cudaDev));
  std::vector<DevOp> mine;
  for (const DevOp& d : all)
    if (d.op->comm == c) mine.push_back(d);
  LaunchBuilder lb(c);
  for (size_t i = 0; i < mine.size();) {
    size_t n = 1;
    if (mine[i].op->coll == Coll::kSendRecv)
      while (i + n < mine.size() && mine[i + n].op->coll == Coll::kSendRecv) ++n;
    for (size_t k = 0; k < n; ++k) ++c->opCount;
    BRAID_CHECK(lb.addStage(&mine[i], n));
    i += n;
  }
  return lb.flush();
}

}  // namespace

ncclResult_t executeDeviceOps(const std::vector<const OpRecord*>& ops) {
  if (ops.empty()) return ncclSuccess;
  std::vector<Comm*> comms;
  for (const OpRecord* op : ops)
    if (std::find(comms.begin(), comms.end(), op->comm) == comms.end()) comms.push_back(op->comm);
  DeviceGuard guard;
  std::vector<DevOp> devOps;
  ncclResult_t r = prepare(ops, &devOps);
  for (size_t i = 0; r == ncclSuccess && i < comms.size(); ++i) r = enqueue(comms[i], devOps);
  if (r != ncclSuccess)
    for (Comm* c : comms) c->fatal(r);
  return r;
}

}  // namespace braid
