// DevResourcePlan: what ncclDevCommCreate will build for a set of requirements.
//
// Pure (no CUDA): checks the requirements against what Braid's device communicator
// offers -- LSA barriers, world barriers where the world is one LSA team, resource
// buffers -- and lays out the resource window: buffers in units of 128 bytes
// (ncclDevResourceHandle), the LSA barriers' words first. Requirements that need what
// Braid has not (GIN, multimem, LL all-to-all buffers) are refused with a message that
// names the field, so the host call fails rather than the kernel.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl_device/core.h"

namespace braid {

struct DevResourcePlan {
  size_t bytes = 0;  ///< the resource window's size (a multiple of 128)
  ncclLsaBarrierHandle_t lsaBarrier{0, 0};        ///< lsaBarrierCount barriers
  ncclLsaBarrierHandle_t hybridLsaBarrier{0, 0};  ///< barrierCount (world) barriers
  struct Assign {
    ncclDevResourceHandle_t* out;  ///< the entry's outBufferHandle (may be NULL)
    ncclDevResourceHandle_t handle;
  };
  /// resourceRequirementsList, in list order (the entries themselves are not kept: a
  /// grouped ncclDevCommCreate completes after they may be gone).
  std::vector<Assign> user;
};

/// Bytes of the words of n LSA barriers over a team of teamSize (lsa_barrier.h).
size_t lsaBarrierBytes(int n, int teamSize);

/// Plans reqs for a communicator of nRanks ranks in LSA teams of lsaSize. False, with
/// *code (ncclInvalidArgument / ncclInvalidUsage) and *why, when refused.
bool planDevResources(const ncclDevCommRequirements_t& reqs, int nRanks, int lsaSize,
                      DevResourcePlan* out, ncclResult_t* code, std::string* why);

}  // namespace braid
