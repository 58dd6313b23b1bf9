// Shared helpers of the cuda_api tests: GPU-test skipping and the IPC child role.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "src/os/cuda_rt.h"

/// Skips the calling test when CUDA is not usable, saying why.
#define CUDA_API_REQUIRE_GPU()                                                        \
  do {                                                                                \
    if (!::braid::cudart::available())                                                \
      GTEST_SKIP() << "no CUDA device: " << ::braid::cudart::unavailableReason();    \
  } while (0)

namespace cuda_api_test {

/// Path of this test binary (the IPC test re-executes it in a child role).
extern const char* gSelfPath;

/// The child role of the IPC roundtrip (main.cc dispatches "--ipc-child" here):
/// argv = handle-hex offset bytes device. Returns the process exit code.
int ipcChildMain(int argc, char** argv);

/// Byte i of the pattern the IPC test writes.
inline unsigned char ipcPattern(size_t i) { return static_cast<unsigned char>(i * 7 + 1); }
constexpr unsigned char kIpcChildFill = 0x5A;

/// Runs argv (a null-terminated list) with extra environment entries, returns its exit
/// status (or -1) and its stdout+stderr in *out.
int runProcess(const char* const* argv, const char* const* env, std::string* out);

}  // namespace cuda_api_test
