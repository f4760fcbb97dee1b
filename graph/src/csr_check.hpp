/*
 * The structural checks of a CSR (rule 6 of docs/dataset-format.md), shared by every loader:
 * read_dataset and write_dataset on one process, load_graph and make_graph on the ranks of a
 * communicator.  Internal to graph/src.
 *
 * Pieces of the arrays are checked where they are at hand, from any thread and in any order:
 * a reader thread right after its read (the bytes are still in cache), a rank on its own part
 * of the graph.  Each piece keeps its first fault and, for row_offsets, its first and last
 * value; finish() joins the pieces in order, which finds a decrease that straddles two pieces,
 * and throws naming the first fault.  Across ranks, every rank sends its findings() to every
 * other (agree_on_findings), merges them and throws the same error, so no rank is left waiting.
 *
 * The checks:
 *   row_offsets[0] = 0, every offset in [0, num_edges], never decreasing,
 *   row_offsets[num_nodes] = num_edges;
 *   col_indices in [0, num_nodes);
 *   edge_weights finite and >= 0.
 */
#pragma once

#include <wholememory/bootstrap.hpp>

#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

namespace wholestore::graph::detail {

/// Accumulates the checks of pieces of one CSR's arrays; see the file comment.
class csr_checker {
 public:
  /// `source` names the graph in messages ("dataset /data/x", "the host graph of make_graph").
  csr_checker(std::string source, std::uint64_t num_nodes, std::uint64_t num_edges);

  /// Checks row_offsets[first, first + count) held at `values`.  Thread-safe.
  void row_offsets(const std::int64_t* values, std::uint64_t first, std::size_t count);
  /// Checks col_indices[first, first + count).  Thread-safe.
  void col_indices(const std::int32_t* values, std::uint64_t first, std::size_t count);
  void col_indices(const std::int64_t* values, std::uint64_t first, std::size_t count);
  /// Checks edge_weights[first, first + count).  Thread-safe.
  void edge_weights(const float* values, std::uint64_t first, std::size_t count);

  /// This checker's faults and row_offsets piece ends, encoded for another rank's merge().
  std::string findings() const;
  /// Adds the findings() of another rank's checker of the same graph.
  void merge(const std::string& findings);
  /// Joins the row_offsets pieces and throws wholememory::logic_error naming the source, the
  /// array, the first bad position and value, and the rule.  When `whole` is set the pieces
  /// must cover row_offsets (they then prove the first and last offsets too).
  void finish(bool whole = true) const;

  /// Seconds spent in the piece checks so far, summed over threads.
  double seconds() const { return static_cast<double>(nanoseconds_.load()) * 1e-9; }

 private:
  enum class kind : std::uint32_t {
    none,
    offset_first,     // row_offsets[0] != 0
    offset_range,     // outside [0, num_edges]
    offset_decrease,  // below the offset before it
    offset_last,      // row_offsets[num_nodes] != num_edges
    col_range,        // outside [0, num_nodes)
    weight_value,     // NaN, infinite or negative
  };
  enum array : std::uint32_t { rows = 0, cols = 1, weights = 2, num_arrays = 3 };
  // The first fault of one array: position (max: none), the value there and, for a decrease,
  // the value before it.  Trivially copyable: findings() sends it as bytes.
  struct fault {
    std::uint64_t position = std::numeric_limits<std::uint64_t>::max();
    std::int64_t value = 0;
    std::int64_t previous = 0;
    double real_value = 0;  // weights
    kind what = kind::none;
    std::uint32_t pad = 0;
  };
  struct piece {
    std::uint64_t first;
    std::uint64_t count;
    std::int64_t first_value;
    std::int64_t last_value;
  };

  void keep(array a, const fault& f);
  std::string describe(const fault& f) const;
  template <typename T>
  void check_cols(const T* values, std::uint64_t first, std::size_t count);

  std::string source_;
  std::uint64_t num_nodes_, num_edges_;
  mutable std::mutex mutex_;
  fault faults_[num_arrays];
  std::vector<piece> pieces_;
  std::atomic<std::uint64_t> nanoseconds_{0};
};

/// Collective over `bs`: every rank sends its checker's findings to every other, merges them
/// and throws the first fault (finish()).  Every rank reaches the same verdict.
void agree_on_findings(wholememory::bootstrap& bs, csr_checker& checker);

}  // namespace wholestore::graph::detail
