// A user's NCCL program built against an installed Braid (tests/install.cmake): two ranks
// as threads all-reduce and all-gather host buffers; every element is checked. argv[1] is
// a substring the path of the library serving ncclAllReduce must contain (proves which
// library the build picked up). Prints "CONSUMER OK" and exits 0 on success.
#include <dlfcn.h>
#include <nccl.h>
#include <braid/braid.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 2;
constexpr size_t kCount = 4099;  // odd, so no rank gets an even share

int runRank(int rank, ncclUniqueId id) {
  ncclComm_t comm = nullptr;
  if (ncclCommInitRank(&comm, kRanks, id, rank) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: init: %s\n", rank, ncclGetLastError(nullptr));
    return 1;
  }
  std::vector<double> send(kCount), recv(kCount, -1.0);
  for (size_t i = 0; i < kCount; ++i) send[i] = double(rank + 1) * double(i);
  std::vector<int> part(kCount, rank * 7 + 1), all(kRanks * kCount, -1);
  int bad = 0;
  if (ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat64, ncclSum, comm, nullptr) !=
          ncclSuccess ||
      ncclAllGather(part.data(), all.data(), kCount, ncclInt32, comm, nullptr) != ncclSuccess) {
    std::fprintf(stderr, "rank %d: %s\n", rank, ncclGetLastError(comm));
    bad = 1;
  }
  for (size_t i = 0; i < kCount && !bad; ++i)
    if (recv[i] != 3.0 * double(i)) {
      std::fprintf(stderr, "rank %d: allreduce[%zu] = %g\n", rank, i, recv[i]);
      bad = 1;
    }
  for (size_t i = 0; i < all.size() && !bad; ++i)
    if (all[i] != int(i / kCount) * 7 + 1) {
      std::fprintf(stderr, "rank %d: allgather[%zu] = %d\n", rank, i, all[i]);
      bad = 1;
    }
  ncclCommDestroy(comm);
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  Dl_info info{};
  void* fn = dlsym(RTLD_DEFAULT, "ncclAllReduce");
  // The real path: pkg-config's relocatable prefix leaves "lib/pkgconfig/../.." in it.
  char real[4096] = "?";
  if (fn && dladdr(fn, &info) && info.dli_fname && !realpath(info.dli_fname, real))
    std::snprintf(real, sizeof(real), "%s", info.dli_fname);
  const char* from = real;
  std::printf("ncclAllReduce from %s; Braid %s\n", from, braidVersionString());
  if (argc > 1 && std::strstr(from, argv[1]) == nullptr) {
    std::fprintf(stderr, "expected the library to match '%s'\n", argv[1]);
    return 1;
  }
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version != NCCL_VERSION_CODE) {
    std::fprintf(stderr, "ncclGetVersion %d, header %d\n", version, NCCL_VERSION_CODE);
    return 1;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  int failures[kRanks] = {};
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) ranks.emplace_back([&, r] { failures[r] = runRank(r, id); });
  for (auto& t : ranks) t.join();
  if (failures[0] || failures[1]) return 1;
  std::printf("CONSUMER OK\n");
  return 0;
}
