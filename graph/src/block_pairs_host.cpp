// block_pairs_host (block_pairs.hpp): a counting sort by block, stable, one pass to count and
// check, one to place.
#include <graph/block_pairs.hpp>
#include <wholememory/error.hpp>

#include <vector>

namespace wholestore::graph {

namespace detail {

void check_block_pairs(const block_pairs_args& a, const char* who) {
  WM_EXPECTS(a.layout.partitions >= 1,
             who << ": partitions must be at least 1, got " << a.layout.partitions);
  WM_EXPECTS(static_cast<std::uint64_t>(a.layout.partitions) <= a.layout.nodes,
             who << ": " << a.layout.partitions << " partitions of " << a.layout.nodes
                 << " nodes; at most one partition per node");
  WM_EXPECTS(a.negatives_per_pair >= 0,
             who << ": negatives_per_pair must be >= 0, got " << a.negatives_per_pair);
  WM_EXPECTS(a.counts != nullptr, who << ": counts is null");
  WM_EXPECTS(a.negatives_per_pair == 0 || a.pairs == 0 || a.tables != nullptr,
             who << ": negatives need the partitions' alias tables (tables is null)");
  WM_EXPECTS(a.pairs == 0 || (a.centers && a.targets && a.out_centers && a.out_targets),
             who << ": a null pair buffer with " << a.pairs << " pairs");
}

}  // namespace detail

void block_pairs_host(const block_pairs_args& a) {
  detail::check_block_pairs(a, "block_pairs_host");
  const int parts = a.layout.partitions;
  const auto nodes = static_cast<std::int64_t>(a.layout.nodes);
  const auto per = static_cast<std::size_t>(a.negatives_per_pair) + 1;
  const std::size_t blocks = static_cast<std::size_t>(parts) * static_cast<std::size_t>(parts);
  std::vector<std::uint32_t> block(a.pairs);
  std::vector<std::uint64_t> start(blocks + 1, 0);
  for (std::size_t p = 0; p < a.pairs; ++p) {
    const std::int64_t u = a.centers[p];
    WM_EXPECTS(u >= 0 && u < nodes, "block_pairs_host: center " << u << " of pair " << p
                                                                << " is outside [0, " << nodes
                                                                << ")");
    for (std::size_t j = 0; j < per; ++j) {
      const std::int64_t t = a.targets[p * per + j];
      WM_EXPECTS(t >= 0 && t < nodes, "block_pairs_host: target "
                                          << t << " at position " << p * per + j
                                          << " is outside [0, " << nodes << ")");
    }
    block[p] = static_cast<std::uint32_t>((u % parts) * parts + a.targets[p * per] % parts);
    ++start[block[p] + 1];
  }
  for (std::size_t b = 0; b < blocks; ++b) {
    a.counts[b] = start[b + 1];
    start[b + 1] += start[b];
  }
  for (std::size_t p = 0; p < a.pairs; ++p)
    detail::write_block_pair(a, p, static_cast<std::size_t>(start[block[p]]++));
}

}  // namespace wholestore::graph
