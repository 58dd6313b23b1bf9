// d2d_bw: the device-to-device copy bandwidth probe, the reference the GPU perf numbers
// are quoted against (docs/gpu.md). Copies -b..-e bytes (default 64M..1G, doubling) from
// one cudaMalloc'd buffer to another on one device with cudaMemcpyAsync on a stream,
// timed with CUDA events over -n copies (default 20, after 3 warmup copies), and prints
// per size: time per copy, copy GB/s = bytes / time, and read+write GB/s = 2 x bytes /
// time (the HBM traffic); -J writes the rows as JSON. Exits 2 without a usable device.
//   usage: d2d_bw [-b size] [-e size] [-n copies] [-d device] [-J file.json]   (--help)
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "src/tools/cli.h"

namespace {

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "d2d_bw: %s failed: %s (%s)\n", what, cudaGetErrorString(e),
               cudaGetErrorName(e));
  return false;
}

struct Row {
  size_t bytes;
  double us, copyGbps, rwGbps;
};

/// What the run holds; released by the destructor on every exit path.
struct Resources {
  void* src = nullptr;
  void* dst = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Resources() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (stream != nullptr) cudaStreamDestroy(stream);
    if (src != nullptr) cudaFree(src);
    if (dst != nullptr) cudaFree(dst);
  }
};

}  // namespace

int main(int argc, char** argv) {
  size_t minBytes = size_t(64) << 20, maxBytes = size_t(1) << 30;
  int reps = 20, device = 0;
  std::string json;
  braid::cli::App app("The device-to-device copy bandwidth, the reference of the GPU perf "
                      "numbers: cudaMemcpyAsync between two buffers of one device, sizes "
                      "doubling from -b to -e.",
                      "d2d_bw");
  app.addSize("-b", &minBytes, "smallest size, K/M/G suffixes (default 64M)");
  app.addSize("-e", &maxBytes, "largest size (default 1G)");
  app.add_option("-n", reps, "timed copies per size (default 20)")
      ->check(braid::cli::range(1, 1 << 30));
  app.add_option("-d", device, "the CUDA device (default 0)")->check(braid::cli::range(0, 1 << 16));
  app.add_option("-J", json, "write the rows as JSON to this file")
      ->check(braid::cli::nonEmpty())
      ->type_name("FILE");
  int exitCode = 0;
  if (!app.parseCommandLine(argc, argv, &exitCode)) return exitCode;
  if (minBytes == 0) return app.fail("-b", "the smallest size must be at least 1 byte");
  if (maxBytes < minBytes) return app.fail("-e", "the largest size is below -b");
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    std::fprintf(stderr, "d2d_bw: no usable CUDA device: %s\n",
                 e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    return 2;
  }
  if (device >= count) {
    std::fprintf(stderr, "d2d_bw: device %d does not exist (%d devices)\n", device, count);
    return 2;
  }
  Resources r;
  cudaDeviceProp prop{};
  if (!check(cudaSetDevice(device), "cudaSetDevice") ||
      !check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties") ||
      !check(cudaMalloc(&r.src, maxBytes), "cudaMalloc (source)") ||
      !check(cudaMalloc(&r.dst, maxBytes), "cudaMalloc (destination)") ||
      !check(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !check(cudaEventCreate(&r.start), "cudaEventCreate") ||
      !check(cudaEventCreate(&r.stop), "cudaEventCreate") ||
      !check(cudaMemsetAsync(r.src, 1, maxBytes, r.stream), "cudaMemsetAsync") ||
      !check(cudaMemsetAsync(r.dst, 0, maxBytes, r.stream), "cudaMemsetAsync")) {
    return 1;
  }
  std::printf("# d2d_bw: cudaMemcpyAsync device-to-device on device %d (%s), %d copies per size\n",
              device, prop.name, reps);
  std::printf("# %12s  %10s  %10s  %14s\n", "size (B)", "time (us)", "copy GB/s",
              "read+write GB/s");
  std::string rows;
  for (size_t bytes = minBytes; bytes <= maxBytes; bytes *= 2) {
    for (int w = 0; w < 3; ++w) {
      if (!check(cudaMemcpyAsync(r.dst, r.src, bytes, cudaMemcpyDeviceToDevice, r.stream),
                 "cudaMemcpyAsync")) {
        return 1;
      }
    }
    if (!check(cudaEventRecord(r.start, r.stream), "cudaEventRecord")) return 1;
    for (int i = 0; i < reps; ++i) {
      if (!check(cudaMemcpyAsync(r.dst, r.src, bytes, cudaMemcpyDeviceToDevice, r.stream),
                 "cudaMemcpyAsync")) {
        return 1;
      }
    }
    float ms = 0;
    if (!check(cudaEventRecord(r.stop, r.stream), "cudaEventRecord") ||
        !check(cudaEventSynchronize(r.stop), "cudaEventSynchronize") ||
        !check(cudaEventElapsedTime(&ms, r.start, r.stop), "cudaEventElapsedTime")) {
      return 1;
    }
    Row row{bytes, 1e3 * ms / reps, 0, 0};
    row.copyGbps = row.us > 0 ? double(bytes) / row.us / 1e3 : 0;
    row.rwGbps = 2 * row.copyGbps;
    std::printf("  %12zu  %10.1f  %10.1f  %14.1f\n", row.bytes, row.us, row.copyGbps, row.rwGbps);
    char buf[200];
    std::snprintf(buf, sizeof(buf),
                  "%s\n    {\"bytes\": %zu, \"time_us\": %.6g, \"copy_gbps\": %.6g, "
                  "\"rw_gbps\": %.6g}",
                  rows.empty() ? "" : ",", row.bytes, row.us, row.copyGbps, row.rwGbps);
    rows += buf;
    if (bytes > maxBytes / 2) break;
  }
  std::fflush(stdout);
  if (json.empty()) return 0;
  std::FILE* f = std::fopen(json.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "d2d_bw: cannot write '%s'\n", json.c_str());
    return 1;
  }
  std::fprintf(f,
               "{\n  \"tool\": \"d2d_bw\",\n  \"device\": \"%s\",\n  \"copies\": %d,\n"
               "  \"metric\": \"cudaMemcpyAsync D2D; copy_gbps = bytes/time, rw_gbps = "
               "2*bytes/time\",\n  \"results\": [%s\n  ]\n}\n",
               prop.name, reps, rows.c_str());
  return std::fclose(f) == 0 ? 0 : 1;
}
