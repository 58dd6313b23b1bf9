// Fuzzes environment values: the typed registry's integer, boolean and string parsing
// (src/config/params.cc: decimal, 0x hex, 0 octal, K/M/G and B suffixes, signs,
// overflow) and the parameters whose text is parsed further: NCCL_ALGO / NCCL_PROTO
// (src/core/tuner.cc), NCCL_SOCKET_IFNAME (src/net/socket.cc), NCCL_DEBUG /
// NCCL_DEBUG_SUBSYS (src/config/log.cc) and BRAID_SIMD (src/reduce/kernel_level.cc).
//
// Input: a selector byte, then the value (up to its first NUL, as the environment holds it).
// Oracles: a plain decimal value reads as its number, or the default when it overflows;
// booleans follow their documented spellings; strings read back unchanged; an empty
// NCCL_ALGO allows every algorithm; comma lists hold no blanks or empty items.
#include <strings.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "algorithms/registry.h"
#include "src/config/log.h"
#include "src/config/params.h"
#include "src/core/tuner.h"
#include "src/net/socket.h"
#include "src/reduce/kernel_table.h"
#include "tests/fuzz/fuzz_input.h"

using namespace braid;
using braid_fuzz::FuzzInput;

namespace {

constexpr int64_t kIntDefault = 4242;
const IntParam gInt("BRAID_FUZZ_INT", kIntDefault, "fuzz harness: an integer parameter");
const BoolParam gBool("BRAID_FUZZ_BOOL", false, "fuzz harness: a boolean parameter");
const StringParam gString("BRAID_FUZZ_STRING", "dflt", "fuzz harness: a string parameter");

/// The value of `text` if it is [-]digits[kKmMgG][bB] with at most 19 digits; sets
/// *known to whether the oracle applies (*overflow: the number does not fit int64_t).
int64_t expectedInt(const std::string& text, bool* known, bool* overflow) {
  *known = false;
  *overflow = false;
  size_t i = 0;
  const bool neg = !text.empty() && text[0] == '-';
  if (neg) ++i;
  const size_t digits0 = i;
  __int128 v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (i - digits0 < 20) v = v * 10 + (text[i] - '0');  // more digits: not checked below
    ++i;
  }
  const size_t digits = i - digits0;
  if (digits == 0 || digits > 19) return 0;
  if (digits > 1 && text[digits0] == '0') return 0;  // octal: left to the fuzzer alone
  __int128 mult = 1;
  if (i < text.size()) {
    const char c = text[i];
    if (c == 'k' || c == 'K') mult = 1 << 10, ++i;
    else if (c == 'm' || c == 'M') mult = 1 << 20, ++i;
    else if (c == 'g' || c == 'G') mult = 1 << 30, ++i;
  }
  if (i < text.size() && (text[i] == 'b' || text[i] == 'B')) ++i;
  if (i != text.size()) return 0;
  *known = true;
  if (neg) v = -v;
  if (v > INT64_MAX || v < INT64_MIN) {
    *overflow = true;  // strtoll fails: ERANGE
    return 0;
  }
  const __int128 r = v * mult;
  if (r > INT64_MAX || r < INT64_MIN) {
    *overflow = true;
    return 0;
  }
  return int64_t(r);
}

void fuzzInt(const std::string& text) {
  setenv(gInt.name(), text.c_str(), 1);
  const int64_t got = gInt.get();
  unsetenv(gInt.name());
  bool known, overflow;
  const int64_t want = expectedInt(text, &known, &overflow);
  if (known) FUZZ_CHECK(got == (overflow ? kIntDefault : want));
  if (text.empty()) FUZZ_CHECK(got == kIntDefault);
}

void fuzzBool(const std::string& text) {
  setenv(gBool.name(), text.c_str(), 1);
  const bool got = gBool.get();
  unsetenv(gBool.name());
  const char* c = text.c_str();
  const bool want = strcasecmp(c, "1") == 0 || strcasecmp(c, "true") == 0 ||
                    strcasecmp(c, "yes") == 0 || strcasecmp(c, "on") == 0;
  FUZZ_CHECK(got == want);
}

void fuzzString(const std::string& text) {
  setenv(gString.name(), text.c_str(), 1);
  const std::string got = gString.get();
  unsetenv(gString.name());
  FUZZ_CHECK(got == (text.empty() ? std::string("dflt") : text));
}

void fuzzAlgoProto(const std::string& spec) {
  for (const Algorithm& a : allAlgorithms()) {
    const bool allowed = algoAllowed(spec, a.coll, a.name, a.ncclName);
    const bool named = algoNamed(spec, a.coll, a.name, a.ncclName);
    if (spec.empty()) FUZZ_CHECK(allowed && !named);
    if (named) FUZZ_CHECK(allowed);
    for (const char* proto : {"Simple", "LL128", "LL"}) {
      const bool p = protoAllowed(spec, a.coll, proto);
      if (spec.empty()) FUZZ_CHECK(p);
    }
  }
}

void fuzzIfname(const std::string& text) {
  for (const std::string& item : splitCommaList(text)) {
    FUZZ_CHECK(!item.empty());
    FUZZ_CHECK(item.find(',') == std::string::npos);
    FUZZ_CHECK(item.front() != ' ' && item.front() != '\t');
    FUZZ_CHECK(item.back() != ' ' && item.back() != '\t');
  }
  setenv("NCCL_SOCKET_IFNAME", text.c_str(), 1);
  SockAddr a;
  std::string ifname;
  const ncclResult_t r = pickLocalAddress(&a, &ifname);
  unsetenv("NCCL_SOCKET_IFNAME");
  FUZZ_CHECK(r == ncclSuccess || r == ncclSystemError || r == ncclInvalidArgument);
  if (r == ncclSuccess) FUZZ_CHECK(a.port() >= 0);
}

void fuzzDebug(const std::string& level, const std::string& subsys) {
  unsetenv("NCCL_DEBUG_FILE");  // never write files
  setenv("NCCL_DEBUG", level.c_str(), 1);
  setenv("NCCL_DEBUG_SUBSYS", subsys.c_str(), 1);
  logReinit();
  (void)logEnabled(LogLevel::kInfo, kLogAll);
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_SUBSYS");
  logReinit();
}

void fuzzSimd(const std::string& text) {
  using namespace braid::reduce_detail;
  KernelLevel level;
  if (parseKernelLevel(text.c_str(), &level)) {
    FUZZ_CHECK(int(level) >= 0 && int(level) < kNumKernelLevels);
    FUZZ_CHECK(strcasecmp(kernelLevelName(level), text.c_str()) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t which = in.byte();
  const std::string text = braid_fuzz::cString(in.rest());
  switch (which % 8) {
    case 0: fuzzInt(text); break;
    case 1: fuzzBool(text); break;
    case 2: fuzzString(text); break;
    case 3: fuzzAlgoProto(text); break;
    case 4: fuzzIfname(text); break;
    case 5: {
      const size_t cut = text.find('/');
      fuzzDebug(text.substr(0, cut), cut == std::string::npos ? "" : text.substr(cut + 1));
      break;
    }
    case 6: fuzzSimd(text); break;
    default:  // every registered integer parameter reads the value without failing
      for (const ParamBase* p : ParamBase::all()) {
        if (p->type() != ParamType::kInt) continue;
        const char* old = getenv(p->name());
        const std::string saved = old ? old : "";
        setenv(p->name(), text.c_str(), 1);
        (void)static_cast<const IntParam*>(p)->get();
        if (old)
          setenv(p->name(), saved.c_str(), 1);
        else
          unsetenv(p->name());
      }
      break;
  }
  return 0;
}
