// One-sided operations (NCCL 2.30): ncclPutSignal, ncclSignal, ncclWaitSignal and
// ncclWinGetUserPtr. Validation here (NCCL's rules: sigIdx, ctx and flags are 0), then
// the op is recorded in the group like any other and runs in stream order through
// rmaExecute (src/rma/rma.h).
#include <memory>
#include <vector>

#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/group.h"
#include "src/core/host_stream.h"
#include "src/core/registration.h"
#include "src/os/cuda_rt.h"
#include "src/reduce/reducer.h"
#include "src/rma/rma.h"

using namespace braid;

namespace {

ncclResult_t fail(ncclResult_t r) {
  if (inGroup()) groupNoteError(r);
  return r;
}

/// The checks every one-sided call shares: a usable comm with RMA state, a peer in
/// range, sigIdx/ctx/flags 0 (NCCL 2.30 accepts nothing else), a stream we can follow.
ncclResult_t checkCommon(Comm* c, const char* call, int peer, int sigIdx, int ctx,
                         unsigned flags, cudaStream_t stream) {
  if (peer < 0 || peer >= c->nranks)
    return setError(ncclInvalidArgument, c, "%s: peer %d is out of range for %d ranks", call,
                    peer, c->nranks);
  if (sigIdx != 0)
    return setError(ncclInvalidArgument, c, "%s: signal index %d is invalid (must be 0 in "
                    "NCCL 2.30)", call, sigIdx);
  if (ctx != 0)
    return setError(ncclInvalidArgument, c, "%s: context %d is invalid (must be 0 in NCCL 2.30)",
                    call, ctx);
  if (flags != 0)
    return setError(ncclInvalidArgument, c, "%s: flags 0x%x are invalid (must be 0)", call, flags);
  if (stream != nullptr && HostStream::lookup(stream) == nullptr && cudart::available() &&
      cudart::streamCapturing(stream))
    return setError(ncclInvalidUsage, c, "%s: one-sided operations cannot be captured in a CUDA "
                    "graph in Braid yet (stream %p is capturing)", call,
                    static_cast<void*>(stream));
  if (!rmaReady(c))
    return setError(ncclInvalidUsage, c, "%s: no window was registered on this communicator "
                    "(%s); Braid sets up one-sided operations in the first "
                    "ncclCommWindowRegister (collective), so register a window first", call,
                    c->who().c_str());
  return ncclSuccess;
}

OpRecord rmaRecord(RmaKind kind, const char* call, Comm* c, int peer, cudaStream_t stream) {
  OpRecord r;
  r.coll = Coll::kSendRecv;  // not used: rma != 0 routes the op (src/exec/batch.cc)
  r.call = call;
  r.comm = c;
  r.root = peer;
  r.stream = stream;
  r.rma = uint8_t(kind);
  r.count = 0;
  r.type = ncclInt8;
  return r;
}

}  // namespace

extern "C" {

ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype,
                           int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx,
                           int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) {
  const char* call = "ncclPutSignal";
  ncclResult_t r = checkCommUsable(comm, call);
  if (r != ncclSuccess) return fail(r);
  Comm* c = asComm(comm);
  if (dataTypeSize(datatype) == 0)
    return fail(setError(ncclInvalidArgument, c, "%s: invalid datatype %d", call, int(datatype)));
  if ((r = checkCommon(c, call, peer, sigIdx, ctx, flags, stream)) != ncclSuccess) return fail(r);
  if (peerWin == nullptr)
    return fail(setError(ncclInvalidArgument, c, "%s: peerWin is NULL", call));
  const Registration* win = findWindow(peerWin);
  if (win == nullptr || win->comm != c)
    return fail(setError(ncclInvalidArgument, c, "%s: peerWin %p is not a window registered on "
                         "this communicator (ncclCommWindowRegister), or was deregistered",
                         call, static_cast<void*>(peerWin)));
  if (!win->exchanged)
    return fail(setError(ncclInvalidUsage, c, "%s: window %p is still being registered (its "
                         "ncclCommWindowRegister's group has not ended)", call,
                         static_cast<void*>(peerWin)));
  const size_t ts = dataTypeSize(datatype);
  if (count > SIZE_MAX / ts)
    return fail(setError(ncclInvalidArgument, c, "%s: count %zu overflows", call, count));
  const size_t bytes = count * ts;
  const WindowPeer& target = win->peers[size_t(peer)];
  if (peerWinOffset > target.size || bytes > target.size - peerWinOffset)
    return fail(setError(ncclInvalidArgument, c, "%s: %zu bytes at offset %zu do not fit in "
                         "rank %d's window of %llu bytes", call, bytes, peerWinOffset, peer,
                         static_cast<unsigned long long>(target.size)));
  if (localbuff == nullptr && count > 0)
    return fail(setError(ncclInvalidArgument, c, "%s: localbuff is NULL", call));
  OpRecord op = rmaRecord(RmaKind::kPutSignal, call, c, peer, stream);
  op.sendbuff = localbuff;
  op.count = count;
  op.type = datatype;
  op.rmaWin = win;
  op.rmaOffset = peerWinOffset;
  op.mem = count > 0 ? cudart::pointerKind(localbuff, nullptr) : MemKind::kHost;
  if (op.mem == MemKind::kDevice && HostStream::lookup(stream) != nullptr)
    return fail(setError(ncclInvalidArgument, c, "%s: device buffers cannot be queued on a "
                         "Braid host stream; pass a CUDA stream", call));
  return enqueueOp(op);
}

ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream) {
  const char* call = "ncclSignal";
  ncclResult_t r = checkCommUsable(comm, call);
  if (r != ncclSuccess) return fail(r);
  Comm* c = asComm(comm);
  if ((r = checkCommon(c, call, peer, sigIdx, ctx, flags, stream)) != ncclSuccess) return fail(r);
  return enqueueOp(rmaRecord(RmaKind::kSignal, call, c, peer, stream));
}

ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
                            cudaStream_t stream) {
  const char* call = "ncclWaitSignal";
  ncclResult_t r = checkCommUsable(comm, call);
  if (r != ncclSuccess) return fail(r);
  Comm* c = asComm(comm);
  if (nDesc <= 0 || signalDescs == nullptr)
    return fail(setError(ncclInvalidArgument, c, "%s: %s", call,
                         signalDescs == nullptr ? "signalDescs is NULL"
                                                : "nDesc must be at least 1"));
  for (int i = 0; i < nDesc; ++i) {
    const ncclWaitSignalDesc_t& d = signalDescs[i];
    if (d.opCnt <= 0)
      return fail(setError(ncclInvalidArgument, c, "%s: descriptor %d has invalid opCnt %d",
                           call, i, d.opCnt));
    if ((r = checkCommon(c, call, d.peer, d.sigIdx, d.ctx, 0, stream)) != ncclSuccess) {
      BRAID_INFO(kLogColl, "%s: descriptor %d rejected", call, i);
      return fail(r);
    }
  }
  OpRecord op = rmaRecord(RmaKind::kWaitSignal, call, c, 0, stream);
  op.rmaWaits = std::make_shared<const std::vector<ncclWaitSignalDesc_t>>(signalDescs,
                                                                         signalDescs + nDesc);
  return enqueueOp(op);
}

ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  BRAID_CHECK(checkComm(comm, "ncclWinGetUserPtr"));
  Comm* c = asComm(comm);
  if (outUserPtr == nullptr)
    return setError(ncclInvalidArgument, c, "ncclWinGetUserPtr: outUserPtr is NULL");
  *outUserPtr = nullptr;
  if (win == nullptr) return setError(ncclInvalidArgument, c, "ncclWinGetUserPtr: win is NULL");
  const Registration* w = findWindow(win);
  if (w == nullptr || w->comm != c)
    return setError(ncclInvalidArgument, c, "ncclWinGetUserPtr: win %p is not a window "
                    "registered on this communicator (or was deregistered)",
                    static_cast<void*>(win));
  *outUserPtr = w->buff;
  return ncclSuccess;
}

}  // extern "C"
