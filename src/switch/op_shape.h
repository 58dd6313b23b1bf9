// OpShape: which bytes each rank sends and receives in one switch operation (wire::OpDesc),
// the geometry the client (what to send, where results land) and the switch (how long
// each stream is, where each rank's result lies) must agree on.
//
// "The result" of an op is: allreduce: count elements; allgather and reducescatter:
// the window (windowBytes bytes) of the global buffer of nranks * bytesPerRank bytes.
#pragma once
#include <cstdint>
#include <string>

#include "src/switch/wire.h"

namespace braid {

struct Span {
  uint64_t off = 0;
  uint64_t len = 0;
};

class OpShape {
 public:
  /// Checks `d` for a group of nranks (known collective and, for reductions, a
  /// datatype/op pair the switch reduces; sizes in range and aligned to elements).
  /// On failure returns false and says why.
  static bool validate(const wire::OpDesc& d, uint32_t nranks, std::string* why);

  OpShape(const wire::OpDesc& d, uint32_t nranks) : d_(d), nranks_(nranks) {}

  bool reduces() const { return d_.coll != wire::kAllGather; }
  uint64_t resultBytes() const;
  /// The part of rank r's block inside the window, relative to the window's start
  /// (empty where they do not meet). Allgather and reducescatter only.
  Span windowPart(uint32_t r) const;
  /// The bytes rank r sends: allreduce: [0, n) of its buffer; allgather: the window
  /// part of its own block, relative to that block; reducescatter: the whole window.
  Span input(uint32_t r) const;
  /// Where rank r's output lies in the result: allreduce and allgather: all of it;
  /// reducescatter: the window part of its block.
  Span output(uint32_t r) const;
  const wire::OpDesc& desc() const { return d_; }

 private:
  wire::OpDesc d_;
  uint32_t nranks_;
};

/// Human-readable "allreduce of 1000 float32 (sum)" for messages.
std::string describeOp(const wire::OpDesc& d);

}  // namespace braid
