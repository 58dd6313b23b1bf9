// ibNet(): Braid's IB verbs network, "IB", as an ncclNet_v11_t (RC queue pairs over
// InfiniBand or RoCE). The parts: ibv_api (libibverbs loaded at run time), ib_device
// (ports, GIDs, properties), ib_mr_cache (registrations), ib_setup (listen, connect,
// accept), ib_comm (queue pairs and the data path). Without <infiniband/verbs.h> at
// build time, or without libibverbs.so.1 at run time, ibNet() returns nullptr.
#include "transports/net/builtin_nets.h"
#include "transports/net_ib/ibv_api.h"

#ifdef BRAID_HAVE_IBVERBS
#include <algorithm>
#include <climits>
#include <mutex>

#include <poll.h>

#include "src/config/params.h"
#include "src/config/error.h"
#include "transports/net_ib/ib_comm.h"
#include "transports/net_ib/ib_device.h"
#include "transports/net_ib/ib_setup.h"

namespace braid {
namespace {

using ib::IbComm;
using ib::IbDevice;
using ib::IbMr;
using ib::IbRequest;

// What init() hands back: the traffic class this context's comms use.
struct IbNetCtx {
  int trafficClass = 0;
};

ncclResult_t deviceAt(int dev, const IbDevice** out) {
  const auto& devs = ib::ibDevices();
  if (dev < 0 || size_t(dev) >= devs.size())
    return setError(ncclInvalidArgument, nullptr, "IB net: no device %d (%zu devices)", dev,
                    devs.size());
  *out = &devs[size_t(dev)];
  return ncclSuccess;
}

int ctxTrafficClass(void* ctx) {
  return ctx ? static_cast<IbNetCtx*>(ctx)->trafficClass : int(param::kIbTc.get());
}

ncclResult_t ibInit(void** ctx, uint64_t, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t,
                    ncclProfilerCallback_t) {
  ib::ibDevices();  // discovery happens once, here or in devices()
  auto* c = new IbNetCtx;
  c->trafficClass = config && config->trafficClass != NCCL_NET_TRAFFIC_CLASS_UNDEF
                        ? config->trafficClass
                        : int(param::kIbTc.get());
  *ctx = c;
  return ncclSuccess;
}

ncclResult_t ibDevicesCount(int* ndev) {
  *ndev = int(ib::ibDevices().size());
  return ncclSuccess;
}

ncclResult_t ibGetProperties(int dev, ncclNetProperties_v11_t* p) {
  const IbDevice* d = nullptr;
  BRAID_CHECK(deviceAt(dev, &d));
  *p = ncclNetProperties_v11_t{};
  p->name = const_cast<char*>(d->hca.c_str());
  p->pciPath = d->pciPath.empty() ? nullptr : const_cast<char*>(d->pciPath.c_str());
  p->guid = d->guid;
  p->ptrSupport = NCCL_PTR_HOST | (d->dmabuf ? NCCL_PTR_CUDA | NCCL_PTR_DMABUF : 0);
  // Regions belong to the HCA's protection domain, not to a comm, and the cache makes
  // registering the same buffer again cheap.
  p->regIsGlobal = param::kIbRegCache.get() ? 1 : 0;
  p->forceFlush = 0;
  p->speed = d->speedMbps;
  p->port = d->port;
  p->latency = 0;
  p->maxComms = d->maxQp > 0 ? d->maxQp : 65536;
  p->maxRecvs = ib::kMaxRecvs;  // multi-receive: one irecv of up to 8 tagged buffers
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->netDeviceVersion = 0;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  // Immediates and scatter entries carry 32-bit sizes; stay below 2 GiB as NCCL does.
  const size_t maxMsg = d->maxMsg ? d->maxMsg : uint32_t(INT_MAX);
  p->maxP2pBytes = std::min<size_t>(maxMsg, size_t(INT_MAX));
  p->maxCollBytes = p->maxP2pBytes;
  p->maxMultiRequestSize = 1;
  return ncclSuccess;
}

ncclResult_t ibListen(void* ctx, int dev, void* handle, void** listenComm) {
  *listenComm = nullptr;
  const IbDevice* d = nullptr;
  BRAID_CHECK(deviceAt(dev, &d));
  auto* l = new ib::IbListenComm(d, ctxTrafficClass(ctx));
  ncclResult_t res = l->listen(static_cast<ib::IbHandle*>(handle));
  if (res != ncclSuccess) {
    delete l;
    return res;
  }
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t ibConnect(void* ctx, int dev, void* handle, void** sendComm,
                       ncclNetDeviceHandle_v11_t** sendDevComm) {
  *sendComm = nullptr;
  if (sendDevComm) *sendDevComm = nullptr;
  const IbDevice* d = nullptr;
  BRAID_CHECK(deviceAt(dev, &d));
  if (!handle) return setError(ncclInvalidArgument, nullptr, "IB connect: handle is NULL");
  IbComm* c = nullptr;
  BRAID_CHECK(
      ib::ibConnectStep(d, ctxTrafficClass(ctx), static_cast<const ib::IbHandle*>(handle), &c));
  *sendComm = c;
  return ncclSuccess;
}

ncclResult_t ibAccept(void* listenComm, void** recvComm, ncclNetDeviceHandle_v11_t** recvDevComm) {
  *recvComm = nullptr;
  if (recvDevComm) *recvDevComm = nullptr;
  IbComm* c = nullptr;
  BRAID_CHECK(static_cast<ib::IbListenComm*>(listenComm)->accept(&c));
  *recvComm = c;
  return ncclSuccess;
}

ncclResult_t ibRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  *mhandle = nullptr;
  const IbDevice* d = static_cast<IbComm*>(comm)->device();
  IbMr* mr = nullptr;
  BRAID_CHECK(d->mrCache->reg(data, size, param::kIbRegCache.get(), &mr));
  *mhandle = mr;
  return ncclSuccess;
}

ncclResult_t ibRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                           void** mhandle) {
  if (type == NCCL_PTR_HOST || fd < 0) return ibRegMr(comm, data, size, type, mhandle);
  *mhandle = nullptr;
  const IbDevice* d = static_cast<IbComm*>(comm)->device();
  if (!d->dmabuf)
    return setError(ncclInvalidUsage, nullptr,
                    "IB %s: dma-buf registration requested but the device does not support it",
                    d->name.c_str());
  IbMr* mr = nullptr;
  BRAID_CHECK(d->mrCache->regDmabuf(data, size, offset, fd, &mr));
  *mhandle = mr;
  return ncclSuccess;
}

ncclResult_t ibDeregMr(void* comm, void* mhandle) {
  if (!mhandle) return ncclSuccess;
  return static_cast<IbComm*>(comm)->device()->mrCache->release(static_cast<IbMr*>(mhandle));
}

ncclResult_t ibIsend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void*,
                     void** request) {
  IbRequest* r = nullptr;
  ncclResult_t res =
      static_cast<IbComm*>(sendComm)->isend(data, size, tag, static_cast<IbMr*>(mhandle), &r);
  *request = r;
  return res;
}

ncclResult_t ibIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void**, void** request) {
  *request = nullptr;
  IbMr* mrs[ib::kMaxRecvs] = {};
  for (int i = 0; mhandles && i < n && i < ib::kMaxRecvs; ++i) mrs[i] = static_cast<IbMr*>(mhandles[i]);
  IbRequest* r = nullptr;
  ncclResult_t res = static_cast<IbComm*>(recvComm)->irecv(n, data, sizes, tags, mrs, &r);
  *request = r;
  return res;
}

// Host buffers need no flush: the receive completion orders the data. (GPUDirect
// flushes through an RDMA read are not implemented; forceFlush is 0.)
ncclResult_t ibIflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;
  return ncclSuccess;
}

ncclResult_t ibTest(void* request, int* done, int* sizes) {
  auto* r = static_cast<IbRequest*>(request);
  return r->comm->test(r, done, sizes);
}

ncclResult_t ibCloseComm(void* comm) {
  delete static_cast<IbComm*>(comm);
  return ncclSuccess;
}

ncclResult_t ibCloseListen(void* listenComm) {
  delete static_cast<ib::IbListenComm*>(listenComm);
  return ncclSuccess;
}

ncclResult_t ibMakeVDevice(int* d, ncclNetVDeviceProps_v11_t* props) {
  if (!props || props->ndevs != 1)
    return setError(ncclInvalidUsage, nullptr,
                    "IB net: virtual devices merging several NICs are not supported");
  const IbDevice* dev = nullptr;
  BRAID_CHECK(deviceAt(props->devs[0], &dev));
  *d = props->devs[0];
  return ncclSuccess;
}

ncclResult_t ibFinalize(void* ctx) {
  delete static_cast<IbNetCtx*>(ctx);
  return ncclSuccess;
}

ncclResult_t ibSetNetAttr(void*, ncclNetAttr_v11_t*) { return ncclSuccess; }

int ibPollFd(void* comm, short* events) {
  *events = POLLIN;  // a completion channel only ever reads as readable
  return static_cast<IbComm*>(comm)->pollFd();
}

ncclNet_v11_t makeTable() {
  ncclNet_v11_t t{};
  t.name = "IB";
  t.init = ibInit;
  t.devices = ibDevicesCount;
  t.getProperties = ibGetProperties;
  t.listen = ibListen;
  t.connect = ibConnect;
  t.accept = ibAccept;
  t.regMr = ibRegMr;
  t.regMrDmaBuf = ibRegMrDmaBuf;
  t.deregMr = ibDeregMr;
  t.isend = ibIsend;
  t.irecv = ibIrecv;
  t.iflush = ibIflush;
  t.test = ibTest;
  t.closeSend = ibCloseComm;
  t.closeRecv = ibCloseComm;
  t.closeListen = ibCloseListen;
  t.makeVDevice = ibMakeVDevice;
  t.finalize = ibFinalize;
  t.setNetAttr = ibSetNetAttr;
  return t;
}

}  // namespace

const ncclNet_v11_t* ibNet() {
  if (!ib::ibvApi()) return nullptr;
  static const ncclNet_v11_t table = makeTable();
  static std::once_flag once;
  std::call_once(once, [] {
    NetExtensions ext;
    ext.pollFd = ibPollFd;
    ext.abandonConnect = ib::abandonConnect;
    registerNetExtensions(&table, ext);
  });
  return &table;
}

}  // namespace braid

#else  // no <infiniband/verbs.h> at build time

namespace braid {
const ncclNet_v11_t* ibNet() { return nullptr; }
}  // namespace braid

#endif
