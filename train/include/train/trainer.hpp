/*
 * The node-embedding trainer as a library call: node embeddings by skip-gram with negative
 * sampling over random-walk windows (DeepWalk, node2vec) or over edges (LINE), scored by link
 * prediction on held-out edges.  A workload, not a program: `wholestore train` (apps/train.cpp)
 * calls train_embeddings, and a binding calls the same function the same way.  Nothing here
 * reads a config or prints: progress comes back through train_callbacks, results in
 * train_result, errors as exceptions.
 *
 * The graph (already split: graph/edge_split.hpp) sits in WholeMemory for the walks and the
 * negative sampler; two embedding tables (embedding/table.hpp) hold the input vectors (the
 * embeddings, initialised uniform in [-0.5/dim, 0.5/dim)) and the output vectors (zeros).
 *
 * The positive pairs of an epoch form one global sequence of pair slots:
 *   walk modes: walks_per_node rounds over all nodes, round r in the order of a shuffle keyed by
 *     (seed, epoch, r); walk w of the epoch gives slots w * S .. w * S + S - 1, slot (i, j) for
 *     every walk position i and every j != i with |i - j| <= window, i ascending then j
 *     ascending (S depends only on walk_length and window); a slot whose node is -1 (the walk
 *     ended at a node without out-edges) is skipped
 *   line: one slot per training edge (directed CSR entries): slot s takes edge
 *     rand_below(draw(key(seed, epoch), s), edges), with replacement
 * Batch b of an epoch is slots [b * batch_size, (b + 1) * batch_size); its K negatives per slot
 * are draws s * K .. s * K + K - 1 of the negative sampler keyed by (seed, epoch).  Every random
 * choice is a function of (seed, epoch, slot), never of a generator's state, so a run resumed
 * from a checkpoint continues exactly.
 *
 * Ranks split each batch's slots in contiguous chunks in rank order and pass their pairs to the
 * tables' apply_gradients in slot order: the concatenation is the one-rank batch, and since
 * the tables sum duplicate gradient rows in global batch order and the SGNS arithmetic is the
 * same bits on every path (embedding/sgns.hpp), the embeddings are bit for bit the same for
 * any rank count, thread count, and on the CPU and the GPU.  Losses are summed as integers in
 * units of 2^-24, exact in any order, so the loss curve is the same figure too.
 *
 * The learning rate decays linearly over all steps of the run: lr * max(min_lr_fraction,
 * 1 - step / total_steps), step counted from 0 over epochs.
 *
 * Schedules (train_settings::schedule) say how several ranks share this work:
 *   global  the trajectory above, the same bits on any rank count: every step reads and
 *           updates rows anywhere in both tables, so with several ranks each step exchanges
 *           gradient rows between GPUs.
 *   blocks  GraphVite's partitioned schedule: node v belongs to partition v % P (P =
 *           partitions, a multiple of the rank count) in both tables.  The epoch's slots are cut
 *           into episodes of about episode_slots() slots; an episode's pairs are
 *           grouped into the P x P blocks (center partition i, context partition c) with
 *           negatives drawn in the context's partition (graph/block_pairs.hpp), and trained in P
 *           rounds: round k trains blocks (i, (i + k) % P) for every i, which share no row of
 *           either table, so each rank trains its blocks on its own GPU's copies of their two
 *           partitions with no exchange.  Rank r holds node partitions [r P/R, (r + 1) P/R) and
 *           takes each round's context partitions from the tables and gives them back after
 *           (the copies cross NVLink once per round).  A block's pairs keep slot order and are
 *           trained in steps of batch_size / P pairs; the learning rate decays with the run's
 *           progress in slots as above.  The embeddings are bit for bit the same for every rank
 *           count that divides P, but not those of `global`.
 *
 * A training graph in distributed memory is walked collectively (DeepWalk only: node2vec with
 * p or q != 1 is refused as a bad setting): every rank walks once per batch, with no walks
 * when its chunk is empty, so the walks, and the embeddings, are those of continuous memory.
 *
 * Errors: bad settings throw logic_error naming the setting, on every rank; a run that diverges
 * throws train_diverged on every rank at the same step.  Checkpoints (checkpoint_dir) are a
 * directory train owns: state.txt names the last stored epoch, whose tables are
 * DIR/epoch-N/{input,output}; a directory holding anything else is refused before any change.
 * train_embeddings is collective over its bootstrap and synchronous: on the GPU path it owns its
 * streams and waits for them before it returns or throws.
 */
#pragma once

#include <embedding/table.hpp>
#include <graph/dataset.hpp>
#include <graph/edge_split.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/memory_type.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace wholestore::train {

enum class train_mode { deepwalk, node2vec, line };

/// "deepwalk", "node2vec", "line".
const char* train_mode_name(train_mode m);

/// How several ranks share the steps (see above).
enum class train_schedule { global, blocks };

/// "global", "blocks".
const char* train_schedule_name(train_schedule s);

/// The shipped optimizer: AdaGrad (train.yaml).
inline embedding::optimizer_options adagrad_options() {
  embedding::optimizer_options o;
  o.kind = embedding::optimizer_kind::adagrad;
  return o;
}

struct train_settings {
  train_mode mode = train_mode::deepwalk;
  int walk_length = 20;     ///< steps per walk, 1 to 100000 (DeepWalk, node2vec: 40 to 80)
  int window = 3;           ///< context half-width, 1 to 1024 (DeepWalk, node2vec: 5 to 10)
  int walks_per_node = 2;   ///< rounds of walks per epoch, 1 to 10000 (usual: 10 to 80)
  double p = 1.0, q = 1.0;  ///< node2vec (> 0)
  int negatives = 5;        ///< K, 1 to 1024 (word2vec, DeepWalk, node2vec: 1 to 20)
  bool negatives_by_degree = true;
  std::size_t dim = 128;            ///< 1 to 65536 (usual: 64 to 512)
  std::uint64_t batch_size = 4096;  ///< pair slots per step, all ranks together; 1 to 2^31
  int epochs = 2;                   ///< 1 to 1000000
  float lr = 0.1f;
  float min_lr_fraction = 0.0001f;
  embedding::optimizer_options optimizer = adagrad_options();
  /// distributed: DeepWalk, node2vec with p = q = 1, or LINE
  wholememory::memory_type graph_type = wholememory::memory_type::continuous;
  wholememory::memory_location graph_location = wholememory::memory_location::host;
  /// Every rank holds the whole training graph and the negative sampler's table in its own
  /// memory (continuous or chunked graphs): walks and draws read no other GPU.  Several ranks
  /// share one copy otherwise, and on several GPUs 3/4 of a walk's random reads then cross
  /// NVLink, which bounds the walks (and the blocks schedule's episodes) far below one GPU's
  /// rate.  Costs a copy of the CSR (8 bytes an edge) and 16 bytes a node per rank.
  bool replicate_graph = false;
  wholememory::memory_type table_type = wholememory::memory_type::continuous;
  wholememory::memory_location table_location = wholememory::memory_location::host;
  bool use_gpu = false;
  std::uint64_t seed = 0;
  int eval_every = 1;    ///< evaluate every N epochs (0: at the end only)
  int hits_k = 50;       ///< K of Hits@K, 1 to 1000000 (OGB: 20 to 100)
  unsigned threads = 0;  ///< CPU threads per rank (0: all cores)
  std::string checkpoint_dir;
  int checkpoint_every = 1;  ///< epochs between checkpoints (with checkpoint_dir)
  std::string resume_dir;
  int stop_after_epochs = 0;    ///< end the run after this many epochs of this call (0: all)
  bool keep_embeddings = true;  ///< rank 0 returns the input vectors (train_result::embeddings)
  train_schedule schedule = train_schedule::global;
  /// blocks: P, a multiple of the rank count and at most the node count (0: the rank count)
  int partitions = 0;
  /// blocks: steps a block takes per round on average, which sets the episode length
  /// (episode_slots) and so how often partitions move between GPUs; 0: about 32 pair slots per
  /// node an episode (shorter episodes interleave the partitions' updates more finely)
  int block_steps = 0;
  /// blocks: pairs a block trains per step (0: batch_size / partitions, so that a round's step
  /// over all blocks takes batch_size pairs, as a step of the global schedule)
  std::uint64_t block_batch = 0;
};

/// Training diverged: a step's pairs scored NaN or Inf, its mean loss passed 10 times the loss
/// of untrained tables, or the held-out scores were not finite.  Thrown on every rank at the
/// same step; the message names the step, the learning rate and the way out, and the checkpoint
/// directory keeps its last good epoch.
class train_diverged : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Link-prediction scores of held-out edges against as many non-edges.
struct link_scores {
  double auc = 0;   ///< ROC-AUC, ties counted half
  double hits = 0;  ///< share of positives scored above the hits_k-th highest negative
};

/// ROC-AUC (Mann-Whitney, ties half) and OGB-style Hits@k; hits is 1 when there are fewer
/// than k negatives.  Throws logic_error for an empty side.
link_scores score_links(const std::vector<double>& positive, const std::vector<double>& negative,
                        int hits_k);

struct epoch_record {
  int epoch = 0;            ///< 1-based
  double loss = 0;          ///< mean loss per positive pair
  std::uint64_t pairs = 0;  ///< positive pairs trained on
  bool evaluated = false;
  link_scores scores;
  double seconds = 0;  ///< this epoch's training time (without evaluation), slowest rank
};

struct train_result {
  std::vector<epoch_record> epochs;  ///< every epoch of the run, those before a resume included
  int first_epoch = 0;               ///< epochs already done by the checkpoint resumed from
  int last_epoch = 0;                ///< epochs done when this call returned
  link_scores final_scores;          ///< after the last epoch run (evaluated then)
  std::uint64_t pairs = 0;           ///< positive pairs of this call, all ranks
  double train_s = 0;                ///< this call's training time (slowest rank), no evaluation
  /// Rank 0, host time: walk_s waiting for pairs (walks, negatives, pair building), step_s in
  /// the steps (SGNS, updates, the barrier).  On the GPU path batch b + 1's pairs are made on a
  /// second stream while batch b's step runs, so walk_s is the epochs' first batches plus the
  /// part of the next batch's assembly the step did not hide.
  double walk_s = 0, step_s = 0;
  /// Rank 0, GPU path: the step stream's time in the lookups (distributed tables only), the
  /// SGNS kernel and the two tables' updates, the output table's first (CUDA events around
  /// each; host waits inside a phase count in it).  With one rank the input table's update
  /// runs on a second stream beside the output table's: its phase is what is left of it
  /// once the output update is done.  The next batch's walks run on the other
  /// stream at the same time and share the GPU, so these include that contention; they do not
  /// include the walks themselves.
  double gpu_lookup_s = 0, gpu_sgns_s = 0, gpu_input_update_s = 0, gpu_output_update_s = 0;
  /// Rank 0, GPU path, blocks schedule: the step stream's time taking partitions from the
  /// tables, training the blocks, and giving the partitions back (CUDA events around each).
  double gpu_block_load_s = 0, gpu_block_train_s = 0, gpu_block_store_s = 0;
  /// Rank 0, blocks schedule, host time: exchanging each episode's pairs (until the step
  /// stream has them), in the partition loads, enqueueing the blocks' steps, in the stores,
  /// and at the rounds' ends (waiting for the stream and for the other ranks).
  double host_exchange_s = 0, host_load_s = 0, host_steps_s = 0, host_store_s = 0,
         host_round_end_s = 0;
  /// Pairs each rank trained in the last epoch: the fewest and the most (the blocks schedule's
  /// balance; every rank waits for the slowest at each round).
  std::uint64_t rank_pairs_min = 0, rank_pairs_max = 0;
  std::uint64_t steps = 0;        ///< steps of this call
  std::vector<float> embeddings;  ///< rank 0 with keep_embeddings: num_nodes x dim input vectors
};

/// Progress reports (called on every rank, on the calling thread; `wholestore train` shows
/// rank 0's).
struct train_callbacks {
  /// After each step: epoch (1-based), step in the epoch (1-based), steps per epoch, the mean
  /// loss of this rank's pairs so far in the epoch.
  std::function<void(int, std::uint64_t, std::uint64_t, double)> step;
  /// After each epoch (its evaluation included).
  std::function<void(const epoch_record&)> epoch;
};

/// Trains on `split.train` (the same on every rank) and evaluates on its held-out edges.
/// Collective over `bs`: every rank passes the same settings and split.  Throws logic_error for
/// bad settings (naming them), a training graph without edges, a checkpoint of another shape,
/// and as the layers below.
train_result train_embeddings(std::shared_ptr<wholememory::bootstrap> bs,
                              const graph::edge_split& split, const train_settings& settings,
                              const train_callbacks& callbacks = {});

/// The blocks schedule's episode length in pair slots, before an epoch is cut into episodes of
/// equal length (the nearest whole number of them, at least one): block_steps x batch_size x
/// partitions, or for block_steps 0 the multiple of batch_size x partitions nearest below
/// 32 x nodes (at least one).
std::uint64_t episode_slots(const train_settings& s, std::uint64_t nodes, int partitions);

/// Pair slots per walk: (i, j) with i, j in [0, walk_length], i != j, |i - j| <= window.
std::uint64_t slots_per_walk(int walk_length, int window);

}  // namespace wholestore::train
