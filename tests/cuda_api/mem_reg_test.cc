// ncclMemAlloc / ncclMemFree and ncclCommRegister / ncclCommWindowRegister with their
// registry (src/core/registration.h): host memory here, device memory on a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "nccl.h"
#include "src/core/comm.h"
#include "src/core/registration.h"
#include "src/device/vmm.h"
#include "tests/cuda_api/cuda_test_util.h"

#if BRAID_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

using namespace braid;

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

/// A 1-rank communicator (ncclCommInitAll on one device; host memory without a GPU).
struct OneRank {
  ncclComm_t comm = nullptr;
  OneRank() {
    int dev = 0;
    EXPECT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess) << ncclGetLastError(nullptr);
  }
  ~OneRank() {
    if (comm != nullptr) {
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    }
  }
  Comm* c() const { return asComm(comm); }
};

// ---- ncclMemAlloc / ncclMemFree ------------------------------------------------------

TEST(MemAlloc, HostMemoryWithoutAGpu) {
  if (cudart::available()) GTEST_SKIP() << "CUDA is usable here: ncclMemAlloc gives device memory";
  void* p = nullptr;
  const size_t n = 100000;
  ASSERT_EQ(ncclMemAlloc(&p, n), ncclSuccess);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % NCCL_WIN_REQUIRED_ALIGNMENT, 0u);
  EXPECT_EQ(cudart::pointerKind(p, nullptr), MemKind::kHost);
  memset(p, 0xab, n);  // usable host memory
  EXPECT_EQ(static_cast<unsigned char*>(p)[n - 1], 0xab);
  EXPECT_EQ(ncclMemFree(p), ncclSuccess);
}

TEST(MemAlloc, EdgeCases) {
  void* p = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(ncclMemAlloc(&p, 0), ncclSuccess);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);
  EXPECT_EQ(ncclMemAlloc(nullptr, 16), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "ncclMemAlloc")) << ncclGetLastError(nullptr);
  p = reinterpret_cast<void*>(0x1);
  EXPECT_NE(ncclMemAlloc(&p, SIZE_MAX - 100), ncclSuccess);
  EXPECT_EQ(p, nullptr);
}

TEST(MemAlloc, DeviceMemoryWithAGpu) {
  CUDA_API_REQUIRE_GPU();
  ASSERT_EQ(cudart::setDevice(cudart::deviceCount() - 1), ncclSuccess);
  for (size_t n : {size_t(1), size_t(100), size_t(4096), size_t(3 << 20) + 5}) {
    void* p = nullptr;
    ASSERT_EQ(ncclMemAlloc(&p, n), ncclSuccess) << n;
    int dev = -1;
    EXPECT_EQ(cudart::pointerKind(p, &dev), MemKind::kDevice) << n;
    EXPECT_EQ(dev, cudart::deviceCount() - 1);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % NCCL_WIN_REQUIRED_ALIGNMENT, 0u);
    std::vector<unsigned char> in(n, 0x77), out(n);
    EXPECT_EQ(cudart::copyToDevice(p, in.data(), n), ncclSuccess);
    EXPECT_EQ(cudart::copyFromDevice(out.data(), p, n), ncclSuccess);
    EXPECT_EQ(in, out);
    EXPECT_EQ(ncclMemFree(p), ncclSuccess) << ncclGetLastError(nullptr);
  }
  ASSERT_EQ(cudart::setDevice(0), ncclSuccess);
}

// ---- the registry --------------------------------------------------------------------

/// Distinct fake communicator keys (the registry never dereferences them).
Comm* fakeComm(int i) {
  static char keys[4];
  return reinterpret_cast<Comm*>(&keys[i]);
}

TEST(Registry, FindCoversTheRange) {
  Comm* c = fakeComm(0);
  std::vector<char> a(1000), b(100);
  Registration *ra = nullptr, *rb = nullptr;
  ASSERT_EQ(addRegistration(c, a.data(), a.size(), false, 0, &ra), ncclSuccess);
  ASSERT_EQ(addRegistration(c, b.data(), b.size(), true, NCCL_WIN_COLL_SYMMETRIC, &rb), ncclSuccess);
  EXPECT_EQ(registrationCount(c), 2u);
  EXPECT_EQ(ra->kind, MemKind::kHost);
  EXPECT_EQ(ra->device, -1);
  EXPECT_FALSE(ra->hasIpc);
  EXPECT_TRUE(rb->window);
  EXPECT_EQ(rb->winFlags, NCCL_WIN_COLL_SYMMETRIC);

  EXPECT_EQ(findRegistration(c, a.data(), a.size()), ra);
  EXPECT_EQ(findRegistration(c, a.data() + 10, 990), ra);
  EXPECT_EQ(findRegistration(c, a.data() + 999, 1), ra);
  EXPECT_EQ(findRegistration(c, a.data() + 1000, 0), ra);  // empty range at the end
  EXPECT_EQ(findRegistration(c, a.data() + 10, 991), nullptr);  // one byte past
  EXPECT_EQ(findRegistration(c, a.data() - 1, 2), nullptr);
  EXPECT_EQ(findRegistration(c, b.data() + 50, 50), rb);
  EXPECT_EQ(findRegistration(fakeComm(1), a.data(), 1), nullptr);  // other communicator

  EXPECT_EQ(removeRegistration(c, ra, false, "test"), ncclSuccess);
  EXPECT_EQ(findRegistration(c, a.data(), 1), nullptr);
  // A window handle is not a buffer handle, and the reverse.
  EXPECT_EQ(removeRegistration(c, rb, false, "test"), ncclInvalidArgument);
  EXPECT_EQ(removeRegistration(c, rb, true, "test"), ncclSuccess);
  EXPECT_EQ(registrationCount(c), 0u);
}

TEST(Registry, NestedAndOverlappingRanges) {
  Comm* c = fakeComm(0);
  std::vector<char> buf(4096);
  Registration *outer = nullptr, *inner = nullptr, *tail = nullptr;
  ASSERT_EQ(addRegistration(c, buf.data(), 4096, false, 0, &outer), ncclSuccess);
  ASSERT_EQ(addRegistration(c, buf.data() + 100, 100, false, 0, &inner), ncclSuccess);
  ASSERT_EQ(addRegistration(c, buf.data() + 150, 1000, false, 0, &tail), ncclSuccess);
  // [160, 1160) is only inside outer, though two later ranges start below it.
  EXPECT_EQ(findRegistration(c, buf.data() + 160, 1000), outer);
  const Registration* r = findRegistration(c, buf.data() + 160, 10);
  EXPECT_TRUE(r == inner || r == tail || r == outer);
  EXPECT_TRUE(r->covers(buf.data() + 160, 10));
  // The same range twice: two records, each removable once.
  Registration* again = nullptr;
  ASSERT_EQ(addRegistration(c, buf.data(), 4096, false, 0, &again), ncclSuccess);
  EXPECT_NE(again, outer);
  EXPECT_EQ(registrationCount(c), 4u);
  EXPECT_EQ(removeRegistration(c, again, false, "test"), ncclSuccess);
  EXPECT_EQ(findRegistration(c, buf.data() + 160, 1000), outer);
  forgetRegistrations(c);
  EXPECT_EQ(registrationCount(c), 0u);
  EXPECT_EQ(findRegistration(c, buf.data(), 1), nullptr);
  // Forgotten records are no longer valid handles.
  EXPECT_EQ(removeRegistration(c, outer, false, "test"), ncclInvalidArgument);
}

// ---- ncclCommRegister / ncclCommWindowRegister ----------------------------------------

TEST(CommRegister, HostBuffersOfAOneRankComm) {
  OneRank one;
  ASSERT_NE(one.comm, nullptr);
  std::vector<float> buf(1024, 1.0f);
  void* handle = nullptr;
  ASSERT_EQ(ncclCommRegister(one.comm, buf.data(), buf.size() * sizeof(float), &handle),
            ncclSuccess);
  ASSERT_NE(handle, nullptr);
  const Registration* r = findRegistration(one.c(), buf.data() + 10, 100 * sizeof(float));
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r, handle);
  EXPECT_EQ(r->kind, MemKind::kHost);
  EXPECT_EQ(r->device, -1);
  EXPECT_FALSE(r->hasIpc);
  EXPECT_FALSE(r->window);

  ncclWindow_t win = nullptr;
  ASSERT_EQ(ncclCommWindowRegister(one.comm, buf.data(), 4096, &win, NCCL_WIN_DEFAULT),
            ncclSuccess);
  EXPECT_EQ(registrationCount(one.c()), 2u);

  // The registered buffer still works as a collective buffer.
  ASSERT_EQ(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, one.comm,
                          nullptr), ncclSuccess);
  EXPECT_EQ(buf[5], 1.0f);

  // Window and buffer handles do not mix.
  EXPECT_EQ(ncclCommDeregister(one.comm, win), ncclInvalidArgument);
  EXPECT_EQ(ncclCommWindowDeregister(one.comm, reinterpret_cast<ncclWindow_t>(handle)),
            ncclInvalidArgument);
  EXPECT_EQ(ncclCommWindowDeregister(one.comm, win), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(one.comm, handle), ncclSuccess);
  EXPECT_EQ(findRegistration(one.c(), buf.data(), 4), nullptr);

  // A second deregister is an error with a message (and no use of freed memory).
  EXPECT_EQ(ncclCommDeregister(one.comm, handle), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(one.comm), "deregistered already"))
      << ncclGetLastError(one.comm);
  EXPECT_EQ(ncclCommWindowDeregister(one.comm, win), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(one.comm), "ncclCommWindowDeregister"))
      << ncclGetLastError(one.comm);
  EXPECT_EQ(registrationCount(one.c()), 0u);
}

TEST(CommRegister, BadArguments) {
  OneRank one;
  ASSERT_NE(one.comm, nullptr);
  std::vector<char> buf(8192);
  void* handle = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(ncclCommRegister(one.comm, nullptr, 16, &handle), ncclInvalidArgument);
  EXPECT_EQ(handle, nullptr);
  EXPECT_EQ(ncclCommRegister(one.comm, buf.data(), 16, nullptr), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDeregister(one.comm, nullptr), ncclInvalidArgument);
  ncclWindow_t win = nullptr;
  EXPECT_EQ(ncclCommWindowRegister(one.comm, buf.data(), 16, &win, 0x100), ncclInvalidArgument);
  EXPECT_EQ(registrationCount(one.c()), 0u);
  // A handle of another communicator is refused.
  OneRank two;
  ASSERT_NE(two.comm, nullptr);
  ASSERT_EQ(ncclCommRegister(one.comm, buf.data(), 16, &handle), ncclSuccess);
  EXPECT_EQ(ncclCommDeregister(two.comm, handle), ncclInvalidArgument);
  EXPECT_EQ(ncclCommDeregister(one.comm, handle), ncclSuccess);
}

TEST(CommRegister, DeviceBufferKeepsItsIpcHandle) {
  CUDA_API_REQUIRE_GPU();
  ASSERT_EQ(cudart::setDevice(0), ncclSuccess);
  OneRank one;
  ASSERT_NE(one.comm, nullptr);
  // cudaMalloc memory: legacy CUDA IPC exports it (ncclMemAlloc's cuMem memory is not
  // exportable that way: see ncclMemAllocIsVmmWhereSupported).
  void* mem = nullptr;
  ASSERT_EQ(cudart::deviceAlloc(&mem, 1 << 20, "test"), ncclSuccess);
  char* p = static_cast<char*>(mem) + 4096;
  void* handle = nullptr;
  ASSERT_EQ(ncclCommRegister(one.comm, p, 65536, &handle), ncclSuccess);
  const Registration* r = findRegistration(one.c(), p + 100, 1000);
  ASSERT_EQ(r, handle);
  EXPECT_EQ(r->kind, MemKind::kDevice);
  EXPECT_EQ(r->device, 0);
  ASSERT_TRUE(r->hasIpc);
  // The handle names the allocation, the offset where the buffer sits in it.
  unsigned char h[kCudaIpcHandleBytes];
  size_t off = 0;
  ASSERT_EQ(cudart::ipcGetHandle(mem, h, &off), ncclSuccess);
  EXPECT_EQ(off + 4096, r->ipcOffset);
  EXPECT_EQ(memcmp(h, r->ipcHandle, sizeof(h)), 0);
  EXPECT_EQ(ncclCommDeregister(one.comm, handle), ncclSuccess);
  EXPECT_EQ(cudart::deviceFree(mem), ncclSuccess);
}

// ncclMemAlloc gives cuMem (VMM) memory where the device supports it -- what the device
// API's windows map (docs/device-api.md) -- and it registers as device memory.
TEST(CommRegister, ncclMemAllocIsVmmWhereSupported) {
  CUDA_API_REQUIRE_GPU();
  ASSERT_EQ(cudart::setDevice(0), ncclSuccess);
  OneRank one;
  ASSERT_NE(one.comm, nullptr);
  void* mem = nullptr;
  ASSERT_EQ(ncclMemAlloc(&mem, 1 << 20), ncclSuccess);
  EXPECT_EQ(vmm::owns(mem), vmm::supported(0));
  void* handle = nullptr;
  ASSERT_EQ(ncclCommRegister(one.comm, mem, 1 << 20, &handle), ncclSuccess);
  const Registration* r = findRegistration(one.c(), mem, 1 << 20);
  ASSERT_EQ(r, handle);
  EXPECT_EQ(r->kind, MemKind::kDevice);
  EXPECT_EQ(ncclCommDeregister(one.comm, handle), ncclSuccess);
  EXPECT_EQ(ncclMemFree(mem), ncclSuccess);
  EXPECT_FALSE(vmm::owns(mem));
}

}  // namespace
