// One collective run twice from the same inputs: by the host executor (the Simulator,
// PlanRun + Reducer) and by the CUDA executor's interpreter in host emulation (every
// rank's launch, one thread per block, over host-memory FIFOs); every byte of every
// rank's buffers (guards included) must come out identical.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "algorithms/plan.h"
#include "algorithms/registry.h"
#include "nccl.h"

namespace braid {
namespace emutest {

enum class Op { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };
constexpr int kNumOps = 6;
const char* opName(Op op);
/// The 12 NCCL datatypes, by index.
ncclDataType_t typeAt(int i);
constexpr int kNumTypes = 12;

struct EmuCase {
  const Algorithm* algo = nullptr;
  int nranks = 1;
  uint64_t count = 0;
  ncclDataType_t type = ncclFloat32;
  Op op = Op::kSum;  ///< reducing collectives only
  int root = 0;
  bool inPlace = false;
  // FIFO geometry and plan parameters.
  uint32_t nslots = 4;
  uint64_t slotBytes = 256;
  uint64_t chunkBytes = 512;  ///< <= nslots * min(slot, slice) / 2
  int nChannels = 1;
  uint64_t sliceBytes = 0;    ///< Plan::sliceBytes (0: whole slots)
  /// Odd ranks' kernels move whole slots whatever sliceBytes says, so receivers
  /// consume slots in parts (the two ends of a stream slice differently).
  bool mixedSlices = false;
  bool scalarByPointer = false;  ///< PreMulSum scalar through DevWork::scalarPtr
  std::shared_ptr<const RankLayout> layout;
  std::string describe() const;
};

enum class EmuStatus { kPassed, kUnsupported, kFailed };
struct EmuResult {
  EmuStatus status = EmuStatus::kFailed;
  std::string message;
};

EmuResult runEmuCase(const EmuCase& c);

bool isReducing(Coll c);
bool isRooted(Coll c);

/// Fills n elements of `type` at p with finite values of modest size (no NaN, no
/// overflow in a product of a few of them), from seed.
void fillValues(ncclDataType_t type, void* p, uint64_t n, uint64_t seed);

}  // namespace emutest
}  // namespace braid
