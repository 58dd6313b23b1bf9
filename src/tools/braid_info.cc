// braid-info: prints Braid's version, build features and every environment variable
// it reads, with its current value, default and meaning; or one view (--topo, --net,
// --markdown, --job-secret) or an action (--dump PID...). braid-info --help lists them.
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "src/bootstrap/unique_id.h"
#include "braid/braid.h"
#include "nccl.h"
#include "src/config/params.h"
#include "src/diag/flight_recorder.h"
#include "src/topo/node_topology.h"
#include "src/topo/summary.h"
#include "src/tools/cli.h"
#include "transports/net/net_registry.h"

namespace {

const char* typeName(braid::ParamType t) {
  switch (t) {
    case braid::ParamType::kInt: return "int";
    case braid::ParamType::kBool: return "bool";
    default: return "string";
  }
}

void wrap(const char* text, int indent, int width) {
  std::string line;
  const char* p = text;
  while (*p) {
    const char* sp = strchr(p, ' ');
    size_t len = sp ? size_t(sp - p) : strlen(p);
    if (!line.empty() && line.size() + 1 + len > size_t(width)) {
      printf("%*s%s\n", indent, "", line.c_str());
      line.clear();
    }
    if (!line.empty()) line += ' ';
    line.append(p, len);
    p += len;
    while (*p == ' ') ++p;
  }
  if (!line.empty()) printf("%*s%s\n", indent, "", line.c_str());
}

/// Networks: every candidate, its devices or why it cannot be used, and the one that
/// inter-host traffic would take (NCCL_NET, NCCL_NET_PLUGIN, NCCL_IB_DISABLE apply).
void printNetworks() {
  printf("Networks (inter-host traffic):\n");
  for (const braid::NetRegistry::Entry& e : braid::NetRegistry::get().describe()) {
    if (!e.net) {
      printf("  %-10s unavailable: %s\n", e.name.c_str(), e.state.c_str());
      continue;
    }
    const braid::Net& n = *e.net;
    printf("  %-10s %s%s (ncclNet v%d)\n", n.name.c_str(), n.external ? "plugin " : "built in",
           n.external ? n.library.c_str() : "", n.abiVersion);
    for (size_t d = 0; d < n.devices.size(); ++d) {
      const ncclNetProperties_v11_t& p = n.devices[d];
      printf("    dev %zu: %-10s port %d, %d Mbit/s, latency %.1f us, %s%s%s, max recvs %d%s%s\n",
             d, p.name ? p.name : "?", p.port, p.speed, double(p.latency),
             (p.ptrSupport & NCCL_PTR_HOST) ? "host" : "",
             (p.ptrSupport & NCCL_PTR_CUDA) ? "+cuda" : "",
             (p.ptrSupport & NCCL_PTR_DMABUF) ? "+dmabuf" : "", p.maxRecvs,
             p.pciPath ? ", " : "", p.pciPath ? p.pciPath : "");
    }
  }
  const braid::Net* chosen = nullptr;
  if (braid::NetRegistry::get().select(braid::param::kNet.get(), &chosen) == ncclSuccess)
    printf("  in use: %s\n", chosen->name.c_str());
  else
    printf("  in use: none (NCCL_NET='%s' cannot be used)\n", braid::param::kNet.get().c_str());
}

/// The variable table as Markdown (docs/environment.md holds this verbatim).
void printMarkdown() {
  printf("| variable | type | default | meaning |\n|---|---|---|---|\n");
  for (const braid::ParamBase* p : braid::ParamBase::all()) {
    const std::string& def = p->defaultValue();
    printf("| `%s` | %s | %s | %s |\n", p->name(), typeName(p->type()),
           def.empty() ? "(empty)" : ("`" + def + "`").c_str(), p->meaning());
  }
}

/// Whether process `pid` catches SIGUSR1 (SigCgt in /proc/PID/status): without a
/// handler the signal would kill it.
bool catchesUsr1(long pid) {
  FILE* f = fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "r");
  if (!f) return false;
  char line[256];
  bool caught = false;
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, "SigCgt:", 7) == 0)
      caught = (strtoull(line + 7, nullptr, 16) >> (SIGUSR1 - 1)) & 1;
  fclose(f);
  return caught;
}

/// --dump PID...: SIGUSR1 to each process; their comms write flight records into their
/// BRAID_FLIGHT_RECORDER_DIR.
int dumpFlightRecords(const std::vector<std::string>& pids) {
  int failed = 0;
  for (const std::string& text : pids) {
    char* end = nullptr;
    const long pid = strtol(text.c_str(), &end, 10);
    if (text.empty() || !end || *end || pid <= 0) {
      fprintf(stderr, "braid-info --dump: '%s' is not a process id\n", text.c_str());
      ++failed;
    } else if (!catchesUsr1(pid)) {
      fprintf(stderr, "braid-info --dump: process %ld does not handle SIGUSR1 (not a Braid "
              "process with a communicator, or BRAID_FLIGHT_RECORDER_SIGNAL=0): not sent\n", pid);
      ++failed;
    } else if (kill(pid_t(pid), SIGUSR1) != 0) {
      fprintf(stderr, "braid-info --dump: process %ld: %s\n", pid, strerror(errno));
      ++failed;
    } else {
      printf("asked process %ld to write its flight records\n", pid);
    }
  }
  if (failed == 0)
    printf("records go to each process's BRAID_FLIGHT_RECORDER_DIR (unset: "
           "/tmp/braid-flight-recorder-<uid>; %s here); then run braid-doctor on that "
           "directory\n", braid::flightRecorderDir().c_str());
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool brief = false, markdown = false, topo = false, net = false, jobSecret = false;
  std::vector<std::string> dump;
  braid::cli::App app("Prints the version, build features, networks, environment variables "
                      "and algorithms; or one of the views below (one at most).",
                      "braid-info");
  braid::cli::Option* views[] = {
      app.add_flag("--brief", brief, "the listing without the descriptions"),
      app.add_flag("--markdown", markdown, "the environment variables as a Markdown table"),
      app.add_flag("--topo", topo, "the node topology"),
      app.add_flag("--net", net, "the networks only"),
      app.add_flag("--job-secret", jobSecret,
                   "the job secret NCCL_COMM_ID gives (for braid-switch --secret-file)"),
      app.add_option("--dump", dump,
                     "asks the Braid processes PID... to write their flight records (SIGUSR1; "
                     "read them with braid-doctor)")
          ->expected(1, braid::cli::kAnyNumber)
          ->multi_option_policy(braid::cli::MultiOptionPolicy::TakeAll)
          ->type_name("PID")};
  int exitCode = 0;
  if (!app.parseCommandLine(argc, argv, &exitCode)) return exitCode;
  const braid::cli::Option* first = nullptr;  // one view at most
  for (const braid::cli::Option* v : views) {
    if (v->count() == 0) continue;
    if (first) return app.fail(v->get_name(), "goes not with " + first->get_name());
    first = v;
  }
  if (markdown) {
    printMarkdown();
    return 0;
  }
  if (topo) {
    // The node topology as Braid sees it (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE apply).
    const braid::topo::Topology& t = braid::topo::nodeTopology();
    printf("%s\n\n%s", braid::topo::describe(braid::topo::summarize(t)).c_str(),
           t.describeTree().c_str());
    return 0;
  }
  if (net) {
    printNetworks();
    return 0;
  }
  if (jobSecret) {
    // What `braid-switch --secret-file` wants for a job launched with NCCL_COMM_ID (every
    // rank derives the job secret from it); ids from ncclGetUniqueId carry a random one.
    const char* id = getenv("NCCL_COMM_ID");
    if (!id || !*id) {
      fprintf(stderr, "braid-info --job-secret: set NCCL_COMM_ID to the job's value\n");
      return 2;
    }
    printf("0x%016llx\n",
           static_cast<unsigned long long>(braid::bootstrapSecretFromString(id)));
    return 0;
  }
  if (!dump.empty()) return dumpFlightRecords(dump);
  int v = 0;
  ncclGetVersion(&v);
  printf("Braid %s (NCCL API %d.%d.%d, version code %d)\n", braidVersionString(), v / 10000,
         (v / 100) % 100, v % 100, v);
  printf("Build features: %s\n\n", braidBuildFeatures());
  printNetworks();
  printf("\n");
  printf("Environment variables (value [default]):\n");
  for (const braid::ParamBase* p : braid::ParamBase::all()) {
    const char* raw = p->raw();
    printf("  %-28s %-6s = %s%s [%s]\n", p->name(), typeName(p->type()),
           raw ? raw : p->defaultValue().c_str(), raw ? " (set)" : "",
           p->defaultValue().c_str());
    if (!brief) wrap(p->meaning(), 6, 80);
  }
  printf("\nAlgorithms (NCCL_ALGO names; the first of each collective is its default):\n");
  for (const braid::Algorithm& a : braid::allAlgorithms()) {
    // " [switch]": an in-network algorithm, usable only where a switch serves the call
    // (NCCL_COLLNET_ENABLE=1 BRAID_SWITCH=...); tests/multinode/mn_lib.sh reads it.
    // " [direct access]": run where the ranks reach each other's buffers (the flag board).
    printf("  %-14s %-9s%s%s%s%s%s\n", braid::collName(a.coll), a.name, a.ncclName ? " (" : "",
           a.ncclName ? a.ncclName : "", a.ncclName ? ")" : "", a.needsSwitch ? " [switch]" : "",
           a.needsPeerAccess ? " [direct access]" : "");
    if (!brief) wrap(a.description, 6, 80);
  }
  return 0;
}
