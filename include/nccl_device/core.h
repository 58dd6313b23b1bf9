/* Braid's nccl_device/core.h: the device communicator, teams, windows and the host
 * functions of NCCL 2.30's device API, written for Braid with NVIDIA's names,
 * signatures and -- for every struct a program allocates or the library fills and
 * device code reads (ncclDevComm, ncclWindow_vidmem, requirements, properties,
 * handles) -- NVIDIA's layouts, so that a program built against NVIDIA's 2.30 headers
 * runs on Braid's library (tests/device_api compares the layouts with NCCL 2.30.7's).
 *
 * What the library provides behind it (docs/device-api.md):
 *   the load/store (LSA) team   the ranks of one process on CUDA devices that reach
 *                               each other, contiguous in the communicator
 *   windows                     ncclCommWindowRegister on device memory from
 *                               ncclMemAlloc (cuMem): every LSA member's part mapped at
 *                               lsaFlatBase + lsaRank * stride
 *   ncclDevCommCreate           LSA barriers and resource buffers; requirements that
 *                               need GIN or multimem are refused with a message
 */
#ifndef BRAID_NCCL_DEVICE_CORE_H_
#define BRAID_NCCL_DEVICE_CORE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coop.h"
#include "nccl.h"
#include "utility.h"

/* ---- handles and small types -------------------------------------------------- */

struct ncclDevComm;
typedef struct ncclDevComm ncclDevComm_t;
struct ncclTeam;
typedef struct ncclTeam ncclTeam_t;
typedef struct ncclWindow_vidmem ncclWindow_vidmem_t;
struct ncclMultimemHandle;
typedef struct ncclMultimemHandle ncclMultimemHandle_t;

/* A resource buffer, in units of 128 bytes from the start of the resource window. */
typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

typedef struct {
  uint64_t opaque[2];
} ncclGinRequest_t;

/* A team: nRanks ranks, world ranks spaced `stride` apart; `rank` is the caller's index. */
struct ncclTeam {
  int nRanks, rank, stride;
};

#ifdef __cplusplus
struct ncclTeamTagWorld {};
struct ncclTeamTagLsa {};
struct ncclTeamTagRail {};
template <typename T>
struct ncclSymPtr;
#endif

struct ncclMultimemHandle {
  void* mcBasePtr;
};

struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle; /* the barrier's words (see lsa_barrier.h) */
  int nBarriers;
};
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;

struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;
  ncclDevResourceHandle_t unused;
};
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;

struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle;
  uint32_t nSlots;
};
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

typedef enum {
  NCCL_GIN_CONNECTION_NONE,
  NCCL_GIN_CONNECTION_FULL,
  NCCL_GIN_CONNECTION_RAIL,
} ncclGinConnectionType_t;

typedef enum {
  NCCL_GIN_TYPE_NONE = 0,
  NCCL_GIN_TYPE_PROXY = 2,
  NCCL_GIN_TYPE_GDAKI = 3,
  NCCL_GIN_TYPE_GPI = 4,
} ncclGinType_t;

#define NCCL_GIN_MAX_CONNECTIONS 4
typedef void* ncclGinWindow_t;

/* ---- windows as device code sees them -------------------------------------------- */

struct ncclSegmentWindow; /* GIN segments: Braid has none */

/* ncclWindow_t points at one of these, in device memory (nccl.h declares the handle). */
struct ncclWindow_vidmem {
  void* winHost;       /* the library's own record of the window */
  char* lsaFlatBase;   /* LSA rank 0's part; rank r's at lsaFlatBase + r * stride */
  int lsaRank;
  int worldRank;
  uint32_t stride4G;   /* stride in units of 4 GiB */
  uint32_t mcOffset4K; /* multicast mapping (none in Braid: 0) */
  uint32_t ginOffset4K;
  ncclGinWindow_t ginWins[NCCL_GIN_MAX_CONNECTIONS];
  struct ncclSegmentWindow* ginMultiSegmentWins;
  int numSegments;
};

/* The fields of the resource window's ncclWindow_vidmem that address resource buffers,
 * copied into the device communicator (same offsets as in ncclWindow_vidmem). */
typedef struct ncclResourceWindow_vidmem {
  char reserved1[8];
  char* lsaFlatBase;
  char reserved2[8];
  uint32_t stride4G;
  uint32_t mcOffset4K;
  char reserved3[32];
} ncclResourceWindow_vidmem_t;

#ifdef __cplusplus
/* Windows by address range, for code that looks a window up from a pointer. */
struct ncclDevCommWindowTable {
  struct Entry {
    uintptr_t base, size;
    ncclWindow_t window;
  } entries[32];
  struct ncclDevCommWindowTable* next;
};
#endif
typedef struct ncclDevCommWindowTable* ncclDevCommWindowTable_t;

/* The device communicator: filled by ncclDevCommCreate, passed to kernels by value. */
struct ncclDevComm {
  unsigned int magic; /* library-internal: do not modify */
  unsigned int version;

  int rank, nRanks;
  uint32_t nRanks_rcp32;
  int lsaRank, lsaSize;
  uint32_t lsaSize_rcp32;

  ncclDevCommWindowTable_t windowTable;

  ncclWindow_t resourceWindow;
  ncclResourceWindow_vidmem_t resourceWindow_inlined;

  ncclGinBarrierHandle_t hybridWorldGinBarrier;

  ncclMultimemHandle_t lsaMultimem;
  ncclLsaBarrierHandle_t lsaBarrier;
  ncclGinBarrierHandle_t railGinBarrier;

  uint8_t ginConnectionCount;
  uint8_t ginNetDeviceTypes[NCCL_GIN_MAX_CONNECTIONS];
  void* ginHandles[NCCL_GIN_MAX_CONNECTIONS];
  int ginSignalCount;
  int ginCounterCount;
  uint64_t* ginSignalShadows;
  uint32_t ginContextCount;
  bool ginConnectionsRailed;
  bool ginStrongLegacySignals;
  bool ginContextsRailed;

  uint32_t* abortFlag; /* nonzero once the communicator is aborted */

  ncclLsaBarrierHandle_t hybridLsaBarrier;
  ncclGinBarrierHandle_t hybridRailGinBarrier;

  ncclGinBarrierHandle_t worldGinBarrier;
};

/* ---- what a program asks of ncclDevCommCreate ----------------------------------- */

struct ncclDevCommRequirements;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
struct ncclDevResourceRequirements;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
struct ncclTeamRequirements;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;

struct ncclDevCommRequirements {
  size_t size; /* set by the initializer */
  unsigned int magic;
  unsigned int version;
  ncclDevResourceRequirements_t* resourceRequirementsList;
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;    /* world barriers (LSA barriers when the world is one LSA team) */
  int lsaBarrierCount; /* LSA barriers: one per CTA that syncs at the same time */
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount; /* a hint */
  int ginSignalCount;
  int ginCounterCount;
  ncclGinConnectionType_t ginConnectionType;
  bool ginExclusiveContexts;
  int ginQueueDepth;
  int ginTrafficClass;
  int worldGinBarrierCount;
  bool ginStrongSignalsRequired;
  bool ginVaSignalsRequired;
};

#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER                                              \
  {                                                                                         \
    sizeof(ncclDevCommRequirements_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NULL, NULL, false, \
        0, 0, 0, 0, 0, false, 4, 0, 0, NCCL_GIN_CONNECTION_NONE, false, 0,                  \
        NCCL_CONFIG_UNDEF_INT, 0, true, true                                                \
  }

/* A buffer in the resource window, symmetric over the LSA team. */
struct ncclDevResourceRequirements {
  ncclDevResourceRequirements_t* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle; /* set by ncclDevCommCreate when not NULL */
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
};

struct ncclTeamRequirements {
  ncclTeamRequirements_t* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
};

struct ncclCommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  ncclGinType_t ginType;
  int nLsaTeams;
  bool hostRmaSupport;
  ncclGinType_t railedGinType;
};
typedef struct ncclCommProperties ncclCommProperties_t;

/* NVIDIA's initializer names the first three fields; the rest are spelled out as zero
 * so that -Wmissing-field-initializers stays quiet. */
#define NCCL_COMM_PROPERTIES_INITIALIZER                                                   \
  {                                                                                        \
    sizeof(ncclCommProperties_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, 0, 0, 0, 0, false,    \
        false, NCCL_GIN_TYPE_NONE, 0, false, NCCL_GIN_TYPE_NONE                            \
  }

/* ---- host functions (libnccl) ----------------------------------------------------- */

#ifdef __cplusplus
extern "C" {
#endif

__host__ ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
__host__ ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
__host__ ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                        ncclDevComm_t* outDevComm);
__host__ ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                         ncclDevComm_t* outDevComm);
__host__ ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
__host__ ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
__host__ ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                      void** outPtr);
__host__ ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                       void** outPtr);
__host__ ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                   ncclMultimemHandle_t multimem, void** outPtr);
__host__ ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                                    ncclMultimemHandle_t multimem, void** outPtr);
__host__ ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                              void** outPtr);
__host__ ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                               void** outPtr);
__host__ ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                               void** outPtr);
__host__ ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                                void** outPtr);

/* Teams of a host communicator (the same answers as the device forms below). */
__host__ ncclTeam_t ncclTeamWorld(ncclComm_t comm);
__host__ ncclTeam_t ncclTeamLsa(ncclComm_t comm);
__host__ ncclTeam_t ncclTeamRail(ncclComm_t comm);
__host__ int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
__host__ int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/* Resource requirements for nBarriers LSA barriers over `team` (chain *outReq into
 * ncclDevCommRequirements.resourceRequirementsList; *outHandle is filled by
 * ncclDevCommCreate). */
__host__ ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                      ncclLsaBarrierHandle_t* outHandle,
                                                      ncclDevResourceRequirements_t* outReq);
__host__ ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team,
                                                      int nBarriers,
                                                      ncclGinBarrierHandle_t* outHandle,
                                                      ncclDevResourceRequirements_t* outReq);

#ifdef __cplusplus
} /* extern "C" */
#endif

/* ---- teams: pure arithmetic, host and device ----------------------------------------- */

#ifdef __cplusplus
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamWorld(ncclDevComm const& c) {
  return ncclTeam{c.nRanks, c.rank, 1};
}
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamLsa(ncclDevComm const& c) {
  return ncclTeam{c.lsaSize, c.lsaRank, 1};
}
/* The ranks at the caller's LSA index in every LSA team. */
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamRail(ncclDevComm const& c) {
  return ncclTeam{c.nRanks / c.lsaSize, c.rank / c.lsaSize, c.lsaSize};
}
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToWorld(ncclDevComm const& c, ncclTeam tm, int rank) {
  return c.rank + (rank - tm.rank) * tm.stride;
}
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToLsa(ncclDevComm const& c, ncclTeam tm, int rank) {
  return c.lsaRank + (rank - tm.rank) * tm.stride;
}

/* Whether b's member bPeer is a member of a (both teams contain the caller). */
NCCL_HOST_DEVICE_INLINE bool ncclTeamRankIsMember(ncclTeam_t a, ncclTeam_t b, int bPeer) {
  const int delta = (bPeer - b.rank) * b.stride; /* world distance from the caller */
  if (delta % a.stride != 0) return false;
  const int ai = a.rank + delta / a.stride;
  return 0 <= ai && ai < a.nRanks;
}
/* b's member bPeer as an index in a (meaningful when ncclTeamRankIsMember). */
NCCL_HOST_DEVICE_INLINE int ncclTeamRankToTeam(ncclTeam_t a, ncclTeam_t b, int bPeer) {
  return a.rank + (bPeer - b.rank) * b.stride / a.stride;
}
/* The consecutive runs of innerSize members of parent, as a team. */
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamInnerFactor(ncclTeam_t parent, int innerSize) {
  return ncclTeam{innerSize, parent.rank % innerSize, parent.stride};
}
/* The members of parent at the caller's position in every run of innerSize. */
NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamOuterFactor(ncclTeam_t parent, int innerSize) {
  return ncclTeam{parent.nRanks / innerSize, parent.rank / innerSize,
                  parent.stride * innerSize};
}
/* The index-th member of parent (in parent's numbering) that is not in subset. */
NCCL_HOST_DEVICE_INLINE int ncclTeamRankInDifference(ncclTeam_t parent, ncclTeam_t subset,
                                                     int index) {
  int seen = 0;
  for (int i = 0; i < parent.nRanks; i++) {
    if (ncclTeamRankIsMember(subset, parent, i)) continue;
    if (seen++ == index) return i;
  }
  return -1;
}
#endif /* __cplusplus */

/* Where resource buffer h starts, in bytes from the start of the resource window. */
NCCL_HOST_DEVICE_INLINE size_t ncclGetResourceBufferOffset(ncclDevResourceHandle_t h) {
  return (size_t)h * 128;
}

/* ---- pointers into windows (device) ----------------------------------------------- */

#if NCCL_CHECK_CUDACC
namespace braid_dev {
/// LSA member i's part of w, at offset.
__device__ __forceinline__ void* lsaPart(ncclWindow_t w, size_t offset, int i) {
  char* base = w->lsaFlatBase;
  if (base == nullptr)
    fail("a window with no load/store mapping was used on the device (register it with "
         "ncclCommWindowRegister on memory from ncclMemAlloc)");
  return add4G(base, uint32_t(i) * w->stride4G) + offset;
}
/// LSA member i's resource buffer h.
__device__ __forceinline__ void* resourcePart(ncclDevComm const& c, ncclDevResourceHandle h,
                                              int i) {
  char* base = c.resourceWindow_inlined.lsaFlatBase;
  if (base == nullptr) fail("the device communicator has no resource buffers");
  return add4G(base, uint32_t(i) * c.resourceWindow_inlined.stride4G) +
         ncclGetResourceBufferOffset(h);
}
}  // namespace braid_dev

NCCL_DEVICE_INLINE void* ncclGetLocalPointer(ncclWindow_t w, size_t offset) {
  return braid_dev::lsaPart(w, offset, w->lsaRank);
}
NCCL_DEVICE_INLINE void* ncclGetLsaPointer(ncclWindow_t w, size_t offset, int peer) {
  return braid_dev::lsaPart(w, offset, peer);
}
/* World rank `peer`, which must be in the caller's LSA team. */
NCCL_DEVICE_INLINE void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, int peer) {
  return braid_dev::lsaPart(w, offset, w->lsaRank + (peer - w->worldRank));
}
/* Member `peer` of team tm, which must lie in the caller's LSA team. */
NCCL_DEVICE_INLINE void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, ncclTeam tm,
                                            int peer) {
  return braid_dev::lsaPart(w, offset, w->lsaRank + (peer - tm.rank) * tm.stride);
}
/* Multicast memory: Braid offers none (ncclCommQueryProperties says so): NULL. */
NCCL_DEVICE_INLINE void* ncclGetMultimemPointer(ncclWindow_t w, size_t offset,
                                                ncclMultimemHandle mm) {
  if (mm.mcBasePtr == nullptr || w->mcOffset4K == 0) return nullptr;
  return static_cast<char*>(mm.mcBasePtr) + size_t(w->mcOffset4K) * 4096 + offset;
}
NCCL_DEVICE_INLINE void* ncclGetLsaMultimemPointer(ncclWindow_t w, size_t offset,
                                                   ncclDevComm const& c) {
  return ncclGetMultimemPointer(w, offset, c.lsaMultimem);
}

NCCL_DEVICE_INLINE void* ncclGetResourceBufferLocalPointer(ncclDevComm const& c,
                                                           ncclDevResourceHandle h) {
  return braid_dev::resourcePart(c, h, c.lsaRank);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferLsaPointer(ncclDevComm const& c,
                                                         ncclDevResourceHandle h, int peer) {
  return braid_dev::resourcePart(c, h, peer);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferPeerPointer(ncclDevComm const& c,
                                                          ncclDevResourceHandle h, ncclTeam tm,
                                                          int peer) {
  return braid_dev::resourcePart(c, h, c.lsaRank + (peer - tm.rank) * tm.stride);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferMultimemPointer(ncclDevComm const& c,
                                                              ncclDevResourceHandle h,
                                                              ncclMultimemHandle mm) {
  if (mm.mcBasePtr == nullptr) return nullptr;
  return static_cast<char*>(mm.mcBasePtr) +
         size_t(c.resourceWindow_inlined.mcOffset4K) * 4096 + ncclGetResourceBufferOffset(h);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferLsaMultimemPointer(ncclDevComm const& c,
                                                                 ncclDevResourceHandle h) {
  return ncclGetResourceBufferMultimemPointer(c, h, c.lsaMultimem);
}
NCCL_DEVICE_INLINE ncclSymPtr<char> ncclGetResourceBuffer(ncclDevComm const& c,
                                                          ncclDevResourceHandle h);

/* The window of c holding ptr (a registered buffer of this rank), or NULL: the lanes of
 * coop's warp search the communicator's window table together. Collective on coop. */
template <typename Coop>
NCCL_DEVICE_INLINE ncclWindow_t ncclFindWindow(Coop coop, ncclDevComm const& c, void const* ptr) {
  auto lanes = ncclCoopCoalesced(coop);
  const uint32_t mask = ncclCoopGetLaneMask(lanes);
  const uintptr_t u = reinterpret_cast<uintptr_t>(ptr);
  for (ncclDevCommWindowTable const* t = c.windowTable; t != nullptr; t = t->next) {
    ncclWindow_t mine = nullptr;
    for (int i = lanes.thread_rank(); i < 32; i += lanes.size()) {
      const ncclDevCommWindowTable::Entry& e = t->entries[i];
      if (e.window != nullptr && e.size != 0 && u - e.base < e.size) {
        mine = e.window;
        break;
      }
    }
    const uint32_t found = __ballot_sync(mask, mine != nullptr);
    if (found != 0)
      return reinterpret_cast<ncclWindow_t>(__shfl_sync(
          mask, reinterpret_cast<unsigned long long>(mine), __ffs(found) - 1));
  }
  return nullptr;
}
#endif /* NCCL_CHECK_CUDACC */

#endif /* BRAID_NCCL_DEVICE_CORE_H_ */
