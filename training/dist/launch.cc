#include "training/dist/launch.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <stdexcept>

extern char** environ;  // POSIX

namespace braid {
namespace train {
namespace {

const std::string* lookup(const Env& env, const std::string& name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return nullptr;
  return &it->second;
}

/// The integer value of `name`, or throws naming it.
int intVar(const Env& env, const std::string& name, const std::string& launcher) {
  const std::string* v = lookup(env, name);
  if (!v) throw std::invalid_argument(launcher + " launch: " + name + " is not set");
  errno = 0;
  char* end = nullptr;
  const long x = std::strtol(v->c_str(), &end, 10);
  if (errno != 0 || end == v->c_str() || *end != '\0' || x < 0 || x > (1L << 30))
    throw std::invalid_argument(launcher + " launch: " + name + "='" + *v +
                                "' is not a non-negative integer");
  return int(x);
}

/// Like intVar but returns `def` when the variable is absent.
int intVarOr(const Env& env, const std::string& name, const std::string& launcher, int def) {
  return lookup(env, name) ? intVar(env, name, launcher) : def;
}

/// Slurm's SLURM_TASKS_PER_NODE looks like "4(x2),3": the first node's count.
int firstTaskCount(const std::string& s) {
  int n = 0;
  size_t i = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) n = n * 10 + (s[i++] - '0');
  return i == 0 ? -1 : n;
}

void check(const LaunchInfo& li, const std::string& rankVar, const std::string& sizeVar) {
  if (li.worldSize < 1)
    throw std::invalid_argument(li.launcher + " launch: " + sizeVar + " must be at least 1");
  if (li.rank >= li.worldSize)
    throw std::invalid_argument(li.launcher + " launch: " + rankVar + "=" + std::to_string(li.rank) +
                                " is not below " + sizeVar + "=" + std::to_string(li.worldSize));
  if (li.localWorldSize < 1 || li.localRank >= li.localWorldSize)
    throw std::invalid_argument(li.launcher + " launch: local rank " + std::to_string(li.localRank) +
                                " is not below the local world size " +
                                std::to_string(li.localWorldSize));
}

std::string portOf(const Env& env, const std::string& launcher) {
  return std::to_string(intVarOr(env, "MASTER_PORT", launcher, kDefaultMasterPort));
}

/// Fills info.rendezvous following launch.h's rules.
void rendezvous(const Env& env, LaunchInfo& li) {
  if (li.worldSize == 1 && !lookup(env, "NCCL_COMM_ID") && !lookup(env, "MASTER_ADDR")) return;
  if (const std::string* id = lookup(env, "NCCL_COMM_ID")) {
    li.rendezvous = *id;
    li.rendezvousFrom = "NCCL_COMM_ID";
    return;
  }
  if (const std::string* addr = lookup(env, "MASTER_ADDR")) {
    li.rendezvous = *addr + ":" + portOf(env, li.launcher);
    li.rendezvousFrom = lookup(env, "MASTER_PORT") ? "MASTER_ADDR:MASTER_PORT" : "MASTER_ADDR:29500";
    return;
  }
  if (li.launcher == "slurm") {
    std::string host;
    if (const std::string* ip = lookup(env, "SLURM_LAUNCH_NODE_IPADDR")) {
      host = *ip;
      li.rendezvousFrom = "SLURM_LAUNCH_NODE_IPADDR";
    } else if (const std::string* nl = lookup(env, "SLURM_NODELIST")) {
      host = firstSlurmHost(*nl);
      li.rendezvousFrom = "SLURM_NODELIST";
    } else if (const std::string* jl = lookup(env, "SLURM_JOB_NODELIST")) {
      host = firstSlurmHost(*jl);
      li.rendezvousFrom = "SLURM_JOB_NODELIST";
    }
    if (!host.empty()) {
      li.rendezvous = host + ":" + portOf(env, li.launcher);
      return;
    }
  }
  if (li.localWorldSize == li.worldSize) {
    li.rendezvous = "127.0.0.1:" + portOf(env, li.launcher);
    li.rendezvousFrom = "single host default";
    return;
  }
  throw std::invalid_argument(li.launcher + " launch: " + std::to_string(li.worldSize) +
                              " ranks on several hosts need a rendezvous address: set MASTER_ADDR "
                              "(and MASTER_PORT) or NCCL_COMM_ID");
}

}  // namespace

std::string LaunchInfo::describe() const {
  std::string s = "rank " + std::to_string(rank) + "/" + std::to_string(worldSize) + " (local " +
                  std::to_string(localRank) + "/" + std::to_string(localWorldSize) + ") via " +
                  launcher;
  if (!rendezvous.empty()) s += ", rendezvous " + rendezvous + " (" + rendezvousFrom + ")";
  return s;
}

Env processEnvironment() {
  Env env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

std::string firstSlurmHost(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  std::string first;
  int depth = 0;
  for (char c : nodelist) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) break;
    first += c;
  }
  const size_t lb = first.find('[');
  if (lb == std::string::npos) return first;
  const std::string prefix = first.substr(0, lb);
  // First item of the range list: "03-05,9" -> "03".
  std::string item;
  for (size_t i = lb + 1; i < first.size(); ++i) {
    const char c = first[i];
    if (c == '-' || c == ',' || c == ']') break;
    item += c;
  }
  return prefix + item;
}

LaunchInfo parseLaunchEnv(const Env& env) {
  LaunchInfo li;
  if (lookup(env, "RANK") || lookup(env, "WORLD_SIZE")) {
    li.launcher = "torchrun";
    if (!lookup(env, "RANK"))
      throw std::invalid_argument("torchrun launch: WORLD_SIZE is set but RANK is not");
    if (!lookup(env, "WORLD_SIZE"))
      throw std::invalid_argument("torchrun launch: RANK is set but WORLD_SIZE is not");
    li.rank = intVar(env, "RANK", li.launcher);
    li.worldSize = intVar(env, "WORLD_SIZE", li.launcher);
    li.localRank = intVarOr(env, "LOCAL_RANK", li.launcher, li.rank);
    li.localWorldSize = intVarOr(env, "LOCAL_WORLD_SIZE", li.launcher,
                                 lookup(env, "LOCAL_RANK") ? li.localRank + 1 : li.worldSize);
    check(li, "RANK", "WORLD_SIZE");
    // torchrun multi-node needs MASTER_ADDR (or NCCL_COMM_ID); one node may default.
    if (li.worldSize > 1 && !lookup(env, "NCCL_COMM_ID") && !lookup(env, "MASTER_ADDR") &&
        li.localWorldSize != li.worldSize)
      throw std::invalid_argument(
          "torchrun launch: MASTER_ADDR is not set (needed to meet the other hosts' ranks; "
          "or set NCCL_COMM_ID=ip:port)");
  } else if (lookup(env, "OMPI_COMM_WORLD_RANK") || lookup(env, "OMPI_COMM_WORLD_SIZE")) {
    li.launcher = "mpi";
    li.rank = intVar(env, "OMPI_COMM_WORLD_RANK", li.launcher);
    li.worldSize = intVar(env, "OMPI_COMM_WORLD_SIZE", li.launcher);
    li.localRank = intVarOr(env, "OMPI_COMM_WORLD_LOCAL_RANK", li.launcher, li.rank);
    li.localWorldSize = intVarOr(env, "OMPI_COMM_WORLD_LOCAL_SIZE", li.launcher, li.worldSize);
    check(li, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE");
  } else if (lookup(env, "SLURM_PROCID")) {
    li.launcher = "slurm";
    li.rank = intVar(env, "SLURM_PROCID", li.launcher);
    li.worldSize = intVar(env, "SLURM_NTASKS", li.launcher);
    li.localRank = intVarOr(env, "SLURM_LOCALID", li.launcher, 0);
    if (lookup(env, "SLURM_NTASKS_PER_NODE")) {
      li.localWorldSize = intVar(env, "SLURM_NTASKS_PER_NODE", li.launcher);
    } else if (const std::string* t = lookup(env, "SLURM_TASKS_PER_NODE")) {
      li.localWorldSize = firstTaskCount(*t);
      if (li.localWorldSize < 1)
        throw std::invalid_argument("slurm launch: SLURM_TASKS_PER_NODE='" + *t +
                                    "' does not start with a task count");
    } else {
      li.localWorldSize = li.worldSize;
    }
    check(li, "SLURM_PROCID", "SLURM_NTASKS");
  }
  rendezvous(env, li);
  return li;
}

std::unique_ptr<ProcessGroup> initWorld(const LaunchInfo& info) {
  if (info.worldSize > 1 && info.rendezvous.empty())
    throw std::invalid_argument("initWorld: " + std::to_string(info.worldSize) +
                                " ranks but no rendezvous address");
  ncclUniqueId id;
  if (!info.rendezvous.empty()) {
    // ncclGetUniqueId derives the same id from NCCL_COMM_ID in every process; rank 0's
    // ncclCommInitRank then hosts the bootstrap root there.
    const Env env = processEnvironment();
    const std::string* cur = lookup(env, "NCCL_COMM_ID");
    if (!cur || info.rendezvous != *cur) setenv("NCCL_COMM_ID", info.rendezvous.c_str(), 1);
  }
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r != ncclSuccess) {
    const char* e = ncclGetLastError(nullptr);
    throw DistError("initWorld: ncclGetUniqueId failed for rendezvous '" + info.rendezvous +
                        "' (" + info.rendezvousFrom + "): " + ncclGetErrorString(r) +
                        (e && *e ? std::string(": ") + e : std::string()),
                    r);
  }
  return std::make_unique<ProcessGroup>(id, info.rank, info.worldSize);
}

std::unique_ptr<ProcessGroup> initWorldFromEnvironment(LaunchInfo* info) {
  const LaunchInfo li = parseLaunchEnv(processEnvironment());
  if (info) *info = li;
  return initWorld(li);
}

}  // namespace train
}  // namespace braid
