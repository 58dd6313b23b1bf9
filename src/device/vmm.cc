// Vmm: cuMem device memory and the flat window map (see vmm.h). The driver functions come
// from the runtime's cudaGetDriverEntryPointByVersion, as in cuda_rt.cc.
#include "src/device/vmm.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "src/config/log.h"
#include "src/config/error.h"
#include "src/os/cuda_rt.h"

#if BRAID_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <cudaTypedefs.h>
#endif

namespace braid {
namespace vmm {

bool planFlat(const std::vector<size_t>& allocSize, const std::vector<size_t>& offsetInAlloc,
              size_t g, FlatLayout* out, std::string* why) {
  constexpr uint64_t k4G = uint64_t(1) << 32;
  const size_t n = allocSize.size();
  std::string err;
  if (out == nullptr || n == 0 || offsetInAlloc.size() != n)
    err = "planFlat: no output, no allocations, or not one offset per allocation";
  else if (g == 0 || (g & (g - 1)) != 0 || g > k4G)
    err = "planFlat: granularity " + std::to_string(g) + " is not a power of two <= 4 GiB";
  size_t maxOff = 0, maxSize = 0;
  for (size_t p = 0; p < n && err.empty(); ++p) {
    const std::string who = "team member " + std::to_string(p) + "'s window starts at offset " +
                            std::to_string(offsetInAlloc[p]) + " of its allocation";
    // Allocation p goes at base + p * stride - offset[p], a multiple of g as the stride is:
    // every offset must be the same modulo g (and base too).
    if (offsetInAlloc[p] >= allocSize[p])
      err = who + ", which has " + std::to_string(allocSize[p]) + " bytes: outside it";
    else if (offsetInAlloc[p] % g != offsetInAlloc[0] % g)
      err = who + ", team member 0's at " + std::to_string(offsetInAlloc[0]) + ": offsets must "
            "be equal modulo the mapping granularity " + std::to_string(g);
    maxOff = std::max(maxOff, offsetInAlloc[p]);
    maxSize = std::max(maxSize, allocSize[p]);
  }
  // stride: maxOff + maxSize rounded up to 4 GiB, so allocation p ends before p + 1's begins.
  uint64_t span = 0, total = 0;
  bool overflow = __builtin_add_overflow(uint64_t(maxOff), uint64_t(maxSize), &span) ||
                  __builtin_add_overflow(span, k4G - 1, &span);
  const uint64_t stride = span / k4G * k4G;
  if (err.empty() && (overflow || stride / k4G > UINT32_MAX ||
                      __builtin_mul_overflow(uint64_t(n), stride, &total) ||
                      __builtin_add_overflow(total, uint64_t(maxOff) + (g - 1), &total)))
    err = "planFlat: " + std::to_string(n) + " allocations of up to " + std::to_string(maxSize) +
          " bytes overflow the address space";
  if (!err.empty() && why != nullptr) *why = err;
  if (!err.empty()) return false;
  out->stride = stride;
  out->baseOffset = maxOff;  // every offset is maxOff modulo g: each mapAt is a multiple of g
  out->reserve = size_t(total / g * g);
  out->mapAt.resize(n);
  for (size_t p = 0; p < n; ++p) out->mapAt[p] = size_t(maxOff + p * stride - offsetInAlloc[p]);
  return true;
}

#if BRAID_HAVE_CUDA

namespace {
/// The driver functions used here, found once through the runtime (ok: all of them).
struct Driver {
  bool ok = cudart::available();
  template <class F>
  F get(const char* name) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    if (!ok) return nullptr;
#if CUDART_VERSION >= 12050
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &q);
#else
    cudaError_t e = cudaGetDriverEntryPoint(name, &p, cudaEnableDefault, &q);
#endif
    if (e == cudaSuccess && q == cudaDriverEntryPointSuccess) return reinterpret_cast<F>(p);
    (void)cudaGetLastError();
    ok = false;
    BRAID_INFO(kLogInit, "VMM: the CUDA driver has no %s: no cuMem allocations", name);
    return nullptr;
  }
  // cuda.h's version macros (cuMemGetAddressRange -> _v2) rename the member, not the name
  // looked up; CUDA 12.0's version of that name is the same _v2.
#define BRAID_DRIVER_FN(f) decltype(&::f) f = get<decltype(&::f)>(#f)
  BRAID_DRIVER_FN(cuGetErrorName); BRAID_DRIVER_FN(cuGetErrorString); BRAID_DRIVER_FN(cuDeviceGet);
  BRAID_DRIVER_FN(cuDeviceGetAttribute); BRAID_DRIVER_FN(cuMemCreate); BRAID_DRIVER_FN(cuMemMap);
  BRAID_DRIVER_FN(cuMemRelease); BRAID_DRIVER_FN(cuMemUnmap); BRAID_DRIVER_FN(cuMemSetAccess);
  BRAID_DRIVER_FN(cuMemAddressReserve); BRAID_DRIVER_FN(cuMemAddressFree);
  BRAID_DRIVER_FN(cuMemGetAddressRange); BRAID_DRIVER_FN(cuMemRetainAllocationHandle);
  BRAID_DRIVER_FN(cuMemGetAllocationGranularity);
  BRAID_DRIVER_FN(cuMemGetAllocationPropertiesFromHandle);
#undef BRAID_DRIVER_FN
};
const Driver& driver() {
  static const Driver d = Driver();
  return d;
}
/// Records "CUDA <call> failed: CUDA_ERROR_X (text)<then>" as cuda_rt.cc does; returns code.
ncclResult_t cuFail(CUresult r, const std::string& call, const std::string& then = "",
                    ncclResult_t code = ncclUnhandledCudaError) {
  const char *name = nullptr, *text = nullptr;
  if (driver().cuGetErrorName(r, &name) != CUDA_SUCCESS) name = "unknown CUresult";
  if (driver().cuGetErrorString(r, &text) != CUDA_SUCCESS) text = "no description";
  return setError(code, nullptr, "CUDA %s failed: %s (%s)%s", call.c_str(), name, text,
                  then.c_str());
}
int attribute(int dev, CUdevice_attribute a) {
  CUdevice cu = 0;
  int v = 0;
  const Driver& d = driver();
  bool ok = d.cuDeviceGet(&cu, dev) == CUDA_SUCCESS;
  return ok && d.cuDeviceGetAttribute(&v, a, cu) == CUDA_SUCCESS ? v : 0;
}
CUmemAccessDesc readWrite(int dev) {
  return {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
}
/// Makes dev's primary context current for the driver calls that follow.
ncclResult_t enter(int dev, const char* call) {
  if (supported(dev)) return cudart::setDevice(dev);
  return setError(ncclUnhandledCudaError, nullptr, "%s: no CUDA virtual memory management on "
                  "device %d (%s)", call, dev, cudart::available() ? "the device or driver "
                  "lacks it" : cudart::unavailableReason().c_str());
}
/// Unmaps r's pieces and frees its range (every step tried, the first failure returned).
ncclResult_t release(Reservation* r) {
  cudart::DeviceScope scope;
  ncclResult_t res = cudart::setDevice(r->dev);
  cudart::CaptureRelaxed relaxed;
  for (const auto& piece : r->pieces) {
    CUresult e = driver().cuMemUnmap(CUdeviceptr(piece.first), piece.second);
    if (e != CUDA_SUCCESS && res == ncclSuccess) res = cuFail(e, "cuMemUnmap");
  }
  CUresult e = driver().cuMemAddressFree(CUdeviceptr(r->start), r->size);
  if (e != CUDA_SUCCESS && res == ncclSuccess) res = cuFail(e, "cuMemAddressFree");
  *r = Reservation();
  return res;
}
/// An allocation to map: its retained handle (released with the Piece: a mapping holds
/// the memory by itself), its bytes, and its offset in the reserved range.
struct Piece {
  CUmemGenericAllocationHandle handle = 0;
  size_t size = 0, at = 0;
  Piece() = default;
  Piece(const Piece&) = delete;  // one owner per retained handle
  ~Piece() { if (handle != 0) (void)driver().cuMemRelease(handle); }
};
/// Reserves `size` bytes aligned to g and maps each piece (named label + i) there, for
/// the devices in `access`; on failure nothing stays mapped or reserved.
ncclResult_t mapAll(const std::vector<Piece>& pieces, size_t size, size_t g, int dev,
                    const std::vector<CUmemAccessDesc>& access, const char* label,
                    Reservation* out) {
  const Driver& d = driver();
  CUdeviceptr start = 0;
  CUresult e = d.cuMemAddressReserve(&start, size, g, 0, 0);
  if (e != CUDA_SUCCESS)
    return cuFail(e, "cuMemAddressReserve of " + std::to_string(size) + " bytes");
  *out = Reservation{uintptr_t(start), size, dev, {}};
  size_t i = 0;
  for (; i < pieces.size(); ++i) {
    const CUdeviceptr at = start + pieces[i].at;
    if ((e = d.cuMemMap(at, pieces[i].size, 0, pieces[i].handle, 0)) != CUDA_SUCCESS) break;
    out->pieces.push_back({uintptr_t(at), pieces[i].size});
    e = d.cuMemSetAccess(at, pieces[i].size, access.data(), access.size());
    if (e != CUDA_SUCCESS) break;
  }
  if (e == CUDA_SUCCESS) return ncclSuccess;
  const std::string call = out->pieces.size() > i ? "cuMemSetAccess" : "cuMemMap";
  (void)release(out);
  return cuFail(e, call + " of " + label + std::to_string(i) + "'s " +
                       std::to_string(pieces[i].size) + " bytes on device " + std::to_string(dev));
}
/// Team member p's buffer: retains its allocation's handle; finds the size of the mapping
/// holding it, its offset there, and cuMemMap's granularity for it (*g rises to it).
ncclResult_t inspect(const void* ptr, size_t p, Piece* piece, size_t* offset, size_t* g) {
  const Driver& d = driver();
  CUresult e = CUDA_ERROR_INVALID_VALUE;
  if (ptr != nullptr) e = d.cuMemRetainAllocationHandle(&piece->handle, const_cast<void*>(ptr));
  if (e != CUDA_SUCCESS) {
    piece->handle = 0;  // not retained
    return cuFail(e, "cuMemRetainAllocationHandle", ": the buffer of team member " +
                  std::to_string(p) + " is not a cuMem allocation: allocate it with ncclMemAlloc",
                  ncclInvalidArgument);
  }
  CUdeviceptr base = 0, at = CUdeviceptr(reinterpret_cast<uintptr_t>(ptr));
  CUmemAllocationProp prop = {};
  size_t pg = 0;
  const std::string who = " for team member " + std::to_string(p);
  if ((e = d.cuMemGetAddressRange(&base, &piece->size, at)) != CUDA_SUCCESS)  // ptr's mapping
    return cuFail(e, "cuMemGetAddressRange" + who);
  if ((e = d.cuMemGetAllocationPropertiesFromHandle(&prop, piece->handle)) != CUDA_SUCCESS)
    return cuFail(e, "cuMemGetAllocationPropertiesFromHandle" + who);
  e = d.cuMemGetAllocationGranularity(&pg, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (e != CUDA_SUCCESS)  // cuMemMap's alignment for this allocation
    return cuFail(e, "cuMemGetAllocationGranularity" + who);
  *offset = size_t(at - base);
  *g = std::max(*g, pg);
  return ncclSuccess;
}
/// memAlloc's live allocations by start, and their lock (leaked: used at exit).
struct Allocs {
  std::mutex mu;
  std::map<uintptr_t, Reservation> live;
};
Allocs& allocs() {
  static Allocs* a = new Allocs();
  return *a;
}
}  // namespace

bool supported(int dev) {
  if (dev < 0 || dev >= cudart::deviceCount() || !driver().ok) return false;
  return attribute(dev, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) != 0;
}

ncclResult_t memAlloc(void** ptr, size_t size, int dev) {
  if (ptr == nullptr) return setError(ncclInvalidArgument, nullptr, "vmm::memAlloc: NULL ptr");
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  cudart::DeviceScope scope;
  BRAID_CHECK(enter(dev, "vmm::memAlloc"));
  cudart::CaptureRelaxed relaxed;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
  if (attribute(dev, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED) != 0)
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  // Network cards may then read and write it directly (as NCCL asks where it can).
  if (attribute(dev, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED) != 0)
    prop.allocFlags.gpuDirectRDMACapable = 1;
  size_t g = 0;
  const Driver& d = driver();
  CUresult e = d.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
  if (e != CUDA_SUCCESS) return cuFail(e, "cuMemGetAllocationGranularity");
  if (g == 0 || size > SIZE_MAX - (g - 1))
    return setError(ncclInvalidArgument, nullptr, "vmm::memAlloc: size %zu overflows", size);
  std::vector<Piece> one(1);
  one[0].size = (size + g - 1) / g * g;
  if ((e = d.cuMemCreate(&one[0].handle, one[0].size, &prop, 0)) != CUDA_SUCCESS)
    return cuFail(e, "cuMemCreate of " + std::to_string(one[0].size) + " bytes on device " +
                         std::to_string(dev));
  std::vector<CUmemAccessDesc> access;
  for (int peer = 0; peer < cudart::deviceCount(); ++peer)
    if (peer == dev || cudart::canAccessPeer(peer, dev)) access.push_back(readWrite(peer));
  Reservation r;
  BRAID_CHECK(mapAll(one, one[0].size, g, dev, access, "allocation ", &r));
  *ptr = reinterpret_cast<void*>(r.start);
  BRAID_INFO(kLogAlloc, "cuMemCreate %zu bytes on device %d (%zu devices have access): %p",
             r.size, dev, access.size(), *ptr);
  std::lock_guard<std::mutex> lock(allocs().mu);
  allocs().live[r.start] = std::move(r);
  return ncclSuccess;
}

ncclResult_t memFree(void* ptr) {
  if (ptr == nullptr) return ncclSuccess;
  std::unique_lock<std::mutex> lock(allocs().mu);
  auto node = allocs().live.extract(reinterpret_cast<uintptr_t>(ptr));
  lock.unlock();
  if (node.empty())
    return setError(ncclInvalidArgument, nullptr, "vmm::memFree: %p is not memAlloc's", ptr);
  return release(&node.mapped());
}

bool owns(const void* ptr) {
  std::lock_guard<std::mutex> lock(allocs().mu);
  return allocs().live.count(reinterpret_cast<uintptr_t>(ptr)) != 0;
}

bool isVmm(const void* ptr) {
  const Driver& d = driver();
  CUmemGenericAllocationHandle h = 0;
  if (!d.ok || ptr == nullptr || d.cuMemRetainAllocationHandle(&h, const_cast<void*>(ptr)) !=
                                     CUDA_SUCCESS)
    return false;
  (void)d.cuMemRelease(h);
  return true;
}

ncclResult_t mapFlat(const std::vector<const void*>& peers, int dev, FlatMap* out) {
  if (out == nullptr || out->range_.start != 0 || peers.empty())
    return setError(ncclInvalidArgument, nullptr, "vmm::mapFlat: %s", out == nullptr ? "out is "
                    "NULL" : peers.empty() ? "no team members" : "out holds a mapping already");
  *out = FlatMap();
  cudart::DeviceScope scope;
  BRAID_CHECK(enter(dev, "vmm::mapFlat"));
  cudart::CaptureRelaxed relaxed;
  const size_t n = peers.size();
  std::vector<Piece> pieces(n);
  std::vector<size_t> sizes(n), offsets(n);
  size_t g = 0;
  FlatLayout plan;
  std::string why;
  ncclResult_t res = ncclSuccess;
  for (size_t p = 0; p < n && res == ncclSuccess; ++p) {
    res = inspect(peers[p], p, &pieces[p], &offsets[p], &g);
    sizes[p] = pieces[p].size;
  }
  if (res == ncclSuccess && !planFlat(sizes, offsets, g, &plan, &why))
    res = setError(ncclInvalidArgument, nullptr, "vmm::mapFlat: %s", why.c_str());
  if (res != ncclSuccess) return res;
  for (size_t p = 0; p < n; ++p) pieces[p].at = plan.mapAt[p];
  BRAID_CHECK(mapAll(pieces, plan.reserve, g, dev, {readWrite(dev)}, "team member ",
                     &out->range_));
  out->base = reinterpret_cast<char*>(out->range_.start + plan.baseOffset);
  out->stride4G = uint32_t(plan.stride >> 32);
  BRAID_INFO(kLogAlloc, "VMM flat map of %zu team members on device %d: base %p, stride %u "
             "x 4 GiB", n, dev, static_cast<void*>(out->base), out->stride4G);
  return ncclSuccess;
}

ncclResult_t unmapFlat(FlatMap* m) {
  if (m == nullptr) return setError(ncclInvalidArgument, nullptr, "vmm::unmapFlat: m is NULL");
  ncclResult_t res = m->range_.start != 0 ? release(&m->range_) : ncclSuccess;
  *m = FlatMap();
  return res;
}

#else  // !BRAID_HAVE_CUDA: built without the toolkit.

static ncclResult_t noCuda(const char* fn) {
  return setError(ncclInvalidUsage, nullptr, "vmm::%s: Braid was built without CUDA", fn);
}
bool supported(int) { return false; }
bool owns(const void*) { return false; }
bool isVmm(const void*) { return false; }
ncclResult_t memAlloc(void** ptr, size_t, int) {
  if (ptr != nullptr) *ptr = nullptr;
  return noCuda(__func__);
}
ncclResult_t memFree(void* ptr) { return ptr == nullptr ? ncclSuccess : noCuda(__func__); }
ncclResult_t mapFlat(const std::vector<const void*>&, int, FlatMap*) { return noCuda(__func__); }
ncclResult_t unmapFlat(FlatMap*) { return noCuda(__func__); }
#endif  // BRAID_HAVE_CUDA

}  // namespace vmm
}  // namespace braid
