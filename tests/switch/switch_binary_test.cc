// The braid-switch program as a child process: it prints its port, serves an
// all-reduce, and when it is killed (SIGKILL) during an operation or during a connect
// the members get an error naming it instead of hanging; SIGTERM ends it with status 0;
// --secret-file admits one job secret; --help and bad arguments (one line naming the
// option, exit status 2).
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/switch/harness.h"

#ifndef BRAID_SWITCH_BIN
#error "BRAID_SWITCH_BIN (the braid-switch program) must be defined by the build"
#endif

namespace {

using namespace switchtest;

struct Child {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
  std::string stdoutText, stderrText;
  std::string addr;

  ~Child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out >= 0) close(out);
    if (err >= 0) close(err);
  }
  /// Reads what the child printed until `want` shows up in its stdout (or stderr) or
  /// timeoutMs passed.
  bool readUntil(const std::string& want, bool fromStderr, int timeoutMs) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
    for (;;) {
      const std::string& text = fromStderr ? stderrText : stdoutText;
      if (text.find(want) != std::string::npos) return true;
      const int left = int(std::chrono::duration_cast<std::chrono::milliseconds>(
                               end - std::chrono::steady_clock::now()).count());
      if (left <= 0) return false;
      pollfd p[2] = {{out, POLLIN, 0}, {err, POLLIN, 0}};
      if (poll(p, 2, left) <= 0) continue;
      char buf[4096];
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP))) continue;
        ssize_t k = read(p[i].fd, buf, sizeof buf);
        if (k > 0) (i == 0 ? stdoutText : stderrText).append(buf, size_t(k));
        if (k == 0 && i == (fromStderr ? 1 : 0)) return false;  // closed without it
      }
    }
  }
  /// Waits for the exit; returns the wait status (-1 on timeout).
  int waitExit(int timeoutMs) {
    int status = 0;
    if (!pollUntil([&] { return waitpid(pid, &status, WNOHANG) == pid; }, timeoutMs)) return -1;
    pid = -1;
    return status;
  }
};

/// Runs braid-switch with `args` (stdout and stderr piped back).
void spawn(Child* c, const std::vector<std::string>& args) {
  int o[2], e[2];
  ASSERT_EQ(pipe(o), 0);
  ASSERT_EQ(pipe(e), 0);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(BRAID_SWITCH_BIN));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  c->pid = fork();
  ASSERT_GE(c->pid, 0);
  if (c->pid == 0) {
    dup2(o[1], 1);
    dup2(e[1], 2);
    close(o[0]);
    close(e[0]);
    execv(BRAID_SWITCH_BIN, argv.data());
    _exit(127);
  }
  close(o[1]);
  close(e[1]);
  c->out = o[0];
  c->err = e[0];
}

/// Starts a switch on a free port; sets c->addr from its "listening on" line.
void startSwitch(Child* c, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--listen", "127.0.0.1:0"};
  args.insert(args.end(), extra.begin(), extra.end());
  spawn(c, args);
  const std::string tag = "braid-switch listening on ";
  ASSERT_TRUE(c->readUntil("\n", false, 10000)) << "no line from braid-switch: " << c->stderrText;
  const size_t at = c->stdoutText.find(tag);
  ASSERT_NE(at, std::string::npos) << c->stdoutText;
  const size_t eol = c->stdoutText.find('\n', at);
  c->addr = c->stdoutText.substr(at + tag.size(), eol - at - tag.size());
  ASSERT_NE(c->addr.find("127.0.0.1:"), std::string::npos) << c->addr;
}

void allReduceOnce(std::vector<Member>& m, size_t count, uint64_t seed) {
  const int n = int(m.size());
  runThreads(n, [&](int r) {
    std::vector<float> send(count), recv(count), want(count);
    fillInput(ncclFloat32, seed, r, send.data(), count);
    reference(ncclFloat32, ncclSum, seed, flatOrder(n), 0, count, want.data());
    void* req = nullptr;
    ASSERT_EQ(net()->iallreduce(m[size_t(r)].coll, send.data(), recv.data(), count, ncclFloat32,
                                ncclSum, nullptr, nullptr, &req),
              ncclSuccess);
    int size = 0;
    ASSERT_EQ(waitRequest(req, &size), ncclSuccess) << allWarnings();
    EXPECT_EQ(std::memcmp(recv.data(), want.data(), count * 4), 0) << "rank " << r;
  });
}

TEST(SwitchBinary, AllReduceThenKilledDuringAnOperation) {
  Watchdog wd(60, "binary all-reduce and kill");
  Child sw;
  startSwitch(&sw, {"--quiet"});
  auto m = prepare({sw.addr, sw.addr}, 8000, 99);
  connectAll(m);
  allReduceOnce(m, 100003, 1);
  // Rank 0 starts an operation rank 1 never joins; the switch dies under it.
  std::vector<float> buf(100000, 1.0f);
  void* req = nullptr;
  ASSERT_EQ(net()->iallreduce(m[0].coll, buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum,
                              nullptr, nullptr, &req),
            ncclSuccess);
  int size = 0;
  EXPECT_EQ(waitRequest(req, &size, 50), ncclInProgress);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(sw.pid, SIGKILL), 0);
  const ncclResult_t r0 = waitRequest(req, &size, 10000);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r0, ncclRemoteError);
  EXPECT_LT(secs, 5.0);
  EXPECT_NE(findWarn({"rank 0", sw.addr}), "") << allWarnings();
  // Rank 1 finds out at its next operation.
  void* req1 = nullptr;
  ncclResult_t r1 = net()->iallreduce(m[1].coll, buf.data(), buf.data(), 10, ncclFloat32, ncclSum,
                                      nullptr, nullptr, &req1);
  if (r1 == ncclSuccess) r1 = waitRequest(req1, &size, 10000);
  EXPECT_EQ(r1, ncclRemoteError);
  closeAll(m);
}

TEST(SwitchBinary, KilledDuringAConnect) {
  Watchdog wd(60, "binary killed during connect");
  Child sw;
  startSwitch(&sw);
  setenv("BRAID_SWITCH_TIMEOUT_MS", "30000", 1);
  auto m = prepare({sw.addr, sw.addr}, 8100, 99);
  ncclResult_t r0 = ncclSuccess;
  std::chrono::steady_clock::time_point done;
  std::thread t([&] {
    r0 = connectMember(m, 0);  // rank 1 never comes
    done = std::chrono::steady_clock::now();
  });
  ASSERT_TRUE(sw.readUntil("opened by rank 0", true, 10000)) << sw.stderrText;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(sw.pid, SIGKILL), 0);
  t.join();
  unsetenv("BRAID_SWITCH_TIMEOUT_MS");
  EXPECT_NE(r0, ncclSuccess);
  EXPECT_LT(std::chrono::duration<double>(done - t0).count(), 5.0);
  EXPECT_NE(findWarn({"rank 0", sw.addr}), "") << allWarnings();
  closeAll(m);
}

TEST(SwitchBinary, SigtermExitsCleanly) {
  Watchdog wd(60, "SIGTERM");
  Child sw;
  startSwitch(&sw);
  auto m = prepare({sw.addr}, 8200, 5);
  connectAll(m);
  allReduceOnce(m, 1000, 3);
  closeAll(m);
  ASSERT_EQ(kill(sw.pid, SIGTERM), 0);
  const int status = sw.waitExit(10000);
  ASSERT_NE(status, -1) << "braid-switch did not exit after SIGTERM";
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(SwitchBinary, SecretFile) {
  Watchdog wd(60, "secret file");
  char path[] = "/tmp/braid-switch-secret-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "0x2a\n", 5), 5);
  close(fd);
  Child sw;
  startSwitch(&sw, {"--secret-file", path, "--quiet"});
  auto good = prepare({sw.addr}, 8300, 42);
  connectAll(good);
  allReduceOnce(good, 100, 4);
  closeAll(good);
  auto bad = prepare({sw.addr}, 8301, 41);
  EXPECT_EQ(connectMember(bad, 0), ncclRemoteError);
  EXPECT_NE(findWarn({"not admitted"}), "") << allWarnings();
  closeAll(bad);
  unlink(path);
}

TEST(SwitchBinary, HelpAndBadArguments) {
  Watchdog wd(60, "arguments");
  {
    Child c;
    spawn(&c, {"--help"});
    EXPECT_TRUE(c.readUntil("usage:", false, 10000));
    const int st = c.waitExit(10000);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << st;
  }
  // Bad command lines: exit status 2 and one line on stderr naming the option.
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{"--bogus"}, "--bogus"},
      {{"--listen", "127.0.0.1:0", "--timeout-ms", "0"}, "--timeout-ms"},
      {{"--listen", "127.0.0.1:0", "--timeout-ms", "x"}, "--timeout-ms"},
      {{"--listen"}, "--listen"},
      {{"--quiet"}, "--listen"}};
  for (const auto& [args, named] : bad) {
    Child c;
    spawn(&c, args);
    c.readUntil("\n", true, 10000);
    const int st = c.waitExit(10000);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 2) << st << " " << args[0];
    EXPECT_NE(c.stderrText.find(named), std::string::npos) << c.stderrText;
    EXPECT_EQ(c.stderrText.rfind("braid-switch: ", 0), 0u) << c.stderrText;
  }
  {
    Child c;
    spawn(&c, {"--listen", "nonsense"});
    const int st = c.waitExit(10000);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 1) << st;
  }
}

}  // namespace
