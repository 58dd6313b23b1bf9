// ucxNet(): Braid's UCX network, an ncclNet_v11_t (include/braid/net_plugin.h) named
// "UCX".
//
//   init()      one UcxWorker per context (ucx_worker.h: why one per context)
//   listen/connect/accept   the TCP handshake (ucx_handshake.h)
//   isend/irecv/test        UCP tag messages on a UcxComm (ucx_comm.h)
//   regMr       records the range: UCX registers memory itself, on first use, through
//               its registration cache, and tcp/shared memory need no registration
//
// One device. UCX itself is loaded with dlopen (ucx_api.h); ucxNet() is nullptr where
// it cannot be, or where this build had no UCX headers.
#include "transports/net/builtin_nets.h"
#include "transports/net_ucx/ucx_api.h"

#if !BRAID_HAVE_UCX
namespace braid {
const ncclNet_v11_t* ucxNet() { return nullptr; }
}  // namespace braid
#else
#include <fstream>
#include <mutex>
#include <string>

#include "src/config/error.h"
#include "src/net/socket.h"
#include "transports/net_ucx/ucx_comm.h"
#include "transports/net_ucx/ucx_handshake.h"
#include "transports/net_ucx/ucx_worker.h"

namespace braid {
namespace {

constexpr int kFallbackSpeedMbps = 10000;  // when the interface does not say (veth, tun)
constexpr size_t kMaxMessageBytes = size_t(1) << 31;

// What regMr hands back: nothing to undo but the record itself.
struct UcxMr {
  void* data;
  size_t size;
};

// Calls with a null context (a caller that skipped init()) share one worker that lives
// as long as the process.
UcxWorker* workerOf(void* ctx) {
  if (ctx) return static_cast<UcxWorker*>(ctx);
  static std::mutex mu;
  static UcxWorker* shared = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (!shared && UcxWorker::create(ucxApi(), &shared) != ncclSuccess) shared = nullptr;
  return shared;
}

// Link speed of the interface the handshake uses, Mbit/s, from /sys.
int linkSpeedMbps() {
  static const int speed = [] {
    SockAddr addr;
    std::string ifname;
    if (pickLocalAddress(&addr, &ifname) != ncclSuccess || ifname.empty())
      return kFallbackSpeedMbps;
    std::ifstream f("/sys/class/net/" + ifname + "/speed");
    int mbps = 0;
    if (!(f >> mbps) || mbps <= 0) return kFallbackSpeedMbps;
    return mbps;
  }();
  return speed;
}

UcxComm* commOf(void* comm, const char* op) {
  if (!comm) setError(ncclInvalidArgument, nullptr, "UCX net: %s: comm is NULL", op);
  return static_cast<UcxComm*>(comm);
}

// ---- the table's functions ----------------------------------------------------------

ncclResult_t ucxInit(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t*, ncclDebugLogger_t,
                     ncclProfilerCallback_t) {
  if (!ctx) return setError(ncclInvalidArgument, nullptr, "UCX net: init: ctx is NULL");
  UcxWorker* worker = nullptr;
  BRAID_CHECK(UcxWorker::create(ucxApi(), &worker));
  BRAID_INFO(kLogNet, "UCX net: context %p for comm id %llx", static_cast<void*>(worker),
             static_cast<unsigned long long>(commId));
  *ctx = worker;
  return ncclSuccess;
}

ncclResult_t ucxFinalize(void* ctx) {
  delete static_cast<UcxWorker*>(ctx);
  return ncclSuccess;
}

ncclResult_t ucxDevices(int* ndev) {
  if (!ndev) return setError(ncclInvalidArgument, nullptr, "UCX net: devices: ndev is NULL");
  *ndev = 1;
  return ncclSuccess;
}

ncclResult_t ucxGetProperties(int dev, ncclNetProperties_v11_t* props) {
  if (dev != 0 || !props)
    return setError(ncclInvalidArgument, nullptr, "UCX net: getProperties: bad device %d", dev);
  static char name[] = "ucx";
  *props = ncclNetProperties_v11_t{};
  props->name = name;
  props->pciPath = nullptr;
  props->guid = 0;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = linkSpeedMbps();
  props->port = 0;
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = 0;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = 0;
  props->maxP2pBytes = kMaxMessageBytes;
  props->maxCollBytes = kMaxMessageBytes;
  props->maxMultiRequestSize = 1;
  return ncclSuccess;
}

ncclResult_t ucxListen(void* ctx, int dev, void* handle, void** listenComm) {
  if (dev != 0 || !handle || !listenComm)
    return setError(ncclInvalidArgument, nullptr, "UCX net: listen: bad arguments (dev %d)", dev);
  *listenComm = nullptr;
  UcxWorker* worker = workerOf(ctx);
  if (!worker) return ncclSystemError;
  UcxListener* l = nullptr;
  BRAID_CHECK(UcxListener::create(worker, static_cast<UcxHandle*>(handle), &l));
  *listenComm = l;
  return ncclSuccess;
}

ncclResult_t ucxConnect(void* ctx, int dev, void* handle, void** sendComm,
                        ncclNetDeviceHandle_v11_t** sendDevComm) {
  if (sendDevComm) *sendDevComm = nullptr;
  if (dev != 0 || !handle || !sendComm)
    return setError(ncclInvalidArgument, nullptr, "UCX net: connect: bad arguments (dev %d)",
                    dev);
  *sendComm = nullptr;
  UcxWorker* worker = workerOf(ctx);
  if (!worker) return ncclSystemError;
  UcxComm* comm = nullptr;
  BRAID_CHECK(UcxConnector::connect(worker, static_cast<UcxHandle*>(handle), &comm));
  *sendComm = comm;
  return ncclSuccess;
}

ncclResult_t ucxAccept(void* listenComm, void** recvComm,
                       ncclNetDeviceHandle_v11_t** recvDevComm) {
  if (recvDevComm) *recvDevComm = nullptr;
  if (!listenComm || !recvComm)
    return setError(ncclInvalidArgument, nullptr, "UCX net: accept: bad arguments");
  *recvComm = nullptr;
  UcxComm* comm = nullptr;
  BRAID_CHECK(static_cast<UcxListener*>(listenComm)->accept(&comm));
  *recvComm = comm;
  return ncclSuccess;
}

ncclResult_t ucxRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (!comm || !mhandle)
    return setError(ncclInvalidArgument, nullptr, "UCX net: regMr: bad arguments");
  if (type != NCCL_PTR_HOST)
    return setError(ncclInvalidArgument, nullptr,
                    "UCX net: regMr: only host memory (NCCL_PTR_HOST) is supported, not type %d",
                    type);
  *mhandle = new UcxMr{data, size};
  return ncclSuccess;
}

ncclResult_t ucxRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void** mhandle) {
  if (mhandle) *mhandle = nullptr;
  return setError(ncclInvalidUsage, nullptr, "UCX net: DMA-BUF registration is not supported");
}

ncclResult_t ucxDeregMr(void*, void* mhandle) {
  delete static_cast<UcxMr*>(mhandle);
  return ncclSuccess;
}

ncclResult_t ucxIsend(void* sendComm, void* data, size_t size, int tag, void*, void*,
                      void** request) {
  UcxComm* c = commOf(sendComm, "isend");
  if (!c || !request) return ncclInvalidArgument;
  if (!c->isSend())
    return setError(ncclInvalidArgument, nullptr, "UCX net: isend on a receive comm");
  return c->isend(data, size, tag, request);
}

ncclResult_t ucxIrecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void**,
                      void**, void** request) {
  UcxComm* c = commOf(recvComm, "irecv");
  if (!c || !request) return ncclInvalidArgument;
  if (c->isSend())
    return setError(ncclInvalidArgument, nullptr, "UCX net: irecv on a send comm");
  if (n != 1 || !data || !sizes || !tags)
    return setError(ncclInvalidArgument, nullptr,
                    "UCX net: irecv of %d buffers (maxRecvs is 1)", n);
  return c->irecv(data[0], sizes[0], tags[0], request);
}

ncclResult_t ucxIflush(void*, int, void**, int*, void**, void** request) {
  // Host memory only, and UCX completes receives after the data is in place.
  if (request) *request = nullptr;
  return ncclSuccess;
}

ncclResult_t ucxTest(void* request, int* done, int* sizes) {
  if (!request || !done)
    return setError(ncclInvalidArgument, nullptr, "UCX net: test: bad arguments");
  UcxRequest* req = static_cast<UcxRequest*>(request);
  return req->comm->test(req, done, sizes);
}

ncclResult_t ucxCloseComm(void* comm) { return UcxComm::close(static_cast<UcxComm*>(comm)); }

ncclResult_t ucxCloseListen(void* listenComm) {
  delete static_cast<UcxListener*>(listenComm);
  return ncclSuccess;
}

ncclResult_t ucxSetNetAttr(void*, ncclNetAttr_v11_t*) { return ncclSuccess; }

ncclNet_v11_t makeTable() {
  ncclNet_v11_t t{};
  t.name = "UCX";
  t.init = ucxInit;
  t.devices = ucxDevices;
  t.getProperties = ucxGetProperties;
  t.listen = ucxListen;
  t.connect = ucxConnect;
  t.accept = ucxAccept;
  t.regMr = ucxRegMr;
  t.regMrDmaBuf = ucxRegMrDmaBuf;
  t.deregMr = ucxDeregMr;
  t.isend = ucxIsend;
  t.irecv = ucxIrecv;
  t.iflush = ucxIflush;
  t.test = ucxTest;
  t.closeSend = ucxCloseComm;
  t.closeRecv = ucxCloseComm;
  t.closeListen = ucxCloseListen;
  t.getDeviceMr = nullptr;    // no device-side networking
  t.irecvConsumed = nullptr;  // receives are consumed when test() reports them
  t.makeVDevice = nullptr;    // one device: nothing to merge
  t.finalize = ucxFinalize;
  t.setNetAttr = ucxSetNetAttr;
  return t;
}

}  // namespace

const ncclNet_v11_t* ucxNet() {
  static const ncclNet_v11_t table = makeTable();
  if (!ucxApi()) return nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    NetExtensions ext;
    ext.abandonConnect = [](void* handle) { UcxConnector::abandon(static_cast<UcxHandle*>(handle)); };
    registerNetExtensions(&table, ext);
  });
  return &table;
}

}  // namespace braid
#endif  // BRAID_HAVE_UCX
