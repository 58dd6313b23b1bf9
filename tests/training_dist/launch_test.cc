// Launch environment parsing (training/dist/launch.h): torchrun/braidrun, Open MPI and
// Slurm variables, the rendezvous rules, and errors that name the variable. The real
// process test (braidrun + launch_probe) is in tests/training_dist.cmake.
#include <gtest/gtest.h>

#include "training/dist/launch.h"

namespace braid {
namespace train {
namespace {

std::string errorOf(const Env& env) {
  try {
    parseLaunchEnv(env);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Launch, NoLauncherIsOneProcess) {
  const LaunchInfo li = parseLaunchEnv({{"HOME", "/root"}});
  EXPECT_EQ(li.launcher, "none");
  EXPECT_EQ(li.rank, 0);
  EXPECT_EQ(li.worldSize, 1);
  EXPECT_EQ(li.rendezvous, "");
}

TEST(Launch, Braidrun) {
  const LaunchInfo li = parseLaunchEnv({{"RANK", "2"},
                                        {"WORLD_SIZE", "4"},
                                        {"LOCAL_RANK", "2"},
                                        {"LOCAL_WORLD_SIZE", "4"},
                                        {"MASTER_ADDR", "127.0.0.1"},
                                        {"MASTER_PORT", "4100"},
                                        {"NCCL_COMM_ID", "127.0.0.1:4100"}});
  EXPECT_EQ(li.launcher, "torchrun");
  EXPECT_EQ(li.rank, 2);
  EXPECT_EQ(li.worldSize, 4);
  EXPECT_EQ(li.localRank, 2);
  EXPECT_EQ(li.localWorldSize, 4);
  EXPECT_EQ(li.rendezvous, "127.0.0.1:4100");
  EXPECT_EQ(li.rendezvousFrom, "NCCL_COMM_ID");
  EXPECT_NE(li.describe().find("rank 2/4"), std::string::npos) << li.describe();
}

TEST(Launch, TorchrunMasterAddrAndDefaultPort) {
  LaunchInfo li = parseLaunchEnv({{"RANK", "5"},
                                  {"WORLD_SIZE", "8"},
                                  {"LOCAL_RANK", "1"},
                                  {"LOCAL_WORLD_SIZE", "4"},
                                  {"MASTER_ADDR", "10.0.0.7"},
                                  {"MASTER_PORT", "23456"}});
  EXPECT_EQ(li.rendezvous, "10.0.0.7:23456");
  li = parseLaunchEnv({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "node1"}});
  EXPECT_EQ(li.rendezvous, "node1:29500");
  EXPECT_EQ(li.localWorldSize, 2);  // no LOCAL_* : one host assumed
}

TEST(Launch, TorchrunErrorsNameTheVariable) {
  EXPECT_NE(errorOf({{"RANK", "0"}}).find("WORLD_SIZE"), std::string::npos);
  EXPECT_NE(errorOf({{"WORLD_SIZE", "2"}}).find("RANK"), std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "x"}, {"WORLD_SIZE", "2"}}).find("RANK='x'"), std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "2"}, {"WORLD_SIZE", "2"}}).find("RANK=2"), std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}).find("RANK"), std::string::npos);
  // Several hosts (local world < world) and no address.
  EXPECT_NE(errorOf({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}})
                .find("MASTER_ADDR"),
            std::string::npos);
  EXPECT_NE(errorOf({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "80x"}})
                .find("MASTER_PORT"),
            std::string::npos);
}

TEST(Launch, OpenMpiOneHostDefaultsToLoopback) {
  const LaunchInfo li = parseLaunchEnv({{"OMPI_COMM_WORLD_RANK", "1"},
                                        {"OMPI_COMM_WORLD_SIZE", "3"},
                                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "3"}});
  EXPECT_EQ(li.launcher, "mpi");
  EXPECT_EQ(li.rank, 1);
  EXPECT_EQ(li.worldSize, 3);
  EXPECT_EQ(li.rendezvous, "127.0.0.1:29500");
}

TEST(Launch, OpenMpiSeveralHosts) {
  const Env base = {{"OMPI_COMM_WORLD_RANK", "3"},
                    {"OMPI_COMM_WORLD_SIZE", "4"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  EXPECT_NE(errorOf(base).find("MASTER_ADDR"), std::string::npos);
  Env withId = base;
  withId["NCCL_COMM_ID"] = "10.1.1.1:777";
  EXPECT_EQ(parseLaunchEnv(withId).rendezvous, "10.1.1.1:777");
  Env withMaster = base;
  withMaster["MASTER_ADDR"] = "10.1.1.2";
  EXPECT_EQ(parseLaunchEnv(withMaster).rendezvous, "10.1.1.2:29500");
  EXPECT_NE(errorOf({{"OMPI_COMM_WORLD_RANK", "0"}}).find("OMPI_COMM_WORLD_SIZE"), std::string::npos);
}

TEST(Launch, Slurm) {
  LaunchInfo li = parseLaunchEnv({{"SLURM_PROCID", "6"},
                                  {"SLURM_NTASKS", "8"},
                                  {"SLURM_LOCALID", "2"},
                                  {"SLURM_TASKS_PER_NODE", "4(x2)"},
                                  {"SLURM_NODELIST", "gpu[07-08]"}});
  EXPECT_EQ(li.launcher, "slurm");
  EXPECT_EQ(li.rank, 6);
  EXPECT_EQ(li.worldSize, 8);
  EXPECT_EQ(li.localRank, 2);
  EXPECT_EQ(li.localWorldSize, 4);
  EXPECT_EQ(li.rendezvous, "gpu07:29500");
  li = parseLaunchEnv({{"SLURM_PROCID", "0"},
                       {"SLURM_NTASKS", "2"},
                       {"SLURM_LAUNCH_NODE_IPADDR", "192.168.3.4"},
                       {"SLURM_NODELIST", "a,b"},
                       {"MASTER_PORT", "1234"}});
  EXPECT_EQ(li.rendezvous, "192.168.3.4:1234");
  EXPECT_NE(errorOf({{"SLURM_PROCID", "0"}}).find("SLURM_NTASKS"), std::string::npos);
  EXPECT_NE(errorOf({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_TASKS_PER_NODE", "(x2)"}})
                .find("SLURM_TASKS_PER_NODE"),
            std::string::npos);
}

TEST(Launch, FirstSlurmHost) {
  EXPECT_EQ(firstSlurmHost("node[03-05,9],gpu1"), "node03");
  EXPECT_EQ(firstSlurmHost("single"), "single");
  EXPECT_EQ(firstSlurmHost("a1,b[1-2]"), "a1");
  EXPECT_EQ(firstSlurmHost("rack[2,4-5]"), "rack2");
}

TEST(Launch, TorchrunTakesPrecedenceOverSlurm) {
  // srun launching torchrun-style programs: RANK wins.
  const LaunchInfo li = parseLaunchEnv({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(li.launcher, "torchrun");
  EXPECT_EQ(li.rank, 1);
}

TEST(Launch, SingleProcessWorld) {
  LaunchInfo li;  // rank 0 of 1
  auto pg = initWorld(li);
  ASSERT_TRUE(pg);
  EXPECT_EQ(pg->size(), 1);
  double x = 2;
  pg->allReduce(&x, 1);
  EXPECT_EQ(x, 2);
}

}  // namespace
}  // namespace train
}  // namespace braid
