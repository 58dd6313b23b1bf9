// main of braid_cuda_api_test: GoogleTest, or the child role of the CUDA IPC test
// ("--ipc-child ..."), run in a freshly exec'd process of this binary (CUDA cannot be
// used in a forked child of a process that has initialised it).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/cuda_api/cuda_test_util.h"

namespace cuda_api_test {

const char* gSelfPath = "/proc/self/exe";

int ipcChildMain(int argc, char** argv) {
  using namespace braid;
  if (argc != 4) {
    fprintf(stderr, "ipc child: want handle-hex offset bytes device\n");
    return 2;
  }
  unsigned char handle[kCudaIpcHandleBytes];
  if (strlen(argv[0]) != 2 * kCudaIpcHandleBytes) return 3;
  for (size_t i = 0; i < kCudaIpcHandleBytes; ++i) {
    unsigned v = 0;
    if (sscanf(argv[0] + 2 * i, "%2x", &v) != 1) return 3;
    handle[i] = static_cast<unsigned char>(v);
  }
  size_t offset = strtoull(argv[1], nullptr, 10), bytes = strtoull(argv[2], nullptr, 10);
  int dev = atoi(argv[3]);
  if (cudart::setDevice(dev) != ncclSuccess) {
    fprintf(stderr, "ipc child: setDevice: %s\n", cudart::lastError().c_str());
    return 4;
  }
  void* base = nullptr;
  if (cudart::ipcOpenHandle(handle, &base) != ncclSuccess) {
    fprintf(stderr, "ipc child: open: %s\n", cudart::lastError().c_str());
    return 5;
  }
  char* p = static_cast<char*>(base) + offset;
  std::vector<unsigned char> got(bytes);
  if (cudart::copyFromDevice(got.data(), p, bytes) != ncclSuccess) return 6;
  for (size_t i = 0; i < bytes; ++i)
    if (got[i] != ipcPattern(i)) {
      fprintf(stderr, "ipc child: byte %zu is %d, want %d\n", i, got[i], ipcPattern(i));
      return 7;
    }
  if (cudart::memsetDevice(p, kIpcChildFill, bytes) != ncclSuccess) return 8;
  if (cudart::ipcCloseHandle(base) != ncclSuccess) return 9;
  return 0;
}

int runProcess(const char* const* argv, const char* const* env, std::string* out) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    for (const char* const* e = env; e != nullptr && *e != nullptr; ++e) putenv(const_cast<char*>(*e));
    execv(argv[0], const_cast<char* const*>(argv));
    _exit(127);
  }
  close(fds[1]);
  out->clear();
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof(buf))) > 0) out->append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace cuda_api_test

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "--ipc-child") == 0)
    return cuda_api_test::ipcChildMain(argc - 2, argv + 2);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
