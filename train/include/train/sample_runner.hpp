/*
 * The sampling epoch runner as a library call: batches of seeds sampled into multi-hop
 * neighborhoods on the CPU or GPU sampler (graph/sampling.hpp), and the features of each batch's
 * input nodes (the last hop's source nodes) gathered, as a GNN training loop would.  A workload,
 * not a program: `wholestore sample` (apps/sample.cpp) and the sampler bench
 * (apps/bench_sample.cpp) call it; nothing here reads a config or prints: progress comes back
 * through a callback, the figures in sample_run_result, errors as exceptions.
 *
 * Where a batch's seeds come from (seed_order):
 *   shuffled_epochs: every epoch visits all nodes once, in the order shuffled_seeds(num_nodes,
 *     random_seed, epoch); rank r of R takes the contiguous chunk split_seeds gives it and cuts
 *     it into batches of batch_size (the last one shorter); the sampler's random seed is
 *     mix64(random_seed ^ mix64(epoch)), so a node's sample in an epoch is the same whichever
 *     rank or batch takes it, for any rank count and batch size.
 *   random_batches: batch b of rank r (b counted over warm-up and timed batches) has global id
 *     k = b * R + r; its seed i is mix64(random_seed ^ mix64(k * batch_size + i)) % num_nodes
 *     and its sampler seed mix64(random_seed + k): distinct batches on every rank.
 *
 * A graph (or gathered features) in distributed memory makes sampling and gathering collective:
 * every rank then makes as many calls per epoch as the rank with the most batches, padding with
 * empty batches, so the ranks' call counts are equal.  Neither the apps nor this runner prefetch
 * the next batch: each call waits for its batch (the GPU path synchronizes its stream after
 * the sample and after the gather), so the times measured are the sampler's and the gather's.
 */
#pragma once

#include <graph/csr_graph.hpp>
#include <graph/sampling.hpp>
#include <wholememory/bootstrap.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace wholestore::train {

enum class seed_order {
  shuffled_epochs,  ///< every node once per epoch, shuffled, a contiguous chunk per rank
  random_batches,   ///< every batch's seeds drawn at random (the bench's batches)
};

/// What a sampling run does.
struct sample_run_options {
  seed_order order = seed_order::shuffled_epochs;
  std::vector<int> fanouts{15, 10, 5};  ///< neighbors per hop; -1 takes all
  graph::sample_method method = graph::sample_method::uniform;
  bool edge_ids = false;            ///< have the sampler return edge ids
  std::uint64_t batch_size = 1024;  ///< seeds per batch (>= 1)
  std::uint64_t epochs = 1;         ///< passes (>= 1)
  /// Batches per rank per epoch.  shuffled_epochs: at most this many of the rank's batches
  /// (0: all of them); random_batches: exactly this many (>= 1).
  std::uint64_t batches = 0;
  /// random_batches only: untimed batches before the first epoch, counted in no figure.
  std::uint64_t warmup_batches = 0;
  std::uint64_t random_seed = 0;
  bool use_gpu = false;         ///< the GPU sampler (a CUDA build and a current device)
  bool gather_features = true;  ///< gather the input nodes' features (graphs with features)
  unsigned threads = 0;         ///< CPU sampler and gather_host threads (0: all cores)
};

/// One rank's share of an epoch's shuffled seeds: positions [first, last) of the order, cut
/// into local_batches batches.
struct seed_split {
  std::uint64_t first = 0, last = 0;
  std::uint64_t local_batches = 0;
};

/// Rank `rank` of `ranks` takes [num_seeds * rank / ranks, num_seeds * (rank + 1) / ranks), in
/// ceil(size / batch_size) batches, at most max_batches of them when that is not 0.  Throws
/// logic_error for rank outside [0, ranks) or batch_size 0.
seed_split split_seeds(std::uint64_t num_seeds, int rank, int ranks, std::uint64_t batch_size,
                       std::uint64_t max_batches = 0);

/// Node ids 0..num_nodes-1 in an order that depends only on (seed, epoch): Fisher-Yates with
/// the sampler's counter-based mixer (graph::mix64), the same on every rank and platform.
std::vector<std::int64_t> shuffled_seeds(std::uint64_t num_nodes, std::uint64_t seed,
                                         std::uint64_t epoch);

/// Counts and times of a run.  Times in seconds: sample_s is the sampler's calls with the
/// copy of the seeds to the device (GPU path), sampler_s the calls alone (equal on the CPU
/// path), gather_s the gathers, loop_s the whole loop after the warm-up.
struct sample_figures {
  double sample_s = 0, sampler_s = 0, gather_s = 0, loop_s = 0;
  std::uint64_t batches = 0;  ///< batches with seeds (padding not counted)
  std::uint64_t seeds = 0, sampled_edges = 0, gathered_rows = 0, gathered_bytes = 0;
  double rss_mib = 0;  ///< peak resident set (getrusage) at the end
  double gpu_mib = 0;  ///< device memory in use at the end (GPU path; 0 otherwise)
};

struct sample_run_result {
  sample_figures rank;     ///< this rank's
  sample_figures total;    ///< all ranks: counts summed, times and memory the largest of a rank
  double rss_sum_mib = 0;  ///< the ranks' peak resident sets summed
  seed_split split;        ///< this rank's seeds (shuffled_epochs; random_batches: none)
  std::uint64_t calls_per_epoch = 0;  ///< sampling calls per epoch on this rank (padding too)
};

/// After every call: calls done and the run's calls in all (warm-up not counted).
using sample_progress = std::function<void(std::uint64_t done, std::uint64_t total)>;

/// Runs sampling over one graph, keeping the GPU sampler, its stream and device buffers
/// between runs (the bench runs several cases on one graph).  Move-only; the graph must
/// outlive it.
class sample_runner {
 public:
  /// Keeps a reference to `graph`; `bs` joins the ranks that sample it (the graph's
  /// communicator's ranks, or more: several hosts each with a copy of the graph).
  sample_runner(std::shared_ptr<wholememory::bootstrap> bs, graph::csr_graph& graph);
  ~sample_runner();
  sample_runner(sample_runner&&) noexcept;
  sample_runner& operator=(sample_runner&&) noexcept;

  /// Runs o.epochs epochs of batches on this rank and returns its figures and all ranks'.
  /// Collective over the bootstrap (a barrier before the loop and an allgather of the figures
  /// after it) and, for distributed memory, over the graph's communicator; synchronous.
  /// Throws logic_error for bad options (batch_size 0, epochs 0, random_batches without
  /// batches, warm-up with shuffled_epochs, the GPU sampler without CUDA, method weighted
  /// without edge weights, random_batches on a graph without nodes), and the sampler's and
  /// gather's errors.
  sample_run_result run(const sample_run_options& options, const sample_progress& progress = {});

  /// GPU sampler on a distributed graph: see graph::gpu_sampler (false before a GPU run).
  bool served_by_owners() const;
  std::uint64_t padded_hops() const;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

/// One run on a fresh runner: sample_runner(bs, graph).run(options, progress).
sample_run_result run_sampling(std::shared_ptr<wholememory::bootstrap> bs, graph::csr_graph& graph,
                               const sample_run_options& options,
                               const sample_progress& progress = {});

}  // namespace wholestore::train
