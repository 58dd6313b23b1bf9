// PlanCache: a communicator's built plans by what they depend on (count, type size,
// root, collective, in place, device, CollNet), bounded by entries and by bytes. When
// full, the least recently used plans go first, so the plans a training loop runs every
// step stay while a sweep over many sizes passes through.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <unordered_map>

#include "algorithms/plan.h"

namespace braid {

class PlanCache {
 public:
  /// What a cached plan depends on besides the communicator (p2p plans are not cached).
  struct Key {
    uint64_t count;
    uint32_t typeSize;
    int32_t root;
    uint8_t coll;
    bool inPlace;
    bool device;   ///< a plan for the CUDA executor (its own channel count)
    bool collnet;  ///< CollNet algorithms allowed (the collnet takes the type and op)
    bool peerAccess = false;  ///< direct-access algorithms allowed (PlanArgs::peerAccess)
    bool operator==(const Key& o) const {
      return count == o.count && typeSize == o.typeSize && root == o.root && coll == o.coll &&
             inPlace == o.inPlace && device == o.device && collnet == o.collnet &&
             peerAccess == o.peerAccess;
    }
  };
  static constexpr size_t kMaxEntries = 4096;
  static constexpr size_t kMaxBytes = size_t(1) << 20;

  explicit PlanCache(size_t maxEntries = kMaxEntries, size_t maxBytes = kMaxBytes)
      : maxEntries_(maxEntries), maxBytes_(maxBytes) {}

  /// The plan for `key` (now the most recently used), or null.
  std::shared_ptr<const Plan> find(const Key& key);
  /// Keeps `plan` for `key`, dropping the least recently used plans while the cache
  /// holds more than its entries or bytes allow.
  void insert(const Key& key, std::shared_ptr<const Plan> plan);
  void clear();
  size_t size() const { return index_.size(); }
  /// Bytes of the cached plans (about: their steps and headers).
  size_t bytes() const { return bytes_; }
  /// What a plan costs the cache.
  static size_t bytesOf(const Plan& p);

 private:
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Entry {
    Key key;
    std::shared_ptr<const Plan> plan;
    size_t bytes;
  };
  std::list<Entry> lru_;  ///< most recently used first
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_;
  size_t bytes_ = 0;
  size_t maxEntries_, maxBytes_;
};

}  // namespace braid
