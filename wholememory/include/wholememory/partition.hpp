/*
 * partition: how the bytes of one WholeMemory allocation are split into parts (one per rank, or
 * per GPU in single-process mode) at multiples of a granularity, so that rows never straddle
 * parts.  A plain value type; every rank computes the same one.
 */
#pragma once

#include <cstddef>
#include <vector>

namespace wholememory {

/// How the bytes of an allocation are split among its parts.
struct partition {
  std::size_t total_bytes = 0;
  std::size_t granularity = 1;
  /// offsets.size() == parts + 1; part i is [offsets[i], offsets[i+1]).
  std::vector<std::size_t> offsets;

  int num_parts() const { return static_cast<int>(offsets.size()) - 1; }
  std::size_t part_offset(int i) const { return offsets[i]; }
  std::size_t part_bytes(int i) const { return offsets[i + 1] - offsets[i]; }
  /// Part holding byte `offset` (< total_bytes); empty parts are skipped.
  int part_of(std::size_t offset) const;

  /// Even split of `total_bytes` into `parts` parts at multiples of `granularity`; the bytes
  /// past the last whole granule go to the last part.  Throws logic_error for granularity 0 or
  /// parts < 1.
  static partition even(std::size_t total_bytes, int parts, std::size_t granularity);
  /// Partition with the given part sizes; each but the last must be a multiple of
  /// `granularity`.  Throws logic_error naming the offending part otherwise.
  static partition from_sizes(const std::vector<std::size_t>& part_bytes, std::size_t granularity);
};

}  // namespace wholememory
