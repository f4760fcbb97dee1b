/*
 * Edge-list text to a CSR graph (then write_dataset).
 *
 * Accepts whitespace- or comma-separated columns `src dst [weight]`, comment lines (starting
 * with `#` or `%`) and header lines (a first non-comment line whose first two fields are not
 * both ids, e.g. "source,target" or a lone node count), LF, CRLF and bare CR line ends.  Ids
 * may be sparse integers or any strings: they are remapped to 0..N-1 in order of first
 * appearance, unless `numeric_ids_as_is` and every id is an integer below 2^40, in which case
 * N = max id + 1.  A malformed line (one field, a bad weight, trailing garbage) throws
 * wholememory::logic_error naming the file, the line number and the line.
 */
#pragma once

#include <graph/dataset.hpp>

#include <string>

namespace wholestore::graph {

struct convert_options {
  bool symmetrize = false;  ///< add the reverse of every edge (an undirected graph)
  bool drop_self_loops = false;
  bool drop_duplicates = false;    ///< keep one copy of each (src, dst) after symmetrizing
  bool has_weights = false;        ///< read a third column as a float32 weight
  bool numeric_ids_as_is = false;  ///< keep integer ids instead of remapping them
};

/// Reads an edge list and builds the CSR (neighbors of each node in input order, or sorted by
/// destination when duplicates are dropped).  node_ids holds the original ids when remapped.
host_csr convert_edge_list(const std::string& path, const convert_options& options);

}  // namespace wholestore::graph
