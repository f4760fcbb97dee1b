/*
 * Skip-gram pairs grouped into the blocks of a partitioned schedule (train's `blocks`: the
 * node and context tables cut into P partitions, each step of a round reading and writing the
 * rows of one node partition and one context partition only, GraphVite-style).
 *
 * Layout: node v lives in partition v % P as its row v / P there (partition c holds
 * block_layout::rows(c) rows), so that every partition gets a share of the high-degree nodes
 * whatever the order of the ids.  Pair p (center u, context t, negatives n_0 .. n_(K-1), in
 * embedding/sgns.hpp's layout) falls in block (u % P, t % P) = block index (u % P) * P + t % P.
 * Its negatives are drawn again inside the context's partition c, so that the block reads
 * nothing outside it: negative j of the pair becomes row
 *   alias_draw(tables[c], rows(c), negative_key_of(key, u, t, n_j), j)
 * of c (negatives.hpp's draw rule on partition c's own alias table, built from its nodes'
 * weights as negative_sampler builds the whole graph's), where n_j, the pair's j-th negative
 * drawn over the whole graph, serves as the draw's randomness.  The negatives of a block thus
 * follow the sampler's law restricted to the partition, and are a function of the pair alone
 * (not of where or when it is grouped).
 *
 * Output: the pairs reordered by block, stable (a block's pairs keep their input order), with
 * every id replaced by its row in its partition, and each block's pair count.
 */
#pragma once

#include <graph/negatives.hpp>
#include <graph/random.hpp>
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
  /// Partition c's alias table (layout.rows(c) entries) at tables[c]: memory the path reads
  /// (on the GPU path a device array of device pointers).  Needed when K > 0.
  const alias_entry* const* tables = nullptr;
  std::uint64_t negative_key = 0;  ///< key of the negatives' draws
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

/// The key of a pair's negative draw (see above).
WM_HOST_DEVICE std::uint64_t negative_key_of(std::uint64_t key, std::int64_t center,
                                             std::int64_t context, std::int64_t drawn) {
  return mix64(key ^ mix64(static_cast<std::uint64_t>(center)) ^
               mix64(~static_cast<std::uint64_t>(context)) ^
               mix64(static_cast<std::uint64_t>(drawn) * 0x9e3779b97f4a7c15ull + 1));
}

/// Negative j (>= 1 in the pair's target list) of a pair as a row of partition c.
WM_HOST_DEVICE std::int64_t partition_negative(const alias_entry* table, std::uint64_t rows,
                                               std::uint64_t key, std::int64_t center,
                                               std::int64_t context, std::int64_t drawn,
                                               std::uint64_t j) {
  struct table_ref {
    const alias_entry* base;
    WM_HOST_DEVICE const alias_entry* At(std::int64_t b) const { return base + b; }
  };
  return alias_draw(table_ref{table}, rows, negative_key_of(key, center, context, drawn), j);
}

/// Writes input pair p as output pair q: the center's and the context's rows, and the
/// negatives drawn in the context's partition (both paths call this).
WM_HOST_DEVICE void write_block_pair(const block_pairs_args& a, std::size_t p, std::size_t q) {
  const int parts = a.layout.partitions;
  const auto per = static_cast<std::size_t>(a.negatives_per_pair) + 1;
  const std::int64_t u = a.centers[p], t = a.targets[p * per];
  const int c = static_cast<int>(t % parts);
  a.out_centers[q] = u / parts;
  a.out_targets[q * per] = t / parts;
  for (std::size_t j = 1; j < per; ++j)
    a.out_targets[q * per + j] = partition_negative(a.tables[c], a.layout.rows(c), a.negative_key,
                                                    u, t, a.targets[p * per + j], j);
}

/// Checks shared by both paths (`who` names the caller in messages).
void check_block_pairs(const block_pairs_args& args, const char* who);

}  // namespace detail
}  // namespace wholestore::graph
