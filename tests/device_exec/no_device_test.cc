// The CUDA executor on a machine without a usable GPU (every CI run): ops that reach it
// fail with a message, never a crash, and the host path is untouched.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nccl.h"
#include "src/core/comm.h"
#include "src/device/cuda_executor.h"
#include "src/os/cuda_rt.h"

using namespace braid;

namespace {

class NoDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cudart::available()) GTEST_SKIP() << "a GPU is usable here: tests/gpu covers it";
    ASSERT_EQ(ncclCommInitAll(&comm_, 1, nullptr), ncclSuccess);
  }
  void TearDown() override {
    if (comm_) ncclCommDestroy(comm_);
  }
  ncclComm_t comm_ = nullptr;
};

}  // namespace

TEST_F(NoDevice, AnOpMarkedDeviceFailsWithTheReason) {
  std::vector<float> a(16, 1.0f), b(16, 0.0f);
  OpRecord op;
  op.coll = Coll::kAllReduce;
  op.call = "ncclAllReduce";
  op.comm = asComm(comm_);
  op.sendbuff = a.data();
  op.recvbuff = b.data();
  op.count = a.size();
  op.type = ncclFloat32;
  op.op = ncclSum;
  op.mem = MemKind::kDevice;
  std::vector<const OpRecord*> ops{&op};
  const ncclResult_t r = executeDeviceOps(ops);
  EXPECT_NE(r, ncclSuccess);
  const std::string msg = ncclGetLastError(comm_);
  EXPECT_NE(msg.find("CUDA"), std::string::npos) << msg;
  // Refused before anything was made: nothing written, the communicator still usable.
  EXPECT_EQ(b[0], 0.0f);
  ncclResult_t async = ncclInProgress;
  EXPECT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  EXPECT_EQ(ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, comm_, nullptr),
            ncclSuccess);
  EXPECT_EQ(b[0], 1.0f);
}

TEST_F(NoDevice, HostBuffersStillRunOnTheHostExecutor) {
  std::vector<int> a(1000, 3), b(1000, 0);
  ASSERT_EQ(ncclAllReduce(a.data(), b.data(), a.size(), ncclInt32, ncclSum, comm_, nullptr),
            ncclSuccess);
  EXPECT_EQ(b[0], 3);
  EXPECT_EQ(b[999], 3);
  EXPECT_EQ(asComm(comm_)->device, nullptr) << "no CUDA state was made for host buffers";
}

TEST(NoDeviceInit, CommInitRankWithoutAGpuHasNoDevice) {
  if (cudart::available()) GTEST_SKIP() << "a GPU is usable here";
  EXPECT_EQ(cudart::currentDevice(), -1);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c = nullptr;
  ASSERT_EQ(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  int dev = 7;
  EXPECT_EQ(ncclCommCuDevice(c, &dev), ncclSuccess);
  EXPECT_EQ(dev, -1);
  EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}
