#include <wholememory/error.hpp>
#include <wholememory/partition.hpp>

#include <algorithm>

namespace wholememory {

int partition::part_of(std::size_t offset) const {
  WM_EXPECTS(offset < total_bytes,
             "byte offset " << offset << " outside an allocation of " << total_bytes << " bytes");
  // The last part starting at or before `offset`; empty parts share their start with the next
  // part, so upper_bound skips them.
  auto it = std::upper_bound(offsets.begin(), offsets.end() - 1, offset);
  return static_cast<int>(it - offsets.begin()) - 1;
}

partition partition::even(std::size_t total_bytes, int parts, std::size_t granularity) {
  WM_EXPECTS(parts >= 1, "a partition needs at least one part, got " << parts);
  WM_EXPECTS(granularity >= 1, "granularity must be at least 1 byte, got " << granularity);
  partition p;
  p.total_bytes = total_bytes;
  p.granularity = granularity;
  std::size_t granules = total_bytes / granularity;
  p.offsets.resize(parts + 1);
  for (int i = 0; i < parts; ++i) {
    // Balanced split: part sizes differ by at most one granule, larger parts first.
    std::size_t base = granules / parts, extra = granules % parts;
    std::size_t first = base * i + std::min<std::size_t>(i, extra);
    p.offsets[i] = first * granularity;
  }
  p.offsets[parts] = total_bytes;  // the tail past the last whole granule goes to the last part
  return p;
}

partition partition::from_sizes(const std::vector<std::size_t>& part_bytes,
                                std::size_t granularity) {
  WM_EXPECTS(!part_bytes.empty(), "a partition needs at least one part");
  WM_EXPECTS(granularity >= 1, "granularity must be at least 1 byte, got " << granularity);
  partition p;
  p.granularity = granularity;
  p.offsets.resize(part_bytes.size() + 1, 0);
  for (std::size_t i = 0; i < part_bytes.size(); ++i) {
    WM_EXPECTS(i + 1 == part_bytes.size() || part_bytes[i] % granularity == 0,
               "part " << i << " has " << part_bytes[i]
                       << " bytes, not a multiple of the granularity " << granularity);
    p.offsets[i + 1] = p.offsets[i] + part_bytes[i];
  }
  p.total_bytes = p.offsets.back();
  return p;
}

}  // namespace wholememory
