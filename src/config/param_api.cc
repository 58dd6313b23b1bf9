// The NCCL 2.30 parameter API (ncclParamBind, ncclParamGet*, ...) over Braid's registry.
// Placeholder until the implementation lands: the calls refuse with a message.
#include "nccl.h"
#include "src/core/error.h"

using namespace braid;

namespace {
ncclResult_t notYet(const char* call) {
  return setError(ncclInvalidUsage, nullptr, "%s: the parameter API is not implemented in "
                  "Braid yet", call);
}
}  // namespace

extern "C" {

ncclResult_t ncclParamBind(ncclParamHandle_t* out, const char* key) {
  (void)out, (void)key;
  return notYet("ncclParamBind");
}
#define BRAID_PARAM_GETTER(suffix, ctype)                                  \
  ncclResult_t ncclParamGet##suffix(ncclParamHandle_t h, ctype* out) {     \
    (void)h, (void)out;                                                    \
    return notYet("ncclParamGet" #suffix);                                 \
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
  (void)h, (void)out;
  return notYet("ncclParamGetStr");
}
ncclResult_t ncclParamGet(ncclParamHandle_t h, void* out, int maxLen, int* len) {
  (void)h, (void)out, (void)maxLen, (void)len;
  return notYet("ncclParamGet");
}
ncclResult_t ncclParamGetParameter(const char* key, const char** value, int* valueLen) {
  (void)key, (void)value, (void)valueLen;
  return notYet("ncclParamGetParameter");
}
ncclResult_t ncclParamGetAllParameterKeys(const char*** table, int* tableLen) {
  (void)table, (void)tableLen;
  return notYet("ncclParamGetAllParameterKeys");
}
void ncclParamDumpAll(void) {}

}  // extern "C"
