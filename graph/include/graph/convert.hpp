/*
 * Edge-list text to a CSR graph (then write_dataset).
 *
 * Accepts whitespace- or comma-separated columns `src dst [weight]`, comment lines (starting
 * with `#` or `%`) and header lines (a first non-comment line whose first two fields are not
 * both ids, e.g. "source,target" or a lone node count), LF, CRLF and bare CR line ends.  Ids
 * may be sparse integers or any strings: they are remapped to 0..N-1 in order of first
 * appearance, unless `numeric_ids_as_is` and every id is an integer below 2^40, in which case
 * N = max id + 1.  A malformed line (one field, a bad weight, trailing garbage) throws
 * wholememory::logic_error naming the file, the line number and the line; so does a weight
 * that is NaN, infinite or negative (it would be sampled as weight zero).
 */
#pragma once

#include <graph/dataset.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace wholestore::graph {

/// How edges become rows; the same for edge lists (convert_edge_list) and for the importers of
/// graph/import.hpp.
struct convert_options {
  bool symmetrize = false;  ///< add the reverse of every edge (an undirected graph)
  bool drop_self_loops = false;
  bool drop_duplicates = false;    ///< keep one copy of each (src, dst) after symmetrizing
  bool has_weights = false;        ///< edge lists: read a third column as a float32 weight
  bool numeric_ids_as_is = false;  ///< edge lists: keep integer ids instead of remapping them
  /// Called after each chunk read with the bytes read so far.  Optional.
  std::function<void(std::uint64_t bytes_read)> progress;
  /// Store edge u -> v in row v (rows by destination: the CSC of the input, `direction: in`), so
  /// that sampling a node draws the nodes with an edge into it, as PyG and DGL aggregate.  (Last,
  /// so that positional initializers written before it keep their meaning.)
  bool reverse = false;
};

/// What the converter read, for the caller to report (a skipped header, an empty list).
struct convert_stats {
  std::uint64_t bytes = 0;        ///< bytes read from the file (or the pipe)
  std::uint64_t lines = 0;        ///< lines in the file
  std::uint64_t edges = 0;        ///< edge lines read (before self loops are dropped)
  std::uint64_t header_line = 0;  ///< the line skipped as a header (1-based; 0: none)
  std::string header_text;        ///< that line, when one was skipped
  bool byte_order_mark = false;   ///< a UTF-8 byte order mark was removed from line 1
};

/// Reads an edge list (`path`, or "-" for the standard input) and builds the CSR (neighbors of each
/// node in input order, or sorted by destination when duplicates are dropped).  node_ids holds the
/// original ids when remapped. A UTF-8 byte order mark at the start is dropped; with has_weights, a
/// weight that is NaN, infinite or negative throws naming the line.  `stats`, when given, receives
/// what was read.
host_csr convert_edge_list(const std::string& path, const convert_options& options,
                           convert_stats* stats = nullptr);

}  // namespace wholestore::graph
