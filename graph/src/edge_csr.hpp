/*
 * Edge arrays to a host CSR: the one builder behind convert_edge_list (convert.cpp) and the
 * importers (import_ondisk.cpp, import_ogb.cpp), so that symmetrize, reverse, self loops and
 * duplicates mean the same whatever the input.  Internal to graph/src.
 */
#pragma once

#include <graph/convert.hpp>
#include <graph/dataset.hpp>

#include <cstdint>
#include <vector>

namespace wholestore::graph::detail {

/// Edges as read: src[e] -> dst[e], with an optional weight each.
struct edge_arrays {
  std::vector<std::int64_t> src, dst;
  std::vector<float> weights;  ///< empty, or one per edge
};

/// Builds g.row_offsets, g.col_indices and g.edge_weights for g.num_nodes nodes from `edges`
/// (consumed: its memory is released as the CSR grows), and sets g.directed and g.direction.
/// A counting sort by row: row src[e] (row dst[e] with options.reverse) gets the other end,
/// rows keep input order; options.symmetrize adds the other direction of every edge that is
/// not a self loop, options.drop_self_loops leaves out u -> u, options.drop_duplicates sorts
/// each row by neighbor and keeps the first copy (and its weight).  Every id must be in
/// [0, g.num_nodes): the callers check it where they can name the file and the row.
void build_csr(host_csr& g, edge_arrays&& edges, const convert_options& options);

}  // namespace wholestore::graph::detail
