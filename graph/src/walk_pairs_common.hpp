// Shared by the CPU and GPU paths of walk_pairs.hpp: argument checks and the slot table.
#pragma once

#include <graph/walk_pairs.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace wholestore::graph::detail {

inline void check_window_pairs(const window_pairs_args& a, const char* who) {
  WM_EXPECTS(a.walk_length >= 1, who << ": walk_length must be at least 1, got " << a.walk_length);
  WM_EXPECTS(a.window >= 1, who << ": window must be at least 1, got " << a.window);
  WM_EXPECTS(a.negatives_per_pair >= 0,
             who << ": negatives_per_pair must be >= 0, got " << a.negatives_per_pair);
  WM_EXPECTS(a.lo <= a.hi, who << ": slot range [" << a.lo << ", " << a.hi << ") is reversed");
  if (a.lo == a.hi) return;
  const std::uint64_t s = window_slots(a.walk_length, a.window);
  WM_EXPECTS(a.lo / s >= a.first_walk && (a.hi - 1) / s < a.first_walk + a.walk_count,
             who << ": walks " << a.first_walk << " .. " << a.first_walk + a.walk_count
                 << " do not cover slots [" << a.lo << ", " << a.hi << ") (walks " << a.lo / s
                 << " .. " << (a.hi - 1) / s << ")");
  WM_EXPECTS(a.walks && a.centers && a.targets && (a.negatives || a.negatives_per_pair == 0),
             who << ": walks, centers, targets and negatives must be set");
}

/// (i, j) of every slot of a walk, in slot order.
inline std::vector<std::int32_t> slot_table(int walk_length, int window) {
  std::vector<std::int32_t> t;
  for (int i = 0; i <= walk_length; ++i)
    for (int j = std::max(0, i - window); j <= std::min(walk_length, i + window); ++j)
      if (j != i) {
        t.push_back(i);
        t.push_back(j);
      }
  return t;
}

}  // namespace wholestore::graph::detail
