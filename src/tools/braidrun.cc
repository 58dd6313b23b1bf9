// braidrun: launch N local processes of one program as the ranks of one job.
//
//   braidrun -n N [--tag] [--grace SECONDS] [--] program [args...]
//
// Each child gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE (torchrun style),
// MASTER_ADDR=127.0.0.1, MASTER_PORT (a free port) and NCCL_COMM_ID=127.0.0.1:PORT, so
// NCCL programs (and the perf suite) find each other without MPI. If a child fails or is
// killed, the others get SIGTERM, then SIGKILL after the grace period, and braidrun exits
// with the failed child's status (128+signal for a signal). SIGINT/SIGTERM sent to braidrun
// are forwarded to the children. --tag prefixes every output line with "[rank] ". The
// command line is read with CLI11 (src/tools/cli.h): everything from the program on is
// passed to it untouched.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "src/tools/cli.h"

namespace {

volatile sig_atomic_t gSignal = 0;

void onSignal(int sig) { gSignal = sig; }

/// A free TCP port on 127.0.0.1 (bound and released; the root binds it again soon after).
int freePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

/// One launched rank; with --tag its stdout/stderr come through pipes.
struct Child {
  pid_t pid = -1;
  bool running = false;
  int out[2] = {-1, -1};  // read ends: stdout, stderr (--tag only)
  std::string partial[2];
};

/// Write complete lines of `data` with the rank prefix; keep the unfinished tail.
void emitTagged(int rank, std::string& partial, const char* data, size_t n, FILE* to, bool flush) {
  partial.append(data, n);
  size_t start = 0;
  for (size_t nl; (nl = partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::fprintf(to, "[%d] %.*s\n", rank, static_cast<int>(nl - start), partial.data() + start);
  }
  partial.erase(0, start);
  if (flush && !partial.empty()) {
    std::fprintf(to, "[%d] %s\n", rank, partial.c_str());
    partial.clear();
  }
  std::fflush(to);
}

std::chrono::steady_clock::time_point after(double seconds) {
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(
             std::chrono::duration<double>(seconds));
}

int statusCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

/// The command line: braidrun's options, then the program and its arguments, untouched.
struct Command {
  int n = 0;
  bool tag = false;
  double grace = 3.0;
  std::vector<std::string> program;
};

/// Parses argv into *c; false with *exitCode when braidrun should end (--help, errors).
bool parseCommand(int argc, char** argv, Command* c, int* exitCode) {
  braid::cli::App app("Launches N local processes of one program as the ranks of one job: "
                      "each gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, "
                      "MASTER_PORT and NCCL_COMM_ID.",
                      "braidrun");
  app.footer("usage: braidrun -n N [--tag] [--grace SECONDS] [--] program [args...]\n"
             "Everything from the program on is passed to it as it is.");
  app.add_option("-n,--nproc", c->n,
                 "number of processes (ranks) to start on this host (also -np N)")
      ->check(braid::cli::range(1, 1 << 20))
      ->type_name("N");
  app.add_flag("--tag", c->tag, "prefix each output line with \"[rank] \"");
  app.add_option("--grace", c->grace, "wait after SIGTERM before SIGKILL (default 3)")
      ->check(braid::cli::range(0.0, 1e9))
      ->type_name("SECONDS");
  app.prefix_command();  // the first word that is not braidrun's starts the program
  // mpirun's spelling -np N: CLI11 names short options by one letter, so it is read as
  // --nproc (among braidrun's own words only: the program's arguments stay as they are).
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-np") {
      args[i] = "--nproc";
    } else if (a == "--" || a.empty() || a[0] != '-') {
      break;
    }
    if (a == "-np" || a == "-n" || a == "--nproc" || a == "--grace") ++i;  // their value
  }
  std::vector<const char*> words;
  for (const std::string& a : args) words.push_back(a.c_str());
  if (!app.parseCommandLine(static_cast<int>(words.size()), words.data(), exitCode)) return false;
  c->program = app.remaining();
  if (!c->program.empty() && c->program.front() == "--") {
    c->program.erase(c->program.begin());
  } else if (!c->program.empty() && c->program.front().size() > 1 &&
             c->program.front()[0] == '-') {
    *exitCode = app.fail(c->program.front(), "unknown option");
    return false;
  }
  if (c->n == 0) {
    *exitCode = app.fail("--nproc", "required: braidrun -n N [--] program [args...]");
    return false;
  }
  if (c->program.empty()) {
    *exitCode = app.fail("program", "none given: braidrun -n N [--] program [args...]");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Command cmd;
  int exitCode = 0;
  if (!parseCommand(argc, argv, &cmd, &exitCode)) return exitCode;
  const int n = cmd.n;
  const bool tag = cmd.tag;
  const double grace = cmd.grace;
  std::vector<char*> childArgv;
  for (std::string& a : cmd.program) childArgv.push_back(a.data());
  childArgv.push_back(nullptr);
  const int port = freePort();
  if (port < 0) {
    std::fprintf(stderr, "braidrun: cannot find a free port: %s\n", std::strerror(errno));
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<Child> kids(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    Child& k = kids[r];
    int pipes[2][2];
    if (tag && (pipe(pipes[0]) != 0 || pipe(pipes[1]) != 0)) {
      std::fprintf(stderr, "braidrun: pipe: %s\n", std::strerror(errno));
      return 1;
    }
    k.pid = fork();
    if (k.pid < 0) {
      std::fprintf(stderr, "braidrun: fork: %s\n", std::strerror(errno));
      for (int q = 0; q < r; ++q) kill(-kids[q].pid, SIGKILL);
      return 1;
    }
    if (k.pid == 0) {
      setpgid(0, 0);  // own group: a kill reaches the rank's helpers too
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      if (tag) {
        dup2(pipes[0][1], STDOUT_FILENO);
        dup2(pipes[1][1], STDERR_FILENO);
        for (auto& p : pipes) {
          close(p[0]);
          close(p[1]);
        }
      }
      const std::string ps = std::to_string(port);
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", ps.c_str(), 1);
      setenv("NCCL_COMM_ID", ("127.0.0.1:" + ps).c_str(), 1);
      execvp(childArgv[0], childArgv.data());
      std::fprintf(stderr, "braidrun: cannot run '%s': %s\n", childArgv[0], std::strerror(errno));
      _exit(127);
    }
    setpgid(k.pid, k.pid);
    k.running = true;
    if (tag) {
      for (int s = 0; s < 2; ++s) {
        close(pipes[s][1]);
        k.out[s] = pipes[s][0];
      }
    }
  }

  int result = 0;
  bool stopping = false;
  std::chrono::steady_clock::time_point killAt;
  auto stopAll = [&](int sig) {
    for (Child& k : kids) {
      if (k.running) kill(-k.pid, sig);
    }
  };
  int running = n;
  while (running > 0 || tag) {
    // Output of --tag children.
    std::vector<pollfd> fds;
    std::vector<std::pair<int, int>> who;
    for (int r = 0; tag && r < n; ++r) {
      for (int s = 0; s < 2; ++s) {
        if (kids[r].out[s] >= 0) {
          fds.push_back({kids[r].out[s], POLLIN, 0});
          who.emplace_back(r, s);
        }
      }
    }
    if (fds.empty() && running == 0) break;
    const int ready = poll(fds.data(), fds.size(), 100);
    if (ready == 0 && running == 0) break;  // ranks gone; a leftover helper holds the pipe
    if (ready > 0) {
      for (size_t f = 0; f < fds.size(); ++f) {
        if (fds[f].revents == 0) continue;
        Child& k = kids[who[f].first];
        const int s = who[f].second;
        char buf[4096];
        const ssize_t got = read(fds[f].fd, buf, sizeof(buf));
        if (got > 0) {
          emitTagged(who[f].first, k.partial[s], buf, static_cast<size_t>(got), s ? stderr : stdout,
                     false);
        } else if (got == 0 || errno != EINTR) {
          emitTagged(who[f].first, k.partial[s], "", 0, s ? stderr : stdout, true);
          close(k.out[s]);
          k.out[s] = -1;
        }
      }
    }
    // Forwarded signals.
    if (gSignal != 0) {
      const int sig = gSignal;
      gSignal = 0;
      stopAll(sig);
      if (!stopping) {
        stopping = true;
        killAt = after(grace);
        if (result == 0) result = 128 + sig;
      }
    }
    // Reap.
    int status = 0;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      for (int r = 0; r < n; ++r) {
        if (kids[r].pid != pid || !kids[r].running) continue;
        kids[r].running = false;
        --running;
        const int code = statusCode(status);
        if (code != 0 && !stopping) {
          std::fprintf(stderr, "braidrun: rank %d (pid %d) %s %d; stopping the other ranks\n", r,
                       static_cast<int>(pid),
                       WIFSIGNALED(status) ? "killed by signal" : "exited with",
                       WIFSIGNALED(status) ? WTERMSIG(status) : code);
          result = code;
          stopping = true;
          killAt = after(grace);
          stopAll(SIGTERM);
        }
      }
    }
    if (stopping && running > 0 && std::chrono::steady_clock::now() >= killAt) {
      stopAll(SIGKILL);
      killAt = std::chrono::steady_clock::time_point::max();
    }
    if (!tag && running > 0) {
      poll(nullptr, 0, 20);
    }
  }
  return result;
}
