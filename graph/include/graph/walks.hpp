/*
 * Random walks on a csr_graph: DeepWalk (uniform) and node2vec (second order, return
 * parameter p and in-out parameter q), on the CPU and the GPU, the same walks bit for bit on
 * either path, any thread count and any rank count (detail/walk_step.hpp gives the draws).
 *
 * Walk i of a call starts at starts[i] and has index first_walk + i: ranks that split a list of
 * starts pass their slice's offset as first_walk, and together produce the walks one rank would.
 * Output: count rows of length + 1 node ids (int64), the start first; a walk that reaches a
 * node without out-neighbors stops there and its row is padded with -1.
 *
 * Graphs in continuous or chunked memory (either location), and distributed graphs laid out
 * by make_graph or load_graph: collective over the graph's communicator (the host communicator
 * for random_walks_host, NCCL for gpu_walker; every rank calls as often, with the same length,
 * p and q and its own starts, maybe none), each step served by the owners of the walks' nodes
 * (node2vec's "does the candidate neighbor the previous node" answered by that node's owner).
 * A start
 * outside [0, num_nodes) throws logic_error naming it and its position before anything is
 * written (on a distributed graph every rank throws, the others naming the rank); a row or
 * neighbor id that breaks the CSR's rules (memory changed after loading) throws naming it.
 */
#pragma once

#include <graph/csr_graph.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>

namespace wholestore::graph {

struct walk_options {
  int length = 80;               ///< steps per walk (>= 0): a walk holds length + 1 nodes
  double p = 1.0;                ///< node2vec return parameter (> 0): stepping back weighs 1/p
  double q = 1.0;                ///< node2vec in-out parameter (> 0): moving away weighs 1/q
  std::uint64_t seed = 0;        ///< random seed
  std::uint64_t first_walk = 0;  ///< walk index of starts[0]
};

/// CPU path: host-location graphs.  `out` holds count * (length + 1) int64.  `threads`: 0 for
/// the hardware's count.
void random_walks_host(const csr_graph& graph, const std::int64_t* starts, std::size_t count,
                       const walk_options& options, std::int64_t* out, unsigned threads = 0);

/// GPU path, on the current device: the graph in device memory or in host memory the GPU reads.
/// Keeps its scratch between calls.  Throws logic_error in a build without CUDA.
class gpu_walker {
 public:
  /// Keeps a reference to `graph`, which must outlive the walker.
  explicit gpu_walker(const csr_graph& graph);
  /// starts (count int64) and out (count * (length + 1) int64) in memory the GPU reads and
  /// writes.  Checks the starts first (one wait), then walks; waits for `stream` once more
  /// at the end to report a corrupt graph.  The first node2vec call also makes a sorted copy
  /// of the neighbor lists of nodes with hub_degree or more neighbors (kept, in device
  /// memory, when it takes under a quarter of the free memory), so that "is x a neighbor of
  /// the previous node" is a binary search there instead of a scan; the graph must not
  /// change while the walker exists (it is read-only by contract).
  void walk(const std::int64_t* starts, std::size_t count, const walk_options& options,
            std::int64_t* out, cudaStream_t stream);

  /// Nodes with at least this many neighbors get a sorted copy of their list for node2vec.
  static constexpr std::int64_t hub_degree = 32;

 private:
  void build_hub_lists(cudaStream_t stream);

  const csr_graph* graph_;
  int device_ = -1;
  wholememory::device_buffer flags_;  // [0] first bad start position, [1] fault
  // node2vec's hub lists: per node (a distributed graph: per own node) the start of its sorted
  // copy in hub_sorted_ (-1: none).
  bool hubs_tried_ = false;
  wholememory::device_buffer hub_begin_, hub_sorted_;
  // Distributed graphs: the steps' buffers and node2vec's questions' (walks_distributed.cu),
  // grown as needed.
  wholememory::device_buffer distributed_scratch_, question_scratch_;
};

}  // namespace wholestore::graph
