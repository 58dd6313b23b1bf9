// braid-switch: a software aggregation switch for the BraidSwitch collnet. Node heads
// (BRAID_SWITCH=HOST:PORT) connect to it; it reduces their data and returns the result
// to each. With --parent it is a leaf of a two-level tree whose root is another
// braid-switch.
//
//   braid-switch --listen HOST:PORT [--parent HOST:PORT] [--secret-file FILE]
//                [--timeout-ms N] [--quiet]
//
// Prints "braid-switch listening on IP:PORT" on stdout once ready; log lines go to
// stderr. SIGTERM / SIGINT stop it (exit 0).
#include <signal.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "src/tools/cli.h"
#include "src/tools/switch_server/switch_server.h"

namespace {

bool readSecret(const std::string& path, uint64_t* out, std::string* why) {
  std::ifstream f(path);
  if (!f) {
    *why = "cannot read " + path + ": " + std::strerror(errno);
    return false;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  const size_t b = s.find_first_not_of(" \t\r\n");
  const size_t e = s.find_last_not_of(" \t\r\n");
  s = b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const std::string digits = hex ? s.substr(2) : s;
  if (digits.empty() ||
      digits.find_first_not_of(hex ? "0123456789abcdefABCDEF" : "0123456789") !=
          std::string::npos) {
    *why = path + " does not hold a decimal or 0x hex number";
    return false;
  }
  errno = 0;
  const unsigned long long v = std::strtoull(digits.c_str(), nullptr, hex ? 16 : 10);
  if (errno == ERANGE) {
    *why = path + ": the secret does not fit 64 bits";
    return false;
  }
  *out = v;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::string listen, secretFile;
  braid::SwitchOptions opts;
  bool quiet = false;
  braid::cli::App app("A software aggregation switch for Braid's BraidSwitch collnet: node "
                      "heads (BRAID_SWITCH=HOST:PORT) connect, it reduces their data and "
                      "returns the result to every one of them.",
                      "braid-switch");
  app.add_option("--listen", listen, "where to listen (port 0: any; the port is printed)")
      ->required()
      ->check(braid::cli::nonEmpty())
      ->type_name("HOST:PORT");
  app.add_option("--parent", opts.parent,
                 "the root switch of a two-level tree: groups whose members use several "
                 "switches meet there")
      ->type_name("HOST:PORT");
  app.add_option("--secret-file", secretFile,
                 "admit only the job secret in FILE (decimal or 0x hex)")
      ->type_name("FILE");
  app.add_option("--timeout-ms", opts.timeoutMs,
                 "how long a group may take to gather (default 60000)")
      ->check(braid::cli::range(1, 24 * 3600 * 1000))
      ->type_name("N");
  app.add_flag("--quiet", quiet, "log only refusals and failures");
  int exitCode = 0;
  if (!app.parseCommandLine(argc, argv, &exitCode)) return exitCode;
  if (!secretFile.empty()) {
    std::string why;
    if (!readSecret(secretFile, &opts.secret, &why)) {
      std::fprintf(stderr, "braid-switch: %s\n", why.c_str());
      return 2;
    }
    opts.requireSecret = true;
  }
  opts.log = [quiet](bool warn, const std::string& line) {
    if (quiet && !warn) return;
    std::fprintf(stderr, "%s\n", line.c_str());
  };

  // The server's thread must not take the signals: block them here (inherited), then
  // wait for them synchronously.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  braid::SwitchServer server;
  const std::string bound = server.start(listen, opts);
  if (bound.empty()) {
    std::fprintf(stderr, "braid-switch: %s\n", server.error().c_str());
    return 1;
  }
  std::printf("braid-switch listening on %s\n", bound.c_str());
  std::fflush(stdout);
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  if (!quiet) std::fprintf(stderr, "braid-switch %s: signal %d, stopping\n", bound.c_str(), sig);
  server.stop();
  return 0;
}
