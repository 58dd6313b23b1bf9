/* Braid's nccl_device/lsa_barrier.h: barriers among the CTAs of a load/store team.
 *
 * Barrier `index` of a team is one CTA per member; sync() returns in each once every
 * member's CTA has arrived. The words live in a resource buffer of the device
 * communicator, symmetric over the LSA team, as uint32_t (n = nBarriers):
 *   [0, n)                 multicast epochs (unused: Braid has no multimem)
 *   [n, 2n)                each barrier's epoch, kept between sessions
 *   [2n, 3n)               multicast inboxes (unused)
 *   [3n + index * nRanks + peer]  the epoch peer last announced to this member
 * (NCCL 2.30's layout, so kernels built against either header agree.) A member arrives
 * by storing epoch + 1 into its slot in every other member's inbox, and waits until
 * every slot of its own inbox holds at least epoch + 1. Waits give up when the
 * communicator is aborted (ncclDevComm.abortFlag).
 */
#ifndef BRAID_NCCL_DEVICE_LSA_BARRIER_H_
#define BRAID_NCCL_DEVICE_LSA_BARRIER_H_

#include "coop.h"
#include "core.h"

#if NCCL_CHECK_CUDACC
template <typename Coop>
struct ncclLsaBarrierSession {
  Coop coop;
  ncclDevComm const& comm;
  ncclTeam team;
  ncclLsaBarrierHandle handle;
  int index;
  bool multimem;
  ncclMultimemHandle mmHandle;
  uint32_t epoch;

  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop c, ncclDevComm const& dc, ncclTeam tm,
                                           ncclLsaBarrierHandle h, uint32_t idx,
                                           bool mm = false, ncclMultimemHandle mmh = {})
      : coop(c), comm(dc), team(tm), handle(h), index(int(idx)), multimem(mm), mmHandle(mmh),
        epoch(0) {
    if (multimem)
      braid_dev::fail("ncclLsaBarrierSession: multimem barriers need multicast memory, which "
                      "Braid's device communicator does not have");
    if (index >= handle.nBarriers)
      braid_dev::fail("ncclLsaBarrierSession: barrier index beyond the count asked for in "
                      "ncclDevCommRequirements (lsaBarrierCount)");
    epoch = words()[handle.nBarriers + index];
  }
  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop c, ncclDevComm const& dc, ncclTeamTagLsa,
                                           uint32_t idx, bool mm = false)
      : ncclLsaBarrierSession(c, dc, ncclTeamLsa(dc), dc.lsaBarrier, idx, mm, dc.lsaMultimem) {}
  ncclLsaBarrierSession(ncclLsaBarrierSession const&) = delete;

  /* Keeps the epoch for the next session on this barrier. */
  NCCL_DEVICE_INLINE ~ncclLsaBarrierSession() {
    if (coop.thread_rank() == 0) words()[handle.nBarriers + index] = epoch;
    coop.sync();
  }

  NCCL_DEVICE_INLINE void arrive(Coop, cuda::memory_order order) {
    coop.sync();
    if (team.nRanks > 1)
      cuda::atomic_thread_fence(braid_dev::releasePart(order), cuda::thread_scope_system);
    for (int i = coop.thread_rank(); i < team.nRanks - 1; i += coop.size()) {
      const int peer = i + (i >= team.rank ? 1 : 0);
      cuda::atomic_ref<uint32_t, cuda::thread_scope_system> slot(*inbox(peer, team.rank));
      slot.store(epoch + 1, cuda::memory_order_relaxed);
    }
  }
  NCCL_DEVICE_INLINE void wait(Coop c, cuda::memory_order order) {
    (void)waitFor(c, order, false, 0);
  }
  NCCL_DEVICE_INLINE ncclResult_t wait(Coop c, cuda::memory_order order, uint64_t timeoutCycles) {
    coop.sync();
    return waitFor(c, order, true, timeoutCycles);
  }
  NCCL_DEVICE_INLINE void sync(Coop c, cuda::memory_order order) {
    arrive(c, order);
    wait(c, order);
  }
  NCCL_DEVICE_INLINE ncclResult_t sync(Coop c, cuda::memory_order order, uint64_t timeoutCycles) {
    arrive(c, order);
    return wait(c, order, timeoutCycles);
  }

 private:
  NCCL_DEVICE_INLINE uint32_t* words() const {
    return static_cast<uint32_t*>(ncclGetResourceBufferLocalPointer(comm, handle.bufHandle));
  }
  /* owner's inbox slot for peer (team indices). */
  NCCL_DEVICE_INLINE uint32_t* inbox(int owner, int peer) const {
    uint32_t* w = static_cast<uint32_t*>(
        ncclGetResourceBufferPeerPointer(comm, handle.bufHandle, team, owner));
    return w + 3 * handle.nBarriers + index * team.nRanks + peer;
  }
  NCCL_DEVICE_INLINE ncclResult_t waitFor(Coop, cuda::memory_order order, bool timed,
                                          uint64_t timeoutCycles) {
    ncclResult_t res = ncclSuccess;
    const uint64_t start = timed ? clock64() : 0;
    uint32_t spins = 0;
    for (int i = coop.thread_rank(); i < team.nRanks - 1; i += coop.size()) {
      const int peer = i + (i >= team.rank ? 1 : 0);
      cuda::atomic_ref<uint32_t, cuda::thread_scope_system> slot(*inbox(team.rank, peer));
      while (!braid_dev::reached(slot.load(braid_dev::acquirePart(order)), epoch + 1)) {
        if (timed) {
          if (uint64_t(clock64()) - start >= timeoutCycles) {
            res = ncclTimeout;
            break;
          }
        } else if (braid_dev::aborted(comm.abortFlag, spins)) {
          break;
        }
      }
    }
    // A wait that timed out has not passed the barrier: the epoch stays (a later wait
    // may finish it).
    if (res == ncclSuccess) epoch += 1;
    coop.sync();
    return res;
  }
};
#endif /* NCCL_CHECK_CUDACC */

#endif /* BRAID_NCCL_DEVICE_LSA_BARRIER_H_ */
