#include "algorithms/patterns/partition.h"

#include <algorithm>

namespace braid {
namespace patterns {

Range evenPart(uint64_t count, int parts, int i, uint64_t granule) {
  if (parts <= 0 || i < 0 || i >= parts || count == 0) return Range{count, 0};
  if (granule == 0) granule = 1;
  const uint64_t units = (count + granule - 1) / granule;
  const uint64_t per = units / uint64_t(parts);
  const uint64_t rem = units % uint64_t(parts);
  const uint64_t ui = uint64_t(i);
  const uint64_t firstUnit = ui * per + std::min(ui, rem);
  const uint64_t nUnits = per + (ui < rem ? 1 : 0);
  const uint64_t begin = std::min(count, firstUnit * granule);
  const uint64_t end = std::min(count, (firstUnit + nUnits) * granule);
  return Range{begin, end - begin};
}

uint64_t chunkElems(const PlanArgs& args, const PlanParams& params) {
  if (args.typeSize == 0) return 0;
  return params.chunkBytes / args.typeSize;
}

Range channelShare(uint64_t count, size_t typeSize, int nChannels, int c) {
  const uint64_t granule = typeSize && typeSize < 64 ? 64 / typeSize : 1;
  return evenPart(count, nChannels, c, granule);
}

}  // namespace patterns
}  // namespace braid
