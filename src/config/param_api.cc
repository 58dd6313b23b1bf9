// The NCCL 2.30 parameter API (ncclParamBind, ncclParamGet*, ...) over Braid's one
// registry of environment variables (params.h).
//
// As in NCCL 2.30: a key is a variable's full name ("NCCL_BUFFSIZE"); Braid also takes
// it without its prefix ("BUFFSIZE": NCCL_ first, then BRAID_). A handle is the
// registry's entry (never freed). A value is the environment's, else the default, read
// at each call. Every failure is ncclInvalidArgument: NULL arguments, an unknown key, a
// getter of the wrong kind, a value that does not fit, a buffer too small (*len = 0).
// Strings returned live in thread-local storage until the same call on the same thread.
//
// Braid's registry has three kinds, where NCCL has a C type per parameter:
//   integer parameters  hold an int64_t: ncclParamGet copies 8 bytes; every integer
//                       getter succeeds when the value fits its type (NCCL's type-exact
//                       rule would leave only ncclParamGetI64 usable);
//   boolean parameters  hold a bool: ncclParamGet copies 1 byte; integer getters read
//                       0 or 1; text is TRUE or FALSE (NCCL's spelling);
//   string parameters   ncclParamGetStr and ncclParamGet (the text and its NUL).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "nccl.h"
#include "src/config/log.h"
#include "src/config/params.h"
#include "src/config/error.h"

using namespace braid;

namespace {

const ParamBase* findParam(const char* key) {
  const std::vector<const ParamBase*> all = ParamBase::all();
  auto byName = [&](const std::string& name) -> const ParamBase* {
    for (const ParamBase* p : all)
      if (name == p->name()) return p;
    return nullptr;
  };
  if (const ParamBase* p = byName(key)) return p;
  for (const char* prefix : {"NCCL_", "BRAID_"})
    if (const ParamBase* p = byName(std::string(prefix) + key)) return p;
  return nullptr;
}

/// The registry entry behind a handle, or null (with the message) if it is not one.
const ParamBase* fromHandle(ncclParamHandle_t h, const char* call) {
  if (h == nullptr) {
    setError(ncclInvalidArgument, nullptr, "%s: handle is NULL", call);
    return nullptr;
  }
  const auto* want = reinterpret_cast<const ParamBase*>(h);
  for (const ParamBase* p : ParamBase::all())
    if (p == want) return p;
  setError(ncclInvalidArgument, nullptr, "%s: %p is not a handle from ncclParamBind", call,
           static_cast<void*>(h));
  return nullptr;
}

const char* typeName(ParamType t) {
  return t == ParamType::kInt ? "integer" : t == ParamType::kBool ? "boolean" : "string";
}

/// The current value as NCCL prints it: decimal, TRUE/FALSE, or the text.
std::string valueText(const ParamBase& p) {
  switch (p.type()) {
    case ParamType::kInt:
      return std::to_string(static_cast<const IntParam&>(p).get());
    case ParamType::kBool:
      return static_cast<const BoolParam&>(p).get() ? "TRUE" : "FALSE";
    case ParamType::kString:
      break;
  }
  return static_cast<const StringParam&>(p).get();
}

template <class T>
ncclResult_t getInteger(ncclParamHandle_t h, T* out, const char* call, const char* ctype) {
  const ParamBase* p = fromHandle(h, call);
  if (p == nullptr) return ncclInvalidArgument;
  if (out == nullptr) return setError(ncclInvalidArgument, nullptr, "%s: out is NULL", call);
  int64_t v;
  if (p->type() == ParamType::kInt) {
    v = static_cast<const IntParam*>(p)->get();
  } else if (p->type() == ParamType::kBool) {
    v = static_cast<const BoolParam*>(p)->get() ? 1 : 0;
  } else {
    return setError(ncclInvalidArgument, nullptr, "%s: %s is a string parameter; read it with "
                    "ncclParamGetStr", call, p->name());
  }
  // Compare in the wider of the two types, by sign: every value either fits or not.
  const bool fits =
      std::numeric_limits<T>::is_signed
          ? v >= int64_t(std::numeric_limits<T>::min()) && v <= int64_t(std::numeric_limits<T>::max())
          : v >= 0 && uint64_t(v) <= uint64_t(std::numeric_limits<T>::max());
  if (!fits)
    return setError(ncclInvalidArgument, nullptr, "%s: %s=%lld does not fit in %s", call,
                    p->name(), static_cast<long long>(v), ctype);
  *out = T(v);
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  const char* call = "ncclParamBind";
  if (out == nullptr || key == nullptr)
    return setError(ncclInvalidArgument, nullptr, "%s: %s is NULL", call,
                    out == nullptr ? "out" : "key");
  const ParamBase* p = findParam(key);
  if (p == nullptr) {
    BRAID_INFO(kLogEnv, "PARAM: key \"%s\" not found in registry", key);
    return setError(ncclInvalidArgument, nullptr, "%s: no parameter \"%s\" (braid-info lists "
                    "them)", call, key);
  }
  *out = reinterpret_cast<ncclParamHandle_t>(const_cast<ParamBase*>(p));
  return ncclSuccess;
}

#define BRAID_PARAM_GETTER(suffix, ctype)                                  \
  ncclResult_t ncclParamGet##suffix(ncclParamHandle_t h, ctype* out) {     \
    return getInteger(h, out, "ncclParamGet" #suffix, #ctype);             \
  }
BRAID_PARAM_GETTER(I8, int8_t)
BRAID_PARAM_GETTER(I16, int16_t)
BRAID_PARAM_GETTER(I32, int32_t)
BRAID_PARAM_GETTER(I64, int64_t)
BRAID_PARAM_GETTER(U8, uint8_t)
BRAID_PARAM_GETTER(U16, uint16_t)
BRAID_PARAM_GETTER(U32, uint32_t)
BRAID_PARAM_GETTER(U64, uint64_t)
#undef BRAID_PARAM_GETTER

ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char** out) {
  const char* call = "ncclParamGetStr";
  const ParamBase* p = fromHandle(h, call);
  if (p == nullptr) return ncclInvalidArgument;
  if (out == nullptr) return setError(ncclInvalidArgument, nullptr, "%s: out is NULL", call);
  if (p->type() != ParamType::kString)
    return setError(ncclInvalidArgument, nullptr, "%s: %s is an %s parameter; read it with "
                    "an integer getter or ncclParamGetParameter", call, p->name(),
                    typeName(p->type()));
  static thread_local std::string text;
  text = static_cast<const StringParam*>(p)->get();
  *out = text.c_str();
  return ncclSuccess;
}

ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  const char* call = "ncclParamGet";
  const ParamBase* p = fromHandle(h, call);
  if (p == nullptr) return ncclInvalidArgument;
  if (out == nullptr || len == nullptr || maxLen <= 0)
    return setError(ncclInvalidArgument, nullptr, "%s: need out and len non-NULL and maxLen > "
                    "0 (out %p, len %p, maxLen %d)", call, out, static_cast<void*>(len), maxLen);
  // The value's bytes: int64_t, bool, or the text with its NUL.
  std::string bytes;
  if (p->type() == ParamType::kInt) {
    const int64_t v = static_cast<const IntParam*>(p)->get();
    bytes.assign(reinterpret_cast<const char*>(&v), sizeof(v));
  } else if (p->type() == ParamType::kBool) {
    const bool v = static_cast<const BoolParam*>(p)->get();
    bytes.assign(reinterpret_cast<const char*>(&v), sizeof(v));
  } else {
    bytes = static_cast<const StringParam*>(p)->get();
    bytes.push_back('\0');
  }
  if (bytes.size() > size_t(maxLen)) {
    *len = 0;
    return setError(ncclInvalidArgument, nullptr, "%s: %s needs %zu bytes but maxLen is %d",
                    call, p->name(), bytes.size(), maxLen);
  }
  memcpy(out, bytes.data(), bytes.size());
  *len = int(bytes.size());
  return ncclSuccess;
}

ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  const char* call = "ncclParamGetParameter";
  if (key == nullptr || value == nullptr || valueLen == nullptr)
    return setError(ncclInvalidArgument, nullptr, "%s: key, value and valueLen must not be "
                    "NULL", call);
  const ParamBase* p = findParam(key);
  if (p == nullptr) {
    *value = nullptr;
    *valueLen = 0;
    BRAID_INFO(kLogEnv, "PARAM: key \"%s\" not found in registry", key);
    return setError(ncclInvalidArgument, nullptr, "%s: no parameter \"%s\" (braid-info lists "
                    "them)", call, key);
  }
  static thread_local std::string text;
  text = valueText(*p);
  *value = text.c_str();
  *valueLen = int(text.size());
  return ncclSuccess;
}

ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  if (table == nullptr || tableLen == nullptr)
    return setError(ncclInvalidArgument, nullptr, "ncclParamGetAllParameterKeys: table and "
                    "tableLen must not be NULL");
  // Every Braid parameter is documented (docs/environment.md), so all are listed. The
  // names are string literals: the table only has to outlive the next call.
  static thread_local std::vector<const char*> keys;
  keys.clear();
  for (const ParamBase* p : ParamBase::all()) keys.push_back(p->name());
  *table = keys.data();
  *tableLen = int(keys.size());
  return ncclSuccess;
}

void ncclParamDumpAll(void) {
  // As NCCL: to stdout, one entry per parameter.
  printf("=== ncclParam Registry Dump ===\n");
  for (const ParamBase* p : ParamBase::all()) {
    const std::string value = valueText(*p);
    printf("%s (%s) %s\n    Current value=%s set_by=%s default=%s\n", p->name(),
           typeName(p->type()), p->meaning(), value.empty() ? "<unset>" : value.c_str(),
           p->raw() ? "env" : "default",
           p->defaultValue().empty() ? "<unset>" : p->defaultValue().c_str());
  }
  fflush(stdout);
}

}  // extern "C"
