/* A shared library linked to libbraid.so, loaded by api_table_host.c after NVIDIA's
 * libnccl.so.2 was loaded RTLD_GLOBAL (what PyTorch does before loading an extension).
 * braid_table_check() shows that plain NCCL names here bind to the other library while
 * every member of braidGetNcclApi() lives in libbraid, and runs 2 thread ranks through
 * the table on host memory (which NVIDIA's library cannot do without a GPU). */
#define _GNU_SOURCE
#include <braid/api_table.h>
#include <nccl.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

enum { kRanks = 2, kCount = 777 };

typedef struct {
  const braidNcclApi_t* api;
  ncclUniqueId id;
  int rank;
  int bad;
} Rank;

static const char* libraryOf(const void* fn) {
  Dl_info info;
  if (fn == NULL || dladdr(fn, &info) == 0 || info.dli_fname == NULL) return "?";
  return info.dli_fname;
}

static void* runRank(void* arg) {
  Rank* r = (Rank*)arg;
  const braidNcclApi_t* api = r->api;
  ncclComm_t comm = NULL;
  float send[kCount], recv[kCount];
  for (int i = 0; i < kCount; i++) send[i] = (float)(i * (r->rank + 1));
  if (api->commInitRank(&comm, kRanks, r->id, r->rank) != ncclSuccess ||
      api->allReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, (cudaStream_t)0) !=
          ncclSuccess) {
    fprintf(stderr, "rank %d: %s\n", r->rank, api->getLastError(comm));
    r->bad = 1;
    return NULL;
  }
  for (int i = 0; i < kCount; i++)
    if (recv[i] != (float)(3 * i)) {
      fprintf(stderr, "rank %d: recv[%d] = %g\n", r->rank, i, recv[i]);
      r->bad = 1;
      break;
    }
  api->commDestroy(comm);
  return NULL;
}

int braid_table_check(const char* other) {
  const braidNcclApi_t* api = braidGetNcclApi();
  printf("plain ncclAllReduce binds to %s\n", libraryOf((const void*)&ncclAllReduce));
  if (other && strstr(libraryOf((const void*)&ncclAllReduce), other) == NULL) {
    fprintf(stderr, "expected the plain name to bind to the other NCCL ('%s')\n", other);
    return 1;
  }
  if (api->size != sizeof(braidNcclApi_t) || api->version != NCCL_VERSION_CODE) {
    fprintf(stderr, "table size %zu version %d\n", api->size, api->version);
    return 1;
  }
  /* Every member is set and lives in libbraid. */
  typedef void (*Fn)(void);
  const Fn* fns = (const Fn*)((const char*)api + offsetof(braidNcclApi_t, memAlloc));
  size_t n = (sizeof(braidNcclApi_t) - offsetof(braidNcclApi_t, memAlloc)) / sizeof(Fn);
  for (size_t i = 0; i < n; i++) {
    const char* lib = libraryOf((const void*)fns[i]);
    if (strstr(lib, "libbraid.so") == NULL) {
      fprintf(stderr, "table member %zu is in %s\n", i, lib);
      return 1;
    }
  }
  printf("all %zu table members are in libbraid\n", n);
  Rank ranks[kRanks];
  pthread_t threads[kRanks];
  ncclUniqueId id;
  if (api->getUniqueId(&id) != ncclSuccess) return 1;
  for (int i = 0; i < kRanks; i++) {
    ranks[i] = (Rank){api, id, i, 0};
    pthread_create(&threads[i], NULL, runRank, &ranks[i]);
  }
  int bad = 0;
  for (int i = 0; i < kRanks; i++) {
    pthread_join(threads[i], NULL);
    bad += ranks[i].bad;
  }
  if (bad) return 1;
  printf("TABLE OK\n");
  return 0;
}
