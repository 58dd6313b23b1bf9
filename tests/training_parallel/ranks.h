// Thread ranks for the training-parallel tests: runs one body on N ranks, each a thread
// of this process with its own communicator (ncclCommInitRank on a shared unique id).
// An exception escaping a body fails the test with the rank and message; a run that
// does not finish within the watchdog time aborts the test binary with a message (a
// hung thread cannot be cancelled).
#pragma once
#include <functional>

#include "nccl.h"

namespace tp_test {

using RankFn = std::function<void(int rank, int nranks, ncclComm_t world)>;

/// Runs fn on nranks thread ranks; returns after every rank finished and its
/// communicator was destroyed.
void runRanks(int nranks, const RankFn& fn, int watchdogSeconds = 120);

}  // namespace tp_test
