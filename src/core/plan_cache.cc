#include "src/core/plan_cache.h"

#include <utility>

namespace braid {

size_t PlanCache::KeyHash::operator()(const Key& k) const {
  uint64_t h = k.count * 0x9E3779B97F4A7C15ull;
  h ^= (uint64_t(k.typeSize) << 40) ^ (uint64_t(uint32_t(k.root)) << 8) ^
       (uint64_t(k.coll) << 1) ^ uint64_t(k.inPlace) ^ (uint64_t(k.device) << 5) ^
       (uint64_t(k.collnet) << 6) ^ (uint64_t(k.peerAccess) << 7);
  return size_t(h ^ (h >> 29));
}

size_t PlanCache::bytesOf(const Plan& p) {
  size_t bytes = sizeof(Plan) + p.algorithm.size();
  for (const Program& prog : p.programs) bytes += sizeof(Program) + prog.steps.size() * sizeof(Step);
  return bytes;
}

std::shared_ptr<const Plan> PlanCache::find(const Key& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  if (it->second != lru_.begin()) lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->plan;
}

void PlanCache::insert(const Key& key, std::shared_ptr<const Plan> plan) {
  if (!plan) return;
  const size_t b = bytesOf(*plan);
  auto it = index_.find(key);
  if (it != index_.end()) {  // replace (not expected: callers look first)
    bytes_ -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
  }
  lru_.push_front(Entry{key, std::move(plan), b});
  index_.emplace(key, lru_.begin());
  bytes_ += b;
  // The newest stays even if alone it is above the byte bound.
  while (lru_.size() > 1 && (lru_.size() > maxEntries_ || bytes_ > maxBytes_)) {
    const Entry& old = lru_.back();
    bytes_ -= old.bytes;
    index_.erase(old.key);
    lru_.pop_back();
  }
}

void PlanCache::clear() {
  index_.clear();
  lru_.clear();
  bytes_ = 0;
}

}  // namespace braid
