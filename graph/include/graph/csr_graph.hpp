/*
 * A CSR graph held in WholeMemory, shared by all ranks of a communicator.
 *
 * Four arrays, each its own WholeMemory allocation of the same type x location:
 *   row_offsets   int64, num_nodes + 1
 *   col_indices   int32 or int64 (col_type), num_edges
 *   edge_weights  float32, num_edges (absent: an empty wholememory)
 *   node_features feature_type, num_nodes x feature_dim (absent: empty)
 * Parts are split by element (rows of features), so no element straddles two parts: evenly,
 * except the edges of a distributed graph.  There rank r's part of col_indices and
 * edge_weights holds exactly the edges of the nodes whose row offsets its part of row_offsets
 * holds: if that part is the entries [a, b) (an even split), the edges
 * [row_offsets[min(a, n)], row_offsets[min(b, n)]) with n = num_nodes (the last entry is the end
 * sentinel, not a node), so a rank without nodes holds no edges and a graph without edges has
 * empty edge arrays.  A sampler then reads every sampled node's row on the node's owner, with
 * one exchange per hop; the price is memory imbalance on skewed graphs (a hub's edges all sit
 * on one rank).  edges_follow_nodes() tells whether a graph has this layout.  node_features
 * stay split evenly by row.
 *
 * load_graph() reads a dataset directory (docs/dataset-format.md): every rank reads only the
 * byte ranges of the files that its own part holds, in parallel, after the manifest's sizes
 * (and, optionally, checksums) were checked.  make_graph() copies a host_csr that every rank
 * holds (tests, generated defaults).  Both are collective over the communicator, and both
 * check the CSR's structure (rule 6 of docs/dataset-format.md) on the part each rank reads or
 * copies, so no graph that breaks it reaches a sampler.
 */
#pragma once

#include <graph/dataset.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/gather.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace wholestore::graph {

struct csr_graph {
  std::uint64_t num_nodes = 0;
  std::uint64_t num_edges = 0;
  wholememory::dtype col_type = wholememory::dtype::int32;
  wholememory::dtype feature_type = wholememory::dtype::float32;
  std::uint64_t feature_dim = 0;
  bool directed = true;
  wholememory::allocation row_offsets;
  wholememory::allocation col_indices;
  wholememory::allocation edge_weights;
  wholememory::allocation node_features;

  bool has_weights() const { return static_cast<bool>(edge_weights); }
  bool has_features() const { return static_cast<bool>(node_features); }
  /// Type and location of the topology arrays (features may differ: node_features.type()).
  wholememory::memory_type type() const { return row_offsets.type(); }
  wholememory::memory_location location() const { return row_offsets.location(); }
  /// The features as a gather table (rows = nodes); requires has_features().
  wholememory::wm_tensor features_tensor() const;
};

struct load_options {
  /// Type and location of row_offsets, col_indices and edge_weights.
  wholememory::memory_type type = wholememory::memory_type::continuous;
  wholememory::memory_location location = wholememory::memory_location::host;
  /// Type and location of node_features; unset: the same as the graph's.
  std::optional<wholememory::memory_type> features_type;
  std::optional<wholememory::memory_location> features_location;
  /// Communicator of node_features; unset: the graph's.  Over the same ranks or more (every
  /// rank of it calls), e.g. the graph replicated per host over a host's communicator and the
  /// features distributed over every rank of the job (the seed's multi-node layout).
  std::shared_ptr<wholememory::communicator> features_comm;
  bool load_weights = true;       ///< when the dataset has them
  bool load_features = true;      ///< when the dataset has them
  bool verify_checksums = false;  ///< whole-file checksums before loading (reads every file)
  /// Reader threads per rank (0: min(4, hardware threads)); each reads chunk_bytes at a time.
  unsigned threads = 0;
  std::size_t chunk_bytes = std::size_t{16} << 20;
  /// Called on every rank now and then with (bytes this rank has read, bytes it will read).
  std::function<void(std::uint64_t, std::uint64_t)> progress;
};

struct load_stats {
  double seconds = 0;  ///< wall time of the collective load, max over ranks
  /// CPU time of the structural checks (rule 6), summed over a rank's reader threads, max
  /// over ranks; part of `seconds` only as far as the threads were not waiting for the disk.
  double validate_seconds = 0;
  std::uint64_t local_bytes = 0;  ///< bytes this rank read from files
  std::uint64_t total_bytes = 0;  ///< bytes all ranks read together
  double gbps() const { return seconds > 0 ? total_bytes / seconds / 1e9 : 0.0; }
};

/// Loads a dataset directory into WholeMemory; collective.  Throws logic_error naming the file
/// for a missing, truncated or mismatched array, and, on every rank, naming the dataset, the
/// array, the first bad position and value for a CSR that breaks rule 6 of
/// docs/dataset-format.md (each rank checks the chunks it reads, as it reads them).  For a
/// distributed graph every rank first reads and checks the row offsets where the ranks' parts
/// start (they split the edges); broken ones throw naming the file before anything is allocated.
csr_graph load_graph(std::shared_ptr<wholememory::communicator> comm, const std::string& dir,
                     const load_options& options, load_stats* stats = nullptr);

/// Copies a host graph (identical on every rank) into WholeMemory; collective.  Each rank checks
/// the part it copies; a CSR that breaks rule 6 of docs/dataset-format.md throws logic_error on
/// every rank naming the array, the first bad position and value.
csr_graph make_graph(std::shared_ptr<wholememory::communicator> comm, const host_csr& graph,
                     wholememory::memory_type type, wholememory::memory_location location,
                     wholememory::dtype feature_type = wholememory::dtype::float32);

/// make_graph with the placement of load_options (type, location, features_type,
/// features_location, load_weights, load_features); the loader's other fields are ignored.
csr_graph make_graph(std::shared_ptr<wholememory::communicator> comm, const host_csr& graph,
                     const load_options& placement,
                     wholememory::dtype feature_type = wholememory::dtype::float32);

/// Whether `g` is distributed and each rank's part of col_indices and edge_weights (when present)
/// holds exactly the edges of the nodes whose row offsets its part of row_offsets holds (see
/// the file comment; make_graph and load_graph lay out every distributed graph so).  Collective
/// over the graph's communicator for a distributed graph (one allgather of 8 bytes; every rank
/// gets the same answer); false at once, without communication, for the other types.  A graph
/// of another layout gives false, not an error: it throws only what the allgather throws (a
/// peer that died or timed out).  Synchronous.
bool edges_follow_nodes(const csr_graph& g);

}  // namespace wholestore::graph
