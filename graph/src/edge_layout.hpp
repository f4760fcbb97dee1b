/*
 * Where the edges of a distributed csr_graph live (csr_graph.hpp): rank r's part of col_indices
 * and edge_weights holds exactly the edges of the nodes whose row_offsets entries rank r's part
 * of row_offsets holds.  make_graph and load_graph split the edge arrays with these functions;
 * edges_follow_nodes checks a graph against the same rule.  Internal to graph/src.
 *
 * Row offsets are split evenly by element (row_offsets_partition).  Rank r's part holds the
 * entries [a_r, a_{r+1}); its nodes are [min(a_r, n), min(a_{r+1}, n)) (n = num_nodes: the
 * last entry is the end sentinel, not a node), and its edges
 * [row_offsets[min(a_r, n)], row_offsets[min(a_{r+1}, n)]).  A rank without row offsets, or
 * with only the sentinel, gets no edges.
 */
#pragma once

#include <wholememory/partition.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace wholestore::graph::detail {

/// The partition of row_offsets (num_nodes + 1 int64 entries) over `ranks` ranks that
/// make_graph and load_graph create: the even split by element.
wholememory::partition row_offsets_partition(std::uint64_t num_nodes, int ranks);

/// ranks + 1 node ids from the partition of row_offsets: rank r's nodes are
/// [nodes[r], nodes[r + 1]); nodes.front() == 0, nodes.back() == num_nodes.
std::vector<std::uint64_t> first_nodes(const wholememory::partition& row_offsets_parts,
                                       std::uint64_t num_nodes);

/// The first edge of every rank's part, from offsets[i] = row_offsets[nodes[i]] (nodes from
/// first_nodes): rank r's edges are [edges[r], edges[r + 1]).  Checks the offsets before any
/// edge array is split by them: each in [0, num_edges], row_offsets[0] = 0,
/// row_offsets[num_nodes] = num_edges, never decreasing.  Throws logic_error naming `source`
/// (the dataset's file, the host graph), the position and the value (rule 6 of
/// docs/dataset-format.md) otherwise.
std::vector<std::uint64_t> first_edges(const std::string& source, std::uint64_t num_nodes,
                                       std::uint64_t num_edges,
                                       const std::vector<std::uint64_t>& nodes,
                                       const std::vector<std::int64_t>& offsets);

/// allocation_options::part_bytes of an edge array of `elem`-byte elements split at `edges`
/// (first_edges): one entry per rank, summing to num_edges * elem (zero for a graph without
/// edges; every part may be empty).
std::vector<std::size_t> edge_part_bytes(const std::vector<std::uint64_t>& edges, std::size_t elem);

}  // namespace wholestore::graph::detail
