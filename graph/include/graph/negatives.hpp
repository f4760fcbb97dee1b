/*
 * Negative sampling for node-embedding training: node ids drawn from the degree^power
 * distribution (power 0.75: word2vec's and DeepWalk's choice) or uniformly over all nodes,
 * O(1) per draw through an alias table in WholeMemory (16 bytes per node: a 64-bit acceptance
 * threshold and the alias), on the CPU and the GPU.
 *
 * Deterministic: draw j (j counted from 0 over the whole job) is a function of (table, seed,
 * j) alone, so ranks that pass their slice's offset as first_draw produce together what one
 * rank would, and the CPU and the GPU give the same ids.  Draw j takes x1 = draw(key, 2j) and
 * x2 = draw(key, 2j + 1) of detail/sample_select.hpp's SplitMix64 stream keyed by the seed:
 * bucket b = rand_below(x1, nodes); the draw is b when (x2 >> 32) < threshold[b], else
 * alias[b].  Thresholds are the table's probabilities rounded to multiples of 2^-32, so every
 * node's probability is exact to within 2^-32 / nodes.
 */
#pragma once

#include <graph/csr_graph.hpp>
#include <graph/detail/sample_select.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/memory_type.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace wholestore::graph {

struct negative_options {
  bool by_degree = true;  ///< false: uniform over all nodes
  double power = 0.75;    ///< weight = out-degree^power (nodes without out-edges: never drawn)
  wholememory::memory_type type = wholememory::memory_type::continuous;  ///< or chunked
  wholememory::memory_location location = wholememory::memory_location::host;
};

/// One alias-table entry.
struct alias_entry {
  std::uint64_t threshold;  ///< in [0, 2^32]: keep the bucket when the coin is below it
  std::int64_t alias;
};

class negative_sampler {
 public:
  /// Builds the table from per-node out-degrees given as CSR row offsets (num_nodes + 1, the
  /// same on every rank); every rank computes the same table and writes its part.  Throws
  /// logic_error when no node has positive weight or the power is not finite.  Collective.
  negative_sampler(std::shared_ptr<wholememory::communicator> comm,
                   const std::vector<std::int64_t>& row_offsets, const negative_options& options);
  /// The same from a graph in continuous or chunked memory (its row offsets are read whole).
  negative_sampler(std::shared_ptr<wholememory::communicator> comm, const csr_graph& graph,
                   const negative_options& options);

  std::uint64_t num_nodes() const { return nodes_; }
  /// The exact probability of drawing `node` (from the rounded thresholds).
  double probability(std::int64_t node) const;

  /// CPU: out[i] = draw first_draw + i.  The table must be host-located.
  void sample_host(std::uint64_t seed, std::uint64_t first_draw, std::size_t count,
                   std::int64_t* out, unsigned threads = 0) const;
  /// GPU, on the current device: out in memory the GPU writes; enqueued on `stream`.  Throws
  /// logic_error in a build without CUDA.
  void sample(std::uint64_t seed, std::uint64_t first_draw, std::size_t count, std::int64_t* out,
              cudaStream_t stream) const;

  const wholememory::allocation& table() const { return table_; }

 private:
  std::uint64_t nodes_ = 0;
  wholememory::allocation table_;
  std::vector<alias_entry> host_copy_;  // for probability()
};

namespace detail {

/// Draw j; Table: a PtrGen over alias_entry.
template <typename Table>
WM_HOST_DEVICE std::int64_t alias_draw(const Table& table, std::uint64_t nodes, std::uint64_t key,
                                       std::uint64_t j) {
  const std::uint64_t x1 = draw(key, 2 * j), x2 = draw(key, 2 * j + 1);
  const auto b = static_cast<std::int64_t>(rand_below(x1, nodes));
  const alias_entry e = *table.At(b);
  return (x2 >> 32) < e.threshold ? b : e.alias;
}

WM_HOST_DEVICE std::uint64_t negatives_key(std::uint64_t seed) {
  return mix64(seed ^ 0x2545f4914f6cdd1dull);
}

}  // namespace detail
}  // namespace wholestore::graph
