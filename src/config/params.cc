#include "src/config/params.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "src/config/log.h"

namespace braid {
namespace {

std::vector<const ParamBase*>& registry() {
  static std::vector<const ParamBase*> r;
  return r;
}

bool parseInt(const char* s, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(s, &end, 0);
  if (errno != 0 || end == s) return false;
  int64_t mult = 1;
  if (*end == 'k' || *end == 'K') mult = 1ll << 10, ++end;
  else if (*end == 'm' || *end == 'M') mult = 1ll << 20, ++end;
  else if (*end == 'g' || *end == 'G') mult = 1ll << 30, ++end;
  if (*end == 'b' || *end == 'B') ++end;
  if (*end != '\0') return false;
  int64_t scaled;
  if (__builtin_mul_overflow(int64_t(v), mult, &scaled)) return false;  // "9E18K": too large
  *out = scaled;
  return true;
}

void warnOnce(const char* name, const char* value) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(name).second)
    BRAID_WARN("ignoring malformed value %s='%s' (using the default)", name, value);
}

}  // namespace

ParamBase::ParamBase(const char* name, ParamType type, std::string defaultValue,
                     const char* meaning)
    : name_(name), type_(type), default_(std::move(defaultValue)), meaning_(meaning) {
  registry().push_back(this);
}

const char* ParamBase::raw() const {
  const char* v = getenv(name_);
  return (v && *v) ? v : nullptr;
}

std::string ParamBase::text() const {
  const char* v = raw();
  return v ? v : default_;
}

std::vector<const ParamBase*> ParamBase::all() {
  std::vector<const ParamBase*> v = registry();
  std::sort(v.begin(), v.end(),
            [](const ParamBase* a, const ParamBase* b) { return strcmp(a->name(), b->name()) < 0; });
  return v;
}

IntParam::IntParam(const char* name, int64_t def, const char* meaning)
    : ParamBase(name, ParamType::kInt, std::to_string(def), meaning), def_(def) {}

int64_t IntParam::get() const {
  const char* v = raw();
  if (!v) return def_;
  int64_t out;
  if (!parseInt(v, &out)) {
    warnOnce(name(), v);
    return def_;
  }
  return out;
}

BoolParam::BoolParam(const char* name, bool def, const char* meaning)
    : ParamBase(name, ParamType::kBool, def ? "1" : "0", meaning) {}

bool BoolParam::get() const {
  std::string v = text();
  std::transform(v.begin(), v.end(), v.begin(), ::tolower);
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

StringParam::StringParam(const char* name, const char* def, const char* meaning)
    : ParamBase(name, ParamType::kString, def, meaning) {}

std::string StringParam::get() const { return text(); }

namespace param {
int checkLevel() {
  const char* raw = kCheck.raw();
  if (!raw) return 1;
  std::string v = raw;
  std::transform(v.begin(), v.end(), v.begin(), ::tolower);
  if (v == "0" || v == "false" || v == "no" || v == "off") return 0;
  if (v == "1" || v == "true" || v == "yes" || v == "on") return 2;
  warnOnce(kCheck.name(), raw);
  return 1;
}
}  // namespace param

}  // namespace braid
