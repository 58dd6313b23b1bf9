// planDevResources (dev_comm_plan.h).
#include "src/device/dev_comm_plan.h"

#include <climits>

namespace braid {
namespace {

constexpr size_t kUnit = 128;  // one ncclDevResourceHandle step

size_t roundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

bool refuse(ncclResult_t c, const std::string& w, ncclResult_t* code, std::string* why) {
  *code = c;
  *why = w;
  return false;
}

}  // namespace

size_t lsaBarrierBytes(int n, int teamSize) {
  return size_t(n) * (3 + size_t(teamSize)) * sizeof(uint32_t);
}

bool planDevResources(const ncclDevCommRequirements_t& r, int nRanks, int lsaSize,
                      DevResourcePlan* out, ncclResult_t* code, std::string* why) {
  *out = DevResourcePlan();
  if (r.magic != NCCL_API_MAGIC)
    return refuse(ncclInvalidArgument, "reqs was not initialised with "
                  "NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER (magic mismatch)", code, why);
  if (r.size < offsetof(ncclDevCommRequirements_t, ginStrongSignalsRequired))
    return refuse(ncclInvalidArgument, "reqs->size " + std::to_string(r.size) +
                  " is smaller than NCCL 2.29's requirements struct", code, why);
  const struct { const char* name; int value; } counts[] = {
      {"barrierCount", r.barrierCount},          {"lsaBarrierCount", r.lsaBarrierCount},
      {"railGinBarrierCount", r.railGinBarrierCount},
      {"lsaLLA2ABlockCount", r.lsaLLA2ABlockCount}, {"lsaLLA2ASlotCount", r.lsaLLA2ASlotCount},
      {"ginSignalCount", r.ginSignalCount},      {"ginCounterCount", r.ginCounterCount},
      {"worldGinBarrierCount", r.worldGinBarrierCount}};
  for (const auto& c : counts)
    if (c.value < 0)
      return refuse(ncclInvalidArgument, std::string(c.name) + " is negative (" +
                    std::to_string(c.value) + ")", code, why);
  const bool oneTeam = lsaSize == nRanks;
  const std::string noGin = ": that needs GIN (GPU-initiated networking), which Braid's "
                            "device communicator does not offer (ncclCommQueryProperties "
                            "reports ginType NCCL_GIN_TYPE_NONE)";
  if (r.lsaMultimem)
    return refuse(ncclInvalidUsage, "lsaMultimem: Braid has no multicast memory "
                  "(ncclCommQueryProperties reports multimemSupport false)", code, why);
  if (r.ginForceEnable) return refuse(ncclInvalidUsage, "ginForceEnable" + noGin, code, why);
  if (r.ginSignalCount > 0 || r.ginCounterCount > 0)
    return refuse(ncclInvalidUsage, std::string(r.ginSignalCount > 0 ? "ginSignalCount"
                  : "ginCounterCount") + noGin, code, why);
  if (r.ginConnectionType != NCCL_GIN_CONNECTION_NONE)
    return refuse(ncclInvalidUsage, "ginConnectionType" + noGin, code, why);
  if (r.worldGinBarrierCount > 0 && nRanks > 1)
    return refuse(ncclInvalidUsage, "worldGinBarrierCount" + noGin, code, why);
  if (r.railGinBarrierCount > 0 && !oneTeam)
    return refuse(ncclInvalidUsage, "railGinBarrierCount with " + std::to_string(nRanks / lsaSize) +
                  " LSA teams" + noGin, code, why);
  if (r.barrierCount > 0 && !oneTeam)
    return refuse(ncclInvalidUsage, "barrierCount: a world barrier across " +
                  std::to_string(nRanks / lsaSize) + " LSA teams of " + std::to_string(lsaSize) +
                  " ranks" + noGin, code, why);
  if (r.lsaLLA2ABlockCount > 0)
    return refuse(ncclInvalidUsage, "lsaLLA2ABlockCount: Braid does not offer the LL "
                  "all-to-all buffers (ncclLLA2ASession) yet", code, why);
  int teams = 0;
  for (const ncclTeamRequirements_t* t = r.teamRequirementsList; t != nullptr; t = t->next) {
    if (++teams > 4096)
      return refuse(ncclInvalidArgument, "teamRequirementsList has more than 4096 entries "
                    "(a cycle?)", code, why);
    if (t->multimem)
      return refuse(ncclInvalidUsage, "teamRequirementsList: multimem for a team: Braid has "
                    "no multicast memory", code, why);
  }

  size_t at = 0;
  auto place = [&](size_t bytes, size_t align, ncclDevResourceHandle_t* h) {
    at = roundUp(at, align < kUnit ? kUnit : align);
    *h = ncclDevResourceHandle_t(at / kUnit);
    at += roundUp(bytes, kUnit);
  };
  if (r.lsaBarrierCount > 0) {
    place(lsaBarrierBytes(r.lsaBarrierCount, lsaSize), kUnit, &out->lsaBarrier.bufHandle);
    out->lsaBarrier.nBarriers = r.lsaBarrierCount;
  }
  if (r.barrierCount > 0) {
    place(lsaBarrierBytes(r.barrierCount, lsaSize), kUnit, &out->hybridLsaBarrier.bufHandle);
    out->hybridLsaBarrier.nBarriers = r.barrierCount;
  }
  int listed = 0;
  for (ncclDevResourceRequirements_t* q = r.resourceRequirementsList; q != nullptr;
       q = q->next) {
    if (++listed > 4096)
      return refuse(ncclInvalidArgument, "resourceRequirementsList has more than 4096 entries "
                    "(a cycle?)", code, why);
    if (q->ginSignalCount > 0 || q->ginCounterCount > 0)
      return refuse(ncclInvalidUsage, "resourceRequirementsList entry " +
                    std::to_string(listed - 1) + " asks for GIN signals/counters" + noGin,
                    code, why);
    if (q->bufferAlign != 0 && (q->bufferAlign & (q->bufferAlign - 1)) != 0)
      return refuse(ncclInvalidArgument, "resourceRequirementsList entry " +
                    std::to_string(listed - 1) + ": bufferAlign " +
                    std::to_string(q->bufferAlign) + " is not a power of two", code, why);
    if (q->bufferSize > (size_t(1) << 36))
      return refuse(ncclInvalidArgument, "resourceRequirementsList entry " +
                    std::to_string(listed - 1) + ": bufferSize " +
                    std::to_string(q->bufferSize) + " is larger than 64 GiB", code, why);
    DevResourcePlan::Assign a{q->outBufferHandle, 0};
    place(q->bufferSize, q->bufferAlign, &a.handle);
    out->user.push_back(a);
  }
  if (at / kUnit > UINT32_MAX)
    return refuse(ncclInvalidArgument, "the resource buffers do not fit 32-bit handles", code,
                  why);
  out->bytes = at;
  return true;
}

}  // namespace braid
