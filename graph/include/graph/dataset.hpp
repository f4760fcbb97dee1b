/*
 * Graph datasets on disk: a directory with a manifest and raw little-endian arrays.
 *
 *   <dir>/manifest.yaml     format version, counts, dtypes, file names, sizes, checksums
 *   <dir>/row_offsets.bin   int64, num_nodes + 1 entries (CSR by source node)
 *   <dir>/col_indices.bin   int32 when num_nodes < 2^31, else int64; num_edges entries
 *   <dir>/edge_weights.bin  optional, float32, num_edges entries
 *   <dir>/node_features.bin optional, float32/float16/bfloat16, num_nodes x feature_dim
 *   <dir>/node_labels.bin   optional, int32 class per node (-1: unlabelled), with
 *   <dir>/node_split.bin    uint8 per node: 0 train, 1 validation, 2 test, 3 none
 *   <dir>/node_ids.txt      optional, original id of every node (written by the converter)
 *
 * Rows are by source node (`direction: out`, the default) or, for a dataset converted with
 * `reverse`, by destination node (`direction: in`: row v holds the nodes with an edge into v,
 * i.e. the CSC of the input), so that samplers gather in-neighbors as PyG and DGL aggregate.
 *
 * The manifest is a flat YAML mapping (one `key: value` per line) that this library writes and
 * reads itself, so no YAML dependency sits below apps/.  docs/dataset-format.md is the
 * reference.  Every reader validates sizes and checksums before any use and throws
 * wholememory::logic_error naming the file and what is wrong.
 */
#pragma once

#include <wholememory/dtype.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wholestore::graph {

/// Version written into, and required from, manifests.
constexpr int dataset_format_version = 1;

/// Which edges row v of a dataset holds: v's out-neighbors (the input's edges u -> v stored
/// by source) or v's in-neighbors (stored by destination; `convert` with `reverse`).
enum class edge_direction : std::uint8_t { out, in };

/// "out" or "in", as the manifest writes it.
const char* edge_direction_name(edge_direction d);

/// node_labels value of a node without a class.
constexpr std::int32_t unlabelled = -1;
/// node_split values: a node is in one of the three splits or in none.
constexpr std::uint8_t split_train = 0, split_valid = 1, split_test = 2, split_none = 3;

/// One array file of a dataset.
struct array_file {
  std::string name;            ///< file name inside the dataset directory
  wholememory::dtype type;     ///< element type
  std::uint64_t count = 0;     ///< elements
  std::uint64_t bytes = 0;     ///< file size, count * dtype_size(type)
  std::uint64_t checksum = 0;  ///< FNV-1a 64 of the file's bytes
};

/// What manifest.yaml says.
struct manifest {
  int format_version = dataset_format_version;
  std::uint64_t num_nodes = 0;
  std::uint64_t num_edges = 0;
  bool directed = true;  ///< false when the converter symmetrized the edges
  /// `direction:` in the manifest; datasets written before the key existed are `out`.
  edge_direction direction = edge_direction::out;
  array_file row_offsets;
  array_file col_indices;
  std::optional<array_file> edge_weights;
  std::optional<array_file> node_features;
  std::uint64_t feature_dim = 0;  ///< columns of node_features (0 when absent)
  std::string node_ids_file;      ///< empty when ids were not remapped
  /// node_ids_file's size and FNV-1a 64 checksum; datasets written before these keys existed
  /// lack them (then the file's lines are counted only when the ids are read).
  std::optional<std::uint64_t> node_ids_bytes, node_ids_checksum;
  /// Node classification data (optional, together): labels int32 in [0, num_classes) or
  /// `unlabelled`, split uint8 (split_train, split_valid, split_test, split_none), num_nodes
  /// each.
  std::optional<array_file> node_labels, node_split;
  std::uint32_t num_classes = 0;  ///< 0 when there are no labels
};

/// A whole CSR graph in host memory, as the converter and generator produce it.
struct host_csr {
  std::uint64_t num_nodes = 0;
  std::vector<std::int64_t> row_offsets;  ///< num_nodes + 1
  std::vector<std::int64_t> col_indices;  ///< num_edges (narrowed to int32 on disk if it fits)
  std::vector<float> edge_weights;        ///< empty or num_edges
  std::vector<float> node_features;       ///< empty or num_nodes * feature_dim (float32)
  std::uint64_t feature_dim = 0;
  bool directed = true;
  edge_direction direction = edge_direction::out;  ///< rows by source (out) or destination (in)
  std::vector<std::string> node_ids;               ///< empty, or the original id of every node
  /// Node classification (generate_sbm, import_ondisk, import_ogb): empty, or num_nodes each;
  /// labels in [0, num_classes) or `unlabelled`, split split_train / split_valid / split_test
  /// / split_none; a node in one of the three splits has a label.
  std::vector<std::int32_t> node_labels;
  std::vector<std::uint8_t> node_split;
  std::uint32_t num_classes = 0;
  std::uint64_t num_edges() const { return col_indices.size(); }
};

/// Writes `graph` as a dataset into `dir`.  Validates the CSR first (rule 6 of
/// docs/dataset-format.md).  features_type picks the on-disk feature dtype (float32, float16
/// or bfloat16).  Returns the manifest written.
///
/// The dataset is built in a temporary directory beside `dir` and swapped in whole (rename,
/// or an atomic exchange when `dir` exists), so `dir` always holds the previous dataset or the
/// new one, complete, whenever the write fails or the process dies; a failed write removes
/// its temporary directory, and the next write removes those of writers that died.  An
/// existing `dir` is replaced when it is empty or holds only dataset files; any other
/// directory (other files in it, or not a directory at all) is refused with logic_error
/// unless `overwrite` is set (a directory; never a plain file or a symbolic link).
manifest write_dataset(const std::string& dir, const host_csr& graph,
                       wholememory::dtype features_type = wholememory::dtype::float32,
                       bool overwrite = false);

/// The checks write_dataset makes before it writes anything, for callers that want them before
/// a long computation (gen, convert): features_type is a float type, `dir` is not empty and may
/// be replaced (as write_dataset says), and the nearest existing ancestor of `dir` is a
/// directory this process can write in.  Throws logic_error (system_error when `dir` cannot be
/// examined) naming the path and the reason.  The result can change before the write (another
/// process); write_dataset checks again.
void check_dataset_destination(const std::string& dir,
                               wholememory::dtype features_type = wholememory::dtype::float32,
                               bool overwrite = false);

/// Reads and checks `dir`/manifest.yaml: format version, required keys, counts consistent with
/// each other and with every file's size on disk.  Does not read the arrays.
manifest read_manifest(const std::string& dir);

/// Verifies every array file's checksum against the manifest, then verify_node_ids; throws
/// naming the first file that differs.
void verify_checksums(const std::string& dir, const manifest& m);

/// node_ids_file against the manifest's node_ids_checksum, and one line per node; nothing for
/// a dataset without ids or one written before the checksum was recorded.  Throws logic_error
/// naming the file.
void verify_node_ids(const std::string& dir, const manifest& m);

/// Reads the whole dataset into host memory (after read_manifest and verify_checksums), with
/// col_indices widened to int64 and features converted to float32.
host_csr read_dataset(const std::string& dir);

/// FNV-1a 64 of a byte range, continuing from `seed` (for streaming).
std::uint64_t fnv1a64(const void* data, std::size_t bytes,
                      std::uint64_t seed = 14695981039346656037ull);

/// Degree statistics for `wholestore info`.
struct degree_stats {
  std::uint64_t min = 0, max = 0;
  double mean = 0, median = 0;
  std::uint64_t isolated = 0;  ///< nodes with out-degree 0
  /// histogram[k]: nodes whose degree d satisfies 2^(k-1) <= d < 2^k (k = 0 holds d = 0).
  std::vector<std::uint64_t> log2_histogram;
};
degree_stats compute_degree_stats(const std::vector<std::int64_t>& row_offsets);

}  // namespace wholestore::graph
