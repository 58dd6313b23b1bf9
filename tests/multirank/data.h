// Typed test data for the multi-rank suites: every NCCL datatype encoded and decoded
// through double (exact for the small values the suites use), and element checks that
// report the first mismatches instead of flooding the log.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nccl.h"

namespace mr {

/// Bytes per element; 0 for an invalid type.
size_t typeSize(ncclDataType_t t);
const char* typeName(ncclDataType_t t);
bool isUnsigned(ncclDataType_t t);
bool isFloat(ncclDataType_t t);
/// The 12 types of NCCL 2.28.
const std::vector<ncclDataType_t>& allTypes();

/// Stores v (must be exactly representable) as element i of a buffer of type t.
void store(ncclDataType_t t, void* buf, size_t i, double v);
/// Reads element i of a buffer of type t.
double load(ncclDataType_t t, const void* buf, size_t i);

/// A byte buffer sized for count elements of t, with guard bytes to catch overruns.
class TypedBuffer {
 public:
  TypedBuffer(ncclDataType_t t, size_t count);
  void* data() { return bytes_.data() + kGuard; }
  void* at(size_t elem) { return bytes_.data() + kGuard + elem * typeSize(type_); }
  size_t count() const { return count_; }
  void set(size_t i, double v) { store(type_, data(), i, v); }
  double get(size_t i) const { return load(type_, bytes_.data() + kGuard, i); }
  void fill(double v);
  /// The guard bytes around the data are untouched.
  ::testing::AssertionResult guardsIntact() const;

 private:
  static constexpr size_t kGuard = 64;
  static constexpr unsigned char kPattern = 0xA5;
  ncclDataType_t type_;
  size_t count_;
  std::vector<unsigned char> bytes_;
};

/// Compares got[i] == want(i) for i in [0, n); names the first few mismatches.
template <class Fn>
::testing::AssertionResult checkElements(const char* what, size_t n, Fn&& gotWant) {
  size_t bad = 0;
  std::string first;
  for (size_t i = 0; i < n; ++i) {
    double got = 0, want = 0;
    gotWant(i, &got, &want);
    if (got == want) continue;
    if (bad < 5)
      first += "\n  [" + std::to_string(i) + "] got " + std::to_string(got) + " want " +
               std::to_string(want);
    ++bad;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": " << bad << " of " << n << " elements wrong" << first;
}

}  // namespace mr
