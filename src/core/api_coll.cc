// The collective and point-to-point entry points: validate, record, run.
#include <algorithm>
#include <cstdint>

#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/group.h"
#include "src/core/host_stream.h"
#include "src/os/cuda_rt.h"
#include "src/reduce/reducer.h"

using namespace braid;

namespace {

enum Need : unsigned { kNone = 0, kAll = 1, kRoot = 2 };

struct CollRule {
  bool reduces;      ///< takes a reduction op
  bool rooted;       ///< takes a root
  size_t sendMult;   ///< send buffer = count * (sendMult ? sendMult : nranks) elements
  size_t recvMult;
  unsigned sendNeed;  ///< who must pass a send buffer
  unsigned recvNeed;
};

CollRule ruleFor(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return {true, false, 1, 1, kAll, kAll};
    case Coll::kBroadcast: return {false, true, 1, 1, kRoot, kAll};
    case Coll::kReduce: return {true, true, 1, 1, kAll, kRoot};
    case Coll::kAllGather: return {false, false, 1, 0, kAll, kAll};
    case Coll::kReduceScatter: return {true, false, 0, 1, kAll, kAll};
    case Coll::kAllToAll: return {false, false, 0, 0, kAll, kAll};
    case Coll::kGather: return {false, true, 1, 0, kAll, kRoot};
    case Coll::kScatter: return {false, true, 0, 1, kRoot, kAll};
    default: return {false, false, 1, 1, kNone, kNone};
  }
}

ncclResult_t checkBuffer(Comm* c, const char* call, const char* name, const void* p, size_t elems,
                         ncclDataType_t type) {
  if (elems == 0) return ncclSuccess;
  if (p == nullptr)
    return setError(ncclInvalidArgument, c, "%s: %s is NULL (%s)", call, name, c->who().c_str());
  size_t ts = dataTypeSize(type);
  if (reinterpret_cast<uintptr_t>(p) % ts != 0)
    return setError(ncclInvalidArgument, c,
                    "%s: %s %p is not aligned to the %zu-byte size of %s (%s)", call, name, p, ts,
                    dataTypeName(type), c->who().c_str());
  return ncclSuccess;
}

ncclResult_t checkOp(Comm* c, const char* call, ncclRedOp_t op, ncclDataType_t type) {
  int o = int(op);
  if (o >= 0 && o < int(ncclNumOps)) return ncclSuccess;
  size_t idx = size_t(o) - size_t(ncclNumOps);
  if (o < 0 || idx >= c->userOps.size() || !c->userOps[idx].live)
    return setError(ncclInvalidArgument, c,
                    "%s: invalid reduction op %d (not a built-in op nor a live op from "
                    "ncclRedOpCreatePreMulSum on this communicator)", call, o);
  if (c->userOps[idx].type != type)
    return setError(ncclInvalidArgument, c,
                    "%s: reduction op %d was created for datatype %s but is used with %s", call,
                    o, dataTypeName(c->userOps[idx].type), dataTypeName(type));
  return ncclSuccess;
}

/// The memory kind of the op's buffers (op->mem): one kind per call, device buffers on
/// the communicator's GPU.
ncclResult_t classifyMemory(OpRecord* op, bool needSend, bool needRecv) {
  op->mem = MemKind::kHost;
  if (!cudart::available()) return ncclSuccess;
  Comm* c = op->comm;
  int sendDev = -1, recvDev = -1;
  const bool hasSend = needSend && op->sendbuff != nullptr;
  const bool hasRecv = needRecv && op->recvbuff != nullptr;
  const MemKind sk = hasSend ? cudart::pointerKind(op->sendbuff, &sendDev) : MemKind::kHost;
  const MemKind rk = hasRecv ? cudart::pointerKind(op->recvbuff, &recvDev) : MemKind::kHost;
  if (hasSend && hasRecv && sk != rk)
    return setError(ncclInvalidArgument, c,
                    "%s: sendbuff %p is %s memory but recvbuff %p is %s memory; one call "
                    "takes buffers of one kind (%s)", op->call, op->sendbuff, memKindName(sk),
                    op->recvbuff, memKindName(rk), c->who().c_str());
  const bool device = (hasSend && sk == MemKind::kDevice) || (hasRecv && rk == MemKind::kDevice);
  if (!device) {
    if (int(op->op) >= int(ncclNumOps) && op->userOp.residence == ncclScalarDevice) {
      int d = -1;
      if (cudart::pointerKind(op->userOp.ptr, &d) == MemKind::kDevice)
        return setError(ncclInvalidArgument, c,
                        "%s: the PreMulSum scalar %p is device memory but the buffers are "
                        "host memory (%s)", op->call, op->userOp.ptr, c->who().c_str());
    }
    return ncclSuccess;
  }
  for (int i = 0; i < 2; ++i) {
    const bool isSend = i == 0;
    if (!(isSend ? hasSend : hasRecv)) continue;
    const int dev = isSend ? sendDev : recvDev;
    if (dev != c->cudaDev)
      return setError(ncclInvalidArgument, c,
                      "%s: %s %p is on GPU %d but the communicator uses GPU %d (%s)", op->call,
                      isSend ? "sendbuff" : "recvbuff", isSend ? op->sendbuff : op->recvbuff,
                      dev, c->cudaDev, c->who().c_str());
  }
  const int streamDev = op->stream ? cudart::streamDevice(op->stream) : -1;
  if (streamDev >= 0 && streamDev != c->cudaDev)
    return setError(ncclInvalidArgument, c,
                    "%s: stream %p belongs to GPU %d but the communicator uses GPU %d (%s)",
                    op->call, static_cast<void*>(op->stream), streamDev, c->cudaDev,
                    c->who().c_str());
  if (HostStream::lookup(op->stream) != nullptr)
    return setError(ncclInvalidArgument, c,
                    "%s: device buffers cannot be queued on a Braid host stream (%p); pass a "
                    "CUDA stream (%s)", op->call, static_cast<void*>(op->stream),
                    c->who().c_str());
  op->mem = MemKind::kDevice;
  return ncclSuccess;
}

/// Validates an op against NCCL's rules (every message names the argument), and sets
/// its memory kind.
ncclResult_t validate(OpRecord& op) {
  BRAID_CHECK(checkCommUsable(asHandle(op.comm), op.call));
  Comm* c = op.comm;
  if (dataTypeSize(op.type) == 0)
    return setError(ncclInvalidArgument, c, "%s: invalid datatype %d (valid: 0..%d)", op.call,
                    int(op.type), int(ncclNumTypes) - 1);
  const CollRule rule = ruleFor(op.coll);
  if (rule.reduces) BRAID_CHECK(checkOp(c, op.call, op.op, op.type));
  if (rule.rooted && (op.root < 0 || op.root >= c->nranks))
    return setError(ncclInvalidArgument, c, "%s: root %d is out of range for %d ranks", op.call,
                    op.root, c->nranks);
  if (op.coll == Coll::kSendRecv && (op.root < 0 || op.root >= c->nranks))
    return setError(ncclInvalidArgument, c, "%s: peer %d is out of range for %d ranks", op.call,
                    op.root, c->nranks);
  const size_t n = size_t(c->nranks), ts = dataTypeSize(op.type);
  size_t sendMult = rule.sendMult ? rule.sendMult : n, recvMult = rule.recvMult ? rule.recvMult : n;
  if (op.coll == Coll::kSendRecv) {
    sendMult = op.isSend ? 1 : 0;
    recvMult = op.isSend ? 0 : 1;
  }
  size_t maxMult = std::max(sendMult, recvMult);
  if (maxMult && op.count > SIZE_MAX / ts / maxMult)
    return setError(ncclInvalidArgument, c, "%s: count %zu of %s overflows the address space",
                    op.call, op.count, dataTypeName(op.type));
  const bool root = op.root == c->rank;
  bool needSend = op.coll == Coll::kSendRecv ? op.isSend
                  : rule.sendNeed == kAll || (rule.sendNeed == kRoot && root);
  bool needRecv = op.coll == Coll::kSendRecv ? !op.isSend
                  : rule.recvNeed == kAll || (rule.recvNeed == kRoot && root);
  if (needSend) BRAID_CHECK(checkBuffer(c, op.call, "sendbuff", op.sendbuff, op.count * sendMult, op.type));
  if (needRecv) BRAID_CHECK(checkBuffer(c, op.call, "recvbuff", op.recvbuff, op.count * recvMult, op.type));
  return classifyMemory(&op, needSend, needRecv);
}

ncclResult_t submit(OpRecord op) {
  // A PreMulSum op as it is now (destroying the handle later cannot change queued work).
  if (int(op.op) >= int(ncclNumOps) && ruleFor(op.coll).reduces &&
      checkComm(asHandle(op.comm), op.call) == ncclSuccess) {
    const size_t idx = size_t(op.op) - size_t(ncclNumOps);
    if (idx < op.comm->userOps.size()) op.userOp = op.comm->userOps[idx];
  }
  ncclResult_t r = validate(op);
  if (r != ncclSuccess) {
    if (inGroup()) groupNoteError(r);
    return r;
  }
  // Nothing to move (as NCCL): done once validated, without a trip through the executor.
  if (op.count == 0) return ncclSuccess;
  BRAID_INFO(kLogColl, "%s: opCount %llu sendbuff %p recvbuff %p count %zu datatype %d op %d "
             "root %d comm %p [nranks=%d] stream %p", op.call,
             static_cast<unsigned long long>(op.comm->opCount), op.sendbuff, op.recvbuff,
             op.count, int(op.type), int(op.op), op.root, static_cast<void*>(op.comm),
             op.comm->nranks, static_cast<void*>(op.stream));
  return enqueueOp(op);
}

OpRecord record(Coll coll, const char* call, ncclComm_t comm, const void* send, void* recv,
                size_t count, ncclDataType_t type, ncclRedOp_t op, int root, cudaStream_t stream) {
  OpRecord r;
  r.coll = coll;
  r.call = call;
  r.comm = asComm(comm);
  r.sendbuff = send;
  r.recvbuff = recv;
  r.count = count;
  r.type = type;
  r.op = op;
  r.root = root;
  r.stream = stream;
  return r;
}

}  // namespace

extern "C" {

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return submit(record(Coll::kAllReduce, "ncclAllReduce", comm, sendbuff, recvbuff, count,
                       datatype, op, 0, stream));
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return submit(record(Coll::kBroadcast, "ncclBroadcast", comm, sendbuff, recvbuff, count,
                       datatype, ncclSum, root, stream));
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream) {
  return submit(record(Coll::kBroadcast, "ncclBcast", comm, buff, buff, count, datatype, ncclSum,
                       root, stream));
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
  return submit(record(Coll::kReduce, "ncclReduce", comm, sendbuff, recvbuff, count, datatype,
                       op, root, stream));
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return submit(record(Coll::kAllGather, "ncclAllGather", comm, sendbuff, recvbuff, sendcount,
                       datatype, ncclSum, 0, stream));
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return submit(record(Coll::kReduceScatter, "ncclReduceScatter", comm, sendbuff, recvbuff,
                       recvcount, datatype, op, 0, stream));
}

ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return submit(record(Coll::kAllToAll, "ncclAlltoAll", comm, sendbuff, recvbuff, count,
                       datatype, ncclSum, 0, stream));
}

ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(record(Coll::kGather, "ncclGather", comm, sendbuff, recvbuff, count, datatype,
                       ncclSum, root, stream));
}

ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  return submit(record(Coll::kScatter, "ncclScatter", comm, sendbuff, recvbuff, count, datatype,
                       ncclSum, root, stream));
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  OpRecord r = record(Coll::kSendRecv, "ncclSend", comm, sendbuff, nullptr, count, datatype,
                      ncclSum, peer, stream);
  r.isSend = true;
  return submit(r);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return submit(record(Coll::kSendRecv, "ncclRecv", comm, nullptr, recvbuff, count, datatype,
                       ncclSum, peer, stream));
}

}  // extern "C"
