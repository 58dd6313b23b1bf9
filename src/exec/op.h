// OpRecord: one validated API call (a collective or one side of a send/recv), as the
// group layer records it until ncclGroupEnd.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "algorithms/plan.h"
#include "nccl.h"
#include "src/os/cuda_rt.h"

namespace braid {

struct Comm;

/// A PreMulSum op made by ncclRedOpCreatePreMulSum.
struct UserRedOp {
  bool live = false;
  ncclDataType_t type = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  unsigned char immediate[8] = {};  ///< value, for ncclScalarHostImmediate
  const void* ptr = nullptr;        ///< for ncclScalarDevice (read at execution)
};

struct OpRecord {
  Coll coll = Coll::kAllReduce;
  const char* call = "";  ///< API name, for messages ("ncclAllReduce")
  Comm* comm = nullptr;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  int root = 0;  ///< root, or the peer for send/recv
  bool isSend = false;  ///< kSendRecv only
  cudaStream_t stream = nullptr;
  /// Where the op's buffers are (validated: one kind per op); kDevice ops run on the
  /// CUDA executor, on `stream`.
  MemKind mem = MemKind::kHost;
  /// For a PreMulSum op (op >= ncclNumOps): the op as it was when the call was made,
  /// so destroying or reusing the handle afterwards cannot change queued work.
  UserRedOp userOp;
  /// One-sided ops (src/rma): an RmaKind (0: not one-sided). A put writes `count`
  /// elements of sendbuff into rank `root`'s part of window rmaWin at byte rmaOffset; a
  /// signal raises root's counter; a wait waits for rmaWaits.
  uint8_t rma = 0;
  const void* rmaWin = nullptr;
  size_t rmaOffset = 0;
  std::shared_ptr<const std::vector<ncclWaitSignalDesc_t>> rmaWaits;
  /// Set when issued: the op's flight-recorder entry (kNoFrSeq: none) and, for a
  /// collective, its number among the communicator's collectives (-1: none).
  uint64_t frSeq = kNoFrSeq;
  int64_t collSeq = -1;
  static constexpr uint64_t kNoFrSeq = ~uint64_t(0);
};

}  // namespace braid
