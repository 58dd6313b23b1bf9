// cudart (src/os/cuda_rt.h): the answers without a usable GPU (this CI machine: the
// toolkit but no driver), and the same functions on a GPU (skipped here, saying why).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "tests/cuda_api/cuda_test_util.h"

#if BRAID_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

using namespace braid;
using cuda_api_test::runProcess;

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

/// Skips the calling (no-GPU) test on a machine where CUDA is usable.
#define CUDA_API_REQUIRE_NO_GPU()                                                  \
  do {                                                                             \
    if (cudart::available()) GTEST_SKIP() << "CUDA is usable here: a no-GPU test"; \
  } while (0)

// ---- without a usable GPU ----------------------------------------------------------

TEST(CudartNoGpu, NotAvailableAndSaysWhy) {
  CUDA_API_REQUIRE_NO_GPU();
  EXPECT_FALSE(cudart::available());
  EXPECT_FALSE(cudart::available());  // cached: the same answer, no crash
  std::string why = cudart::unavailableReason();
  EXPECT_FALSE(why.empty());
#if BRAID_HAVE_CUDA
  // CUDA's own reason: no driver (this machine) or no device. (CUDA keeps failing
  // every later call with it, cudaGetLastError() included: nothing to clear.)
  EXPECT_TRUE(contains(why, "cudaError")) << why;
#else
  EXPECT_TRUE(contains(why, "without CUDA")) << why;
#endif
}

TEST(CudartNoGpu, QueriesAnswerNoDevice) {
  CUDA_API_REQUIRE_NO_GPU();
  EXPECT_EQ(cudart::deviceCount(), 0);
  EXPECT_EQ(cudart::currentDevice(), -1);
  EXPECT_EQ(cudart::deviceBusId(0), "");
  EXPECT_FALSE(cudart::canAccessPeer(0, 0));
  EXPECT_FALSE(cudart::streamCapturing(nullptr));
  EXPECT_EQ(cudart::streamDevice(nullptr), -1);
  EXPECT_EQ(cudart::setDevice(-1), ncclSuccess);  // no-op
  { cudart::CaptureRelaxed relaxed; }              // harmless
}

TEST(CudartNoGpu, PointerKindIsHost) {
  int stackVar = 0;
  std::unique_ptr<int[]> heap(new int[64]);
  void* big = malloc(1 << 20);
  int dev = 7;
  EXPECT_EQ(cudart::pointerKind(&stackVar, &dev), MemKind::kHost);
  EXPECT_EQ(dev, -1);
  dev = 7;
  EXPECT_EQ(cudart::pointerKind(heap.get(), &dev), MemKind::kHost);
  EXPECT_EQ(dev, -1);
  EXPECT_EQ(cudart::pointerKind(big, nullptr), MemKind::kHost);
  dev = 7;
  EXPECT_EQ(cudart::pointerKind(nullptr, &dev), MemKind::kHost);
  EXPECT_EQ(dev, -1);
  free(big);
  EXPECT_STREQ(memKindName(MemKind::kHost), "host");
  EXPECT_STREQ(memKindName(MemKind::kDevice), "device");
}

/// Every allocating/moving call fails with ncclUnhandledCudaError and a message naming
/// the call and the reason, in lastError() and ncclGetLastError().
void expectNoCudaFailure(ncclResult_t r, const char* call) {
  EXPECT_EQ(r, ncclUnhandledCudaError) << call;
  std::string msg = cudart::lastError();
  EXPECT_TRUE(contains(msg, call)) << call << ": " << msg;
  EXPECT_TRUE(contains(msg, cudart::unavailableReason().c_str())) << msg;
  EXPECT_EQ(msg, ncclGetLastError(nullptr));
}

TEST(CudartNoGpu, AllocationsFailWithAMessage) {
  CUDA_API_REQUIRE_NO_GPU();
  void* p = reinterpret_cast<void*>(0x1);
  expectNoCudaFailure(cudart::deviceAlloc(&p, 4096, "test buffer"), "test buffer");
  EXPECT_EQ(p, nullptr);
  void* host = reinterpret_cast<void*>(0x1);
  void* dev = reinterpret_cast<void*>(0x1);
  expectNoCudaFailure(cudart::hostAllocMapped(&host, &dev, 4096), "hostAllocMapped");
  EXPECT_EQ(host, nullptr);
  EXPECT_EQ(dev, nullptr);
  std::vector<char> buf(4096);
  dev = reinterpret_cast<void*>(0x1);
  expectNoCudaFailure(cudart::hostRegister(buf.data(), buf.size(), &dev), "hostRegister");
  EXPECT_EQ(dev, nullptr);
  expectNoCudaFailure(cudart::copyToDevice(buf.data(), buf.data() + 16, 16), "copyToDevice");
  expectNoCudaFailure(cudart::copyFromDevice(buf.data(), buf.data() + 16, 16), "copyFromDevice");
  expectNoCudaFailure(cudart::memsetDevice(buf.data(), 0, 16), "memsetDevice");
  expectNoCudaFailure(cudart::setDevice(0), "setDevice");
  unsigned char handle[kCudaIpcHandleBytes] = {};
  size_t off = 0;
  expectNoCudaFailure(cudart::ipcGetHandle(buf.data(), handle, &off), "ipcGetHandle");
  void* base = reinterpret_cast<void*>(0x1);
  expectNoCudaFailure(cudart::ipcOpenHandle(handle, &base), "ipcOpenHandle");
  EXPECT_EQ(base, nullptr);
  void* ev = reinterpret_cast<void*>(0x1);
  expectNoCudaFailure(cudart::eventCreate(&ev), "eventCreate");
  EXPECT_EQ(ev, nullptr);
  expectNoCudaFailure(cudart::streamSynchronize(nullptr), "streamSynchronize");
  EXPECT_EQ(cudart::eventQuery(buf.data()), -1);
  EXPECT_TRUE(contains(cudart::lastError(), "eventQuery")) << cudart::lastError();
  EXPECT_EQ(cudart::eventQuery(nullptr), 1);
  // Releasing nothing is fine.
  EXPECT_EQ(cudart::deviceFree(nullptr), ncclSuccess);
  EXPECT_EQ(cudart::hostFree(nullptr), ncclSuccess);
  EXPECT_EQ(cudart::hostUnregister(nullptr), ncclSuccess);
  EXPECT_EQ(cudart::ipcCloseHandle(nullptr), ncclSuccess);
  EXPECT_EQ(cudart::eventDestroy(nullptr), ncclSuccess);
}

TEST(CudartNoGpu, LastErrorIsPerThread) {
  CUDA_API_REQUIRE_NO_GPU();
  void* p = nullptr;
  EXPECT_NE(cudart::deviceAlloc(&p, 64, "main thread buffer"), ncclSuccess);
  std::string other = "unset";
  std::thread([&] { other = cudart::lastError(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_TRUE(contains(cudart::lastError(), "main thread buffer"));
}

// ---- with a GPU (skipped here) -------------------------------------------------------

#if BRAID_HAVE_CUDA
/// cudaMalloc'd bytes, freed at scope exit.
struct CudaBuffer {
  void* p = nullptr;
  explicit CudaBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&p, bytes), cudaSuccess); }
  ~CudaBuffer() { cudaFree(p); }
};
#endif

TEST(CudartGpu, DeviceQueries) {
  CUDA_API_REQUIRE_GPU();
  EXPECT_GT(cudart::deviceCount(), 0);
  ASSERT_EQ(cudart::setDevice(0), ncclSuccess);
  EXPECT_EQ(cudart::currentDevice(), 0);
  std::string bus = cudart::deviceBusId(0);
  // "0000:3b:00.0": 4-digit domain, lower case.
  ASSERT_EQ(bus.size(), 12u) << bus;
  EXPECT_EQ(bus[4], ':');
  EXPECT_EQ(bus[7], ':');
  EXPECT_EQ(bus[10], '.');
  for (char ch : bus) EXPECT_FALSE(ch >= 'A' && ch <= 'Z') << bus;
  EXPECT_TRUE(cudart::canAccessPeer(0, 0));
  EXPECT_EQ(cudart::setDevice(cudart::deviceCount()), ncclInvalidArgument);
  EXPECT_EQ(cudart::deviceBusId(cudart::deviceCount()), "");
  EXPECT_TRUE(cudart::unavailableReason().empty());
}

#if BRAID_HAVE_CUDA
TEST(CudartGpu, PointerKindOfCudaMemory) {
  CUDA_API_REQUIRE_GPU();
  int last = cudart::deviceCount() - 1;
  ASSERT_EQ(cudart::setDevice(last), ncclSuccess);
  CudaBuffer b(1 << 20);
  int dev = -7;
  EXPECT_EQ(cudart::pointerKind(b.p, &dev), MemKind::kDevice);
  EXPECT_EQ(dev, last);
  EXPECT_EQ(cudart::pointerKind(static_cast<char*>(b.p) + 12345, &dev), MemKind::kDevice);
  void* managed = nullptr;
  ASSERT_EQ(cudaMallocManaged(&managed, 4096), cudaSuccess);
  EXPECT_EQ(cudart::pointerKind(managed, &dev), MemKind::kDevice);
  cudaFree(managed);
  void* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 4096), cudaSuccess);
  EXPECT_EQ(cudart::pointerKind(pinned, &dev), MemKind::kHost);
  EXPECT_EQ(dev, -1);
  cudaFreeHost(pinned);
  int stackVar = 0;
  EXPECT_EQ(cudart::pointerKind(&stackVar, &dev), MemKind::kHost);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudart::setDevice(0), ncclSuccess);
}

TEST(CudartGpu, DeviceAllocCopyMemset) {
  CUDA_API_REQUIRE_GPU();
  ASSERT_EQ(cudart::setDevice(0), ncclSuccess);
  void* d = nullptr;
  const size_t n = 1 << 16;
  ASSERT_EQ(cudart::deviceAlloc(&d, n, "test"), ncclSuccess);
  std::vector<unsigned char> in(n), out(n, 0);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<unsigned char>(i * 13);
  ASSERT_EQ(cudart::copyToDevice(d, in.data(), n), ncclSuccess);
  ASSERT_EQ(cudart::copyFromDevice(out.data(), d, n), ncclSuccess);
  EXPECT_EQ(in, out);
  ASSERT_EQ(cudart::memsetDevice(d, 0x33, n), ncclSuccess);
  ASSERT_EQ(cudart::copyFromDevice(out.data(), d, n), ncclSuccess);
  EXPECT_EQ(out, std::vector<unsigned char>(n, 0x33));
  EXPECT_EQ(cudart::deviceFree(d), ncclSuccess);
  // Too large: a clear message, no crash.
  EXPECT_EQ(cudart::deviceAlloc(&d, size_t(1) << 62, "huge"), ncclUnhandledCudaError);
  EXPECT_EQ(d, nullptr);
  EXPECT_TRUE(contains(cudart::lastError(), "huge")) << cudart::lastError();
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

/// Copies n bytes from the device address `devAddr` into fresh device memory and back
/// to the host, through the copy engine (proves devAddr is a usable device address).
std::vector<unsigned char> readThroughDevice(const void* devAddr, size_t n) {
  CudaBuffer tmp(n);
  EXPECT_EQ(cudaMemcpy(tmp.p, devAddr, n, cudaMemcpyDeviceToDevice), cudaSuccess);
  std::vector<unsigned char> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), tmp.p, n, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

TEST(CudartGpu, HostAllocMappedIsReachableFromTheDevice) {
  CUDA_API_REQUIRE_GPU();
  ASSERT_EQ(cudart::setDevice(0), ncclSuccess);
  const size_t n = 8192;
  void *host = nullptr, *dev = nullptr;
  ASSERT_EQ(cudart::hostAllocMapped(&host, &dev, n), ncclSuccess);
  ASSERT_NE(dev, nullptr);
  auto* h = static_cast<unsigned char*>(host);
  for (size_t i = 0; i < n; ++i) h[i] = static_cast<unsigned char>(i ^ 0x5c);
  std::vector<unsigned char> want(h, h + n);
  EXPECT_EQ(readThroughDevice(dev, n), want);
  EXPECT_EQ(cudart::hostFree(host), ncclSuccess);
}

TEST(CudartGpu, HostRegisterIsReachableFromTheDevice) {
  CUDA_API_REQUIRE_GPU();
  ASSERT_EQ(cudart::setDevice(0), ncclSuccess);
  const size_t n = 3 * 4096;
  void* mem = nullptr;
  ASSERT_EQ(posix_memalign(&mem, 4096, n), 0);
  auto* h = static_cast<unsigned char*>(mem);
  for (size_t i = 0; i < n; ++i) h[i] = static_cast<unsigned char>(i * 3 + 1);
  void* dev = nullptr;
  ASSERT_EQ(cudart::hostRegister(mem, n, &dev), ncclSuccess);
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(readThroughDevice(dev, n), std::vector<unsigned char>(h, h + n));
  EXPECT_EQ(cudart::hostUnregister(mem), ncclSuccess);
  // A second unregister is CUDA's error, reported, not a crash.
  EXPECT_EQ(cudart::hostUnregister(mem), ncclUnhandledCudaError);
  EXPECT_TRUE(contains(cudart::lastError(), "cudaHostUnregister")) << cudart::lastError();
  free(mem);
}

TEST(CudartGpu, StreamsEventsAndCapture) {
  CUDA_API_REQUIRE_GPU();
  ASSERT_EQ(cudart::setDevice(0), ncclSuccess);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  EXPECT_EQ(cudart::streamDevice(s), 0);
  EXPECT_FALSE(cudart::streamCapturing(s));
  void* ev = nullptr;
  ASSERT_EQ(cudart::eventCreate(&ev), ncclSuccess);
  EXPECT_EQ(cudart::eventRecord(ev, s), ncclSuccess);
  EXPECT_EQ(cudart::streamWaitEvent(nullptr, ev), ncclSuccess);
  EXPECT_EQ(cudart::streamSynchronize(s), ncclSuccess);
  EXPECT_EQ(cudart::eventQuery(ev), 1);

  // During a global-mode capture, setup calls under CaptureRelaxed leave it valid.
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_TRUE(cudart::streamCapturing(s));
  void* d = nullptr;
  EXPECT_EQ(cudart::deviceAlloc(&d, 4096, "during capture"), ncclSuccess);
  EXPECT_EQ(cudart::deviceFree(d), ncclSuccess);
  EXPECT_EQ(cudart::eventRecord(ev, s), ncclSuccess);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  if (graph != nullptr) cudaGraphDestroy(graph);
  EXPECT_FALSE(cudart::streamCapturing(s));
  EXPECT_EQ(cudart::eventDestroy(ev), ncclSuccess);
  cudaStreamDestroy(s);
}

TEST(CudartGpu, IpcHandleRoundtripBetweenProcesses) {
  CUDA_API_REQUIRE_GPU();
  ASSERT_EQ(cudart::setDevice(0), ncclSuccess);
  const size_t alloc = 1 << 20, offset = 8192, n = 65536;
  CudaBuffer b(alloc);
  ASSERT_EQ(cudart::memsetDevice(b.p, 0, alloc), ncclSuccess);
  char* p = static_cast<char*>(b.p) + offset;
  std::vector<unsigned char> pattern(n);
  for (size_t i = 0; i < n; ++i) pattern[i] = cuda_api_test::ipcPattern(i);
  ASSERT_EQ(cudart::copyToDevice(p, pattern.data(), n), ncclSuccess);
  unsigned char handle[kCudaIpcHandleBytes];
  size_t gotOffset = 0;
  ASSERT_EQ(cudart::ipcGetHandle(p, handle, &gotOffset), ncclSuccess) << cudart::lastError();
  EXPECT_EQ(gotOffset, offset);
  // Another process (this binary, exec'd in its child role) opens the handle, checks the
  // pattern and overwrites the bytes.
  std::string hex;
  char two[3];
  for (unsigned char ch : handle) {
    snprintf(two, sizeof(two), "%02x", ch);
    hex += two;
  }
  std::string off = std::to_string(gotOffset), bytes = std::to_string(n);
  const char* argv[] = {cuda_api_test::gSelfPath, "--ipc-child", hex.c_str(), off.c_str(),
                        bytes.c_str(), "0", nullptr};
  std::string out;
  ASSERT_EQ(runProcess(argv, nullptr, &out), 0) << out;
  std::vector<unsigned char> back(n);
  ASSERT_EQ(cudart::copyFromDevice(back.data(), p, n), ncclSuccess);
  EXPECT_EQ(back, std::vector<unsigned char>(n, cuda_api_test::kIpcChildFill));
  // The child wrote exactly [p, p + n): the bytes around it are untouched.
  unsigned char around[2] = {1, 1};
  ASSERT_EQ(cudart::copyFromDevice(&around[0], p - 1, 1), ncclSuccess);
  ASSERT_EQ(cudart::copyFromDevice(&around[1], p + n, 1), ncclSuccess);
  EXPECT_EQ(around[0], 0);
  EXPECT_EQ(around[1], 0);
}
#endif  // BRAID_HAVE_CUDA

}  // namespace
