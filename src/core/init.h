// Pieces of communicator creation (init.cc) that other creation paths reuse:
// ncclCommGrow (grow.cc) builds its communicator through the same init as
// ncclCommInitRank, and agrees on the token over the parent's bootstrap as
// ncclCommSplit does.
#pragma once
#include <cstdint>
#include <functional>

#include "nccl.h"

namespace braid {

struct Comm;
class Bootstrap;

/// Copies the user's config (NULL: the defaults) into *out and validates it; errors are
/// ncclInvalidArgument with a message naming `call` and the field.
ncclResult_t readCommConfig(const ncclConfig_t* user, ncclConfig_t* out, const char* call);

/// The body of every initialisation (as ncclCommInitRank): joins the job of `id` as
/// `rank` of `nranks`; sets comm->asyncError when it finishes.
ncclResult_t initCommRank(Comm* comm, int nranks, const ncclUniqueId& id, int rank,
                          const ncclConfig_t& cfg, int cudaDev);

/// Creates a communicator that `job` initialises: now (blocking), on a thread
/// (cfg.blocking == 0: returns ncclInProgress) or at group end (inside a group).
ncclResult_t launchCommInit(ncclComm_t* out, const ncclConfig_t& cfg,
                            std::function<ncclResult_t(Comm*)> job);

/// Runs `fn` on the parent's bootstrap in the parent's turn `ticket` (from
/// Comm::issue), with its execution lock held; aborting `child` stops the wait.
ncclResult_t runOnParentBootstrap(Comm* parent, uint64_t ticket, Comm* child,
                                  const std::function<ncclResult_t(Bootstrap&)>& fn);

}  // namespace braid
