// reduce_bench: the host reduction kernels (src/reduce) at every instruction-set level
// this CPU has, against memcpy and a STREAM-add-like loop, in bytes/s counting bytes
// read + written (a reduce of n bytes per operand: 3n; memcpy: 2n; no write-allocate
// traffic counted, as STREAM).
//
// Names: reduce/<level>/<type>/<op>/<bytes per operand>, memcpy/<bytes>,
// stream_add/<bytes>. Sizes: 4 KiB (L1), 256 KiB (L2), 4 MiB (L3), 64 MiB (memory).
//
//   reduce_bench --benchmark_filter='reduce/avx512/f32/sum'
//   reduce_bench --benchmark_min_time=0.2 --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true     (one command line)
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "src/reduce/float_types.h"
#include "src/reduce/kernel_table.h"
#include "src/reduce/reducer.h"

namespace {

using braid::Reducer;
using braid::reduce_detail::KernelLevel;

const size_t kSizes[] = {size_t(4) << 10, size_t(256) << 10, size_t(4) << 20, size_t(64) << 20};

/// A page-aligned buffer, touched (so page faults stay out of the timings).
struct Buffer {
  std::unique_ptr<uint8_t, decltype(&std::free)> p{nullptr, &std::free};
  explicit Buffer(size_t bytes) {
    void* q = nullptr;
    if (posix_memalign(&q, 4096, bytes) != 0) std::abort();
    p.reset(static_cast<uint8_t*>(q));
    std::memset(q, 0, bytes);
  }
  uint8_t* get() const { return p.get(); }
};

/// Moderate values of the type (no NaN/inf/subnormal slow paths; sums stay finite).
void fill(ncclDataType_t t, uint8_t* p, size_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const size_t es = braid::dataTypeSize(t);
  for (size_t off = 0; off + es <= bytes; off += es) {
    const float f = u(rng);
    uint64_t v = 0;
    switch (t) {
      case ncclFloat16: v = braid::floatToHalf(f); break;
      case ncclBfloat16: v = braid::floatToBfloat16(f); break;
      case ncclFloat8e4m3: v = braid::floatToFp8e4m3(f); break;
      case ncclFloat8e5m2: v = braid::floatToFp8e5m2(f); break;
      case ncclFloat32: std::memcpy(&v, &f, 4); break;
      case ncclFloat64: {
        const double d = f;
        std::memcpy(&v, &d, 8);
        break;
      }
      default: v = rng() % 1000; break;
    }
    std::memcpy(p + off, &v, es);
  }
}

struct Case {
  ncclDataType_t type;
  const char* typeName;
  ncclRedOp_t op;
};
const Case kCases[] = {
    {ncclFloat32, "f32", ncclSum},     {ncclFloat32, "f32", ncclMax},
    {ncclFloat32, "f32", ncclProd},    {ncclFloat32, "f32", ncclAvg},
    {ncclFloat16, "f16", ncclSum},     {ncclBfloat16, "bf16", ncclSum},
    {ncclFloat64, "f64", ncclSum},     {ncclInt32, "i32", ncclSum},
    {ncclInt8, "i8", ncclSum},         {ncclFloat8e4m3, "e4m3", ncclSum},
    {ncclFloat8e5m2, "e5m2", ncclSum},
};

void reduceBench(benchmark::State& state, KernelLevel level, Case c, size_t bytes) {
  if (!braid::reduce_detail::setKernelLevel(level)) {
    state.SkipWithError("kernel level not available");
    return;
  }
  const size_t n = bytes / braid::dataTypeSize(c.type);
  Buffer in(bytes), local(bytes), dst(bytes);
  fill(c.type, in.get(), bytes, 1);
  fill(c.type, local.get(), bytes, 2);
  const Reducer r(c.type, c.op, 2);
  const uint8_t flags = c.op == ncclAvg ? 2 /* kPostOp */ : 0;
  for (auto _ : state) {
    r.reduce(dst.get(), in.get(), local.get(), n, flags);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(3 * bytes));
  braid::reduce_detail::resetKernelLevel();
}

void memcpyBench(benchmark::State& state, size_t bytes) {
  Buffer src(bytes), dst(bytes);
  std::memset(src.get(), 1, bytes);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(2 * bytes));
}

/// a[i] = b[i] + c[i] in plain float, compiled with the default flags of the build. In
/// chunks of constant length, so that GCC vectorises it (SSE2) even at -O2.
__attribute__((noinline)) void streamAdd(float* __restrict a, const float* __restrict b,
                                         const float* __restrict c, size_t n) {
  constexpr size_t kChunk = 256;
  size_t i = 0;
  for (; i + kChunk <= n; i += kChunk)
    for (size_t j = i; j < i + kChunk; ++j) a[j] = b[j] + c[j];
  for (; i < n; ++i) a[i] = b[i] + c[i];
}

void streamAddBench(benchmark::State& state, size_t bytes) {
  const size_t n = bytes / sizeof(float);
  Buffer a(bytes), b(bytes), c(bytes);
  fill(ncclFloat32, b.get(), bytes, 1);
  fill(ncclFloat32, c.get(), bytes, 2);
  for (auto _ : state) {
    streamAdd(reinterpret_cast<float*>(a.get()), reinterpret_cast<const float*>(b.get()),
              reinterpret_cast<const float*>(c.get()), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(3 * bytes));
}

void registerAll() {
  for (size_t bytes : kSizes) {
    benchmark::RegisterBenchmark(("memcpy/" + std::to_string(bytes)).c_str(), memcpyBench, bytes);
    benchmark::RegisterBenchmark(("stream_add/" + std::to_string(bytes)).c_str(), streamAddBench,
                                 bytes);
  }
  for (int l = braid::reduce_detail::kNumKernelLevels - 1; l >= 0; --l) {
    const KernelLevel level = static_cast<KernelLevel>(l);
    if (!braid::reduce_detail::kernelLevelAvailable(level)) continue;
    for (const Case& c : kCases)
      for (size_t bytes : kSizes) {
        const std::string name = std::string("reduce/") +
                                 braid::reduce_detail::kernelLevelName(level) + "/" + c.typeName +
                                 "/" + braid::redOpName(c.op) + "/" + std::to_string(bytes);
        benchmark::RegisterBenchmark(name.c_str(), reduceBench, level, c, bytes);
      }
  }
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
