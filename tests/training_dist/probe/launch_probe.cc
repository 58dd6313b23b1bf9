// A rank program for the launch tests: started by braidrun, it builds the world
// ProcessGroup from the environment (training/dist/launch.h) and checks it with an
// all-reduce and a broadcast. Exit status 0 when everything agrees.
//
// Options rewrite braidrun's torchrun-style environment first, to exercise the other
// launchers' variables in real processes:
//   --unset-comm-id   drop NCCL_COMM_ID (rendezvous from MASTER_ADDR/MASTER_PORT)
//   --as-mpi          Open MPI's OMPI_COMM_WORLD_* instead of RANK/WORLD_SIZE/...
//   --as-slurm        Slurm's SLURM_* instead, address from SLURM_LAUNCH_NODE_IPADDR
#include <cstdio>
#include <cstdlib>
#include <string>

#include "training/dist/launch.h"

using braid::train::Env;

int main(int argc, char** argv) {
  Env env = braid::train::processEnvironment();
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string rank = env["RANK"], size = env["WORLD_SIZE"];
    const std::string lrank = env["LOCAL_RANK"], lsize = env["LOCAL_WORLD_SIZE"];
    if (a == "--unset-comm-id" || a == "--as-mpi" || a == "--as-slurm") unsetenv("NCCL_COMM_ID");
    if (a == "--as-mpi" || a == "--as-slurm") {
      for (const char* v : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}) unsetenv(v);
    }
    if (a == "--as-mpi") {
      setenv("OMPI_COMM_WORLD_RANK", rank.c_str(), 1);
      setenv("OMPI_COMM_WORLD_SIZE", size.c_str(), 1);
      setenv("OMPI_COMM_WORLD_LOCAL_RANK", lrank.c_str(), 1);
      setenv("OMPI_COMM_WORLD_LOCAL_SIZE", lsize.c_str(), 1);
    } else if (a == "--as-slurm") {
      unsetenv("MASTER_ADDR");
      setenv("SLURM_PROCID", rank.c_str(), 1);
      setenv("SLURM_NTASKS", size.c_str(), 1);
      setenv("SLURM_LOCALID", lrank.c_str(), 1);
      setenv("SLURM_TASKS_PER_NODE", (lsize + "(x1)").c_str(), 1);
      setenv("SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1", 1);
    }
  }
  try {
    braid::train::LaunchInfo info;
    auto world = braid::train::initWorldFromEnvironment(&info);
    double x = world->rank() + 1;
    world->allReduce(&x, 1);
    const int n = world->size();
    const double want = n * (n + 1) / 2.0;
    int32_t token = world->rank() == 0 ? 4242 : 0;
    world->broadcast(&token, 1, 0);
    std::printf("%s: sum %g (want %g), token %d\n", info.describe().c_str(), x, want, token);
    const bool ok = x == want && token == 4242 && info.worldSize == n;
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "launch_probe: %s\n", e.what());
    return 1;
  }
}
