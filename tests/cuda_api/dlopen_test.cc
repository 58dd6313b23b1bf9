// The library loads and runs its host path in a fresh process that links nothing of
// Braid's (tests/cuda_api/dlopen_probe.cc), with CUDA unusable: here because there is no
// driver, on a GPU machine because CUDA_VISIBLE_DEVICES hides the devices.
#include <gtest/gtest.h>

#include <string>

#include "src/os/cuda_rt.h"
#include "tests/cuda_api/cuda_test_util.h"

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::string runProbe(const char* const* env, int* rc) {
  const char* argv[] = {CUDA_API_PROBE, CUDA_API_LIBNCCL, nullptr};
  std::string out;
  *rc = cuda_api_test::runProcess(argv, env, &out);
  return out;
}

TEST(DlopenProbe, LoadsAndRunsWithCudaHidden) {
  const char* env[] = {"CUDA_VISIBLE_DEVICES=", "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT",
                       "NCCL_DEBUG_FILE=", nullptr};
  int rc = -1;
  std::string out = runProbe(env, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "probe: 1-rank all-reduce ok")) << out;
  // The INFO line with CUDA's reason (no driver, or no visible device).
  EXPECT_TRUE(contains(out, "CUDA not usable (")) << out;
}

TEST(DlopenProbe, LoadsAndRunsAsIs) {
  const char* env[] = {"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT", nullptr};
  int rc = -1;
  std::string out = runProbe(env, &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(contains(out, "probe: 1-rank all-reduce ok")) << out;
  if (braid::cudart::available()) {
    EXPECT_TRUE(contains(out, "CUDA usable: ")) << out;
  } else {
    EXPECT_TRUE(contains(out, "CUDA not usable (")) << out;
    EXPECT_TRUE(contains(out, braid::cudart::unavailableReason().c_str())) << out;
  }
}

}  // namespace
