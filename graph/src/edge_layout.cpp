// Where the edges of a distributed csr_graph live (edge_layout.hpp).
#include "edge_layout.hpp"

#include "csr_check.hpp"

#include <wholememory/error.hpp>

#include <algorithm>

namespace wholestore::graph::detail {

namespace wm = wholememory;

wm::partition row_offsets_partition(std::uint64_t num_nodes, int ranks) {
  // make_graph and load_graph: one int64 element per granule, (num_nodes + 1) * 8 bytes.
  return wm::partition::even(static_cast<std::size_t>(num_nodes + 1) * 8, ranks, 8);
}

std::vector<std::uint64_t> first_nodes(const wm::partition& row_offsets_parts,
                                       std::uint64_t num_nodes) {
  WM_EXPECTS(row_offsets_parts.total_bytes == (num_nodes + 1) * 8,
             "internal error: row_offsets has " << row_offsets_parts.total_bytes << " bytes for "
                                                << num_nodes << " nodes");
  std::vector<std::uint64_t> nodes(row_offsets_parts.offsets.size());
  for (std::size_t r = 0; r < nodes.size(); ++r) {
    const std::size_t offset = row_offsets_parts.offsets[r];
    WM_EXPECTS(offset % 8 == 0, "internal error: a part of row_offsets starts at byte "
                                    << offset << ", inside an entry");
    nodes[r] = std::min<std::uint64_t>(offset / 8, num_nodes);
  }
  return nodes;
}

std::vector<std::uint64_t> first_edges(const std::string& source, std::uint64_t num_nodes,
                                       std::uint64_t num_edges,
                                       const std::vector<std::uint64_t>& nodes,
                                       const std::vector<std::int64_t>& offsets) {
  WM_EXPECTS(nodes.size() == offsets.size() && !nodes.empty() && nodes.front() == 0 &&
                 nodes.back() == num_nodes,
             "internal error: " << offsets.size() << " row offsets for " << nodes.size()
                                << " rank boundaries");
  // The values on their own (range, the first and the last offset), as the loaders' checks
  // word them: one piece per distinct position.
  csr_checker checker(source, num_nodes, num_edges);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i == 0 || nodes[i] != nodes[i - 1]) checker.row_offsets(&offsets[i], nodes[i], 1);
  }
  checker.finish(false);
  // Then their order: a decrease between two ranks' first offsets would give a rank a negative
  // number of edges.
  std::vector<std::uint64_t> edges(offsets.size());
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    if (i > 0 && offsets[i] < offsets[i - 1]) {
      WM_FAIL(wm::logic_error, source << ": row_offsets[" << nodes[i] << "] is " << offsets[i]
                                      << ", below row_offsets[" << nodes[i - 1]
                                      << "] = " << offsets[i - 1]
                                      << " (offsets never decrease) (rule 6 of "
                                         "docs/dataset-format.md)");
    }
    edges[i] = static_cast<std::uint64_t>(offsets[i]);
  }
  return edges;
}

std::vector<std::size_t> edge_part_bytes(const std::vector<std::uint64_t>& edges,
                                         std::size_t elem) {
  std::vector<std::size_t> bytes(edges.size() - 1);
  for (std::size_t r = 0; r + 1 < edges.size(); ++r) {
    bytes[r] = static_cast<std::size_t>(edges[r + 1] - edges[r]) * elem;
  }
  return bytes;
}

}  // namespace wholestore::graph::detail
