/*
 * Labelled datasets from other tools' files to a host CSR (then write_dataset): an on-disk
 * description of NumPy arrays and csv files (import_ondisk) and OGB's raw node-property layout
 * (import_ogb).  docs/dataset-format.md, "Importing labelled datasets", is the reference.
 *
 * Both read every input whole before returning, so a failure leaves nothing behind (and
 * write_dataset swaps a complete dataset in).  Ids are used as they are: node v of the input is
 * node v of the dataset, the row of its features, its label and its split.  Labels are
 * int32 with `unlabelled` (-1) for nodes without a class; the train, valid and test node sets
 * become node_split (split_none for nodes in none of them), and every node in a split must have
 * a label.  convert_options says how edges become rows (symmetrize, reverse, self loops,
 * duplicates; has_weights and numeric_ids_as_is are for edge-list text only and must be off).
 *
 * Errors throw wholememory::logic_error with one message naming the file, the row (0-based
 * element of a .npy array) or line (1-based, csv) and the value: ids outside [0, num_nodes),
 * shapes and counts that do not fit (labels, features or a mask not num_nodes long, weights not
 * one per edge), a node listed twice in a split or in two splits, an unlabelled node in a split,
 * a weight that is negative or not finite, a .npy file with a bad magic, an unsupported dtype,
 * Fortran order or a size that differs from its header, gzip input in a build without zlib.
 * Files that cannot be opened throw wholememory::system_error naming them.  Host only; nothing
 * is collective.
 */
#pragma once

#include <graph/convert.hpp>
#include <graph/dataset.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace wholestore::graph {

/// Where an on-disk dataset's arrays are: what a `format: wholestore-ondisk 1` description
/// names (the program parses the YAML; paths here are as the process opens them).
struct ondisk_source {
  /// Required: .npy int32/int64 of shape [2, E] (row 0 sources; a [2, 2] array is read this
  /// way) or [E, 2], or any other name: a csv text file of `src,dst` lines (commas or blanks,
  /// an optional header line, `#` comments, gzip-compressed or not).
  std::string edges;
  std::string edge_weights;   ///< optional .npy float32/float16 [E], finite and >= 0
  std::string node_features;  ///< optional .npy float32/float16 [N, F]
  std::string labels;         ///< optional .npy int32/int64/uint8 [N]; -1: unlabelled
  /// Optional split files: .npy int32/int64/uint8 node ids [k], or bool masks [N].  Any of
  /// them needs `labels`.
  std::string train, valid, test;
  /// Nodes; when absent, the rows of node_features or labels (whichever is given; they must
  /// agree), else the largest id in the edges + 1.
  std::optional<std::uint64_t> num_nodes;
  /// Classes; when absent, the largest label + 1.  Every label must be below it.
  std::optional<std::uint32_t> num_classes;
  /// false: each edge stands for both directions (the same as symmetrize).
  bool directed = true;
  bool symmetrize = false;  ///< added to convert_options::symmetrize
  bool reverse = false;     ///< added to convert_options::reverse
};

/// Reads the arrays `source` names and builds the graph (see the top of this header).  `stats`,
/// when given, receives the bytes read over all files, the edges read and, for csv edges, the
/// header line skipped.  options.progress, when set, is called with the bytes read so far.
host_csr import_ondisk(const ondisk_source& source, const convert_options& options,
                       convert_stats* stats = nullptr);

/// Reads OGB's raw node-property-prediction layout in `dir`: raw/edge.csv, raw/num-node-list.csv
/// (one line, N), optional raw/node-feat.csv (N lines of F floats), raw/node-label.csv (N lines
/// of one class each; empty or nan: unlabelled), and split/<split>/train.csv, valid.csv,
/// test.csv (node ids, one per line); each name also as .csv.gz (the plain .csv is taken when
/// both exist), no header lines.  `split` names the directory under split/; empty: the only one
/// there (several: an error listing them; none: no splits).  raw/num-edge-list.csv, when
/// present, must match the edges read.  OGB's add_inverse_edge is options.symmetrize.
host_csr import_ogb(const std::string& dir, const convert_options& options,
                    const std::string& split = "", convert_stats* stats = nullptr);

/// Whether this build reads gzip-compressed inputs (zlib was found when it was configured);
/// without it a compressed file is refused by name.  Uncompressed files are always read.
bool gzip_supported();

}  // namespace wholestore::graph
