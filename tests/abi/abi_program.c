/* An NCCL program built ONLY against NVIDIA's nccl.h (never Braid's), as a user's program
 * would be. It runs two ranks as threads on plain host memory (malloc), which Braid handles
 * natively: ncclGetVersion, ncclGetUniqueId, ncclCommInitRankConfig on 2 threads with the
 * header's NCCL_CONFIG_INITIALIZER (so a 2.28 program hands Braid a 2.28-sized config), an
 * AllReduce (float sum, 1000 elements) and an AllGather, checking every element. Prints
 * "ABI OK" and exits 0 on success; anything else exits 1.
 *
 * tests/abi.cmake builds it against NVIDIA's 2.30 header and against 2.28's, and runs each:
 *   abi.relink*  linked against Braid's libnccl.so.2;
 *   abi.preload* linked against NVIDIA's libnccl.so.2 and run with LD_PRELOAD=libbraid.so.
 * argv[1] (optional) is a substring the path of the library that provides ncclAllReduce
 * must contain, proving which library actually served the calls.
 * No CUDA library is linked: the header only supplies types, and streams are 0. */
#define _GNU_SOURCE
#include <nccl.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if !defined(CUDART_VERSION) || defined(BRAID_NCCL_H_USES_CUDA)
#error "abi_program must be compiled against NVIDIA's nccl.h, not Braid's"
#endif

enum { kRanks = 2, kCount = 1000, kGatherCount = 500 };

typedef struct {
  int rank;
  ncclUniqueId id;
  int failures;
} RankArgs;

#define CHECK(call)                                                                   \
  do {                                                                                \
    ncclResult_t r_ = (call);                                                         \
    if (r_ != ncclSuccess) {                                                          \
      fprintf(stderr, "rank %d: %s failed: %s (%d): %s\n", a->rank, #call,            \
              ncclGetErrorString(r_), (int)r_, ncclGetLastError(NULL));               \
      a->failures++;                                                                  \
      return NULL;                                                                    \
    }                                                                                 \
  } while (0)

static int checkRankQueries(RankArgs* a, ncclComm_t comm) {
  int count = -1, rank = -1;
  if (ncclCommCount(comm, &count) != ncclSuccess || count != kRanks ||
      ncclCommUserRank(comm, &rank) != ncclSuccess || rank != a->rank) {
    fprintf(stderr, "rank %d: ncclCommCount/UserRank gave %d/%d\n", a->rank, count, rank);
    return 1;
  }
  return 0;
}

static int checkAllReduce(RankArgs* a, ncclComm_t comm) {
  float* send = (float*)malloc(kCount * sizeof(float));
  float* recv = (float*)malloc(kCount * sizeof(float));
  int bad = 0;
  for (int i = 0; i < kCount; i++) {
    send[i] = (float)((a->rank + 1) * i);
    recv[i] = -1.0f;
  }
  ncclResult_t r = ncclAllReduce(send, recv, kCount, ncclFloat, ncclSum, comm, (cudaStream_t)0);
  if (r != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclAllReduce: %s\n", a->rank, ncclGetErrorString(r));
    bad = 1;
  }
  for (int i = 0; i < kCount && !bad; i++) {
    float want = (float)(3 * i); /* (1 + 2) * i */
    if (recv[i] != want) {
      fprintf(stderr, "rank %d: allreduce[%d] = %g, want %g\n", a->rank, i, recv[i], want);
      bad = 1;
    }
  }
  free(send);
  free(recv);
  return bad;
}

static int checkAllGather(RankArgs* a, ncclComm_t comm) {
  int* send = (int*)malloc(kGatherCount * sizeof(int));
  int* recv = (int*)malloc(kRanks * kGatherCount * sizeof(int));
  int bad = 0;
  for (int i = 0; i < kGatherCount; i++) send[i] = a->rank * 100000 + i;
  for (int i = 0; i < kRanks * kGatherCount; i++) recv[i] = -1;
  ncclResult_t r =
      ncclAllGather(send, recv, kGatherCount, ncclInt32, comm, (cudaStream_t)0);
  if (r != ncclSuccess) {
    fprintf(stderr, "rank %d: ncclAllGather: %s\n", a->rank, ncclGetErrorString(r));
    bad = 1;
  }
  for (int i = 0; i < kRanks * kGatherCount && !bad; i++) {
    int want = (i / kGatherCount) * 100000 + i % kGatherCount;
    if (recv[i] != want) {
      fprintf(stderr, "rank %d: allgather[%d] = %d, want %d\n", a->rank, i, recv[i], want);
      bad = 1;
    }
  }
  free(send);
  free(recv);
  return bad;
}

static void* runRank(void* arg) {
  RankArgs* a = (RankArgs*)arg;
  ncclComm_t comm = NCCL_COMM_NULL;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.commName = "abi_program";
  CHECK(ncclCommInitRankConfig(&comm, kRanks, a->id, a->rank, &config));
  a->failures += checkRankQueries(a, comm);
  a->failures += checkAllReduce(a, comm);
  a->failures += checkAllGather(a, comm);
  CHECK(ncclCommDestroy(comm));
  return NULL;
}

/* Which shared object provides `symbol` for this process (after any LD_PRELOAD)? */
static const char* providerOf(const char* symbol) {
  Dl_info info;
  void* addr = dlsym(RTLD_DEFAULT, symbol);
  if (addr == NULL || dladdr(addr, &info) == 0 || info.dli_fname == NULL) return "?";
  return info.dli_fname;
}

int main(int argc, char** argv) {
  alarm(120); /* a hang is a failure, not a stuck test run */

  const char* provider = providerOf("ncclAllReduce");
  printf("ncclAllReduce comes from %s\n", provider);
  if (argc > 1 && strstr(provider, argv[1]) == NULL) {
    fprintf(stderr, "expected ncclAllReduce from a library matching '%s'\n", argv[1]);
    return 1;
  }

  int version = 0;
  ncclResult_t r = ncclGetVersion(&version);
  printf("ncclGetVersion -> %d (header %d)\n", version, NCCL_VERSION_CODE);
  /* The library may be newer than the header (a 2.28 program on Braid's 2.30), never older. */
  if (r != ncclSuccess || version < NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, 0) ||
      version >= NCCL_VERSION(2, 31, 0)) {
    fprintf(stderr, "ncclGetVersion returned %d with version %d: want 2.%d to 2.30\n", (int)r,
            version, NCCL_MINOR);
    return 1;
  }

  ncclUniqueId id;
  memset(&id, 0, sizeof id);
  r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    fprintf(stderr, "ncclGetUniqueId: %s: %s\n", ncclGetErrorString(r), ncclGetLastError(NULL));
    return 1;
  }

  RankArgs args[kRanks];
  pthread_t threads[kRanks];
  for (int i = 0; i < kRanks; i++) {
    args[i].rank = i;
    args[i].id = id;
    args[i].failures = 0;
    if (pthread_create(&threads[i], NULL, runRank, &args[i]) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      return 1;
    }
  }
  int failures = 0;
  for (int i = 0; i < kRanks; i++) {
    pthread_join(threads[i], NULL);
    failures += args[i].failures;
  }
  if (failures != 0) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("ABI OK\n");
  return 0;
}
