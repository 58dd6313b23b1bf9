// Builds a DataParallel strategy by name for the tests ("ddp", "zero1", "zero2",
// "zero3", "zero3-keep", "zero3-noprefetch"), with element-sized buckets so the toy model gets several.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "training/parallel/ddp.h"
#include "training/parallel/zero.h"

namespace braid {
namespace train {
namespace toy {

template <class T>
std::unique_ptr<DataParallel<T>> makeStrategy(const std::string& kind, ProcessGroup& pg, ParamStore<T>& store,
                                              AdamWConfig opt, int64_t firstElems = 40,
                                              int64_t capElems = 100) {
  if (kind == "ddp") {
    DdpConfig c;
    c.firstBucketElems = firstElems;
    c.bucketCapElems = capElems;
    return std::make_unique<Ddp<T>>(pg, store, opt, c);
  }
  // "zero3-keep": no reshard after forward; "zero3-noprefetch": no prefetch.
  ZeroConfig z;
  z.stage = kind == "zero1" ? 1 : kind == "zero2" ? 2 : 3;
  z.reshardAfterForward = kind != "zero3-keep";
  z.prefetch = kind != "zero3-noprefetch";
  z.firstBucketElems = firstElems;
  z.bucketCapElems = capElems;
  return std::make_unique<Zero<T>>(pg, store, opt, z);
}

/// The full flat parameter vector as this rank sees it (collective for zero3).
template <class T>
std::vector<T> fullParams(DataParallel<T>& dp, ParamStore<T>& store) {
  if (auto* z = dynamic_cast<Zero<T>*>(&dp)) {
    std::vector<T> out;
    z->fullParams(&out);
    return out;
  }
  return std::vector<T>(store.flatValues(), store.flatValues() + store.flatSize());
}

}  // namespace toy
}  // namespace train
}  // namespace braid
