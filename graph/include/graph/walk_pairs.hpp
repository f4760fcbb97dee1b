/*
 * Skip-gram training pairs from random walks (DeepWalk, node2vec): the windows of a batch of
 * walks turned into (center, context) pairs, each followed by its negatives, on the CPU and the
 * GPU with the same output.
 *
 * Slots: a walk of length L (L + 1 nodes) has window_slots(L, w) pair slots, one per (i, j)
 * with 0 < |i - j| <= w, i ascending, then j ascending.  Walk number v of a job owns the global
 * slots v * S .. v * S + S - 1.  A call takes the slots [lo, hi) of the job (any range: it may
 * start and end inside walks) and the walks that cover them; slot s of walk v at (i, j) gives
 * the pair (walk_v[i], walk_v[j]) unless either is -1 (the walk ended at a node without
 * out-edges), and the pair's K negatives are negatives[(s - lo) * K .. + K), the draws of slot
 * s.  Pairs come out in slot order, compacted: centers[p] and targets[p * (1 + K)] (the
 * context) followed by the K negatives, the layout of embedding/sgns.hpp.  Ranks that split a
 * batch's slots into contiguous ranges together produce the one-rank list.
 */
#pragma once

#include <graph/csr_graph.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>

namespace wholestore::graph {

/// Pair slots of one walk of `walk_length` steps with window `window` (both >= 1).
std::uint64_t window_slots(int walk_length, int window);

struct window_pairs_args {
  const std::int64_t* walks = nullptr;  ///< rows of walk_length + 1 ids; row 0 is walk first_walk
  std::uint64_t first_walk = 0;
  std::size_t walk_count = 0;  ///< rows; must cover walks lo / S .. (hi - 1) / S
  int walk_length = 1;
  int window = 1;
  std::uint64_t lo = 0, hi = 0;             ///< global slots [lo, hi)
  const std::int64_t* negatives = nullptr;  ///< (hi - lo) * K draws (may be null when K == 0)
  int negatives_per_pair = 0;               ///< K >= 0
  std::int64_t* centers = nullptr;          ///< out: room for hi - lo
  std::int64_t* targets = nullptr;          ///< out: room for (hi - lo) * (1 + K)
};

/// CPU path: host buffers.  Returns the number of pairs written.  Throws logic_error for a
/// walk length or window < 1, K < 0, lo > hi or walks that do not cover [lo, hi).
std::size_t window_pairs_host(const window_pairs_args& args);

/// GPU path, on the current device: buffers the GPU reads and writes.  Keeps its scratch
/// between calls.  Waits for `stream` once (the pair count comes back to the host).  Throws
/// logic_error as the CPU path, and in a build without CUDA.
class gpu_window_pairs {
 public:
  std::size_t build(const window_pairs_args& args, cudaStream_t stream);

 private:
  wholememory::device_buffer slot_table_;  // int32 (i, j) per slot of the current shape
  int table_length_ = 0, table_window_ = 0;
  wholememory::device_buffer flags_, positions_, temp_, count_;
};

/// LINE's pairs (one per edge slot): slot s of [lo, hi) takes directed edge
/// e = rand_below(draw(key, s), num_edges) of the graph's CSR (detail/sample_select.hpp) and
/// gives the pair (the row holding e, col_indices[e]) followed by negatives[(s - lo) * K ..
/// + K): hi - lo pairs in slot order, in embedding/sgns.hpp's layout.
struct edge_pairs_args {
  std::uint64_t key = 0;
  std::uint64_t lo = 0, hi = 0;
  const std::int64_t* negatives = nullptr;  ///< (hi - lo) * K draws (may be null when K == 0)
  int negatives_per_pair = 0;               ///< K >= 0
  std::int64_t* centers = nullptr;          ///< out: hi - lo
  std::int64_t* targets = nullptr;          ///< out: (hi - lo) * (1 + K)
};

/// GPU path for a continuous or chunked graph (the row of edge e found by binary search over
/// the row offsets, so nothing per edge is kept), buffers the GPU reads and writes, enqueued
/// on `stream` (does not wait).  Throws logic_error for a distributed graph, a graph without
/// edges, K < 0 or lo > hi, and in a build without CUDA.
void edge_pairs(const csr_graph& g, const edge_pairs_args& args, cudaStream_t stream);

}  // namespace wholestore::graph
