/*
 * Multi-hop neighbor sampling on a csr_graph in WholeMemory.
 *
 * From a batch of seed nodes and per-hop fanouts, each hop samples the neighbors of its
 * destination nodes (graph/detail/sample_select.hpp defines the methods and the randomness)
 * and relabels them into a block, the layout DGL calls a message-flow graph:
 *
 *   blocks[0].dst  = the unique seeds, in order of first occurrence
 *   blocks[h].src_nodes = blocks[h].dst nodes first, then every sampled neighbor not among
 *                         them, in order of first occurrence in the hop's edge list
 *   blocks[h + 1].dst   = blocks[h].src_nodes
 *   edge list of a hop  = for each dst node in order, its sampled positions in the order the
 *                         method returns them; offsets[i]..offsets[i+1] are dst node i's edges,
 *                         src_index[e] indexes src_nodes, edge_ids[e] = row_offsets[v] + pos
 *
 * blocks are in sampling order (hop 0 holds the seeds as destinations); a GNN's first layer
 * consumes blocks.back().  The result depends only on (graph, seeds, fanouts, method,
 * random_seed): the CPU path and the GPU path return the same blocks bit for bit, for any
 * number of threads, ranks or batch split.
 *
 * A seed outside [0, num_nodes) throws logic_error naming it.  Graphs in distributed memory
 * make sample calls collective (every rank of the graph's communicator calls, with its own
 * seeds, the same number of times with the same fanouts and method).
 */
#pragma once

#include <graph/csr_graph.hpp>
#include <graph/detail/sample_select.hpp>
#include <wholememory/stream.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace wholestore::graph {

const char* sample_method_name(sample_method m);
/// "uniform", "uniform_with_replacement" (alias "replacement"), "weighted"; throws
/// logic_error naming the text otherwise.
sample_method parse_sample_method(const std::string& name);

struct sample_options {
  std::vector<int> fanouts;  ///< per hop; -1 takes all neighbors
  sample_method method = sample_method::uniform;
  std::uint64_t random_seed = 0;
  bool edge_ids = false;  ///< fill block::edge_ids
};

/// One hop of a sample, in host memory.
struct block {
  std::int64_t num_dst = 0;
  std::vector<std::int64_t> src_nodes;  ///< global ids; the first num_dst are the dst nodes
  std::vector<std::int64_t> offsets;    ///< num_dst + 1
  std::vector<std::int32_t> src_index;  ///< per edge, index into src_nodes
  std::vector<std::int64_t> edge_ids;   ///< per edge when requested, else empty
  std::int64_t num_src() const { return static_cast<std::int64_t>(src_nodes.size()); }
  std::int64_t num_edges() const { return static_cast<std::int64_t>(src_index.size()); }
  /// COO view: the dst index of every edge (src index is src_index).
  std::vector<std::int32_t> coo_dst() const;
  bool operator==(const block& o) const;
};

struct sample_result {
  std::vector<block> blocks;
  /// The nodes whose features the first GNN layer needs: blocks.back().src_nodes.
  const std::vector<std::int64_t>& input_nodes() const { return blocks.back().src_nodes; }
  std::int64_t num_sampled_edges() const;
  /// Hops of a distributed graph served by the owners of their nodes (sample_host: the hops
  /// of fanout >= 0 of a graph whose edges follow its nodes, unless WHOLESTORE_SAMPLE_BY_OWNER
  /// is 0 on a rank); the rest fetch rows and columns through gathers.
  int served_hops = 0;
};

/// CPU path: host-location graphs (any type; distributed is collective).
sample_result sample_host(const csr_graph& graph, const std::int64_t* seeds, std::size_t count,
                          const sample_options& options,
                          unsigned threads = wholememory::default_host_threads());

/// One hop of a GPU sample, in device memory owned by the sampler that made it (valid until
/// that sampler's next sample call).  Counts are known on the host.
struct device_block {
  std::int64_t num_dst = 0;
  std::int64_t num_src = 0;
  std::int64_t num_edges = 0;
  const std::int64_t* src_nodes = nullptr;  ///< num_src
  const std::int64_t* offsets = nullptr;    ///< num_dst + 1
  const std::int32_t* src_index = nullptr;  ///< num_edges
  const std::int64_t* edge_ids = nullptr;   ///< num_edges, or nullptr
  /// Copies to a host block (synchronizes `stream`).
  block to_host(cudaStream_t stream) const;
};

/// GPU path: keeps its scratch memory between calls, so a training loop allocates nothing
/// per batch.  The graph may be device or host located (a GPU reads pinned host memory).
class gpu_sampler {
 public:
  /// Uses the current CUDA device; keeps a reference to `graph`, which must outlive the
  /// sampler.  Throws logic_error in builds without CUDA.
  explicit gpu_sampler(const csr_graph& graph);
  ~gpu_sampler();
  gpu_sampler(const gpu_sampler&) = delete;
  gpu_sampler& operator=(const gpu_sampler&) = delete;

  /// seeds: device (or GPU-readable host) array of count node ids, read before the call
  /// returns.  Returns one device_block per hop; their arrays stay valid until the next
  /// sample call.  Synchronizes `stream` once, at the end (hop sizes stay on the device and
  /// kernels are sized by bounds); a hop with fanout -1 or more than 2^24 entries in its
  /// bound waits once more for its exact sizes, and graphs in distributed memory wait per
  /// hop and add the gathers' own synchronizations.  Calls that repeat a shape (seed count,
  /// fanouts, method, edge_ids) replay a CUDA graph captured at the first one.
  std::vector<device_block> sample(const std::int64_t* seeds, std::size_t count,
                                   const sample_options& options, cudaStream_t stream);

  /// Whether the hops of this distributed graph are served by the owners of their nodes
  /// (WHOLESTORE_SAMPLE_BY_OWNER unset or 1 on every rank and a graph whose edges follow its
  /// nodes, csr_graph.hpp), known after the first call; false before it and for the other
  /// memory types.
  bool served_by_owners() const;
  /// How many served hops so far had their exchanges sized by every rank's bound instead of
  /// an exchange of counts (no wait: the hops after a call's first while the padded
  /// exchanges stay within WHOLESTORE_SAMPLE_PAD_KIB, docs/architecture.md).
  std::uint64_t padded_hops() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace wholestore::graph
