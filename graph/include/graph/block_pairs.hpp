/*
 * Skip-gram pairs grouped into the blocks of a partitioned schedule (train's `blocks`: the
 * node and context tables cut into P partitions, each step of a round reading and writing the
 * rows of one node partition and one context partition only, GraphVite-style).
 *
 * Layout: node v lives in partition v % P as its row v / P there (partition c holds
 * block_layout::rows(c) rows), so that every partition gets a share of the high-degree nodes
 * whatever the order of the ids.  Pair p (center u, context t, negatives n_0 .. n_(K-1), in
 * embedding/sgns.hpp's layout) falls in block (u % P, t % P) = block index (u % P) * P + t % P.
 * Its negatives are moved into the context's partition c, so that the block reads nothing
 * outside it: n becomes the node of n's group of P consecutive ids {g * P .. g * P + P - 1},
 * g = n / P, that lies in c, which is row g of c (the last row of c for the one group that
 * ends before reaching c).  A negative thus keeps the frequency of its group: the sampler's
 * degree^0.75 law, read at a granularity of P ids.
 *
 * Output: the pairs reordered by block, stable (a block's pairs keep their input order), with
 * every id replaced by its row in its partition, and each block's pair count.
 */
#pragma once

#include <wholememory/device_buffer.hpp>
#include <wholememory/host_device.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>

namespace wholestore::graph {

/// Node v is row v / partitions of partition v % partitions.
struct block_layout {
  std::uint64_t nodes = 0;
  int partitions = 1;
  /// Rows of partition c (0 <= c < partitions).
  WM_HOST_DEVICE std::uint64_t rows(int c) const {
    const auto p = static_cast<std::uint64_t>(partitions), cc = static_cast<std::uint64_t>(c);
    return nodes > cc ? (nodes - cc + p - 1) / p : 0;
  }
  /// The most rows a partition has.
  std::uint64_t max_rows() const { return rows(0); }
};

struct block_pairs_args {
  block_layout layout;
  const std::int64_t* centers = nullptr;  ///< pairs node ids
  const std::int64_t* targets = nullptr;  ///< pairs * (1 + K) node ids: context, K negatives
  std::size_t pairs = 0;
  int negatives_per_pair = 0;           ///< K >= 0
  std::int64_t* out_centers = nullptr;  ///< out: pairs rows, grouped by block
  std::int64_t* out_targets = nullptr;  ///< out: pairs * (1 + K) rows, grouped like out_centers
  /// Out, host memory: partitions^2 counts, block (i, c) at i * partitions + c.
  std::uint64_t* counts = nullptr;
};

/// CPU path: host buffers.  Throws logic_error for partitions < 1 or more partitions than
/// nodes, K < 0, null buffers with pairs > 0, and an id outside [0, nodes) (naming it and its
/// position; the outputs are then unspecified).
void block_pairs_host(const block_pairs_args& args);

/// GPU path, on the current device: inputs and outputs in memory the GPU reads and writes
/// (counts on the host).  Keeps its scratch between calls.  Waits for `stream` once (the
/// counts and the id check come back).  The same output as the CPU path; throws as it, and
/// logic_error in a build without CUDA.
class gpu_block_pairs {
 public:
  void build(const block_pairs_args& args, cudaStream_t stream);

 private:
  wholememory::device_buffer keys_, sorted_keys_, order_, sorted_order_, temp_, counts_;
};

namespace detail {

/// Row of node `n` moved into partition `c` (the negatives' rule above).
WM_HOST_DEVICE std::int64_t row_in_partition(std::int64_t n, int c, const block_layout& l) {
  const auto g = static_cast<std::uint64_t>(n) / static_cast<std::uint64_t>(l.partitions);
  const std::uint64_t rows = l.rows(c);
  return static_cast<std::int64_t>(g < rows ? g : rows - 1);
}

/// Checks shared by both paths (`who` names the caller in messages).
void check_block_pairs(const block_pairs_args& args, const char* who);

}  // namespace detail
}  // namespace wholestore::graph
