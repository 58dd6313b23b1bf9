/* "X": a small TCP network written as a third-party NCCL net plugin, built against
 * <braid/net_plugin.h> only, to prove that Braid loads external plugins and runs its
 * traffic through them. One source, four libraries (tests/net.cmake):
 *   XNET_VERSION=11   libnccl-net-x.so         exports ncclNetPlugin_v11 (name "X")
 *   XNET_VERSION=8    libnccl-net-x8.so        exports ncclNetPlugin_v8  (name "X8")
 *   XNET_VERSION=0    libnccl-net-broken.so    exports no table, only xnetBrokenMarker
 *   XNET_FAIL_INIT=1  libnccl-net-failinit.so  init() fails with ncclSystemError
 *
 * One device, "xnet0". listen() binds a TCP socket to XNET_ADDR (an IPv4 address) if set,
 * else to the first non-loopback IPv4 interface, else to 127.0.0.1; port 0. The handle
 * carries {magic, address, port, token}; the connecting side sends the 64-bit token
 * first and accept() drops any connection whose token is wrong. Each message is an
 * 8-byte size header (host byte order) followed by the payload. Requests on one comm
 * complete strictly in posting order; test() moves bytes without blocking.
 *
 * connect() keeps its in-progress socket in the caller's handle (as NCCL's own socket net
 * does): it must be called again with the same handle buffer until it returns a comm. */
#define _GNU_SOURCE
#include <braid/net_plugin.h>

#ifndef XNET_VERSION
#define XNET_VERSION 11
#endif

#if XNET_VERSION == 0
/* The broken plugin: a library that loads but offers no ncclNetPlugin_v* table. */
__attribute__((visibility("default"))) int xnetBrokenMarker = 42;
#else

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define XNET_MAGIC 0x584e4554u /* "XNET" */
#define XNET_MAX_REQS 32       /* outstanding requests per comm */
#define XNET_MAX_PENDING 16    /* accepted sockets still waiting for their token */

static ncclDebugLogger_t xLogger;
static atomic_ullong xBytesSent, xBytesRecvd; /* payload bytes, all comms together */

#define XLOG(level, flags, ...) \
  do { if (xLogger) xLogger(level, flags, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define XWARN(...) XLOG(NCCL_LOG_WARN, NCCL_NET, __VA_ARGS__)

/* The listen handle, exchanged out of band. `pending` is local state of connect(). */
struct xHandle {
  uint32_t magic;
  uint32_t addr;  /* IPv4, network byte order */
  uint16_t port;  /* network byte order */
  uint16_t pad0;
  uint32_t pad1;
  uint64_t token; /* the connecting side must send this first */
  struct xComm* pending;
};
_Static_assert(sizeof(struct xHandle) <= NCCL_NET_HANDLE_MAXSIZE, "handle too large");

struct xReq {
  struct xComm* comm;
  char* data;
  size_t size;          /* send: message size; receive: posted capacity, then received size */
  uint64_t hdr;         /* the size header on the wire */
  size_t hdrDone, done; /* header and payload bytes moved */
  int complete, freed;  /* all bytes moved; reported done by test() (slot reusable) */
};

struct xComm {
  int fd, isSend;
  ncclResult_t failed; /* sticky error once the connection broke */
  char peer[INET_ADDRSTRLEN + 8];
  /* Ring of requests: [head, cur) complete (some maybe freed), [cur, tail) in progress. */
  unsigned head, cur, tail;
  struct xReq reqs[XNET_MAX_REQS];
};

struct xPending { /* an accepted socket whose token has not all arrived */
  int fd;
  size_t got;
  uint64_t token;
  char peer[INET_ADDRSTRLEN + 8];
};

struct xListen {
  int fd;
  uint64_t token;
  struct xPending pend[XNET_MAX_PENDING];
};

static char xDevName[] = "xnet0";

/* ---- helpers -------------------------------------------------------------------- */

static void xFormatPeer(char* out, size_t len, const struct sockaddr_in* sa) {
  char ip[INET_ADDRSTRLEN] = "?";
  inet_ntop(AF_INET, &sa->sin_addr, ip, sizeof ip);
  snprintf(out, len, "%s:%u", ip, (unsigned)ntohs(sa->sin_port));
}

static uint64_t xRandom64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v && v != 0) return v;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 16) ^
         (uint64_t)(uintptr_t)&v;
}

/* The address listen() binds to: XNET_ADDR, else the first non-loopback IPv4
 * interface that is up, else 127.0.0.1. */
static ncclResult_t xListenAddr(struct in_addr* out) {
  const char* env = getenv("XNET_ADDR");
  if (env && *env) {
    if (inet_pton(AF_INET, env, out) == 1) return ncclSuccess;
    XWARN("X net plugin: XNET_ADDR=%s is not an IPv4 address", env);
    return ncclInvalidArgument;
  }
  out->s_addr = htonl(INADDR_LOOPBACK);
  struct ifaddrs* list = NULL;
  if (getifaddrs(&list) != 0) return ncclSuccess;
  for (struct ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || ifa->ifa_addr->sa_family != AF_INET) continue;
    if ((ifa->ifa_flags & IFF_LOOPBACK) || !(ifa->ifa_flags & IFF_UP)) continue;
    *out = ((struct sockaddr_in*)ifa->ifa_addr)->sin_addr;
    break;
  }
  freeifaddrs(list);
  return ncclSuccess;
}

static struct xComm* xNewComm(int fd, int isSend, const char* peer) {
  struct xComm* c = calloc(1, sizeof *c);
  if (!c) return NULL;
  c->fd = fd;
  c->isSend = isSend;
  snprintf(c->peer, sizeof c->peer, "%s", peer);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return c;
}

/* Moves up to len bytes on c's socket without blocking. Returns the count moved (maybe
 * short), or -1 once the connection is lost (c->failed says how). */
static ssize_t xMove(struct xComm* c, char* buf, size_t len) {
  size_t moved = 0;
  while (moved < len) {
    ssize_t n = c->isSend ? send(c->fd, buf + moved, len - moved, MSG_NOSIGNAL | MSG_DONTWAIT)
                          : recv(c->fd, buf + moved, len - moved, MSG_DONTWAIT);
    if (n > 0) moved += (size_t)n;
    if (n > 0 || (n < 0 && errno == EINTR)) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    int err = n == 0 ? 0 : errno;
    c->failed = (err == 0 || err == ECONNRESET || err == EPIPE) ? ncclRemoteError
                                                                 : ncclSystemError;
    XWARN("X net plugin: connection with %s lost: %s", c->peer,
          err == 0 ? "closed by peer" : strerror(err));
    return -1;
  }
  return (ssize_t)moved;
}

/* Moves as much of c's queue as the socket takes or has, in posting order. */
static ncclResult_t xProgress(struct xComm* c) {
  if (c->failed != ncclSuccess) return c->failed;
  while (c->cur != c->tail) {
    struct xReq* r = &c->reqs[c->cur % XNET_MAX_REQS];
    if (r->hdrDone < sizeof r->hdr) {
      ssize_t n = xMove(c, (char*)&r->hdr + r->hdrDone, sizeof r->hdr - r->hdrDone);
      if (n < 0) return c->failed;
      r->hdrDone += (size_t)n;
      if (r->hdrDone < sizeof r->hdr) return ncclSuccess;
      if (!c->isSend) {
        if (r->hdr > r->size) {
          XWARN("X net plugin: %s sent %llu bytes, only %llu posted", c->peer,
                (unsigned long long)r->hdr, (unsigned long long)r->size);
          return c->failed = ncclInternalError;
        }
        r->size = (size_t)r->hdr;
      }
    }
    if (r->done < r->size) {
      ssize_t n = xMove(c, r->data + r->done, r->size - r->done);
      if (n < 0) return c->failed;
      r->done += (size_t)n;
      atomic_fetch_add(c->isSend ? &xBytesSent : &xBytesRecvd, (unsigned long long)n);
      if (r->done < r->size) return ncclSuccess;
    }
    r->complete = 1;
    c->cur++;
  }
  return ncclSuccess;
}

/* Queues a request on c; *request = NULL when XNET_MAX_REQS are outstanding. */
static ncclResult_t xPost(struct xComm* c, void* data, size_t size, void** request) {
  *request = NULL;
  if (c->failed != ncclSuccess) return c->failed;
  if (c->tail - c->head >= XNET_MAX_REQS) return ncclSuccess;
  struct xReq* r = &c->reqs[c->tail % XNET_MAX_REQS];
  memset(r, 0, sizeof *r);
  r->comm = c;
  r->data = data;
  r->size = size;
  r->hdr = size;
  c->tail++;
  *request = r;
  xProgress(c); /* start moving bytes now; test() reports any error */
  return ncclSuccess;
}

static ncclResult_t xCloseComm(void* comm) {
  struct xComm* c = comm;
  if (!c) return ncclSuccess;
  /* Like plugins that cannot close with requests posted (aws-ofi-nccl), say so. */
  unsigned open = 0;
  for (unsigned i = c->head; i != c->tail; i++)
    if (!c->reqs[i % XNET_MAX_REQS].freed) open++;
  if (open) XWARN("X net plugin: comm closed with %u requests still posted", open);
  close(c->fd);
  free(c);
  /* NCCL_INIT too, so that NCCL_DEBUG=INFO shows it with the default NCCL_DEBUG_SUBSYS. */
  XLOG(NCCL_LOG_INFO, NCCL_NET | NCCL_INIT,
       "X net plugin: comm closed, %llu bytes sent, %llu received",
       (unsigned long long)atomic_load(&xBytesSent),
       (unsigned long long)atomic_load(&xBytesRecvd));
  return ncclSuccess;
}

/* ---- the table's functions (version-independent part) --------------------------- */

static ncclResult_t xInit(ncclDebugLogger_t logger) {
  xLogger = logger;
#ifdef XNET_FAIL_INIT
  XLOG(NCCL_LOG_WARN, NCCL_NET | NCCL_INIT, "X net plugin: init fails (XNET_FAIL_INIT)");
  return ncclSystemError;
#else
  XLOG(NCCL_LOG_INFO, NCCL_NET | NCCL_INIT, "X net plugin: init (version %d)", XNET_VERSION);
  return ncclSuccess;
#endif
}

static ncclResult_t xDevices(int* ndev) { *ndev = 1; return ncclSuccess; }

static ncclResult_t xListen(int dev, void* opaque, void** listenComm) {
  struct xHandle* h = opaque;
  *listenComm = NULL;
  if (dev != 0) return ncclInternalError;
  struct sockaddr_in sa = {.sin_family = AF_INET};
  ncclResult_t res = xListenAddr(&sa.sin_addr);
  if (res != ncclSuccess) return res;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  socklen_t len = sizeof sa;
  if (fd < 0 || bind(fd, (struct sockaddr*)&sa, sizeof sa) != 0 || listen(fd, 256) != 0 ||
      getsockname(fd, (struct sockaddr*)&sa, &len) != 0) {
    XWARN("X net plugin: listen failed: %s", strerror(errno));
    if (fd >= 0) close(fd);
    return ncclSystemError;
  }
  struct xListen* l = calloc(1, sizeof *l);
  if (!l) {
    close(fd);
    return ncclSystemError;
  }
  l->fd = fd;
  l->token = xRandom64();
  for (int i = 0; i < XNET_MAX_PENDING; i++) l->pend[i].fd = -1;
  memset(h, 0, sizeof *h);
  h->magic = XNET_MAGIC;
  h->addr = sa.sin_addr.s_addr;
  h->port = sa.sin_port;
  h->token = l->token;
  *listenComm = l;
  return ncclSuccess;
}

static ncclResult_t xConnect(int dev, void* opaque, void** sendComm,
                             ncclNetDeviceHandle_v8_t** devComm) {
  struct xHandle* h = opaque;
  *sendComm = NULL;
  if (devComm) *devComm = NULL;
  if (dev != 0 || h->magic != XNET_MAGIC) return ncclInternalError;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = h->port};
  sa.sin_addr.s_addr = h->addr;
  char peer[INET_ADDRSTRLEN + 8];
  xFormatPeer(peer, sizeof peer, &sa);
  struct xComm* c = h->pending;
  if (!c) { /* first call: start connecting */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return ncclSystemError;
    if (connect(fd, (struct sockaddr*)&sa, sizeof sa) != 0 && errno != EINPROGRESS) {
      XWARN("X net plugin: connect to %s failed: %s", peer, strerror(errno));
      close(fd);
      return ncclRemoteError;
    }
    if (!(c = xNewComm(fd, 1, peer))) {
      close(fd);
      return ncclSystemError;
    }
    h->pending = c;
  }
  struct pollfd p = {.fd = c->fd, .events = POLLOUT};
  int ready = poll(&p, 1, 0);
  if (ready == 0 || (ready < 0 && errno == EINTR)) return ncclSuccess; /* call again */
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  /* Connected: the token is 8 bytes, the fresh socket buffer takes it at once; poll
   * covers the theoretical short write. */
  size_t sent = 0;
  while (err == 0 && sent < sizeof h->token) {
    ssize_t n = send(c->fd, (char*)&h->token + sent, sizeof h->token - sent, MSG_NOSIGNAL);
    if (n > 0) sent += (size_t)n;
    else if (errno == EAGAIN || errno == EINTR) poll(&p, 1, 100);
    else err = errno;
  }
  h->pending = NULL;
  if (err != 0) {
    XWARN("X net plugin: connect to %s failed: %s", peer, strerror(err));
    close(c->fd);
    free(c);
    return ncclRemoteError;
  }
  *sendComm = c;
  return ncclSuccess;
}

static ncclResult_t xAccept(void* listenComm, void** recvComm,
                            ncclNetDeviceHandle_v8_t** devComm) {
  struct xListen* l = listenComm;
  *recvComm = NULL;
  if (devComm) *devComm = NULL;
  /* Take every waiting connection that fits into a free slot. */
  for (int i = 0; i < XNET_MAX_PENDING; i++) {
    struct xPending* p = &l->pend[i];
    if (p->fd >= 0) continue;
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    int fd = accept4(l->fd, (struct sockaddr*)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
        break;
      XWARN("X net plugin: accept failed: %s", strerror(errno));
      return ncclSystemError;
    }
    p->fd = fd;
    p->got = 0;
    xFormatPeer(p->peer, sizeof p->peer, &sa);
  }
  /* Read tokens as they come; the first connection with the right one is ours. */
  for (int i = 0; i < XNET_MAX_PENDING; i++) {
    struct xPending* p = &l->pend[i];
    if (p->fd < 0) continue;
    ssize_t n = recv(p->fd, (char*)&p->token + p->got, sizeof p->token - p->got, MSG_DONTWAIT);
    if (n > 0) p->got += (size_t)n;
    const char* why = NULL;
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
      why = "closed before sending its token";
    else if (p->got == sizeof p->token && p->token != l->token)
      why = "bad token";
    if (why) {
      XWARN("X net plugin: rejected connection from %s: %s", p->peer, why);
      close(p->fd);
      p->fd = -1;
      continue;
    }
    if (p->got < sizeof p->token) continue;
    struct xComm* c = xNewComm(p->fd, 0, p->peer);
    if (!c) return ncclSystemError;
    p->fd = -1;
    *recvComm = c;
    return ncclSuccess;
  }
  return ncclSuccess;
}

static ncclResult_t xRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  (void)comm, (void)data, (void)size, (void)type;
  static int dummy;
  *mhandle = &dummy; /* TCP needs no registration */
  return ncclSuccess;
}

static ncclResult_t xRegMrDmaBuf(void* comm, void* data, size_t size, int type,
                                 uint64_t offset, int fd, void** mhandle) {
  (void)comm, (void)data, (void)size, (void)type, (void)offset, (void)fd;
  *mhandle = NULL;
  return ncclInternalError; /* host memory only */
}

static ncclResult_t xDeregMr(void* comm, void* mh) { (void)comm, (void)mh; return ncclSuccess; }

static ncclResult_t xIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                            void** request) {
  (void)recvComm, (void)n, (void)data, (void)sizes, (void)mhandles;
  *request = NULL; /* host memory: nothing to flush */
  return ncclSuccess;
}

/* Progresses the request's comm; reports (and frees) the request once it is done. */
static ncclResult_t xTest(void* request, int* done, int* size) {
  struct xReq* r = request;
  struct xComm* c = r->comm;
  ncclResult_t res = xProgress(c);
  *done = 0;
  if (!r->complete) return res;
  *done = 1;
  if (size) *size = (int)r->size;
  r->freed = 1;
  while (c->head != c->cur && c->reqs[c->head % XNET_MAX_REQS].freed) c->head++;
  return ncclSuccess;
}

static ncclResult_t xCloseListen(void* listenComm) {
  struct xListen* l = listenComm;
  if (!l) return ncclSuccess;
  for (int i = 0; i < XNET_MAX_PENDING; i++)
    if (l->pend[i].fd >= 0) close(l->pend[i].fd);
  close(l->fd);
  free(l);
  return ncclSuccess;
}

/* Device-side hooks: Braid never calls them on a host net. */
static ncclResult_t xGetDeviceMr(void* comm, void* mhandle, void** dptr) {
  (void)comm, (void)mhandle;
  if (dptr) *dptr = NULL;
  return ncclInternalError;
}

static ncclResult_t xIrecvConsumed(void* recvComm, int n, void* request) {
  (void)recvComm, (void)n, (void)request;
  return ncclInternalError;
}

/* ---- the exported table ----------------------------------------------------------- */

#define XNET_PROPS .name = xDevName, .pciPath = NULL, .guid = XNET_MAGIC, \
    .ptrSupport = NCCL_PTR_HOST, .speed = 10000, .port = 1, .latency = 0, \
    .maxComms = 65536, .maxRecvs = 1, .netDeviceType = NCCL_NET_DEVICE_HOST

#if XNET_VERSION == 11

static int xCtx; /* the per-communicator context: nothing to keep */

static ncclResult_t xInit11(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                            ncclDebugLogger_t logger, ncclProfilerCallback_t prof) {
  (void)commId, (void)config, (void)prof;
  *ctx = &xCtx;
  return xInit(logger);
}

static ncclResult_t xGetProperties11(int dev, ncclNetProperties_v11_t* props) {
  if (dev != 0) return ncclInternalError;
  *props = (ncclNetProperties_v11_t){XNET_PROPS, .vProps = {1, {0}},
      .maxP2pBytes = (size_t)1 << 30, .maxCollBytes = (size_t)1 << 30,
      .maxMultiRequestSize = 1};
  return ncclSuccess;
}

static ncclResult_t xListen11(void* ctx, int dev, void* handle, void** comm) {
  (void)ctx;
  return xListen(dev, handle, comm);
}

static ncclResult_t xConnect11(void* ctx, int dev, void* handle, void** sendComm,
                               ncclNetDeviceHandle_v11_t** devComm) {
  (void)ctx;
  return xConnect(dev, handle, sendComm, devComm);
}

static ncclResult_t xIsend11(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                             void* phandle, void** request) {
  (void)tag, (void)mhandle, (void)phandle;
  return xPost(sendComm, data, size, request);
}

static ncclResult_t xIrecv11(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                             void** mhandles, void** phandles, void** request) {
  (void)tags, (void)mhandles, (void)phandles;
  *request = NULL;
  if (n != 1) return ncclInternalError;
  return xPost(recvComm, data[0], sizes[0], request);
}

static ncclResult_t xMakeVDevice(int* d, ncclNetVDeviceProps_v11_t* props) {
  (void)d, (void)props;
  return ncclInternalError;
}

static ncclResult_t xFinalize(void* ctx) { (void)ctx; return ncclSuccess; }

static ncclResult_t xSetNetAttr(void* ctx, ncclNetAttr_v11_t* attr) {
  (void)ctx, (void)attr;
  return ncclSuccess;
}

__attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = "X", .init = xInit11, .devices = xDevices, .getProperties = xGetProperties11,
    .listen = xListen11, .connect = xConnect11, .accept = xAccept,
    .regMr = xRegMr, .regMrDmaBuf = xRegMrDmaBuf, .deregMr = xDeregMr,
    .isend = xIsend11, .irecv = xIrecv11, .iflush = xIflush, .test = xTest,
    .closeSend = xCloseComm, .closeRecv = xCloseComm, .closeListen = xCloseListen,
    .getDeviceMr = xGetDeviceMr, .irecvConsumed = xIrecvConsumed,
    .makeVDevice = xMakeVDevice, .finalize = xFinalize, .setNetAttr = xSetNetAttr,
};

#elif XNET_VERSION == 8

static ncclResult_t xGetProperties8(int dev, ncclNetProperties_v8_t* props) {
  if (dev != 0) return ncclInternalError;
  *props = (ncclNetProperties_v8_t){XNET_PROPS};
  return ncclSuccess;
}

static ncclResult_t xIsend8(void* sendComm, void* data, int size, int tag, void* mhandle,
                            void** request) {
  (void)tag, (void)mhandle;
  *request = NULL;
  if (size < 0) return ncclInternalError;
  return xPost(sendComm, data, (size_t)size, request);
}

static ncclResult_t xIrecv8(void* recvComm, int n, void** data, int* sizes, int* tags,
                            void** mhandles, void** request) {
  (void)tags, (void)mhandles;
  *request = NULL;
  if (n != 1 || sizes[0] < 0) return ncclInternalError;
  return xPost(recvComm, data[0], (size_t)sizes[0], request);
}

__attribute__((visibility("default"))) const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = "X8", .init = xInit, .devices = xDevices, .getProperties = xGetProperties8,
    .listen = xListen, .connect = xConnect, .accept = xAccept,
    .regMr = xRegMr, .regMrDmaBuf = xRegMrDmaBuf, .deregMr = xDeregMr,
    .isend = xIsend8, .irecv = xIrecv8, .iflush = xIflush, .test = xTest,
    .closeSend = xCloseComm, .closeRecv = xCloseComm, .closeListen = xCloseListen,
    .getDeviceMr = xGetDeviceMr, .irecvConsumed = xIrecvConsumed,
};

#else
#error "XNET_VERSION must be 0, 8 or 11"
#endif /* XNET_VERSION */
#endif /* XNET_VERSION != 0 */
