// ncclCommGetUniqueId / ncclCommGrow (NCCL 2.30): a communicator grown by new ranks.
//
// The coordinator (any rank of the existing communicator) makes a token with
// ncclCommGetUniqueId: a fresh bootstrap root in its process, like ncclGetUniqueId,
// stamped with the existing communicator's size and hash. It hands the token to the new
// ranks out of band. Every existing rank calls ncclCommGrow(comm, nRanks, id or NULL,
// -1, ...): they agree on the token (and on nRanks) with an all-gather over the existing
// communicator's bootstrap, in its issue order, as ncclCommSplit does. Each new rank
// calls ncclCommGrow(NULL, nRanks, id, rank, ...) with rank in [size, nRanks). Then all
// of them join the new communicator through the ordinary init (ncclCommInitRank's), the
// existing ranks under their old numbers. The existing communicator stays as it was.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "src/bootstrap/bootstrap.h"
#include "src/bootstrap/wire.h"
#include "src/core/comm.h"
#include "src/config/error.h"
#include "src/core/init.h"
#include "src/os/cuda_rt.h"

using namespace braid;

namespace {

/// What ncclCommGetUniqueId adds to a bootstrap id, in the bytes the id's own layout
/// leaves unused (its last 16): whom the token grows.
struct GrowStamp {
  uint32_t magic;      ///< kGrowMagic
  int32_t oldNranks;   ///< size of the communicator being grown
  uint64_t commHash;   ///< Comm::commHash of that communicator
};
constexpr uint32_t kGrowMagic = 0x574f5247u;  // "GROW"
constexpr size_t kStampOffset = NCCL_UNIQUE_ID_BYTES - sizeof(GrowStamp);
static_assert(sizeof(wire::IdLayout) <= kStampOffset,
              "the grow stamp must not overlap the bootstrap's part of the unique id");

GrowStamp stampOf(const ncclUniqueId& id) {
  GrowStamp s;
  memcpy(&s, id.internal + kStampOffset, sizeof(s));
  return s;
}

/// The stamp of an id the user passed, or an error if it is not a grow token.
ncclResult_t readStamp(const ncclUniqueId& id, GrowStamp* out, Comm* comm, const char* who) {
  UniqueIdInfo info;
  BRAID_CHECK(bootstrapDecodeId(id, &info));
  *out = stampOf(id);
  if (out->magic != kGrowMagic || out->oldNranks < 1)
    return setError(ncclInvalidArgument, comm, "ncclCommGrow: %s: the unique id was not made "
                    "by ncclCommGetUniqueId (ncclGetUniqueId's ids cannot grow a "
                    "communicator)", who);
  return ncclSuccess;
}

/// What each existing rank brings to the agreement on the token.
struct GrowVote {
  int32_t hasId;
  int32_t nRanks;
  ncclUniqueId id;
};

/// The existing ranks' part: agree on the token and nRanks over the parent's bootstrap
/// (in the parent's turn `ticket`), then join the new communicator.
ncclResult_t growExisting(Comm* parent, uint64_t ticket, int nRanks, bool hasId,
                          ncclUniqueId id, Comm* child, ncclConfig_t cfg,
                          const std::string& inheritedName) {
  auto fail = [child](ncclResult_t r) {
    child->asyncError.store(r);
    return r;
  };
  std::vector<GrowVote> votes(size_t(parent->nranks));
  GrowVote& mine = votes[size_t(parent->rank)];
  mine.hasId = hasId ? 1 : 0;
  mine.nRanks = nRanks;
  if (hasId) mine.id = id;
  ncclResult_t r = runOnParentBootstrap(parent, ticket, child, [&](Bootstrap& b) {
    return b.allGather(votes.data(), sizeof(GrowVote));
  });
  if (r != ncclSuccess) return fail(r);
  int coordinator = -1;
  for (int i = 0; i < parent->nranks; ++i) {
    const GrowVote& v = votes[size_t(i)];
    if (v.nRanks != nRanks)
      return fail(setError(ncclInvalidUsage, child, "ncclCommGrow: %s asked for %d ranks but "
                           "rank %d of the existing communicator for %d; every rank must pass "
                           "the same nRanks", parent->who().c_str(), nRanks, i, v.nRanks));
    if (!v.hasId) continue;
    if (coordinator < 0) {
      coordinator = i;
      id = v.id;
    } else if (memcmp(&v.id, &id, sizeof(id)) != 0) {
      return fail(setError(ncclInvalidUsage, child, "ncclCommGrow: ranks %d and %d of the "
                           "existing communicator passed different unique ids; pass the one "
                           "token from ncclCommGetUniqueId (or NULL)", coordinator, i));
    }
  }
  if (coordinator < 0)
    return fail(setError(ncclInvalidUsage, child, "ncclCommGrow: no rank of the existing "
                         "communicator (%d ranks) passed the unique id; the coordinator that "
                         "called ncclCommGetUniqueId must pass it", parent->nranks));
  GrowStamp stamp;
  r = readStamp(id, &stamp, child, "the existing ranks' id");
  if (r != ncclSuccess) return fail(r);
  if (stamp.oldNranks != parent->nranks || stamp.commHash != parent->commHash)
    return fail(setError(ncclInvalidArgument, child, "ncclCommGrow: the unique id (from rank "
                         "%d) was made by ncclCommGetUniqueId on another communicator (of %d "
                         "ranks), not on this one", coordinator, stamp.oldNranks));
  if (!inheritedName.empty()) cfg.commName = inheritedName.c_str();
  return initCommRank(child, nRanks, id, parent->rank, cfg, parent->cudaDev);
}

}  // namespace

extern "C" {

ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId) {
  const char* call = "ncclCommGetUniqueId";
  BRAID_CHECK(checkCommUsable(comm, call));
  Comm* c = asComm(comm);
  if (uniqueId == nullptr)
    return setError(ncclInvalidArgument, c, "%s: uniqueId is NULL", call);
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  // A root of its own in this process (NCCL_COMM_ID does not apply): one grow per token.
  BRAID_CHECK(bootstrapNewRootId(&id));
  GrowStamp stamp{kGrowMagic, c->nranks, c->commHash};
  memcpy(id.internal + kStampOffset, &stamp, sizeof(stamp));
  *uniqueId = id;
  BRAID_INFO(kLogInit, "%s: %s made a token to grow the communicator", call, c->who().c_str());
  return ncclSuccess;
}

ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config) {
  const char* call = "ncclCommGrow";
  if (newcomm == nullptr) return setError(ncclInvalidArgument, nullptr, "%s: newcomm is NULL", call);
  *newcomm = nullptr;
  if (nRanks < 1)
    return setError(ncclInvalidArgument, nullptr, "%s: nRanks %d must be at least 1", call,
                    nRanks);
  if (comm == nullptr) {
    // A new rank: its number and the token come from the coordinator.
    if (rank < 0)
      return setError(ncclInvalidArgument, nullptr, "%s: a new rank (comm NULL) must pass its "
                      "rank (>= the existing communicator's size), not %d", call, rank);
    if (rank >= nRanks)
      return setError(ncclInvalidArgument, nullptr, "%s: rank %d is out of range for nRanks %d",
                      call, rank, nRanks);
    if (uniqueId == nullptr)
      return setError(ncclInvalidArgument, nullptr, "%s: a new rank (comm NULL) must pass the "
                      "unique id from the coordinator's ncclCommGetUniqueId, not NULL", call);
    GrowStamp stamp;
    BRAID_CHECK(readStamp(*uniqueId, &stamp, nullptr, "new rank"));
    if (nRanks <= stamp.oldNranks)
      return setError(ncclInvalidArgument, nullptr, "%s: nRanks %d must be larger than the "
                      "existing communicator's %d ranks", call, nRanks, stamp.oldNranks);
    if (rank < stamp.oldNranks)
      return setError(ncclInvalidArgument, nullptr, "%s: new rank %d is taken by the existing "
                      "communicator (ranks 0..%d); new ranks are %d..%d", call, rank,
                      stamp.oldNranks - 1, stamp.oldNranks, nRanks - 1);
    ncclConfig_t cfg;
    BRAID_CHECK(readCommConfig(config, &cfg, call));
    const ncclUniqueId id = *uniqueId;
    const int dev = cudart::currentDevice();  // the caller's device, as NCCL binds it
    return launchCommInit(newcomm, cfg, [=](Comm* c) {
      return initCommRank(c, nRanks, id, rank, cfg, dev);
    });
  }
  // An existing rank: keeps its number.
  BRAID_CHECK(checkCommUsable(comm, call));
  Comm* parent = asComm(comm);
  if (rank != -1)
    return setError(ncclInvalidArgument, parent, "%s: ranks of the existing communicator must "
                    "pass rank -1 (they keep their number, here %d), not %d", call,
                    parent->rank, rank);
  if (nRanks <= parent->nranks)
    return setError(ncclInvalidArgument, parent, "%s: nRanks %d must be larger than the "
                    "existing communicator's %d ranks", call, nRanks, parent->nranks);
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  if (uniqueId != nullptr) {
    GrowStamp stamp;
    BRAID_CHECK(readStamp(*uniqueId, &stamp, parent, "existing rank"));
    if (stamp.oldNranks != parent->nranks || stamp.commHash != parent->commHash)
      return setError(ncclInvalidArgument, parent, "%s: the unique id was made by "
                      "ncclCommGetUniqueId on another communicator (of %d ranks), not on "
                      "this one (%s)", call, stamp.oldNranks, parent->who().c_str());
    id = *uniqueId;
  }
  // config NULL: inherit the parent's blocking mode and name. Channel counts and the
  // rest come from the environment, as on the new ranks (they must agree at init).
  ncclConfig_t cfg;
  std::string inheritedName;
  BRAID_CHECK(readCommConfig(config, &cfg, call));
  if (config == nullptr) {
    cfg.blocking = parent->settings.blocking ? 1 : 0;
    inheritedName = parent->settings.commName;
  }
  const bool hasId = uniqueId != nullptr;
  const uint64_t ticket = parent->issue();
  return launchCommInit(newcomm, cfg, [=](Comm* c) {
    return growExisting(parent, ticket, nRanks, hasId, id, c, cfg, inheritedName);
  });
}

}  // extern "C"
