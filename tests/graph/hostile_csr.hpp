/*
 * The corrupt values the hostile-graph tests write into a loaded CSR (CPU sampler in
 * csr_validation_test.cpp, GPU sampler and walker in gpu/hostile_memory_gpu_test.cpp): each
 * breaks one of the CSR's rules that the samplers and walkers check on every read.
 */
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace wholestore_test {

struct csr_corruption {
  const char* array;       ///< "row_offsets" or "col_indices"
  std::uint64_t position;  ///< element of that array
  std::int64_t value;      ///< what is written there
};

/// For a graph of more than 500 nodes and 4000 edges; `last_row` is the row offset (of the last
/// row's start or end) that is sent past the edges.
inline std::vector<csr_corruption> csr_corruptions(std::uint64_t last_row) {
  return {
      {"row_offsets", 500, 3},                      // decreasing: a negative degree
      {"row_offsets", 500, std::int64_t{1} << 40},  // far past the edges
      {"row_offsets", 500, -(std::int64_t{1} << 40)},
      {"row_offsets", last_row, 20000},  // the last row runs past the edges
      {"col_indices", 4000, std::numeric_limits<std::int32_t>::max()},
      {"col_indices", 4000, -1},
  };
}

}  // namespace wholestore_test
