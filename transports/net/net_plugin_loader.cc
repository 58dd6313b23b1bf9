// Loading external net plugins (NCCL_NET_PLUGIN) and presenting older tables as v11.
//
// Library names are tried as NCCL tries them: the item as given (a path, or a library
// name the dynamic loader finds), then, for a bare name x, libnccl-net-x.so. The table
// symbols are looked up newest first: ncclNetPlugin_v11, _v10, _v9, _v8.
//
// Adapters: a v8-v10 table is wrapped by a v11 table whose functions call the old one
// (each version's adapter holds one old table: NCCL, too, uses one external plugin per
// process). v8 takes int sizes (messages above INT_MAX are refused) and has no virtual
// devices; v8/v9 have no profiler; v8-v10 have no per-comm context.
#include <dlfcn.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "src/config/log.h"
#include "src/config/error.h"
#include "transports/net/net_registry.h"

namespace braid {

void netPluginLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                     const char* fmt, ...) {
  LogLevel l = level == NCCL_LOG_WARN     ? LogLevel::kWarn
               : level == NCCL_LOG_INFO   ? LogLevel::kInfo
               : level == NCCL_LOG_TRACE  ? LogLevel::kTrace
               : level == NCCL_LOG_ABORT  ? LogLevel::kWarn
               : level == NCCL_LOG_VERSION ? LogLevel::kVersion
                                          : LogLevel::kNone;
  if (l == LogLevel::kNone) return;
  // NCCL's subsystem bits up to PROXY (0x400) are Braid's; BOOTSTRAP and REG sit one
  // bit higher in NCCL (after NVLS); the rest (NVLS, PROFILE, RAS...) log as NET.
  uint32_t sub = uint32_t(flags) & 0x7ffu;
  if (flags & NCCL_BOOTSTRAP) sub |= kLogBootstrap;
  if (flags & NCCL_REG) sub |= kLogReg;
  if (sub == 0) sub = kLogNet;
  if (l != LogLevel::kWarn && !logEnabled(l, sub)) return;
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  logMessage(l, l == LogLevel::kWarn ? uint32_t(kLogAll) : sub, file ? file : "plugin", line,
             "%s", text);
}

ncclResult_t netNoProfiler(void**, int, void*, int64_t, void*) { return ncclSuccess; }

namespace {

// ---- v10 -> v11 ----------------------------------------------------------------------
const ncclNet_v10_t* g10 = nullptr;
ncclNetCommConfig_v10_t g10Config{NCCL_NET_TRAFFIC_CLASS_UNDEF};

void propsFrom10(const ncclNetProperties_v10_t& a, ncclNetProperties_v11_t* b) {
  *b = ncclNetProperties_v11_t{};
  b->name = a.name; b->pciPath = a.pciPath; b->guid = a.guid; b->ptrSupport = a.ptrSupport;
  b->regIsGlobal = a.regIsGlobal; b->forceFlush = a.forceFlush; b->speed = a.speed;
  b->port = a.port; b->latency = a.latency; b->maxComms = a.maxComms;
  b->maxRecvs = a.maxRecvs; b->netDeviceType = a.netDeviceType;
  b->netDeviceVersion = a.netDeviceVersion; b->vProps = a.vProps;
  b->maxP2pBytes = a.maxP2pBytes; b->maxCollBytes = a.maxCollBytes;
  b->maxMultiRequestSize = 1;
}

ncclNet_v11_t adapt10() {
  ncclNet_v11_t t{};
  t.name = g10->name;
  t.init = [](void** ctx, uint64_t, ncclNetCommConfig_v11_t* cfg, ncclDebugLogger_t log,
              ncclProfilerCallback_t prof) {
    *ctx = nullptr;
    if (cfg) g10Config = *cfg;
    return g10->init(log, prof ? prof : netNoProfiler);
  };
  t.devices = [](int* n) { return g10->devices(n); };
  t.getProperties = [](int dev, ncclNetProperties_v11_t* p) {
    ncclNetProperties_v10_t old{};
    ncclResult_t r = g10->getProperties(dev, &old);
    if (r == ncclSuccess) propsFrom10(old, p);
    return r;
  };
  t.listen = [](void*, int dev, void* h, void** l) { return g10->listen(dev, h, l); };
  t.connect = [](void*, int dev, void* h, void** s, ncclNetDeviceHandle_v11_t** d) {
    return g10->connect(dev, &g10Config, h, s, d);
  };
  t.accept = [](void* l, void** r, ncclNetDeviceHandle_v11_t** d) { return g10->accept(l, r, d); };
  t.regMr = [](void* c, void* p, size_t n, int type, void** mh) { return g10->regMr(c, p, n, type, mh); };
  t.regMrDmaBuf = [](void* c, void* p, size_t n, int type, uint64_t off, int fd, void** mh) {
    return g10->regMrDmaBuf ? g10->regMrDmaBuf(c, p, n, type, off, fd, mh) : ncclInternalError;
  };
  t.deregMr = [](void* c, void* mh) { return g10->deregMr(c, mh); };
  t.isend = [](void* c, void* p, size_t n, int tag, void* mh, void* ph, void** rq) {
    return g10->isend(c, p, n, tag, mh, ph, rq);
  };
  t.irecv = [](void* c, int n, void** p, size_t* s, int* tags, void** mh, void** ph, void** rq) {
    return g10->irecv(c, n, p, s, tags, mh, ph, rq);
  };
  t.iflush = [](void* c, int n, void** p, int* s, void** mh, void** rq) {
    return g10->iflush(c, n, p, s, mh, rq);
  };
  t.test = [](void* rq, int* done, int* sizes) { return g10->test(rq, done, sizes); };
  t.closeSend = [](void* c) { return g10->closeSend(c); };
  t.closeRecv = [](void* c) { return g10->closeRecv(c); };
  t.closeListen = [](void* c) { return g10->closeListen(c); };
  t.finalize = [](void*) { return ncclSuccess; };
  t.setNetAttr = [](void*, ncclNetAttr_v11_t*) { return ncclSuccess; };
  return t;
}

// ---- v9 -> v11 -----------------------------------------------------------------------
const ncclNet_v9_t* g9 = nullptr;

ncclNet_v11_t adapt9() {
  ncclNet_v11_t t{};
  t.name = g9->name;
  t.init = [](void** ctx, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t log,
              ncclProfilerCallback_t) {
    *ctx = nullptr;
    return g9->init(log);
  };
  t.devices = [](int* n) { return g9->devices(n); };
  t.getProperties = [](int dev, ncclNetProperties_v11_t* p) {
    ncclNetProperties_v9_t old{};
    ncclResult_t r = g9->getProperties(dev, &old);
    if (r == ncclSuccess) propsFrom10(old, p);  // v9 and v10 properties are the same
    return r;
  };
  t.listen = [](void*, int dev, void* h, void** l) { return g9->listen(dev, h, l); };
  t.connect = [](void*, int dev, void* h, void** s, ncclNetDeviceHandle_v11_t** d) {
    return g9->connect(dev, h, s, d);
  };
  t.accept = [](void* l, void** r, ncclNetDeviceHandle_v11_t** d) { return g9->accept(l, r, d); };
  t.regMr = [](void* c, void* p, size_t n, int type, void** mh) { return g9->regMr(c, p, n, type, mh); };
  t.regMrDmaBuf = [](void* c, void* p, size_t n, int type, uint64_t off, int fd, void** mh) {
    return g9->regMrDmaBuf ? g9->regMrDmaBuf(c, p, n, type, off, fd, mh) : ncclInternalError;
  };
  t.deregMr = [](void* c, void* mh) { return g9->deregMr(c, mh); };
  t.isend = [](void* c, void* p, size_t n, int tag, void* mh, void*, void** rq) {
    return g9->isend(c, p, n, tag, mh, rq);
  };
  t.irecv = [](void* c, int n, void** p, size_t* s, int* tags, void** mh, void**, void** rq) {
    return g9->irecv(c, n, p, s, tags, mh, rq);
  };
  t.iflush = [](void* c, int n, void** p, int* s, void** mh, void** rq) {
    return g9->iflush(c, n, p, s, mh, rq);
  };
  t.test = [](void* rq, int* done, int* sizes) { return g9->test(rq, done, sizes); };
  t.closeSend = [](void* c) { return g9->closeSend(c); };
  t.closeRecv = [](void* c) { return g9->closeRecv(c); };
  t.closeListen = [](void* c) { return g9->closeListen(c); };
  t.finalize = [](void*) { return ncclSuccess; };
  t.setNetAttr = [](void*, ncclNetAttr_v11_t*) { return ncclSuccess; };
  return t;
}

// ---- v8 -> v11 -----------------------------------------------------------------------
const ncclNet_v8_t* g8 = nullptr;
constexpr size_t kV8MaxBytes = size_t(1) << 30;  // sizes are int: stay well below INT_MAX

ncclNet_v11_t adapt8() {
  ncclNet_v11_t t{};
  t.name = g8->name;
  t.init = [](void** ctx, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t log,
              ncclProfilerCallback_t) {
    *ctx = nullptr;
    return g8->init(log);
  };
  t.devices = [](int* n) { return g8->devices(n); };
  t.getProperties = [](int dev, ncclNetProperties_v11_t* p) {
    ncclNetProperties_v8_t a{};
    ncclResult_t r = g8->getProperties(dev, &a);
    if (r != ncclSuccess) return r;
    *p = ncclNetProperties_v11_t{};
    p->name = a.name; p->pciPath = a.pciPath; p->guid = a.guid; p->ptrSupport = a.ptrSupport;
    p->regIsGlobal = a.regIsGlobal; p->speed = a.speed; p->port = a.port;
    p->latency = a.latency; p->maxComms = a.maxComms; p->maxRecvs = a.maxRecvs;
    p->netDeviceType = a.netDeviceType; p->netDeviceVersion = a.netDeviceVersion;
    p->vProps.ndevs = 1;
    p->vProps.devs[0] = dev;
    p->maxP2pBytes = kV8MaxBytes;
    p->maxCollBytes = kV8MaxBytes;
    p->maxMultiRequestSize = 1;
    return ncclSuccess;
  };
  t.listen = [](void*, int dev, void* h, void** l) { return g8->listen(dev, h, l); };
  t.connect = [](void*, int dev, void* h, void** s, ncclNetDeviceHandle_v11_t** d) {
    return g8->connect(dev, h, s, d);
  };
  t.accept = [](void* l, void** r, ncclNetDeviceHandle_v11_t** d) { return g8->accept(l, r, d); };
  t.regMr = [](void* c, void* p, size_t n, int type, void** mh) { return g8->regMr(c, p, n, type, mh); };
  t.regMrDmaBuf = [](void* c, void* p, size_t n, int type, uint64_t off, int fd, void** mh) {
    return g8->regMrDmaBuf ? g8->regMrDmaBuf(c, p, n, type, off, fd, mh) : ncclInternalError;
  };
  t.deregMr = [](void* c, void* mh) { return g8->deregMr(c, mh); };
  t.isend = [](void* c, void* p, size_t n, int tag, void* mh, void*, void** rq) {
    if (n > kV8MaxBytes)
      return setError(ncclInternalError, nullptr,
                      "net plugin %s (v8): a %zu-byte send exceeds its int sizes", g8->name, n);
    return g8->isend(c, p, int(n), tag, mh, rq);
  };
  t.irecv = [](void* c, int n, void** p, size_t* s, int* tags, void** mh, void**, void** rq) {
    int sizes[NCCL_NET_MAX_REQUESTS];
    if (n < 1 || n > NCCL_NET_MAX_REQUESTS)
      return setError(ncclInternalError, nullptr, "net plugin %s (v8): irecv of %d buffers",
                      g8->name, n);
    for (int i = 0; i < n; ++i) sizes[i] = int(s[i] > kV8MaxBytes ? kV8MaxBytes : s[i]);
    return g8->irecv(c, n, p, sizes, tags, mh, rq);
  };
  t.iflush = [](void* c, int n, void** p, int* s, void** mh, void** rq) {
    return g8->iflush(c, n, p, s, mh, rq);
  };
  t.test = [](void* rq, int* done, int* sizes) { return g8->test(rq, done, sizes); };
  t.closeSend = [](void* c) { return g8->closeSend(c); };
  t.closeRecv = [](void* c) { return g8->closeRecv(c); };
  t.closeListen = [](void* c) { return g8->closeListen(c); };
  t.finalize = [](void*) { return ncclSuccess; };
  t.setNetAttr = [](void*, ncclNetAttr_v11_t*) { return ncclSuccess; };
  return t;
}

bool endsWith(const std::string& s, const char* tail) {
  size_t n = std::strlen(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

void* openLibrary(const std::string& spec, std::string* tried, std::string* err,
                  bool* notFound) {
  std::vector<std::string> names{spec};
  // A bare name x also means libnccl-net-x.so (not for paths or library names).
  if (spec.find('/') == std::string::npos && !(spec.rfind("lib", 0) == 0 && endsWith(spec, ".so")))
    names.push_back("libnccl-net-" + spec + ".so");
  *notFound = true;
  for (const std::string& n : names) {
    if (!tried->empty()) *tried += ", ";
    *tried += n;
    void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    const char* e = dlerror();
    std::string msg = e ? e : "unknown dlopen error";
    // "No such file" is expected for the first form; other errors (missing symbols,
    // wrong ELF class) mean the library exists but is broken: report those.
    if (msg.find("No such file") == std::string::npos) {
      *notFound = false;
      *err = msg;
    } else if (err->empty()) {
      *err = msg;
    }
  }
  return nullptr;
}

}  // namespace

bool loadNetPlugin(const std::string& spec, Net* net, std::string* why, bool* notFound) {
  std::string tried, err;
  void* lib = openLibrary(spec, &tried, &err, notFound);
  if (!lib) {
    *why = (*notFound ? "not found (tried " + tried + ")" : "cannot load: " + err);
    return false;
  }
  *notFound = false;
  static ncclNet_v11_t adapted[3];  // one per adapted version (one plugin each)
  if (auto* t = static_cast<const ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11"))) {
    net->table = t;
    net->abiVersion = 11;
  } else if (auto* t10 = static_cast<const ncclNet_v10_t*>(dlsym(lib, "ncclNetPlugin_v10"))) {
    if (g10 && g10 != t10) {
      *why = "a second v10 plugin in one process is not supported";
      return false;
    }
    g10 = t10;
    adapted[0] = adapt10();
    net->table = &adapted[0];
    net->abiVersion = 10;
  } else if (auto* t9 = static_cast<const ncclNet_v9_t*>(dlsym(lib, "ncclNetPlugin_v9"))) {
    if (g9 && g9 != t9) {
      *why = "a second v9 plugin in one process is not supported";
      return false;
    }
    g9 = t9;
    adapted[1] = adapt9();
    net->table = &adapted[1];
    net->abiVersion = 9;
  } else if (auto* t8 = static_cast<const ncclNet_v8_t*>(dlsym(lib, "ncclNetPlugin_v8"))) {
    if (g8 && g8 != t8) {
      *why = "a second v8 plugin in one process is not supported";
      return false;
    }
    g8 = t8;
    adapted[2] = adapt8();
    net->table = &adapted[2];
    net->abiVersion = 8;
  } else {
    *why = "loaded, but it exports no ncclNetPlugin_v11, _v10, _v9 or _v8 table (a plugin "
           "for an older or newer NCCL?)";
    dlclose(lib);
    return false;
  }
  // The library's path as the loader resolved it, found through one of its symbols.
  Dl_info info{};
  const char* symbols[] = {"ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9",
                           "ncclNetPlugin_v8"};
  for (const char* s : symbols)
    if (void* p = dlsym(lib, s)) {
      if (dladdr(p, &info) && info.dli_fname) net->library = info.dli_fname;
      break;
    }
  if (net->library.empty()) net->library = spec;
  if (net->abiVersion != 11) net->library += " (v" + std::to_string(net->abiVersion) + ")";
  net->name = net->table->name ? net->table->name : spec;
  net->external = true;
  // In-network reduction comes from the same library, as NCCL loads it.
  net->collTable = static_cast<const ncclCollNet_v11_t*>(dlsym(lib, "ncclCollNetPlugin_v11"));
  return true;
}

}  // namespace braid
