/* "XColl": the collnet half of libnccl-net-x.so (ncclCollNetPlugin_v11), built against
 * <braid/net_plugin.h> only, to prove that Braid finds a plugin's CollNet table in the
 * net plugin's library (as NCCL does) and drives every call of it: init, devices,
 * getProperties, listen, connect, reduceSupport, regMr/deregMr, iallreduce, iallgather,
 * ireducescatter, test, closeColl, closeListen, finalize.
 *
 * It is the smallest possible collnet: a group must have exactly one member (one node:
 * NCCL_COLLNET_NODE_THRESHOLD=1), so every collective is a copy of the member's own
 * data (all-gather and reduce-scatter over the window rules of the ABI). A group of
 * several members is refused at connect(), which makes Braid fall back with a warning.
 * XCOLL_DEVICES=0 hides its device (setup then falls back too).
 *
 * Counters of the calls Braid made are exported for the tests (xcollCounts). */
#define _GNU_SOURCE
#include <braid/net_plugin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { kInit, kListen, kConnect, kRegMr, kAllReduce, kAllGather, kReduceScatter, kTest,
       kClose, kCount };
__attribute__((visibility("default"))) atomic_long xcollCounts[kCount];

#define XCOLL_MAGIC 0x58434f4c4cull /* "XCOLL" */

typedef struct {
  int used;
  int size;
} XReq;

typedef struct {
  unsigned long magic;
  XReq reqs[NCCL_NET_MAX_REQUESTS];
} XColl;

static int xcCtx;

static ncclResult_t xcInit(void** ctx, uint64_t commId, ncclDebugLogger_t log) {
  (void)commId, (void)log;
  atomic_fetch_add(&xcollCounts[kInit], 1);
  *ctx = &xcCtx;
  return ncclSuccess;
}
static ncclResult_t xcDevices(int* ndev) {
  const char* e = getenv("XCOLL_DEVICES");
  *ndev = e ? atoi(e) : 1;
  return ncclSuccess;
}
static ncclResult_t xcGetProperties(int dev, ncclNetProperties_v11_t* props) {
  static char name[] = "xcoll0";
  if (dev != 0) return ncclInvalidArgument;
  memset(props, 0, sizeof(*props));
  props->name = name;
  props->ptrSupport = NCCL_PTR_HOST;
  props->speed = 10000;
  props->maxComms = 1024;
  props->maxRecvs = 1;
  props->maxCollBytes = (size_t)1 << 30;
  return ncclSuccess;
}
static ncclResult_t xcListen(void* ctx, int dev, void* handle, void** listenComm) {
  (void)ctx, (void)dev;
  unsigned long m = XCOLL_MAGIC;
  memcpy(handle, &m, sizeof m);
  *listenComm = malloc(1);
  atomic_fetch_add(&xcollCounts[kListen], 1);
  return *listenComm ? ncclSuccess : ncclSystemError;
}
static ncclResult_t xcConnect(void* handles[], int nranks, int rank, void* listenComm,
                              void** collComm) {
  (void)listenComm;
  unsigned long m;
  memcpy(&m, handles[rank], sizeof m);
  if (m != XCOLL_MAGIC || nranks != 1) return ncclInvalidUsage; /* one member only */
  XColl* c = calloc(1, sizeof(XColl));
  if (!c) return ncclSystemError;
  c->magic = XCOLL_MAGIC;
  *collComm = c;
  atomic_fetch_add(&xcollCounts[kConnect], 1);
  return ncclSuccess;
}
static ncclResult_t xcReduceSupport(ncclDataType_t type, ncclRedOp_t op, int* supported) {
  (void)type;
  *supported = op == ncclSum || op == ncclProd || op == ncclMax || op == ncclMin;
  return ncclSuccess;
}
static ncclResult_t xcRegMr(void* collComm, void* data, size_t size, int type, void** mh) {
  (void)collComm, (void)data, (void)size;
  if (type != NCCL_PTR_HOST) return ncclInvalidArgument;
  *mh = &xcCtx;
  atomic_fetch_add(&xcollCounts[kRegMr], 1);
  return ncclSuccess;
}
static ncclResult_t xcRegMrDmaBuf(void* c, void* d, size_t s, int t, uint64_t o, int fd,
                                  void** mh) {
  (void)c, (void)d, (void)s, (void)t, (void)o, (void)fd, (void)mh;
  return ncclInvalidUsage;
}
static ncclResult_t xcDeregMr(void* collComm, void* mh) {
  (void)collComm;
  return mh == &xcCtx ? ncclSuccess : ncclInvalidArgument;
}
static ncclResult_t xcDone(void* collComm, int size, void** request) {
  XColl* c = collComm;
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; ++i)
    if (!c->reqs[i].used) {
      c->reqs[i].used = 1;
      c->reqs[i].size = size;
      *request = &c->reqs[i];
      return ncclSuccess;
    }
  *request = NULL; /* all busy: Braid posts again later */
  return ncclSuccess;
}
static size_t typeBytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}
static ncclResult_t xcIallreduce(void* collComm, void* send, void* recv, size_t count,
                                 ncclDataType_t type, ncclRedOp_t op, void* smh, void* rmh,
                                 void** request) {
  (void)op, (void)smh, (void)rmh;
  memmove(recv, send, count * typeBytes(type)); /* one member: its data is the result */
  atomic_fetch_add(&xcollCounts[kAllReduce], 1);
  return xcDone(collComm, (int)(count * typeBytes(type)), request);
}
static ncclResult_t xcIallgather(void* collComm, void* send, int nParts, ncclNetSGE_v11_t* parts,
                                 size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                                 void* smh, void** request) {
  (void)smh, (void)bytesPerRank;
  size_t at = windowOffset;
  for (int i = 0; i < nParts; ++i) {
    memmove(parts[i].address, (char*)send + at, parts[i].size);
    at += parts[i].size;
  }
  atomic_fetch_add(&xcollCounts[kAllGather], 1);
  return xcDone(collComm, (int)windowBytes, request);
}
static ncclResult_t xcIreducescatter(void* collComm, int nParts, ncclNetSGE_v11_t* parts,
                                     void* recv, size_t bytesPerRank, size_t windowOffset,
                                     size_t windowBytes, ncclDataType_t type, ncclRedOp_t op,
                                     void* rmh, void** request) {
  (void)type, (void)op, (void)rmh;
  /* The member's block is [0, bytesPerRank) of the window's index space. */
  size_t at = windowOffset, got = 0;
  for (int i = 0; i < nParts; ++i) {
    size_t lo = at, hi = at + parts[i].size;
    if (hi > bytesPerRank) hi = bytesPerRank;
    if (lo < hi) {
      memmove((char*)recv + lo, parts[i].address, hi - lo);
      got += hi - lo;
    }
    at += parts[i].size;
  }
  (void)windowBytes;
  atomic_fetch_add(&xcollCounts[kReduceScatter], 1);
  return xcDone(collComm, (int)got, request);
}
static ncclResult_t xcIflush(void* collComm, void* data, int size, void* mh, void** request) {
  (void)data, (void)mh, (void)size;
  return xcDone(collComm, 0, request);
}
static ncclResult_t xcTest(void* request, int* done, int* size) {
  XReq* r = request;
  *done = 1;
  if (size) *size = r->size;
  r->used = 0;
  atomic_fetch_add(&xcollCounts[kTest], 1);
  return ncclSuccess;
}
static ncclResult_t xcCloseColl(void* collComm) {
  XColl* c = collComm;
  if (c->magic != XCOLL_MAGIC) return ncclInvalidArgument;
  free(c);
  atomic_fetch_add(&xcollCounts[kClose], 1);
  return ncclSuccess;
}
static ncclResult_t xcCloseListen(void* listenComm) {
  free(listenComm);
  return ncclSuccess;
}
static ncclResult_t xcMakeVDevice(int* d, ncclNetVDeviceProps_v11_t* props) {
  (void)d, (void)props;
  return ncclInvalidUsage;
}
static ncclResult_t xcFinalize(void* ctx) {
  (void)ctx;
  return ncclSuccess;
}

__attribute__((visibility("default"))) const ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
    .name = "XColl", .init = xcInit, .devices = xcDevices, .getProperties = xcGetProperties,
    .listen = xcListen, .connect = xcConnect, .reduceSupport = xcReduceSupport,
    .regMr = xcRegMr, .regMrDmaBuf = xcRegMrDmaBuf, .deregMr = xcDeregMr,
    .iallreduce = xcIallreduce, .iallgather = xcIallgather, .ireducescatter = xcIreducescatter,
    .iflush = xcIflush, .test = xcTest, .closeColl = xcCloseColl,
    .closeListen = xcCloseListen, .makeVDevice = xcMakeVDevice, .finalize = xcFinalize,
};
