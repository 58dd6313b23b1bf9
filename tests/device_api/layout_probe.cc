// Prints what a program compiled against a device-API header depends on: the size,
// alignment and field offsets of every struct a program allocates or the library fills
// and device code reads, enumerator and initializer values, the type of every host
// function, and the answers of the host/device team functions. Built once against
// Braid's include/ and once against NVIDIA's 2.30.7 headers; device_api.layout requires
// the two outputs to be identical, line for line.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <typeinfo>

#include "nccl_device.h"

#if defined(PROBE_BRAID) && !defined(BRAID_NCCL_DEVICE_H_)
#error "PROBE_BRAID: Braid's nccl_device.h was not the one included"
#endif
#if defined(PROBE_NVIDIA) && defined(BRAID_NCCL_DEVICE_H_)
#error "PROBE_NVIDIA: Braid's nccl_device.h was included"
#endif

#define TYPE(T) std::printf("%s size %zu align %zu\n", #T, sizeof(T), alignof(T))
#define FIELD(T, f) std::printf("  %s.%s %zu\n", #T, #f, offsetof(T, f))
#define VALUE(v) std::printf("%s = %lld\n", #v, static_cast<long long>(v))
#define FN(fn, ...) \
  std::printf("fn %s %s\n", #fn, typeid(static_cast<__VA_ARGS__>(&fn)).name())

int main() {
  TYPE(ncclDevComm);
  FIELD(ncclDevComm, magic); FIELD(ncclDevComm, version); FIELD(ncclDevComm, rank);
  FIELD(ncclDevComm, nRanks); FIELD(ncclDevComm, nRanks_rcp32); FIELD(ncclDevComm, lsaRank);
  FIELD(ncclDevComm, lsaSize); FIELD(ncclDevComm, lsaSize_rcp32);
  FIELD(ncclDevComm, windowTable); FIELD(ncclDevComm, resourceWindow);
  FIELD(ncclDevComm, resourceWindow_inlined); FIELD(ncclDevComm, hybridWorldGinBarrier);
  FIELD(ncclDevComm, lsaMultimem); FIELD(ncclDevComm, lsaBarrier);
  FIELD(ncclDevComm, railGinBarrier); FIELD(ncclDevComm, ginConnectionCount);
  FIELD(ncclDevComm, ginNetDeviceTypes); FIELD(ncclDevComm, ginHandles);
  FIELD(ncclDevComm, ginSignalCount); FIELD(ncclDevComm, ginCounterCount);
  FIELD(ncclDevComm, ginSignalShadows); FIELD(ncclDevComm, ginContextCount);
  FIELD(ncclDevComm, ginConnectionsRailed); FIELD(ncclDevComm, ginStrongLegacySignals);
  FIELD(ncclDevComm, ginContextsRailed); FIELD(ncclDevComm, abortFlag);
  FIELD(ncclDevComm, hybridLsaBarrier); FIELD(ncclDevComm, hybridRailGinBarrier);
  FIELD(ncclDevComm, worldGinBarrier);

  TYPE(ncclWindow_vidmem);
  FIELD(ncclWindow_vidmem, winHost); FIELD(ncclWindow_vidmem, lsaFlatBase);
  FIELD(ncclWindow_vidmem, lsaRank); FIELD(ncclWindow_vidmem, worldRank);
  FIELD(ncclWindow_vidmem, stride4G); FIELD(ncclWindow_vidmem, mcOffset4K);
  FIELD(ncclWindow_vidmem, ginOffset4K); FIELD(ncclWindow_vidmem, ginWins);
  FIELD(ncclWindow_vidmem, ginMultiSegmentWins); FIELD(ncclWindow_vidmem, numSegments);
  TYPE(ncclResourceWindow_vidmem_t);
  FIELD(ncclResourceWindow_vidmem_t, lsaFlatBase); FIELD(ncclResourceWindow_vidmem_t, stride4G);
  FIELD(ncclResourceWindow_vidmem_t, mcOffset4K);
  TYPE(ncclDevCommWindowTable);
  FIELD(ncclDevCommWindowTable, entries); FIELD(ncclDevCommWindowTable, next);
  TYPE(ncclDevCommWindowTable::Entry);

  TYPE(ncclDevCommRequirements_t);
  FIELD(ncclDevCommRequirements_t, size); FIELD(ncclDevCommRequirements_t, magic);
  FIELD(ncclDevCommRequirements_t, version);
  FIELD(ncclDevCommRequirements_t, resourceRequirementsList);
  FIELD(ncclDevCommRequirements_t, teamRequirementsList);
  FIELD(ncclDevCommRequirements_t, lsaMultimem); FIELD(ncclDevCommRequirements_t, barrierCount);
  FIELD(ncclDevCommRequirements_t, lsaBarrierCount);
  FIELD(ncclDevCommRequirements_t, railGinBarrierCount);
  FIELD(ncclDevCommRequirements_t, lsaLLA2ABlockCount);
  FIELD(ncclDevCommRequirements_t, lsaLLA2ASlotCount);
  FIELD(ncclDevCommRequirements_t, ginForceEnable);
  FIELD(ncclDevCommRequirements_t, ginContextCount);
  FIELD(ncclDevCommRequirements_t, ginSignalCount);
  FIELD(ncclDevCommRequirements_t, ginCounterCount);
  FIELD(ncclDevCommRequirements_t, ginConnectionType);
  FIELD(ncclDevCommRequirements_t, ginExclusiveContexts);
  FIELD(ncclDevCommRequirements_t, ginQueueDepth);
  FIELD(ncclDevCommRequirements_t, ginTrafficClass);
  FIELD(ncclDevCommRequirements_t, worldGinBarrierCount);
  FIELD(ncclDevCommRequirements_t, ginStrongSignalsRequired);
  FIELD(ncclDevCommRequirements_t, ginVaSignalsRequired);
  TYPE(ncclDevResourceRequirements_t);
  FIELD(ncclDevResourceRequirements_t, next); FIELD(ncclDevResourceRequirements_t, bufferSize);
  FIELD(ncclDevResourceRequirements_t, bufferAlign);
  FIELD(ncclDevResourceRequirements_t, outBufferHandle);
  FIELD(ncclDevResourceRequirements_t, ginSignalCount);
  FIELD(ncclDevResourceRequirements_t, ginCounterCount);
  FIELD(ncclDevResourceRequirements_t, outGinSignalStart);
  FIELD(ncclDevResourceRequirements_t, outGinCounterStart);
  TYPE(ncclTeamRequirements_t);
  FIELD(ncclTeamRequirements_t, next); FIELD(ncclTeamRequirements_t, team);
  FIELD(ncclTeamRequirements_t, multimem); FIELD(ncclTeamRequirements_t, outMultimemHandle);
  TYPE(ncclCommProperties_t);
  FIELD(ncclCommProperties_t, size); FIELD(ncclCommProperties_t, magic);
  FIELD(ncclCommProperties_t, version); FIELD(ncclCommProperties_t, rank);
  FIELD(ncclCommProperties_t, nRanks); FIELD(ncclCommProperties_t, cudaDev);
  FIELD(ncclCommProperties_t, nvmlDev); FIELD(ncclCommProperties_t, deviceApiSupport);
  FIELD(ncclCommProperties_t, multimemSupport); FIELD(ncclCommProperties_t, ginType);
  FIELD(ncclCommProperties_t, nLsaTeams); FIELD(ncclCommProperties_t, hostRmaSupport);
  FIELD(ncclCommProperties_t, railedGinType);

  TYPE(ncclTeam_t);
  FIELD(ncclTeam_t, nRanks); FIELD(ncclTeam_t, rank); FIELD(ncclTeam_t, stride);
  TYPE(ncclLsaBarrierHandle_t);
  FIELD(ncclLsaBarrierHandle_t, bufHandle); FIELD(ncclLsaBarrierHandle_t, nBarriers);
  TYPE(ncclGinBarrierHandle_t);
  FIELD(ncclGinBarrierHandle_t, signal0);
  TYPE(ncclLLA2AHandle_t);
  FIELD(ncclLLA2AHandle_t, bufHandle); FIELD(ncclLLA2AHandle_t, nSlots);
  TYPE(ncclMultimemHandle_t);
  TYPE(ncclGinRequest_t);
  TYPE(ncclSymPtr<char>);
  FIELD(ncclSymPtr<char>, window); FIELD(ncclSymPtr<char>, offset);
  TYPE(ncclDevResourceHandle_t); TYPE(ncclGinSignal_t); TYPE(ncclGinCounter_t);

  VALUE(NCCL_GIN_CONNECTION_NONE); VALUE(NCCL_GIN_CONNECTION_FULL);
  VALUE(NCCL_GIN_CONNECTION_RAIL); VALUE(NCCL_GIN_TYPE_NONE); VALUE(NCCL_GIN_TYPE_PROXY);
  VALUE(NCCL_GIN_TYPE_GDAKI); VALUE(NCCL_GIN_TYPE_GPI); VALUE(NCCL_GIN_MAX_CONNECTIONS);
  VALUE(ncclGinSignalInc); VALUE(ncclGinSignalAdd);
  VALUE(NCCL_NET_DEVICE_GIN_PROXY); VALUE(NCCL_NET_DEVICE_GIN_GDAKI);

  const ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  std::printf("reqs init: size %zu magic %x version %u multimem %d barriers %d %d %d lla2a %d %d "
              "gin %d %d %d %d conn %d excl %d depth %d tc %d world %d strong %d va %d\n",
              reqs.size, reqs.magic, reqs.version, int(reqs.lsaMultimem), reqs.barrierCount,
              reqs.lsaBarrierCount, reqs.railGinBarrierCount, reqs.lsaLLA2ABlockCount,
              reqs.lsaLLA2ASlotCount, int(reqs.ginForceEnable), reqs.ginContextCount,
              reqs.ginSignalCount, reqs.ginCounterCount, int(reqs.ginConnectionType),
              int(reqs.ginExclusiveContexts), reqs.ginQueueDepth, reqs.ginTrafficClass,
              reqs.worldGinBarrierCount, int(reqs.ginStrongSignalsRequired),
              int(reqs.ginVaSignalsRequired));
  const ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
  std::printf("props init: size %zu magic %x version %u\n", props.size, props.magic,
              props.version);

  FN(ncclCommQueryProperties, ncclResult_t (*)(ncclComm_t, ncclCommProperties_t*));
  FN(ncclDevCommCreate, ncclResult_t (*)(ncclComm_t, const ncclDevCommRequirements_t*,
                                         ncclDevComm_t*));
  FN(ncclDevCommDestroy, ncclResult_t (*)(ncclComm_t, const ncclDevComm_t*));
  FN(ncclGetLsaMultimemDevicePointer, ncclResult_t (*)(ncclWindow_t, size_t, void**));
  FN(ncclGetMultimemDevicePointer, ncclResult_t (*)(ncclWindow_t, size_t, ncclMultimemHandle_t,
                                                    void**));
  FN(ncclGetLsaDevicePointer, ncclResult_t (*)(ncclWindow_t, size_t, int, void**));
  FN(ncclGetPeerDevicePointer, ncclResult_t (*)(ncclWindow_t, size_t, int, void**));
  FN(ncclTeamWorld, ncclTeam_t (*)(ncclComm_t));
  FN(ncclTeamLsa, ncclTeam_t (*)(ncclComm_t));
  FN(ncclTeamRail, ncclTeam_t (*)(ncclComm_t));
  FN(ncclTeamRankToWorld, int (*)(ncclComm_t, ncclTeam_t, int));
  FN(ncclTeamRankToLsa, int (*)(ncclComm_t, ncclTeam_t, int));
  FN(ncclLsaBarrierCreateRequirement, ncclResult_t (*)(ncclTeam_t, int, ncclLsaBarrierHandle_t*,
                                                       ncclDevResourceRequirements_t*));
  FN(ncclGinBarrierCreateRequirement, ncclResult_t (*)(ncclComm_t, ncclTeam_t, int,
                                                       ncclGinBarrierHandle_t*,
                                                       ncclDevResourceRequirements_t*));

  // The team arithmetic both headers implement inline, on every small case.
  for (int n = 1; n <= 8; ++n)
    for (int stride = 1; stride <= 2; ++stride)
      for (int r = 0; r < n; ++r) {
        const ncclTeam_t parent{n, r, stride};
        for (int inner = 1; inner <= n; ++inner) {
          if (n % inner != 0) continue;
          const ncclTeam_t in = ncclTeamInnerFactor(parent, inner);
          const ncclTeam_t out = ncclTeamOuterFactor(parent, inner);
          std::printf("team %d/%d/%d inner %d: {%d %d %d} outer {%d %d %d} diff", n, r, stride,
                      inner, in.nRanks, in.rank, in.stride, out.nRanks, out.rank, out.stride);
          for (int i = 0; i < n - inner; ++i)
            std::printf(" %d", ncclTeamRankInDifference(parent, in, i));
          std::printf(" member");
          for (int p = 0; p < n; ++p)
            std::printf(" %d:%d", int(ncclTeamRankIsMember(in, parent, p)),
                        ncclTeamRankIsMember(in, parent, p) ? ncclTeamRankToTeam(in, parent, p)
                                                            : -9);
          std::printf("\n");
        }
      }
  for (unsigned h = 0; h < 5; ++h)
    std::printf("resource offset %u: %zu\n", h, ncclGetResourceBufferOffset(h));
  return 0;
}
