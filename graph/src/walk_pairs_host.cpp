// window_pairs_host (walk_pairs.hpp): one pass over the slots in order.
#include "walk_pairs_common.hpp"

#include <graph/walk_pairs.hpp>

namespace wholestore::graph {

std::uint64_t window_slots(int walk_length, int window) {
  WM_EXPECTS(walk_length >= 1 && window >= 1,
             "window_slots: walk_length and window must be at "
             "least 1, got "
                 << walk_length << " and " << window);
  std::uint64_t s = 0;
  for (int i = 0; i <= walk_length; ++i)
    s += static_cast<std::uint64_t>(std::min(walk_length, i + window) - std::max(0, i - window));
  return s;
}

std::size_t window_pairs_host(const window_pairs_args& a) {
  detail::check_window_pairs(a, "window_pairs_host");
  const std::uint64_t slots = window_slots(a.walk_length, a.window);
  const std::vector<std::int32_t> table = detail::slot_table(a.walk_length, a.window);
  const std::size_t row = static_cast<std::size_t>(a.walk_length) + 1;
  const auto k = static_cast<std::size_t>(a.negatives_per_pair);
  std::size_t n = 0;
  for (std::uint64_t s = a.lo; s < a.hi; ++s) {
    const std::int64_t* walk = a.walks + (s / slots - a.first_walk) * row;
    const std::size_t slot = static_cast<std::size_t>(s % slots);
    const std::int64_t c = walk[table[2 * slot]], t = walk[table[2 * slot + 1]];
    if (c < 0 || t < 0) continue;
    a.centers[n] = c;
    std::int64_t* out = a.targets + n * (k + 1);
    out[0] = t;
    const std::int64_t* neg = a.negatives + (s - a.lo) * k;
    for (std::size_t q = 0; q < k; ++q) out[1 + q] = neg[q];
    ++n;
  }
  return n;
}

}  // namespace wholestore::graph
