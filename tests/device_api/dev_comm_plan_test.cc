// planDevResources (src/device/dev_comm_plan.h): what ncclDevCommCreate accepts and how
// it lays out the resource window, without a GPU.
#include "src/device/dev_comm_plan.h"

#include <gtest/gtest.h>

#include <string>

namespace braid {
namespace {

ncclDevCommRequirements_t initReqs() {
  ncclDevCommRequirements_t r = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  return r;
}

/// Refused with `code` and a message containing `what`.
void expectRefused(const ncclDevCommRequirements_t& r, int nRanks, int lsaSize,
                   ncclResult_t code, const char* what) {
  DevResourcePlan plan;
  ncclResult_t got = ncclSuccess;
  std::string why;
  EXPECT_FALSE(planDevResources(r, nRanks, lsaSize, &plan, &got, &why)) << what;
  EXPECT_EQ(got, code) << why;
  EXPECT_NE(why.find(what), std::string::npos) << why;
}

TEST(DevCommPlan, EmptyRequirementsNeedNoBuffers) {
  DevResourcePlan plan;
  ncclResult_t code = ncclSuccess;
  std::string why;
  ASSERT_TRUE(planDevResources(initReqs(), 4, 4, &plan, &code, &why)) << why;
  EXPECT_EQ(plan.bytes, 0u);
  EXPECT_EQ(plan.lsaBarrier.nBarriers, 0);
  EXPECT_TRUE(plan.user.empty());
}

TEST(DevCommPlan, BarriersAndUserBuffersAreLaidOutInOrderWithoutOverlap) {
  for (int lsa : {1, 2, 3, 8}) {
    ncclDevCommRequirements_t r = initReqs();
    r.lsaBarrierCount = 5;
    r.barrierCount = 3;
    ncclDevResourceHandle_t h1 = 77, h2 = 77;
    ncclDevResourceRequirements_t a{}, b{};
    a.bufferSize = 1000;
    a.bufferAlign = 4096;
    a.outBufferHandle = &h1;
    b.bufferSize = 1;
    b.bufferAlign = 0;
    b.outBufferHandle = &h2;
    a.next = &b;
    r.resourceRequirementsList = &a;
    DevResourcePlan plan;
    ncclResult_t code = ncclSuccess;
    std::string why;
    ASSERT_TRUE(planDevResources(r, lsa, lsa, &plan, &code, &why)) << why;
    const size_t lsaWords = lsaBarrierBytes(5, lsa), worldWords = lsaBarrierBytes(3, lsa);
    EXPECT_EQ(lsaWords, size_t(5) * (3 + size_t(lsa)) * 4);
    EXPECT_EQ(plan.lsaBarrier.bufHandle, 0u);
    EXPECT_EQ(plan.lsaBarrier.nBarriers, 5);
    EXPECT_EQ(plan.hybridLsaBarrier.nBarriers, 3);
    const size_t worldAt = ncclGetResourceBufferOffset(plan.hybridLsaBarrier.bufHandle);
    EXPECT_GE(worldAt, lsaWords);
    ASSERT_EQ(plan.user.size(), 2u);
    const size_t aAt = ncclGetResourceBufferOffset(plan.user[0].handle);
    const size_t bAt = ncclGetResourceBufferOffset(plan.user[1].handle);
    EXPECT_GE(aAt, worldAt + worldWords);
    EXPECT_EQ(aAt % 4096, 0u) << "bufferAlign honoured";
    EXPECT_GE(bAt, aAt + 1000);
    EXPECT_GE(plan.bytes, bAt + 1);
    EXPECT_EQ(plan.bytes % 128, 0u);
    EXPECT_EQ(plan.user[0].out, &h1);
    EXPECT_EQ(plan.user[1].out, &h2);
    EXPECT_EQ(h1, 77u) << "handles are written by ncclDevCommCreate, not by the plan";
  }
}

TEST(DevCommPlan, RefusesWhatBraidDoesNotOffer) {
  ncclDevCommRequirements_t r = initReqs();
  r.lsaMultimem = true;
  expectRefused(r, 2, 2, ncclInvalidUsage, "lsaMultimem");
  r = initReqs();
  r.ginForceEnable = true;
  expectRefused(r, 2, 2, ncclInvalidUsage, "ginForceEnable: that needs GIN");
  r = initReqs();
  r.ginCounterCount = 1;
  expectRefused(r, 2, 2, ncclInvalidUsage, "ginCounterCount");
  r = initReqs();
  r.ginConnectionType = NCCL_GIN_CONNECTION_FULL;
  expectRefused(r, 2, 2, ncclInvalidUsage, "ginConnectionType");
  r = initReqs();
  r.worldGinBarrierCount = 1;
  expectRefused(r, 2, 2, ncclInvalidUsage, "worldGinBarrierCount");
  r = initReqs();
  r.lsaLLA2ABlockCount = 2;
  expectRefused(r, 2, 2, ncclInvalidUsage, "lsaLLA2ABlockCount");
  ncclTeamRequirements_t team{};
  team.multimem = true;
  r = initReqs();
  r.teamRequirementsList = &team;
  expectRefused(r, 2, 2, ncclInvalidUsage, "multimem for a team");
  ncclDevResourceRequirements_t res{};
  res.ginSignalCount = 2;
  r = initReqs();
  r.resourceRequirementsList = &res;
  expectRefused(r, 2, 2, ncclInvalidUsage, "GIN signals");
}

TEST(DevCommPlan, WorldAndRailBarriersOnlyWithinOneLsaTeam) {
  ncclDevCommRequirements_t r = initReqs();
  r.barrierCount = 2;
  expectRefused(r, 8, 4, ncclInvalidUsage, "barrierCount: a world barrier across 2 LSA teams");
  r = initReqs();
  r.railGinBarrierCount = 2;
  expectRefused(r, 8, 4, ncclInvalidUsage, "railGinBarrierCount");
  DevResourcePlan plan;
  ncclResult_t code = ncclSuccess;
  std::string why;
  r = initReqs();
  r.barrierCount = 2;
  r.railGinBarrierCount = 2;  // a rail of one rank: nothing to do
  EXPECT_TRUE(planDevResources(r, 4, 4, &plan, &code, &why)) << why;
}

TEST(DevCommPlan, BadArguments) {
  ncclDevCommRequirements_t r = initReqs();
  r.magic = 0;
  expectRefused(r, 2, 2, ncclInvalidArgument, "NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER");
  r = initReqs();
  r.size = 8;
  expectRefused(r, 2, 2, ncclInvalidArgument, "reqs->size 8");
  r = initReqs();
  r.lsaBarrierCount = -1;
  expectRefused(r, 2, 2, ncclInvalidArgument, "lsaBarrierCount is negative");
  ncclDevResourceRequirements_t res{};
  res.bufferSize = 64;
  res.bufferAlign = 48;
  r = initReqs();
  r.resourceRequirementsList = &res;
  expectRefused(r, 2, 2, ncclInvalidArgument, "not a power of two");
  res.bufferAlign = 0;
  res.next = &res;  // a cycle
  expectRefused(r, 2, 2, ncclInvalidArgument, "a cycle?");
  ncclTeamRequirements_t team{};
  team.next = &team;
  r = initReqs();
  r.teamRequirementsList = &team;
  expectRefused(r, 2, 2, ncclInvalidArgument, "teamRequirementsList has more than 4096");
}

}  // namespace
}  // namespace braid
