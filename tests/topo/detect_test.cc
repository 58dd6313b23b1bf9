// Topology::detect() on this machine, and nodeTopology()'s NCCL_TOPO_FILE /
// NCCL_TOPO_DUMP_FILE handling (in forked children, so the cache starts empty).
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "src/topo/node_topology.h"
#include "src/topo/summary.h"
#include "tests/topo/helpers.h"

namespace braid {
namespace topo {
namespace {

std::string tempPath(const char* tag) {
  return "/tmp/braid_topo_test_" + std::to_string(getpid()) + "_" + tag + ".xml";
}

/// Runs `body` in a forked child; the child's exit code is body's result (0 = pass).
int inChild(const std::function<int()>& body) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

TEST(TopoDetect, FindsThisMachine) {
  auto t0 = std::chrono::steady_clock::now();
  std::string err;
  std::optional<Topology> t = Topology::detect(&err);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(t.has_value()) << err;
  EXPECT_EQ(t->source(), "hwloc");
  TopoSummary s = summarize(*t);
  EXPECT_GE(s.packages, 1);
  EXPECT_GE(s.numaNodes, 1);
  EXPECT_GE(s.cores, 1);
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int pus = 0;
  for (int c : t->nodesOfType(NodeType::kCore)) {
    EXPECT_FALSE(t->node(c).cpus.empty());
    pus += int(t->node(c).cpus.size());
  }
  EXPECT_LE(s.cores, online);
  EXPECT_EQ(pus, online) << "hardware threads found vs sysconf(_SC_NPROCESSORS_ONLN)";
  // Every node is reachable from the machine and knows its parent.
  for (const Node& n : t->nodes()) {
    if (n.id == 0) continue;
    ASSERT_GE(n.parent, 0);
    const std::vector<int>& sib = t->node(n.parent).children;
    EXPECT_NE(std::find(sib.begin(), sib.end(), n.id), sib.end());
  }
  for (int g : t->nodesOfType(NodeType::kGpu)) EXPECT_GE(t->node(g).index, 0);
  printf("detect: %.1f ms, %s\n", ms, describe(s).c_str());
  EXPECT_LT(ms, 1000.0) << "detection should take well under 100 ms";
}

TEST(TopoDetect, RoundTripThroughXmlIsIdentical) {
  std::string err;
  std::optional<Topology> t = Topology::detect(&err);
  ASSERT_TRUE(t.has_value()) << err;
  std::string a = t->toXml();
  std::optional<Topology> u = Topology::fromXml(a, "detected.xml", &err);
  ASSERT_TRUE(u.has_value()) << err << "\n" << a;
  EXPECT_EQ(u->toXml(), a);
  EXPECT_EQ(u->size(), t->size());
}

TEST(TopoDetect, SaveAndLoad) {
  std::string path = tempPath("save");
  Topology t = test::loadShipped("dgx-h100.xml");
  std::string err;
  ASSERT_TRUE(t.save(path, &err)) << err;
  std::optional<Topology> u = Topology::load(path, &err);
  ASSERT_TRUE(u.has_value()) << err;
  EXPECT_EQ(u->toXml(), t.toXml());
  EXPECT_EQ(u->source(), path);
  unlink(path.c_str());
  EXPECT_FALSE(t.save("/nonexistent-dir/x.xml", &err));
  EXPECT_NE(err.find("/nonexistent-dir/x.xml"), std::string::npos) << err;
}

TEST(TopoDetect, MinimalTopology) {
  Topology t = Topology::minimal();
  TopoSummary s = summarize(t);
  EXPECT_EQ(s.packages, 1);
  EXPECT_EQ(s.numaNodes, 1);
  EXPECT_EQ(s.cores, int(sysconf(_SC_NPROCESSORS_ONLN)));
  EXPECT_EQ(s.gpus, 0);
  EXPECT_EQ(t.source(), "minimal");
}

TEST(TopoNodeTopology, LoaderUsesFileThenDumps) {
  std::string dump = tempPath("dump");
  Topology t = loadNodeTopology(test::topologiesDir() + "/dgx-h100.xml", dump);
  EXPECT_EQ(t.count(NodeType::kGpu), 8);
  std::string err;
  std::optional<Topology> d = Topology::load(dump, &err);
  ASSERT_TRUE(d.has_value()) << err;
  EXPECT_EQ(d->toXml(), t.toXml());
  unlink(dump.c_str());
}

TEST(TopoNodeTopology, BadFileFallsBackToDetection) {
  std::string bad = tempPath("bad");
  { std::ofstream(bad) << "<system>\n<cpu>\n</system>\n"; }
  Topology t = loadNodeTopology(bad, "");
  EXPECT_EQ(t.source(), "hwloc");
  EXPECT_GE(t.count(NodeType::kCore), 1);
  unlink(bad.c_str());
  // An unwritable dump file only warns.
  Topology u = loadNodeTopology("", "/nonexistent-dir/dump.xml");
  EXPECT_GE(u.count(NodeType::kCore), 1);
}

TEST(TopoNodeTopology, EnvironmentThroughTheParamRegistry) {
  std::string dump = tempPath("envdump");
  std::string file = test::topologiesDir() + "/dgx-h100.xml";
  int rc = inChild([&] {
    setenv("NCCL_TOPO_FILE", file.c_str(), 1);
    setenv("NCCL_TOPO_DUMP_FILE", dump.c_str(), 1);
    const Topology& a = nodeTopology();
    const Topology& b = nodeTopology();
    if (&a != &b) return 1;                    // cached
    if (a.count(NodeType::kGpu) != 8) return 2;  // from the file
    if (a.source() != file) return 3;
    std::string err;
    std::optional<Topology> d = Topology::load(dump, &err);
    if (!d || d->toXml() != a.toXml()) return 4;  // dumped once, same content
    return 0;
  });
  EXPECT_EQ(rc, 0);
  unlink(dump.c_str());
  rc = inChild([] {
    unsetenv("NCCL_TOPO_FILE");
    unsetenv("NCCL_TOPO_DUMP_FILE");
    const Topology& a = nodeTopology();
    return a.source() == "hwloc" && a.count(NodeType::kCore) >= 1 ? 0 : 1;
  });
  EXPECT_EQ(rc, 0);
}

TEST(TopoNodeTopology, ThreadSafeFirstUse) {
  int rc = inChild([] {
    unsetenv("NCCL_TOPO_FILE");
    const Topology* seen[8] = {};
    std::vector<std::thread> ts;
    for (int i = 0; i < 8; ++i) ts.emplace_back([&seen, i] { seen[i] = &nodeTopology(); });
    for (auto& t : ts) t.join();
    for (int i = 1; i < 8; ++i)
      if (seen[i] != seen[0]) return 1;
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace topo
}  // namespace braid
