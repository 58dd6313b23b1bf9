/* The host functions of NCCL 2.30's device API (nccl_device/core.h), ABI-identical:
 * the structs callers allocate and pass in (ncclDevCommRequirements_t,
 * ncclCommProperties_t, ncclMultimemHandle_t) have NVIDIA's layout (checked by
 * tests/multirank/rma.cc against offsets taken from NCCL 2.30.7). Only what the host
 * functions need is declared; do not include this header together with NVIDIA's
 * nccl_device.h (code built against that one links to Braid unchanged).
 *
 * What Braid does (no device-side communicator yet):
 *   ncclCommQueryProperties       fills the properties: deviceApiSupport and
 *                                 multimemSupport false, no GIN, hostRmaSupport true
 *   ncclDevCommCreate / Destroy   ncclInvalidUsage, with a message saying so
 *   ncclGetPeerDevicePointer      the peer's window address where this process can
 *                                 address it (itself, thread ranks of this process);
 *                                 NULL (ncclSuccess) otherwise, as NCCL for peers
 *                                 outside its load/store team
 *   ncclGetLsaDevicePointer       the same, by index in the load/store team: the ranks
 *                                 of this process contiguous with this rank
 *   ncclGet(Lsa)MultimemDevicePointer  NULL (ncclSuccess): no multicast memory
 */
#ifndef BRAID_NCCL_DEVICE_HOST_H_
#define BRAID_NCCL_DEVICE_HOST_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The device communicator: NVIDIA's layout is not needed by Braid (never filled). */
struct ncclDevComm;
typedef struct ncclDevComm ncclDevComm_t;

typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;

struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;

struct ncclMultimemHandle {
  void* mcBasePtr;
};
typedef struct ncclMultimemHandle ncclMultimemHandle_t;

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

struct ncclDevResourceRequirements;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
struct ncclTeamRequirements;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;

struct ncclDevCommRequirements {
  size_t size;
  unsigned int magic;
  unsigned int version;
  ncclDevResourceRequirements_t* resourceRequirementsList;
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem;
  int barrierCount;
  int lsaBarrierCount;
  int railGinBarrierCount;
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;
  int ginContextCount;
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
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;

struct ncclDevResourceRequirements {
  ncclDevResourceRequirements_t* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle;
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

/* The same values as NVIDIA's initializer. */
#define NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER                                              \
  {                                                                                         \
    sizeof(ncclDevCommRequirements_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, NULL, NULL, false, \
        0, 0, 0, 0, 0, false, 4, 0, 0, NCCL_GIN_CONNECTION_NONE, false, 0,                  \
        NCCL_CONFIG_UNDEF_INT, 0, true, true                                                \
  }

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

/* NVIDIA's names the first three fields; the rest are zero there too (spelled out here
 * so that -Wmissing-field-initializers stays quiet). */
#define NCCL_COMM_PROPERTIES_INITIALIZER                                                   \
  {                                                                                        \
    sizeof(ncclCommProperties_t), NCCL_API_MAGIC, NCCL_VERSION_CODE, 0, 0, 0, 0, false,    \
        false, NCCL_GIN_TYPE_NONE, 0, false, NCCL_GIN_TYPE_NONE                            \
  }

ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t* props);
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                               ncclDevComm_t* outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                ncclDevComm_t* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void** outPtr);
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                          ncclMultimemHandle_t multimem, void** outPtr);
ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                           ncclMultimemHandle_t multimem, void** outPtr);
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                     void** outPtr);
ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                      void** outPtr);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                      void** outPtr);
ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer,
                                       void** outPtr);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* BRAID_NCCL_DEVICE_HOST_H_ */
