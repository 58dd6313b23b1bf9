/* Braid's nccl_device/barrier.h: barriers over the world, an LSA team or a rail
 * (NCCL 2.30's ncclBarrierSession / ncclGinBarrierSession / ncclBarrier).
 *
 * A world barrier is an LSA barrier (on ncclDevComm.hybridLsaBarrier, sized by
 * ncclDevCommRequirements.barrierCount) followed by a GIN barrier across the rails.
 * Braid has no GIN: where the rail team has one member -- the whole communicator is
 * one LSA team -- the LSA part is the whole barrier and works; a barrier that would
 * need GIN stops the kernel with a message (ncclDevCommCreate already refuses
 * barrierCount there).
 */
#ifndef BRAID_NCCL_DEVICE_BARRIER_H_
#define BRAID_NCCL_DEVICE_BARRIER_H_

#include "coop.h"
#include "core.h"
#include "gin.h"
#include "lsa_barrier.h"

#ifdef __cplusplus
/* What a barrier that crosses GIN makes visible: bits, combined with |. */
enum ncclGinFenceLevel : uint32_t {
  None = 0,
  Put = 1u << 0, /* puts to the caller from before the barrier have landed */
  Get = 1u << 1, /* the caller's gets from before the barrier have landed */
  Relaxed = None,
};
NCCL_HOST_DEVICE_INLINE constexpr ncclGinFenceLevel operator|(ncclGinFenceLevel a,
                                                              ncclGinFenceLevel b) {
  return static_cast<ncclGinFenceLevel>(static_cast<uint32_t>(a) | static_cast<uint32_t>(b));
}
NCCL_HOST_DEVICE_INLINE constexpr ncclGinFenceLevel operator&(ncclGinFenceLevel a,
                                                              ncclGinFenceLevel b) {
  return static_cast<ncclGinFenceLevel>(static_cast<uint32_t>(a) & static_cast<uint32_t>(b));
}

/* Pass in place of an ncclGin to fence every GIN context of the communicator. */
struct ncclGinAllContexts {
  ncclDevComm const& comm;
  NCCL_HOST_DEVICE_INLINE constexpr ncclGinAllContexts(ncclDevComm const& c) : comm(c) {}
};
#endif

#if NCCL_CHECK_CUDACC
/* A barrier among the members of a team through GIN signals: only a team of one member
 * (nothing to wait for) works without GIN. */
template <typename Coop>
struct ncclGinBarrierSession {
  Coop coop;
  ncclTeam team;
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop c, ncclGin, ncclTeam tm, ncclGinBarrierHandle,
                                           uint32_t)
      : coop(c), team(tm) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop c, ncclGin g, ncclTeamTagRail, uint32_t)
      : coop(c), team(ncclTeamRail(g.comm)) {}
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop c, ncclGin g, ncclTeamTagWorld, uint32_t)
      : coop(c), team(ncclTeamWorld(g.comm)) {}
  ncclGinBarrierSession(ncclGinBarrierSession const&) = delete;
  NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order,
                               ncclGinFenceLevel = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get) {
    if (team.nRanks > 1) braid_dev::noGin("ncclGinBarrierSession::sync");
    coop.sync();
  }
  NCCL_DEVICE_INLINE ncclResult_t sync(Coop c, cuda::memory_order o, ncclGinFenceLevel f,
                                       uint64_t) {
    sync(c, o, f);
    return ncclSuccess;
  }
};

template <typename Coop>
struct ncclBarrierSession {
  Coop coop;
  braid_dev::Maybe<ncclLsaBarrierSession<Coop>> inner;
  int outerRanks; /* members of the part across LSA teams (needs GIN when > 1) */

  NCCL_DEVICE_INLINE ncclBarrierSession(Coop c, ncclTeam innerTeam, ncclTeam outerTeam, ncclGin g,
                                        ncclLsaBarrierHandle innerHandle, ncclGinBarrierHandle,
                                        uint32_t index, bool multimem = false,
                                        ncclMultimemHandle innerMm = {})
      : coop(c), outerRanks(outerTeam.nRanks) {
    if (innerTeam.nRanks > 1)
      inner.emplace(c, g.comm, innerTeam, innerHandle, index, multimem, innerMm);
    needsNoGin();
  }
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop c, ncclTeamTagWorld, ncclGin g, uint32_t index,
                                        bool multimem = false)
      : coop(c), outerRanks(g.comm.nRanks / g.comm.lsaSize) {
    inner.emplace(c, g.comm, ncclTeamLsa(g.comm), g.comm.hybridLsaBarrier, index, multimem,
                  g.comm.lsaMultimem);
    needsNoGin();
  }
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop c, ncclTeamTagLsa, ncclDevComm const& dc,
                                        uint32_t index, bool multimem = false)
      : coop(c), outerRanks(1) {
    inner.emplace(c, dc, ncclTeamLsa(dc), dc.hybridLsaBarrier, index, multimem, dc.lsaMultimem);
  }
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop c, ncclTeamTagRail, ncclGin g, uint32_t)
      : coop(c), outerRanks(g.comm.nRanks / g.comm.lsaSize) {
    needsNoGin();
  }
  ncclBarrierSession(ncclBarrierSession const&) = delete;

  NCCL_DEVICE_INLINE ncclLsaBarrierSession<Coop>& lsaBarrier() {
    if (!inner.present) braid_dev::fail("ncclBarrierSession::lsaBarrier: this barrier has no LSA part");
    return inner.get();
  }
  NCCL_DEVICE_INLINE void sync(Coop c, cuda::memory_order order,
                               ncclGinFenceLevel = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get) {
    if (inner.present) inner.get().sync(c, order);
    else coop.sync();
  }
  NCCL_DEVICE_INLINE ncclResult_t sync(Coop c, cuda::memory_order order, ncclGinFenceLevel,
                                       uint64_t timeoutCycles) {
    if (inner.present) return inner.get().sync(c, order, timeoutCycles);
    coop.sync();
    return ncclSuccess;
  }

 private:
  NCCL_DEVICE_INLINE void needsNoGin() const {
    if (outerRanks > 1)
      braid_dev::noGin("barrier across LSA teams (ncclBarrierSession)");
  }
};

template <typename Coop>
NCCL_DEVICE_INLINE void ncclBarrier(Coop coop, ncclTeamTagWorld tag, ncclGin gin, uint32_t index,
                                    cuda::memory_order order = cuda::memory_order_acq_rel,
                                    ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get,
                                    bool multimem = false) {
  ncclBarrierSession<Coop> bar(coop, tag, gin, index, multimem);
  bar.sync(coop, order, fence);
}
template <typename Coop>
NCCL_DEVICE_INLINE void ncclBarrier(Coop coop, ncclTeamTagRail tag, ncclGin gin, uint32_t index,
                                    cuda::memory_order order = cuda::memory_order_acq_rel,
                                    ncclGinFenceLevel fence = ncclGinFenceLevel::Put | ncclGinFenceLevel::Get) {
  ncclBarrierSession<Coop> bar(coop, tag, gin, index);
  bar.sync(coop, order, fence);
}
#endif /* NCCL_CHECK_CUDACC */

#endif /* BRAID_NCCL_DEVICE_BARRIER_H_ */
