// A program that uses NCCL's device API the way nccl-tests' device implementations do
// (all_reduce.cu -D 1, alltoall.cu's GIN kernels), built with nvcc against Braid's
// installed headers alone (no NVIDIA header: it stops if it sees one).
//
// Without a GPU (CI) it checks the host side on thread ranks -- teams, properties, and
// the clear refusals of ncclDevCommCreate -- and says that the device part was skipped.
// With a GPU, n thread ranks share it (or spread over several): symmetric windows from
// ncclMemAlloc, a device communicator with LSA barriers, an all-reduce kernel reading and
// writing every peer's window through ncclGetLsaPointer, many barrier rounds, and the
// device pointers compared with ncclGetLsaDevicePointer's. Exit 0 only when all hold.
//
//   braid_device_api_program [nranks=2]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nccl.h"
#include "nccl_device.h"

#ifndef BRAID_NCCL_DEVICE_H_
#error "built against another nccl_device.h than Braid's"
#endif

namespace {

int failures = 0;
#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      std::printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      std::printf(__VA_ARGS__);                                   \
      std::printf("\n");                                          \
      ++failures;                                                 \
    }                                                             \
  } while (0)
#define NCCL_OK(call)                                                                   \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    if (r_ != ncclSuccess) {                                                            \
      std::printf("FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,               \
                  ncclGetErrorString(r_), ncclGetLastError(nullptr));                   \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)
#define CUDA_OK(call)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (call);                                                            \
    if (e_ != cudaSuccess) {                                                            \
      std::printf("FAIL %s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

// nccl-tests' allReduceLsaKernel, in substance: every rank sums its share of elements
// from every peer's send window and writes the sum into every peer's receive window.
__global__ void allReduceLsa(ncclWindow_t sendwin, size_t sendoff, ncclWindow_t recvwin,
                             size_t recvoff, size_t count, ncclDevComm devComm) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamLsa(devComm),
                                         devComm.lsaBarrier, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire);
  const int rank = devComm.rank, nRanks = devComm.nRanks;
  const size_t tid = threadIdx.x + size_t(blockDim.x) * (rank + size_t(blockIdx.x) * nRanks);
  const size_t nthreads = size_t(blockDim.x) * gridDim.x * nRanks;
  for (size_t i = tid; i < count; i += nthreads) {
    float v = 0;
    for (int p = 0; p < nRanks; ++p) v += static_cast<float*>(ncclGetLsaPointer(sendwin, sendoff, p))[i];
    for (int p = 0; p < nRanks; ++p) static_cast<float*>(ncclGetLsaPointer(recvwin, recvoff, p))[i] = v;
  }
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}

// Rounds of: write the round number into my slot of every peer's window, barrier, check
// every slot of mine holds it, barrier. Mismatches are counted into *errors.
__global__ void barrierRounds(ncclWindow_t win, int rounds, ncclDevComm devComm,
                              unsigned* errors) {
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamTagLsa(), blockIdx.x};
  const ncclTeam lsa = ncclTeamLsa(devComm);
  for (int r = 1; r <= rounds; ++r) {
    for (int p = threadIdx.x; p < lsa.nRanks; p += blockDim.x) {
      int* slot = static_cast<int*>(ncclGetLsaPointer(win, 0, p)) + blockIdx.x * lsa.nRanks + lsa.rank;
      *slot = r;
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    int* mine = static_cast<int*>(ncclGetLocalPointer(win, 0)) + blockIdx.x * lsa.nRanks;
    for (int p = threadIdx.x; p < lsa.nRanks; p += blockDim.x)
      if (mine[p] != r) atomicAdd(errors, 1u);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
  }
}

// ncclFindWindow by a CTA, a warp and one thread (a pointer inside a window, a window's
// start, a pointer in none), and ncclCoopBcast over a CTA and 8-lane tiles; wrong
// broadcasts are counted into *bad.
__global__ void findAndBcast(ncclDevComm devComm, const char* a, const char* b,
                             ncclWindow_t* found, unsigned* bad) {
  const ncclWindow_t wa = ncclFindWindow(ncclCoopCta(), devComm, a + 100);
  const ncclWindow_t wb = ncclFindWindow(ncclCoopWarp(), devComm, b);
  if (threadIdx.x == 0) {
    found[0] = wa;
    found[1] = wb;
    found[2] = ncclFindWindow(ncclCoopThread(), devComm, reinterpret_cast<void*>(16));
  }
  const int v = ncclCoopBcast(ncclCoopCta(), int(threadIdx.x) + 1000, 5);
  const int t = ncclCoopBcast(ncclCoopTile<8>(), int(threadIdx.x), 3);
  if (v != 1005 || t != int(threadIdx.x / 8 * 8 + 3)) atomicAdd(bad, 1u);
}

// Where device code finds each LSA member's part of a window.
__global__ void lsaPointers(ncclWindow_t win, size_t off, int n, void** out) {
  for (int p = 0; p < n; ++p) out[p] = ncclGetLsaPointer(win, off, p);
  out[n] = ncclGetLocalPointer(win, off);
}

}  // namespace

// nccl-tests' GIN all-to-all shape: compiled (external, so kept), launched only where GIN
// exists (never on Braid today: ncclDevCommCreate refuses GIN requirements).
__global__ void ginAllToAll(ncclWindow_t sendwin, ncclWindow_t recvwin, size_t bytes,
                            ncclDevComm devComm) {
  ncclGin gin{devComm, 0};
  ncclBarrierSession<ncclCoopCta> bar{ncclCoopCta(), ncclTeamTagWorld(), gin, blockIdx.x};
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire, ncclGinFenceLevel::Relaxed);
  for (int r = threadIdx.x; r < devComm.nRanks; r += blockDim.x)
    gin.put(ncclTeamWorld(devComm), r, recvwin, devComm.rank * bytes, sendwin, r * bytes, bytes,
            ncclGin_SignalInc{0});
  gin.waitSignal(ncclCoopCta(), 0, devComm.nRanks);
  gin.flush(ncclCoopCta());
  bar.sync(ncclCoopCta(), cuda::memory_order_release, ncclGinFenceLevel::Relaxed);
  ncclSymPtr<float> sp(sendwin, 0);
  (void)(sp + 4).lsaPtr(0);
  (void)ncclGetLsaMultimemPointer(sendwin, 0, devComm);
  ncclCoopWarp warp;
  warp.sync();
}

namespace {

bool contains(const char* text, const char* what) { return std::strstr(text, what) != nullptr; }

/// The host side, on thread ranks with host memory: teams, properties, refusals.
void hostChecks(int n, bool haveGpu) {
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  NCCL_OK(ncclCommInitAll(comms.data(), n, nullptr));
  for (int i = 0; i < n; ++i) {
    const ncclTeam_t lsa = ncclTeamLsa(comms[size_t(i)]);
    CHECK(lsa.nRanks == n && lsa.rank == i && lsa.stride == 1, "LSA team {%d %d %d}", lsa.nRanks,
          lsa.rank, lsa.stride);
    const ncclTeam_t rail = ncclTeamRail(comms[size_t(i)]);
    CHECK(rail.nRanks == 1 && rail.rank == 0, "rail team {%d %d %d}", rail.nRanks, rail.rank,
          rail.stride);
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    NCCL_OK(ncclCommQueryProperties(comms[size_t(i)], &props));
    CHECK(props.nLsaTeams == 1 && !props.multimemSupport && props.ginType == NCCL_GIN_TYPE_NONE,
          "properties nLsaTeams %d multimem %d gin %d", props.nLsaTeams, int(props.multimemSupport),
          int(props.ginType));
    ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    ncclDevComm dc;
    reqs.lsaMultimem = true;
    CHECK(ncclDevCommCreate(comms[size_t(i)], &reqs, &dc) == ncclInvalidUsage, "multimem accepted");
    CHECK(contains(ncclGetLastError(comms[size_t(i)]), "lsaMultimem"), "%s",
          ncclGetLastError(comms[size_t(i)]));
    reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.ginForceEnable = true;
    CHECK(ncclDevCommCreate(comms[size_t(i)], &reqs, &dc) == ncclInvalidUsage, "GIN accepted");
    CHECK(contains(ncclGetLastError(comms[size_t(i)]), "ginForceEnable: that needs GIN"), "%s",
          ncclGetLastError(comms[size_t(i)]));
    reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
    reqs.lsaBarrierCount = 4;
    if (!haveGpu) {
      CHECK(!props.deviceApiSupport, "deviceApiSupport without a GPU");
      CHECK(ncclDevCommCreate(comms[size_t(i)], &reqs, &dc) == ncclInvalidUsage,
            "a device communicator without a GPU");
      CHECK(contains(ncclGetLastError(comms[size_t(i)]), "no CUDA device"), "%s",
            ncclGetLastError(comms[size_t(i)]));
    }
  }
  for (ncclComm_t c : comms) NCCL_OK(ncclCommDestroy(c));
}

/// The device part: n thread ranks, rank i on device i % ndev.
void deviceChecks(int n, int ndev) {
  constexpr int kBlocks = 4, kThreads = 256;
  const size_t count = (1 << 20) + 37;
  const size_t bytes = count * sizeof(float);
  std::vector<int> devs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) devs[size_t(i)] = i % ndev;
  std::vector<ncclComm_t> comms(static_cast<size_t>(n));
  NCCL_OK(ncclCommInitAll(comms.data(), n, devs.data()));
  std::vector<float*> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n));
  std::vector<int*> slots(static_cast<size_t>(n));
  std::vector<ncclWindow_t> sendWin(static_cast<size_t>(n)), recvWin(static_cast<size_t>(n)), slotWin(static_cast<size_t>(n));
  std::vector<cudaStream_t> streams(static_cast<size_t>(n));
  std::vector<ncclDevComm> dcs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    CUDA_OK(cudaSetDevice(devs[size_t(i)]));
    ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
    NCCL_OK(ncclCommQueryProperties(comms[size_t(i)], &props));
    CHECK(props.deviceApiSupport, "rank %d: deviceApiSupport false on a GPU", i);
    NCCL_OK(ncclMemAlloc(reinterpret_cast<void**>(&send[size_t(i)]), bytes));
    NCCL_OK(ncclMemAlloc(reinterpret_cast<void**>(&recv[size_t(i)]), bytes));
    NCCL_OK(ncclMemAlloc(reinterpret_cast<void**>(&slots[size_t(i)]), 4096));
    std::vector<float> h(count);
    for (size_t k = 0; k < count; ++k) h[k] = float((i + 1) * int(k % 13));
    CUDA_OK(cudaMemcpy(send[size_t(i)], h.data(), bytes, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(recv[size_t(i)], 0, bytes));
    CUDA_OK(cudaMemset(slots[size_t(i)], 0, 4096));
    CUDA_OK(cudaStreamCreateWithFlags(&streams[size_t(i)], cudaStreamNonBlocking));
  }
  NCCL_OK(ncclGroupStart());
  for (int i = 0; i < n; ++i) {
    NCCL_OK(ncclCommWindowRegister(comms[size_t(i)], send[size_t(i)], bytes, &sendWin[size_t(i)],
                                   NCCL_WIN_COLL_SYMMETRIC));
    NCCL_OK(ncclCommWindowRegister(comms[size_t(i)], recv[size_t(i)], bytes, &recvWin[size_t(i)],
                                   NCCL_WIN_COLL_SYMMETRIC));
    NCCL_OK(ncclCommWindowRegister(comms[size_t(i)], slots[size_t(i)], 4096, &slotWin[size_t(i)],
                                   NCCL_WIN_COLL_SYMMETRIC));
  }
  NCCL_OK(ncclGroupEnd());
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  reqs.lsaBarrierCount = kBlocks;
  NCCL_OK(ncclGroupStart());
  for (int i = 0; i < n; ++i) NCCL_OK(ncclDevCommCreate(comms[size_t(i)], &reqs, &dcs[size_t(i)]));
  NCCL_OK(ncclGroupEnd());
  for (int i = 0; i < n; ++i)
    CHECK(dcs[size_t(i)].lsaSize == n && dcs[size_t(i)].lsaRank == i && dcs[size_t(i)].rank == i,
          "devComm %d: lsa %d/%d rank %d", i, dcs[size_t(i)].lsaRank, dcs[size_t(i)].lsaSize,
          dcs[size_t(i)].rank);

  // Device pointers agree with the host function's.
  for (int i = 0; i < n; ++i) {
    CUDA_OK(cudaSetDevice(devs[size_t(i)]));
    void** out = nullptr;
    CUDA_OK(cudaMallocManaged(&out, sizeof(void*) * size_t(n + 1)));
    lsaPointers<<<1, 1, 0, streams[size_t(i)]>>>(recvWin[size_t(i)], 64, n, out);
    CUDA_OK(cudaStreamSynchronize(streams[size_t(i)]));
    for (int p = 0; p < n; ++p) {
      void* host = nullptr;
      NCCL_OK(ncclGetLsaDevicePointer(recvWin[size_t(i)], 64, p, &host));
      CHECK(host == out[p], "rank %d peer %d: host %p device %p", i, p, host, out[p]);
    }
    CHECK(out[n] == out[i], "rank %d: local pointer %p, LSA pointer %p", i, out[n], out[i]);
    CUDA_OK(cudaFree(out));
  }

  // Windows by address, broadcasts.
  for (int i = 0; i < n; ++i) {
    CUDA_OK(cudaSetDevice(devs[size_t(i)]));
    ncclWindow_t* found = nullptr;
    unsigned* bad = nullptr;
    CUDA_OK(cudaMallocManaged(&found, 3 * sizeof(ncclWindow_t)));
    CUDA_OK(cudaMallocManaged(&bad, sizeof(unsigned)));
    *bad = 0;
    findAndBcast<<<1, 128, 0, streams[size_t(i)]>>>(dcs[size_t(i)],
        reinterpret_cast<const char*>(send[size_t(i)]),
        reinterpret_cast<const char*>(recv[size_t(i)]), found, bad);
    CUDA_OK(cudaStreamSynchronize(streams[size_t(i)]));
    CHECK(found[0] == sendWin[size_t(i)] && found[1] == recvWin[size_t(i)] && found[2] == nullptr,
          "rank %d: ncclFindWindow gave %p %p %p", i, static_cast<void*>(found[0]),
          static_cast<void*>(found[1]), static_cast<void*>(found[2]));
    CHECK(*bad == 0, "rank %d: %u wrong broadcasts", i, *bad);
    CUDA_OK(cudaFree(found));
    CUDA_OK(cudaFree(bad));
  }

  // All-reduce, three times (barrier epochs carry over between sessions).
  for (int iter = 0; iter < 3; ++iter) {
    for (int i = 0; i < n; ++i) {
      CUDA_OK(cudaSetDevice(devs[size_t(i)]));
      allReduceLsa<<<kBlocks, kThreads, 0, streams[size_t(i)]>>>(
          sendWin[size_t(i)], 0, recvWin[size_t(i)], 0, count, dcs[size_t(i)]);
      CUDA_OK(cudaGetLastError());
    }
    for (int i = 0; i < n; ++i) CUDA_OK(cudaStreamSynchronize(streams[size_t(i)]));
    const int ranksSum = n * (n + 1) / 2;
    for (int i = 0; i < n; ++i) {
      std::vector<float> h(count);
      CUDA_OK(cudaMemcpy(h.data(), recv[size_t(i)], bytes, cudaMemcpyDeviceToHost));
      size_t bad = 0;
      for (size_t k = 0; k < count; ++k)
        if (h[k] != float(ranksSum * int(k % 13))) ++bad;
      CHECK(bad == 0, "iteration %d rank %d: %zu of %zu elements wrong", iter, i, bad, count);
    }
  }

  // Barrier rounds.
  unsigned* errors = nullptr;
  CUDA_OK(cudaMallocManaged(&errors, sizeof(unsigned)));
  *errors = 0;
  for (int i = 0; i < n; ++i) {
    CUDA_OK(cudaSetDevice(devs[size_t(i)]));
    barrierRounds<<<kBlocks, 64, 0, streams[size_t(i)]>>>(slotWin[size_t(i)], 200, dcs[size_t(i)],
                                                          errors);
    CUDA_OK(cudaGetLastError());
  }
  for (int i = 0; i < n; ++i) CUDA_OK(cudaStreamSynchronize(streams[size_t(i)]));
  CHECK(*errors == 0, "%u slot mismatches over 200 barrier rounds", *errors);
  CUDA_OK(cudaFree(errors));

  for (int i = 0; i < n; ++i) {
    CUDA_OK(cudaSetDevice(devs[size_t(i)]));
    NCCL_OK(ncclDevCommDestroy(comms[size_t(i)], &dcs[size_t(i)]));
    CHECK(ncclDevCommDestroy(comms[size_t(i)], &dcs[size_t(i)]) == ncclInvalidArgument,
          "destroyed twice");
    NCCL_OK(ncclCommWindowDeregister(comms[size_t(i)], sendWin[size_t(i)]));
    NCCL_OK(ncclCommWindowDeregister(comms[size_t(i)], recvWin[size_t(i)]));
    NCCL_OK(ncclCommWindowDeregister(comms[size_t(i)], slotWin[size_t(i)]));
    NCCL_OK(ncclMemFree(send[size_t(i)]));
    NCCL_OK(ncclMemFree(recv[size_t(i)]));
    NCCL_OK(ncclMemFree(slots[size_t(i)]));
    CUDA_OK(cudaStreamDestroy(streams[size_t(i)]));
  }
  for (ncclComm_t c : comms) NCCL_OK(ncclCommDestroy(c));
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2;
  if (n < 1 || n > 8) {
    std::printf("usage: %s [nranks 1..8]\n", argv[0]);
    return 2;
  }
  int ndev = 0;
  const cudaError_t e = cudaGetDeviceCount(&ndev);
  const bool haveGpu = e == cudaSuccess && ndev > 0;
  hostChecks(n, haveGpu);
  if (haveGpu) {
    deviceChecks(n, ndev);
    std::printf("device part: %d thread ranks on %d GPU(s): all-reduce, barriers, pointers %s\n",
                n, ndev, failures == 0 ? "passed" : "FAILED");
  } else {
    std::printf("device part SKIPPED: no CUDA device (%s); host checks %s\n",
                e == cudaSuccess ? "0 devices" : cudaGetErrorString(e),
                failures == 0 ? "passed" : "FAILED");
  }
  return failures == 0 ? 0 : 1;
}
