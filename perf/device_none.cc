// The perf suite built without the CUDA runtime (see device.h): no device buffers.
#include "perf/device.h"

namespace braid_perf {
namespace {

bool notBuilt(std::string* error) {
  *error = "this perf binary was built without CUDA (configure with the CUDA toolkit present)";
  return false;
}

}  // namespace

bool deviceBuilt() { return false; }

int deviceCount(std::string* why) {
  notBuilt(why);
  return 0;
}

bool deviceSet(int /*dev*/, std::string* error) { return notBuilt(error); }

void* deviceAlloc(size_t /*bytes*/, std::string* error) {
  notBuilt(error);
  return nullptr;
}

void deviceFree(void* /*p*/) {}

cudaStream_t streamCreate(std::string* error) {
  notBuilt(error);
  return nullptr;
}

void streamDestroy(cudaStream_t /*s*/) {}

bool streamSync(cudaStream_t /*s*/, std::string* error) { return notBuilt(error); }

bool copyToDevice(void* /*dst*/, const void* /*src*/, size_t /*bytes*/, cudaStream_t /*s*/,
                  std::string* error) {
  return notBuilt(error);
}

bool copyToHost(void* /*dst*/, const void* /*src*/, size_t /*bytes*/, cudaStream_t /*s*/,
                std::string* error) {
  return notBuilt(error);
}

}  // namespace braid_perf
