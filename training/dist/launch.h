// Launch: who am I in the job, and where do the ranks meet. Reads the environment the
// usual launchers set and builds the world ProcessGroup from it.
//
// Launchers recognised, in this order of precedence:
//   torchrun / braidrun   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
//                         MASTER_ADDR + MASTER_PORT (braidrun also sets NCCL_COMM_ID)
//   Open MPI (mpirun)     OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//                         OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE
//   Slurm (srun)          SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
//                         SLURM_NTASKS_PER_NODE (or SLURM_TASKS_PER_NODE)
//   none                  a single process (rank 0 of 1)
//
// Rendezvous (the ip:port every rank passes to NCCL as NCCL_COMM_ID, where rank 0's
// bootstrap root listens), first that applies:
//   1. NCCL_COMM_ID, if set;
//   2. MASTER_ADDR:MASTER_PORT (MASTER_PORT defaults to 29500);
//   3. Slurm: SLURM_LAUNCH_NODE_IPADDR, else the first host of SLURM_NODELIST
//      ("node[03-05,9]" -> node03), with MASTER_PORT or 29500;
//   4. all ranks on one host (local world size == world size): 127.0.0.1:29500;
//   otherwise an error naming MASTER_ADDR.
// ncclGetUniqueId honours NCCL_COMM_ID (every process derives the same id from it), so
// initWorld() sets NCCL_COMM_ID in this process when it came from 2-4, then every rank
// calls ncclGetUniqueId + ncclCommInitRank.
//
// The parser is a pure function of an Env map (testable without touching the real
// environment); processEnvironment() snapshots the real one.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "training/dist/process_group.h"

namespace braid {
namespace train {

using Env = std::map<std::string, std::string>;

/// The process's rank and the job's shape, and how the ranks meet.
struct LaunchInfo {
  std::string launcher = "none";  ///< "torchrun" (also braidrun), "mpi", "slurm", "none"
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  int localWorldSize = 1;
  std::string rendezvous;         ///< "ip:port" (NCCL_COMM_ID); empty when worldSize == 1
  std::string rendezvousFrom;     ///< which variable(s) gave it, for messages
  std::string describe() const;   ///< "rank 1/4 (local 1/4) via torchrun, rendezvous 127.0.0.1:29500"
};

/// Port used when none is given.
constexpr int kDefaultMasterPort = 29500;

/// A copy of this process's environment.
Env processEnvironment();

/// Parses the launcher variables of `env`. Throws std::invalid_argument with a message
/// naming the missing or malformed variable (e.g. "RANK is set but WORLD_SIZE is not").
LaunchInfo parseLaunchEnv(const Env& env);

/// The first host name of a Slurm node list: "node[03-05,9],gpu1" -> "node03".
std::string firstSlurmHost(const std::string& nodelist);

/// Creates the world ProcessGroup for `info` (collective over all ranks): sets
/// NCCL_COMM_ID = info.rendezvous in this process when it is not already that, then
/// ncclGetUniqueId + ncclCommInitRank. worldSize 1 needs no rendezvous. Throws
/// DistError / std::invalid_argument on failure.
std::unique_ptr<ProcessGroup> initWorld(const LaunchInfo& info);

/// parseLaunchEnv(processEnvironment()) then initWorld.
std::unique_ptr<ProcessGroup> initWorldFromEnvironment(LaunchInfo* info = nullptr);

}  // namespace train
}  // namespace braid
