// Choosing the instruction-set level of the reduction kernels (see kernel_table.h).
//
// The current table is one atomic pointer: Reducer calls load it relaxed (the tables
// are constant data, initialised before main), setKernelLevel() stores it. The first
// use reads BRAID_SIMD.
#include <atomic>
#include <cctype>
#include <string>

#include "src/config/log.h"
#include "src/config/params.h"
#include "src/reduce/kernel_table.h"

namespace braid {
namespace reduce_detail {
namespace {

bool cpuHas(KernelLevel level) {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
  switch (level) {
    case KernelLevel::kPortable:
      return true;
    case KernelLevel::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case KernelLevel::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  }
  return false;
#else
  return level == KernelLevel::kPortable;
#endif
}

const KernelTable* builtTable(KernelLevel level) {
  switch (level) {
    case KernelLevel::kPortable: return &portableKernels();
    case KernelLevel::kAvx2: return avx2Kernels();
    case KernelLevel::kAvx512: return avx512Kernels();
  }
  return nullptr;
}

/// BRAID_SIMD's choice, else the best level.
KernelLevel automaticLevel() {
  const KernelLevel best = bestKernelLevel();
  const std::string text = param::kSimd.get();
  if (text.empty() || text == "auto" || text == "AUTO") return best;
  KernelLevel wanted;
  if (!parseKernelLevel(text.c_str(), &wanted)) {
    BRAID_WARN("BRAID_SIMD=%s is not one of auto, avx512, avx2, portable: using %s",
               text.c_str(), kernelLevelName(best));
    return best;
  }
  if (!kernelLevelAvailable(wanted)) {
    BRAID_WARN("BRAID_SIMD=%s: this CPU (or build) lacks it: using %s", text.c_str(),
               kernelLevelName(best));
    return best;
  }
  return wanted;
}

struct Current {
  std::atomic<const KernelTable*> table{nullptr};
  std::atomic<int> level{0};
  Current() { set(automaticLevel()); }
  void set(KernelLevel l) {
    level.store(static_cast<int>(l), std::memory_order_relaxed);
    table.store(builtTable(l), std::memory_order_release);
  }
};

Current& current() {
  static Current c;
  return c;
}

}  // namespace

const char* kernelLevelName(KernelLevel level) {
  switch (level) {
    case KernelLevel::kPortable: return "portable";
    case KernelLevel::kAvx2: return "avx2";
    case KernelLevel::kAvx512: return "avx512";
  }
  return "unknown";
}

bool parseKernelLevel(const char* text, KernelLevel* level) {
  std::string s(text != nullptr ? text : "");
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (int l = 0; l < kNumKernelLevels; ++l) {
    if (s == kernelLevelName(static_cast<KernelLevel>(l))) {
      *level = static_cast<KernelLevel>(l);
      return true;
    }
  }
  return false;
}

bool kernelLevelAvailable(KernelLevel level) {
  return builtTable(level) != nullptr && cpuHas(level);
}

KernelLevel bestKernelLevel() {
  for (int l = kNumKernelLevels - 1; l > 0; --l)
    if (kernelLevelAvailable(static_cast<KernelLevel>(l))) return static_cast<KernelLevel>(l);
  return KernelLevel::kPortable;
}

const KernelTable* kernelsFor(KernelLevel level) {
  return kernelLevelAvailable(level) ? builtTable(level) : nullptr;
}

KernelLevel kernelLevel() {
  return static_cast<KernelLevel>(current().level.load(std::memory_order_relaxed));
}

bool setKernelLevel(KernelLevel level) {
  if (!kernelLevelAvailable(level)) return false;
  current().set(level);
  return true;
}

void resetKernelLevel() { current().set(automaticLevel()); }

const KernelTable& currentKernels() {
  return *current().table.load(std::memory_order_acquire);
}

}  // namespace reduce_detail
}  // namespace braid
