/*
 * The per-rank trainer behind train_embeddings (train/trainer.hpp): its state and its members,
 * declared for the files that define them.  Internal to train/; plain C++ (the GPU members are
 * owned CUDA streams and events, holding none in a build without CUDA).
 *   run.cpp        train_embeddings and the settings check, construction (graph, sampler,
 *                  tables, streams), run and run_epoch (the batch loop, the next batch's
 *                  assembly overlapped with the step on the GPU path), the divergence checks,
 *                  checkpoint stores
 *   pairs.cpp      assemble: walks or edges, negatives and pairs of a batch's slots
 *   step.cpp       step on the CPU and step_gpu (lookups, SGNS, both tables' updates), the
 *                  stream, event and copy helpers
 *   evaluate.cpp   score_links, and the held-out edges scored with the input vectors
 *   checkpoint_state.cpp  state.txt and the checkpoint directory's checks
 */
#pragma once

#include <train/trainer.hpp>

#include <embedding/table.hpp>
#include <graph/block_pairs.hpp>
#include <graph/csr_graph.hpp>
#include <graph/negatives.hpp>
#include <graph/random.hpp>
#include <graph/walk_pairs.hpp>
#include <graph/walks.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_stream.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/stream.hpp>

#if defined(WHOLESTORE_HAS_CUDA)
#include <cuda_runtime_api.h>
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace wholestore::train::detail {

namespace wm = ::wholememory;

constexpr double loss_unit = 16777216.0;  // 2^24: losses summed as integers of 2^-24
// A step whose mean loss per pair is over this many times the untrained tables' stops the run.
constexpr double divergence_factor = 10.0;

/// The key of an epoch's draws for one purpose (1 walks, 2 negatives, 3 LINE's edges, 4 the
/// blocks schedule's negatives inside partitions).
inline std::uint64_t epoch_key(std::uint64_t seed, std::uint64_t epoch, std::uint64_t purpose) {
  return graph::mix64(graph::mix64(seed + purpose * 0x9e3779b97f4a7c15ull) ^ epoch);
}

/// One rank's part of a run: made and run by train_embeddings on every rank.
class trainer {
 public:
  /// Builds this rank's graph, negative sampler and tables (collective over `bs`), and the GPU
  /// path's streams.  `split` must outlive the trainer.
  trainer(std::shared_ptr<wm::bootstrap> bs, const graph::edge_split& split,
          const train_settings& s);
  ~trainer();

  /// The whole run: resume, epochs, evaluations, checkpoints, rank 0's embeddings.
  train_result run(const train_callbacks& cb);

 private:
  // ---- pairs.cpp ----

  // This rank's pairs of global slots [lo, hi), in slot order: center indices and (1 + K)
  // target indices each (context, then negatives), in centers_/targets_ on the CPU path and in
  // pair set `set` (d_centers_[set], d_targets_[set]) on the GPU path; returns the pair count.
  // The GPU path enqueues on assembly_stream_ only, after the last step that read the set
  // (pairs_free_), and marks the set ready (pairs_ready_), so it may run on a worker thread
  // while a step of the other set runs on stream_ (run_epoch).  It reads no table.
  // With a distributed graph in a walk mode (collective_walks) every rank must call this once
  // per batch, in step with the others, even for an empty [lo, hi): it walks then collectively.
  std::size_t assemble(std::uint64_t epoch, std::uint64_t lo, std::uint64_t hi, int set);

  // Whether the walks are collective: a distributed graph walked (DeepWalk or node2vec) by
  // random_walks_host or gpu_walker, every rank in step over the graph's communicator.
  bool collective_walks() const {
    return s_.graph_type == wm::memory_type::distributed && s_.mode != train_mode::line;
  }

  // The walker's options for epoch `epoch`, walk index `first_walk` first; every rank passes
  // the same length, p and q.
  graph::walk_options walk_options_of(std::uint64_t epoch, std::uint64_t first_walk) const;

  // `count` walks from `starts` into `out`: host arrays on the CPU path, device arrays walked
  // on assembly_stream_ on the GPU path (synchronous either way).
  void walk(const std::int64_t* starts, std::size_t count, const graph::walk_options& wo,
            std::int64_t* out);

  // assemble()'s work for a non-empty [lo, hi): LINE's edges on the device or the host, or the
  // walks, negatives and window pairs; returns the pair count.
  std::size_t assemble_into(std::uint64_t epoch, std::uint64_t lo, std::uint64_t hi, int set);

  // LINE's pairs on the device: the GPU path with a graph it can read in place.
  bool line_on_gpu() const {
    return s_.use_gpu && s_.mode == train_mode::line &&
           s_.graph_type != wm::memory_type::distributed;
  }

  // `b` grown to hold `count` indices (at least one), its old contents dropped.
  std::int64_t* device_indices(wm::device_buffer& b, std::size_t count);

  // ---- step.cpp ----

  // What a step reports: its pairs' losses in loss units, and the pairs whose scores were NaN
  // or infinite (a diverged table: they add no loss units).
  struct step_totals {
    std::int64_t loss_units = 0;
    std::uint64_t nonfinite = 0;
    /// Summed over the ranks on the device already (on_device_totals): check_step needs no
    /// bootstrap round.
    bool summed = false;
    std::int64_t all_loss_units = 0;
    std::uint64_t all_nonfinite = 0, all_pairs = 0;
  };

  // Whether the GPU step sums its totals over the ranks on the stream (several ranks, an NCCL
  // communicator): the step then makes no bootstrap round.
  bool on_device_totals() const;

  // The CPU path's step on `in` and `out` (host tables): lookups, SGNS, both updates; the
  // pairs' loss units and non-finite pairs.
  step_totals host_step(embedding::table& in, embedding::table& out, const std::int64_t* centers,
                        const std::int64_t* targets, std::size_t n, float lr);

  // One step on this rank's assembled pairs.
  // `while_running` starts the next batch's assembly: on the GPU path once this step is
  // enqueued (so that starting it never holds back the step's first kernel), before it
  // otherwise.
  step_totals step(float lr, const std::function<void()>& while_running);

  // The output table takes its gradients by reference (coefficient x the pair's center row
  // of the input table, recomputed during its update: table::apply_scaled_gradients) where
  // the input table's rows are all mapped: continuous or chunked tables on one host, any rank
  // count (several ranks send each target entry to its owner as 12 bytes instead of a row).
  // Elsewhere the SGNS step writes the gradient rows.  The bits are the same either way.
  bool output_by_reference() const {
    return s_.table_type != wm::memory_type::distributed && comm_->topology().num_hosts == 1;
  }

  // The GPU step; returns the batch's loss in loss units.  Continuous and chunked tables are
  // read by the SGNS kernel itself (the lookups fused in); distributed tables are looked up
  // first (their rows may be on other ranks' GPUs, reached through NCCL).  The output table
  // is updated before the input table: by reference it reads the input table's rows as they
  // were when the gradients were computed.  (Each update touches only its own table and every
  // gradient comes from the old values, so the order does not change the result.)
  step_totals step_gpu(float lr, const std::function<void()>& while_running);

  // CUDA events between the GPU step's phases (train_result::gpu_*_s).
  void mark(int i);

  // Adds the step's phase times (between the events mark() recorded) to phase_s_; the stream
  // has been synchronized.
  void add_phase_times();

  // Host <-> device on the stream, for a few bytes of pageable memory (which makes the copy
  // wait for the stream's earlier work when it reads the device).
  void copy_async(void* dst, const void* src, std::size_t bytes);

  // The same on `stream` (a plain copy in a build without CUDA).
  void copy_on(cudaStream_t stream, void* dst, const void* src, std::size_t bytes);

  // The pair sets' dependencies between the two streams (events without timing, made on first
  // use; waiting for one never recorded is a no-op).
  void record_event(wm::cuda_event& e, cudaStream_t stream);

  void wait_event(cudaStream_t stream, const wm::cuda_event& e);

  // Waits for stream_ (nothing on the CPU path); throws cuda_error when its work failed.
  void sync();

  // ---- run.cpp ----

  // The loss of untrained tables per positive pair: (1 + K) ln 2 (output vectors are zeros).
  double untrained_loss() const { return (1.0 + s_.negatives) * std::log(2.0); }

  // The ranks' step totals combined (summed on the device by step_gpu over NCCL, else an
  // allgather over the bootstrap: either is also the step's barrier); throws
  // train_diverged on every rank when a pair's score was not finite or the step's mean loss
  // per pair passed divergence_factor times the untrained loss (scores are clamped, so the
  // loss of tables blowing up grows towards about 30 times the untrained loss, never past
  // it; a run that learns only goes down from 1).
  void check_step(int epoch, std::uint64_t b, float lr, const step_totals& st,
                  std::size_t step_pairs);

  // `x` as an ostream prints it (the learning rate in divergence messages).
  static std::string number(double x);

  // Throws train_diverged: where, why, what was kept and the way out.
  [[noreturn]] void diverged(const std::string& where, const std::string& why) const;

  // Epoch `epoch` (0-based): its steps, with the epoch's totals over ranks; adds its timings
  // to `result`.
  epoch_record run_epoch(int epoch, const train_callbacks& cb, train_result& result);

  // The epoch's record from this rank's loss units, pairs and seconds (summed, and the
  // slowest, over the ranks: one bootstrap round); adds its pairs to `result`.
  epoch_record epoch_totals(int epoch, std::int64_t loss_sum, std::uint64_t pairs, double secs,
                            train_result& result);

  // Epoch `epochs_done`'s tables into DIR/epoch-N, then state.txt names it (renamed into
  // place: the commit), then older epochs go.  A failure leaves DIR as it was: the state names
  // the last good epoch and the new epoch's directory is removed.
  void store(int epochs_done, const std::vector<epoch_record>& curve);

  // ---- blocks.cpp: the `blocks` schedule (train/trainer.hpp) ----

  bool blocks() const { return s_.schedule == train_schedule::blocks; }

  // The schedule's parts made at construction: the working tables (one rank each, this rank's
  // GPU or host) and every partition's list of node ids.
  void setup_blocks();

  // run_epoch for the blocks schedule.
  epoch_record run_epoch_blocks(int epoch, const train_callbacks& cb, train_result& result);

  // This rank's share of an episode's pairs, grouped into blocks (group_episode), before they
  // go to the ranks that train them (exchange_episode).
  struct grouped_pairs {
    std::vector<std::uint64_t> counts;  // P^2 block counts
    std::size_t pairs = 0;
    int set = 0;  // pair set and send buffers used
  };

  // This rank's share of the episode's slots [s0, s1) assembled (pair set `set`) and grouped
  // into blocks (d_sent_*[set] on the GPU path, sent_* on the CPU path).  Reads no table and
  // makes no collective unless the walks are collective: the GPU path runs it on a worker
  // thread for the next episode while this one trains.
  grouped_pairs group_episode(std::uint64_t epoch, std::uint64_t s0, std::uint64_t s1, int set);

  // The grouped pairs sent to the ranks that train their blocks (the counts by the bootstrap,
  // the pairs by one alltoallv) and put in block order: blocks_at_ then points at this rank's
  // blocks' centers and targets, block b's at block_start_[b - first block].  Collective.
  void exchange_episode(const grouped_pairs& g);

  // Partition c of `global` (weights and optimizer state) copied into `work`'s first rows, and
  // back (to_global).  Synchronous on the GPU path's stream for the index check.
  void move_partition(embedding::table& global, embedding::table& work, int c, bool to_global);

  // One step of a block on the working tables: its n pairs at the given rows (device or host
  // memory per path), learning rate lr, the optimizers' step counter t.  The GPU path waits for
  // nothing (the loss and the check word accumulate in d_totals_ over the round).
  void block_step(const std::int64_t* centers, const std::int64_t* targets, std::size_t n, float lr,
                  std::uint64_t t, step_totals& round);

  // ---- evaluate.cpp ----

  // Input vectors of `nodes` (every rank calls: distributed memory makes lookup collective).
  std::vector<float> read_rows(const std::vector<std::int64_t>& nodes);

  // The held-out edges and non-edges scored after epoch `epoch` (1-based; named when they
  // are not finite: train_diverged).
  link_scores evaluate(int epoch);

  // ---- state ----

  std::shared_ptr<wm::bootstrap> bs_;
  const graph::edge_split& split_;
  train_settings s_;
  std::uint64_t nodes_;
  std::shared_ptr<wm::communicator> comm_;
  int device_ = -1;
  // The GPU path's streams and events, owned (none on the CPU path or in a build without CUDA);
  // the destructor waits for the streams before they go.
  wm::cuda_stream stream_ = nullptr;
  wm::cuda_stream walk_stream_ = nullptr;  // assemble()'s GPU work (run_epoch overlaps it)
  // One rank: the input table's update beside the output table's (step_gpu).
  wm::cuda_stream input_stream_ = nullptr;
  wm::cuda_event sgns_done_ = nullptr, output_done_ = nullptr, input_done_ = nullptr;
  // The stream assemble() enqueues on: walk_stream_, or stream_ for a distributed graph's
  // collective walks (not overlapped).
  cudaStream_t assembly_stream_ = nullptr;
  static constexpr int phases = 4;  // lookups, SGNS, output update, input update
  wm::cuda_event events_[phases + 1] = {nullptr, nullptr, nullptr, nullptr, nullptr};
  wm::cuda_event pairs_ready_[2] = {nullptr, nullptr}, pairs_free_[2] = {nullptr, nullptr};
  double phase_s_[phases] = {};
  graph::csr_graph graph_;
  std::unique_ptr<graph::negative_sampler> negatives_;
  std::unique_ptr<graph::gpu_walker> walker_;
  embedding::table input_, output_;
  std::vector<std::int64_t> edge_src_;
  graph::gpu_window_pairs gpu_pairs_;
  std::size_t n_pairs_ = 0;    // pairs of the batch being stepped (pair set use_)
  int last_stored_epoch_ = 0;  // the epoch the checkpoint directory's state names (0: none)
  int use_ = 0;
  std::vector<std::int64_t> order_;  // the start order of round order_round_ of order_epoch_
  std::uint64_t order_epoch_ = ~std::uint64_t{0}, order_round_ = ~std::uint64_t{0};
  std::uint64_t slots_ = 1, total_slots_ = 0, steps_per_epoch_ = 0;
  // Per-step buffers.
  std::vector<std::int64_t> draws_, starts_, walks_, centers_, targets_;
  std::vector<float> center_rows_, target_rows_, center_grads_, target_grads_;
  // Two pair sets (d_centers_[set], d_targets_[set]): one stepped, one being assembled.
  wm::device_buffer d_centers_[2], d_targets_[2];
  wm::device_buffer d_starts_, d_walks_, d_draws_, d_center_rows_, d_target_rows_, d_center_grads_,
      d_target_grads_, d_target_coefs_, d_totals_;
  static constexpr int totals_words = 7;  // step_gpu's layout of d_totals_
  // The blocks schedule (blocks.cpp).
  int partitions_ = 0;
  // This rank alone (replicate_graph, the blocks schedule): the graph's and negatives' copy,
  // the working tables.
  std::shared_ptr<wm::communicator> self_comm_;
  embedding::table work_in_, work_out_;
  int work_in_part_ = -1;  // the node partition work_in_ holds (-1: none)
  std::vector<std::vector<std::int64_t>> part_nodes_;  // partition c's node ids (CPU path)
  std::vector<wm::device_buffer> d_part_nodes_;        // the same on the GPU path
  graph::gpu_block_pairs gpu_blocks_;
  // Partition c's negative sampler over its rows, and the tables' addresses for block_pairs
  // (host pointers on the CPU path, a device array of device pointers on the GPU path).
  std::vector<std::unique_ptr<graph::negative_sampler>> part_negatives_;
  std::vector<const graph::alias_entry*> part_tables_;
  wm::device_buffer d_part_tables_;
  std::vector<std::uint64_t> block_start_;  // this rank's blocks' first pairs (+ the end)
  std::vector<std::int64_t> block_centers_, block_targets_, sent_centers_, sent_targets_,
      recv_centers_, recv_targets_;
  wm::device_buffer d_block_centers_, d_block_targets_, d_sent_centers_[2], d_sent_targets_[2],
      d_recv_centers_, d_recv_targets_;
  // Events around a round's partition loads, block training and stores (4 per block).
  std::vector<wm::cuda_event> block_events_;
  // This episode's block-ordered centers and targets (exchange_episode).
  std::pair<const std::int64_t*, const std::int64_t*> blocks_at_{nullptr, nullptr};
};

}  // namespace wholestore::train::detail
