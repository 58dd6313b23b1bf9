// handoff: how fast one core reads data another core has just written, the cost every
// FIFO slot pays (docs/performance.md, "Streaming stores"). Two threads alternate: the
// writer fills a buffer of -s bytes and raises a flag, the reader copies it out and
// answers. Reported per size: time per round trip and GB/s, with plain stores and with
// non-temporal (streaming) stores by the writer (src/exec/stream_copy.h).
//   usage: handoff [-n rounds] [sizes...]     (default sizes 64 B .. 1 MiB; --help)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "src/exec/stream_copy.h"
#include "src/tools/cli.h"

namespace {

struct AlignedFree {
  void operator()(char* p) const { ::operator delete[](p, std::align_val_t(64)); }
};
using Buffer = std::unique_ptr<char[], AlignedFree>;
Buffer alloc(size_t n) { return Buffer(new (std::align_val_t(64)) char[n]()); }

/// Seconds for `rounds` write-then-read handoffs of n bytes between two threads.
double run(size_t n, int rounds, bool streaming) {
  Buffer shared = alloc(n), source = alloc(n), sink = alloc(n);
  std::atomic<int> turn{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::thread reader([&] {
    for (int i = 0; i < rounds; ++i) {
      while (turn.load(std::memory_order_acquire) != 2 * i + 1) {
      }
      std::memcpy(sink.get(), shared.get(), n);
      turn.store(2 * i + 2, std::memory_order_release);
    }
  });
  for (int i = 0; i < rounds; ++i) {
    while (turn.load(std::memory_order_acquire) != 2 * i) {
    }
    source[size_t(i) % n] = char(i);  // fresh data every round
    if (streaming) {
      braid::streamCopy(shared.get(), source.get(), n);
      braid::streamFence();
    } else {
      std::memcpy(shared.get(), source.get(), n);
    }
    turn.store(2 * i + 1, std::memory_order_release);
  }
  reader.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 2000;
  std::vector<size_t> sizes{64, 512, 4096, 32768, 131072, 1 << 20};
  braid::cli::App app("Core-to-core handoff of fresh data: a writer thread fills a buffer, a "
                      "reader copies it out; time per round trip with plain and with "
                      "streaming stores.",
                      "handoff");
  app.add_option("-n", rounds, "round trips per size (default 2000)")
      ->check(braid::cli::range(1, 1 << 30));
  app.add_option("sizes", sizes, "buffer sizes in bytes, K/M/G suffixes (default 64 B .. 1 MiB)")
      ->transform(braid::cli::sizeValue())
      ->check(braid::cli::range(size_t(1), size_t(1) << 40))
      ->type_name("SIZE")
      ->multi_option_policy(braid::cli::MultiOptionPolicy::TakeAll);
  int exitCode = 0;
  if (!app.parseCommandLine(argc, argv, &exitCode)) return exitCode;
  std::printf("# handoff: writer thread -> reader thread, %d rounds; time per round trip\n",
              rounds);
  std::printf("%10s %14s %10s %14s %10s\n", "bytes", "plain us", "GB/s", "streaming us",
              "GB/s");
  for (size_t n : sizes) {
    const double plain = run(n, rounds, false), stream = run(n, rounds, true);
    std::printf("%10zu %14.2f %10.2f %14.2f %10.2f\n", n, plain / rounds * 1e6,
                double(n) * rounds / plain / 1e9, stream / rounds * 1e6,
                double(n) * rounds / stream / 1e9);
  }
  return 0;
}
