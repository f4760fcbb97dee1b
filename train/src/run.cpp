// train_embeddings (train/trainer.hpp): pair slots -> walks and negatives -> lookups -> SGNS
// gradients -> apply_gradients on both tables, batch by batch; evaluation and checkpoints at
// epoch ends.  This file: train_embeddings and the settings check, the trainer's construction,
// run and run_epoch, the divergence checks and the checkpoint stores (trainer_impl.hpp says
// where the rest is).
#include "checkpoint_state.hpp"
#include "trainer_impl.hpp"

#include <embedding/checkpoint.hpp>
#include <graph/random.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <future>
#include <sstream>
#include <utility>

namespace wholestore::train {

namespace wm = wholememory;

const char* train_mode_name(train_mode m) {
  switch (m) {
    case train_mode::deepwalk:
      return "deepwalk";
    case train_mode::node2vec:
      return "node2vec";
    default:
      return "line";
  }
}

const char* train_schedule_name(train_schedule s) {
  return s == train_schedule::blocks ? "blocks" : "global";
}

std::uint64_t episode_slots(const train_settings& s, std::uint64_t nodes, int partitions) {
  const std::uint64_t parts = static_cast<std::uint64_t>(std::max(1, partitions));
  const std::uint64_t round = s.batch_size * parts;  // a step of every block of a round
  if (s.block_steps > 0) return static_cast<std::uint64_t>(s.block_steps) * round;
  return std::max(round, 32 * nodes / round * round);
}

std::uint64_t slots_per_walk(int walk_length, int window) {
  return graph::window_slots(walk_length, window);
}

namespace detail {
namespace {

using graph::mix64;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void check_settings(const train_settings& s) {
  // Upper bounds (issue 36): past them a setting is a typo that would run for days without a
  // word or die in an allocation, not a workload.  Each covers the published uses many times
  // over: word2vec, DeepWalk and node2vec train with 1-20 negatives, windows of 5-10, walks of
  // 40-80 steps and 10-80 walks per node; embeddings have 64-512 dimensions; OGB scores Hits@20
  // to Hits@100.  trainer.hpp's train_settings names the same bounds.
  constexpr int max_walk_length = 100000;
  constexpr int max_window = 1024;
  constexpr int max_walks_per_node = 10000;
  constexpr int max_negatives = 1024;
  constexpr std::size_t max_dim = 65536;
  constexpr std::uint64_t max_batch_size = std::uint64_t{1} << 31;
  constexpr int max_epochs = 1000000;
  constexpr int max_hits_k = 1000000;
  WM_EXPECTS(s.walk_length >= 1, "walk_length must be at least 1, got " << s.walk_length);
  WM_EXPECTS(s.walk_length <= max_walk_length,
             "walk_length must be at most "
                 << max_walk_length << ", got " << s.walk_length
                 << ": every walk is held whole and gives up to 2 x window pair slots a step "
                    "(DeepWalk and node2vec walk 40 to 80 steps); for more pairs raise "
                    "walks_per_node or epochs");
  WM_EXPECTS(s.window >= 1, "window must be at least 1, got " << s.window);
  WM_EXPECTS(s.window <= max_window, "window must be at most "
                                         << max_window << ", got " << s.window
                                         << ": every walk position is paired with up to 2 x window "
                                            "others (DeepWalk and node2vec use 5 to 10); lower "
                                            "window");
  WM_EXPECTS(s.walks_per_node >= 1, "walks_per_node must be at least 1, got " << s.walks_per_node);
  WM_EXPECTS(s.walks_per_node <= max_walks_per_node,
             "walks_per_node must be at most "
                 << max_walks_per_node << ", got " << s.walks_per_node
                 << ": an epoch walks that many times from every node (DeepWalk and node2vec use "
                    "10 to 80); for more passes over the graph raise epochs");
  WM_EXPECTS(s.p > 0 && std::isfinite(s.p), "p must be a positive number, got " << s.p);
  WM_EXPECTS(s.q > 0 && std::isfinite(s.q), "q must be a positive number, got " << s.q);
  WM_EXPECTS(s.negatives >= 1, "negatives must be at least 1, got " << s.negatives);
  WM_EXPECTS(s.negatives <= max_negatives,
             "negatives must be at most "
                 << max_negatives << ", got " << s.negatives
                 << ": every positive pair is trained against that many negatives, each a row "
                    "looked up and updated (word2vec, DeepWalk and node2vec use 1 to 20); lower "
                    "negatives");
  WM_EXPECTS(s.dim >= 1, "dim must be at least 1, got " << s.dim);
  WM_EXPECTS(s.dim <= max_dim, "dim must be at most "
                                   << max_dim << ", got " << s.dim
                                   << ": each of the two tables holds nodes x dim floats (node "
                                      "embeddings use 64 to 512); lower dim");
  WM_EXPECTS(s.batch_size >= 1, "batch_size must be at least 1, got " << s.batch_size);
  WM_EXPECTS(s.batch_size <= max_batch_size,
             "batch_size must be at most "
                 << max_batch_size << " (2^31), got " << s.batch_size
                 << ": a step holds its pair slots, their negatives and all their rows at once; "
                    "lower batch_size (the shipped config has 4096)");
  WM_EXPECTS(s.epochs >= 1, "epochs must be at least 1, got " << s.epochs);
  WM_EXPECTS(s.epochs <= max_epochs, "epochs must be at most "
                                         << max_epochs << ", got " << s.epochs
                                         << ": skip-gram training converges in a few to a few "
                                            "hundred passes; lower epochs");
  WM_EXPECTS(s.lr > 0 && std::isfinite(s.lr), "lr must be a positive number, got " << s.lr);
  WM_EXPECTS(s.min_lr_fraction >= 0 && s.min_lr_fraction <= 1,
             "min_lr_fraction must be in [0, 1], got " << s.min_lr_fraction);
  WM_EXPECTS(s.hits_k >= 1, "hits_k must be at least 1, got " << s.hits_k);
  WM_EXPECTS(s.hits_k <= max_hits_k, "hits_k must be at most "
                                         << max_hits_k << ", got " << s.hits_k
                                         << ": Hits@K compares the held-out edges with the K-th "
                                            "highest non-edge (OGB uses K of 20 to 100); lower "
                                            "hits_k");
  WM_EXPECTS(s.eval_every >= 0, "eval_every must be >= 0, got " << s.eval_every);
  WM_EXPECTS(s.checkpoint_every >= 1,
             "checkpoint_every must be at least 1, got " << s.checkpoint_every);
  WM_EXPECTS(s.use_gpu || (s.graph_location == wm::memory_location::host &&
                           s.table_location == wm::memory_location::host),
             "device memory for the graph or the tables needs the GPU path (device: gpu)");
}

}  // namespace

trainer::trainer(std::shared_ptr<wm::bootstrap> bs, const graph::edge_split& split,
                 const train_settings& s)
    : bs_(std::move(bs)), split_(split), s_(s), nodes_(split.train.num_nodes) {
  comm_ = wm::make_host_communicator(bs_);
  if (s_.use_gpu) {
    device_ = wm::default_device(*comm_);
    wm::set_device(device_);
    stream_ = wm::cuda_stream(wm::stream_flags::blocking);
    // Non-blocking: the walks of the next batch must not wait for the legacy stream's
    // implicit order with stream_ (assemble() enqueues only on this stream).
    walk_stream_ = wm::cuda_stream(wm::stream_flags::non_blocking);
    input_stream_ = wm::cuda_stream(wm::stream_flags::non_blocking);
    // One GPU per rank: the tables' exchanges (apply_gradients sends every gradient row to
    // its owner) go over NCCL, peer to peer.  The host communicator stages them through host
    // memory, which made two ranks on two GPUs ten times slower than one.  Ranks sharing a
    // GPU keep the host communicator (NCCL needs a GPU per rank), except for distributed
    // tables and a distributed graph (gpu_walker walks it collectively over the graph's
    // communicator, which must be NCCL), which need NCCL and say so when they cannot have it.
    const bool distributed = s_.table_type == wm::memory_type::distributed ||
                             s_.graph_type == wm::memory_type::distributed;
    if (bs_->size() > 1 && !distributed) {
      const wm::gpu_sharing sharing = wm::describe_gpu_sharing(*bs_, device_);
      if (!sharing.shared()) comm_ = wm::make_nccl_communicator(bs_, device_);
    }
    if (distributed) comm_ = wm::make_nccl_communicator(bs_);
  }
  // The CPU path's communicator is the host one, which random_walks_host needs for a
  // distributed graph; the GPU path's is NCCL for one (above).
  WM_EXPECTS(!s_.replicate_graph || s_.graph_type != wm::memory_type::distributed,
             "replicate_graph needs a continuous or chunked graph (graph.type); a distributed "
             "graph is spread over the ranks by design");
  // This rank alone: the replicated graph's and the blocks schedule's working tables'.
  if (s_.replicate_graph || blocks()) self_comm_ = comm_->split(bs_->rank(), 0);
  const std::shared_ptr<wm::communicator>& graph_comm = s_.replicate_graph ? self_comm_ : comm_;
  graph_ = graph::make_graph(graph_comm, split.train, s_.graph_type, s_.graph_location);
  // Made here, on every rank at the same point, rather than at the first batch a rank walks:
  // a rank may have no walks in a batch, and a distributed graph's walks are collective.
  if (s_.use_gpu && s_.mode != train_mode::line)
    walker_ = std::make_unique<graph::gpu_walker>(graph_);
  // A distributed graph's walks are assembled on the step stream, in sequence with the steps
  // (run_epoch): a collective on a second stream beside the tables' could deadlock.
  assembly_stream_ = collective_walks() ? stream_ : walk_stream_;
  graph::negative_options no;
  no.by_degree = s_.negatives_by_degree;
  // The GPU path draws walk-mode negatives on the device: the alias table there too (random
  // reads of host memory would bound it).  LINE draws on the host on either path.
  if (line_on_gpu() || (s_.use_gpu && s_.mode != train_mode::line))
    no.location = wm::memory_location::device;
  negatives_ = std::make_unique<graph::negative_sampler>(graph_comm, split.train.row_offsets, no);
  if (s_.mode == train_mode::line) {
    if (!line_on_gpu()) {  // the host builds the pairs: every edge's source, once
      edge_src_.resize(split.train.num_edges());
      for (std::uint64_t u = 0; u < nodes_; ++u)
        for (std::int64_t e = split.train.row_offsets[u]; e < split.train.row_offsets[u + 1]; ++e)
          edge_src_[static_cast<std::size_t>(e)] = static_cast<std::int64_t>(u);
    }
    slots_ = 1;
  } else {
    slots_ = graph::window_slots(s_.walk_length, s_.window);
  }
  embedding::table_options to;
  to.rows = nodes_;
  to.dim = s_.dim;
  to.type = s_.table_type;
  to.location = s_.table_location;
  to.optimizer = s_.optimizer;
  to.init.method = embedding::init_options::uniform;
  to.init.a = -0.5 / static_cast<double>(s_.dim);
  to.init.b = 0.5 / static_cast<double>(s_.dim);
  to.init.seed = mix64(s_.seed ^ 0x1f83d9abfb41bd6bull);
  input_ = embedding::table::create(comm_, to);
  to.init.method = embedding::init_options::zeros;
  output_ = embedding::table::create(comm_, to);
  total_slots_ =
      (s_.mode == train_mode::line ? split.train.num_edges()
                                   : nodes_ * static_cast<std::uint64_t>(s_.walks_per_node)) *
      slots_;
  steps_per_epoch_ = (total_slots_ + s_.batch_size - 1) / s_.batch_size;
  if (blocks()) {
    setup_blocks();
  } else {
    s_.partitions = 0;  // state.txt records the partitions of the blocks schedule only
  }
}

trainer::~trainer() {
  // A step that threw may have left work on any stream; the members destroy the events and
  // streams after this.
  walk_stream_.synchronize_no_throw();
  input_stream_.synchronize_no_throw();
  stream_.synchronize_no_throw();
}

train_result trainer::run(const train_callbacks& cb) {
  train_result result;
  int first_epoch = 0;
  if (!s_.checkpoint_dir.empty()) last_stored_epoch_ = claim_checkpoint_dir(s_.checkpoint_dir);
  if (!s_.resume_dir.empty()) {
    const saved_state st = read_state(s_.resume_dir);
    WM_EXPECTS(st.dim == s_.dim, "resume: the checkpoint in " << s_.resume_dir << " has dim "
                                                              << st.dim << ", this run has dim "
                                                              << s_.dim);
    WM_EXPECTS(st.nodes == nodes_, "resume: the checkpoint in "
                                       << s_.resume_dir << " has " << st.nodes
                                       << " nodes, this run's graph has " << nodes_);
    WM_EXPECTS(st.mode == train_mode_name(s_.mode),
               "resume: the checkpoint in " << s_.resume_dir << " was trained with mode " << st.mode
                                            << ", this run has " << train_mode_name(s_.mode));
    check_resume_settings(s_.resume_dir, st, s_);
    WM_EXPECTS(st.epoch <= s_.epochs, "resume: the checkpoint in "
                                          << s_.resume_dir << " has done " << st.epoch
                                          << " epochs, more than this run's " << s_.epochs);
    embedding::load_checkpoint(input_, epoch_dir(s_.resume_dir, st.epoch) + "/input");
    embedding::load_checkpoint(output_, epoch_dir(s_.resume_dir, st.epoch) + "/output");
    first_epoch = st.epoch;
    result.epochs = st.curve;
  }
  result.first_epoch = first_epoch;
  int last = s_.epochs;
  if (s_.stop_after_epochs > 0) last = std::min(last, first_epoch + s_.stop_after_epochs);
  bool evaluated_last = false;
  for (int epoch = first_epoch; epoch < last; ++epoch) {
    epoch_record rec =
        blocks() ? run_epoch_blocks(epoch, cb, result) : run_epoch(epoch, cb, result);
    const bool eval = epoch + 1 == s_.epochs || epoch + 1 == last ||
                      (s_.eval_every > 0 && (epoch + 1) % s_.eval_every == 0);
    if (eval) {
      rec.evaluated = true;
      rec.scores = evaluate(epoch + 1);
      result.final_scores = rec.scores;
    }
    evaluated_last = eval;
    result.epochs.push_back(rec);
    if (!s_.checkpoint_dir.empty() &&
        ((epoch + 1) % s_.checkpoint_every == 0 || epoch + 1 == last)) {
      store(epoch + 1, result.epochs);
    }
    if (cb.epoch) cb.epoch(rec);
  }
  if (!evaluated_last) result.final_scores = evaluate(last);  // nothing to run: score the resumed
  result.last_epoch = last;
  // Timings: the slowest rank's.
  std::vector<double> all(static_cast<std::size_t>(bs_->size()));
  bs_->allgather(&result.train_s, all.data(), sizeof(double));
  result.train_s = *std::max_element(all.begin(), all.end());
  // Rank 0 reads every row (the other ranks join the lookup, collective on distributed
  // memory, with nothing to read).
  std::vector<std::int64_t> every;
  if (s_.keep_embeddings && bs_->rank() == 0) {
    every.resize(nodes_);
    for (std::uint64_t i = 0; i < nodes_; ++i) every[i] = static_cast<std::int64_t>(i);
  }
  if (s_.keep_embeddings) result.embeddings = read_rows(every);
  return result;
}

bool trainer::on_device_totals() const {
  return s_.use_gpu && bs_->size() > 1 && comm_->get_backend() == wm::backend::nccl;
}

void trainer::check_step(int epoch, std::uint64_t b, float lr, const step_totals& st,
                         std::size_t step_pairs) {
  struct totals {
    std::int64_t loss;
    std::uint64_t nonfinite, pairs;
  } mine{st.loss_units, st.nonfinite, step_pairs};
  totals sum{0, 0, 0};
  if (st.summed) {  // summed on the device by step_gpu
    sum = {st.all_loss_units, st.all_nonfinite, st.all_pairs};
  } else {
    std::vector<totals> all(static_cast<std::size_t>(bs_->size()));
    bs_->allgather(&mine, all.data(), sizeof(totals));
    for (const totals& x : all) {
      sum.loss += x.loss;
      sum.nonfinite += x.nonfinite;
      sum.pairs += x.pairs;
    }
  }
  const double mean =
      sum.pairs ? static_cast<double>(sum.loss) / loss_unit / static_cast<double>(sum.pairs) : 0;
  const double limit = divergence_factor * untrained_loss();
  if (sum.nonfinite == 0 && mean <= limit) return;
  std::ostringstream why;
  if (sum.nonfinite) {
    why << sum.nonfinite << " of its " << sum.pairs
        << " pairs had NaN or infinite scores (the tables hold NaN or Inf)";
  } else {
    why << "the mean loss per pair reached " << mean << ", over " << divergence_factor
        << " times the " << untrained_loss() << " of untrained tables";
  }
  diverged("at epoch " + std::to_string(epoch + 1) + ", step " + std::to_string(b + 1) + " of " +
               std::to_string(steps_per_epoch_) + " (lr " + number(lr) + ")",
           why.str());
}

std::string trainer::number(double x) {
  std::ostringstream o;
  o << x;
  return o.str();
}

void trainer::diverged(const std::string& where, const std::string& why) const {
  std::ostringstream m;
  m << "training diverged " << where << ": " << why << ". ";
  const bool kept = !s_.checkpoint_dir.empty() && last_stored_epoch_ > 0;
  if (kept) {
    m << "The last good checkpoint, " << epoch_dir(s_.checkpoint_dir, last_stored_epoch_)
      << ", is unchanged; ";
  } else {
    m << "Nothing was stored; ";
  }
  m << "lower the learning rate (lr " << s_.lr << ", e.g. --set lr=" << s_.lr / 10
    << (kept ? " with --resume " + s_.checkpoint_dir + " to go on from that checkpoint)" : ")");
  if (s_.optimizer.kind == embedding::optimizer_kind::sgd)
    m << " or use the adam or adagrad optimizer, whose steps are bounded";
  throw train_diverged(m.str());
}

epoch_record trainer::run_epoch(int epoch, const train_callbacks& cb, train_result& result) {
  const std::uint64_t e = static_cast<std::uint64_t>(epoch);
  const int rank = bs_->rank(), ranks = bs_->size();
  const std::uint64_t total_steps = steps_per_epoch_ * static_cast<std::uint64_t>(s_.epochs);
  std::int64_t loss_sum = 0;
  std::uint64_t pairs = 0;
  bs_->barrier();
  const auto t0 = std::chrono::steady_clock::now();
  // This rank's slots of batch b: the batch cut in contiguous chunks in rank order (the last
  // batch of the epoch may be short).
  auto slots_of = [&](std::uint64_t b) {
    const std::uint64_t begin = b * s_.batch_size;
    const std::uint64_t len = std::min(total_slots_, begin + s_.batch_size) - begin;
    return std::make_pair(begin + len * static_cast<std::uint64_t>(rank) / ranks,
                          begin + len * static_cast<std::uint64_t>(rank + 1) / ranks);
  };
  // The GPU path assembles batch b + 1 on a worker thread (walk_stream_, the other pair set)
  // while batch b's step runs on stream_: the walks, latency-bound random reads of the graph,
  // overlap the bandwidth-bound updates.  They read no table, so the pairs (and the bits)
  // are the same as in sequence.  Batches never cross an epoch: evaluation, checkpoints and
  // resume see the epoch end exactly as before.  An error of the worker (a corrupt graph,
  // a bad start) is rethrown by get() after batch b's step, before batch b + 1's; if the
  // step throws first, the future's destructor waits for the worker before unwinding.
  // walk_s counts the host's time waiting for pairs: the epoch's first batch, and whatever
  // of the next batch's assembly the step did not hide.
  // A distributed graph's walks are collectives over the communicator the step's updates
  // use, so they are not overlapped: every rank assembles every batch (one walker call each,
  // with no walks when its chunk is empty) on this thread, on stream_, after the previous
  // step, so all ranks call the collectives in the same order.
  const bool overlap = s_.use_gpu && !collective_walks();
  std::future<std::size_t> next;
  int set = 0;
  auto ta = std::chrono::steady_clock::now();
  std::size_t pending = 0;
  if (steps_per_epoch_ > 0) {
    const auto [lo, hi] = slots_of(0);
    pending = assemble(e, lo, hi, set);
  }
  result.walk_s += seconds_since(ta);
  for (std::uint64_t b = 0; b < steps_per_epoch_; ++b) {
    use_ = set;
    n_pairs_ = pending;
    const bool more = b + 1 < steps_per_epoch_;
    auto start_next = [&] {
      if (!more || !overlap) return;
      const auto [lo, hi] = slots_of(b + 1);
      next = std::async(std::launch::async, [this, e, lo = lo, hi = hi, other = 1 - set] {
        wm::set_device(device_);
        return assemble(e, lo, hi, other);
      });
    };
    ta = std::chrono::steady_clock::now();
    const std::uint64_t t = e * steps_per_epoch_ + b;
    const double decay = std::max(static_cast<double>(s_.min_lr_fraction),
                                  1.0 - static_cast<double>(t) / static_cast<double>(total_steps));
    const float lr = static_cast<float>(s_.lr * decay);
    const step_totals st = step(lr, start_next);
    loss_sum += st.loss_units;
    pairs += n_pairs_;
    // The next lookups read rows other ranks update (the ranks wait for each other here),
    // and every rank stops at the same step when the run diverged.
    check_step(epoch, b, lr, st, n_pairs_);
    result.step_s += seconds_since(ta);
    ++result.steps;
    if (cb.step) {
      cb.step(epoch + 1, b + 1, steps_per_epoch_,
              pairs ? static_cast<double>(loss_sum) / loss_unit / static_cast<double>(pairs) : 0.0);
    }
    if (more) {
      ta = std::chrono::steady_clock::now();
      if (next.valid()) {
        pending = next.get();
      } else {
        const auto [lo, hi] = slots_of(b + 1);
        pending = assemble(e, lo, hi, 1 - set);
      }
      set = 1 - set;
      result.walk_s += seconds_since(ta);
    }
  }
  const double secs = seconds_since(t0);
  result.train_s += secs;
  result.gpu_lookup_s = phase_s_[0];
  result.gpu_sgns_s = phase_s_[1];
  result.gpu_output_update_s = phase_s_[2];
  result.gpu_input_update_s = phase_s_[3];
  return epoch_totals(epoch, loss_sum, pairs, secs, result);
}

epoch_record trainer::epoch_totals(int epoch, std::int64_t loss_sum, std::uint64_t pairs,
                                   double secs, train_result& result) {
  const int ranks = bs_->size();
  // The epoch's totals over ranks: exact integer sums.
  struct totals {
    std::int64_t loss;
    std::uint64_t pairs;
    double seconds;
  } mine{loss_sum, pairs, secs};
  std::vector<totals> all(static_cast<std::size_t>(ranks));
  bs_->allgather(&mine, all.data(), sizeof(totals));
  epoch_record rec;
  rec.epoch = epoch + 1;
  std::int64_t loss_total = 0;
  result.rank_pairs_min = all.front().pairs;
  result.rank_pairs_max = 0;
  for (const totals& x : all) {
    loss_total += x.loss;
    rec.pairs += x.pairs;
    rec.seconds = std::max(rec.seconds, x.seconds);
    result.rank_pairs_min = std::min<std::uint64_t>(result.rank_pairs_min, x.pairs);
    result.rank_pairs_max = std::max<std::uint64_t>(result.rank_pairs_max, x.pairs);
  }
  rec.loss = rec.pairs
                 ? static_cast<double>(loss_total) / loss_unit / static_cast<double>(rec.pairs)
                 : 0.0;
  result.pairs += rec.pairs;
  return rec;
}

void trainer::store(int epochs_done, const std::vector<epoch_record>& curve) {
  sync();
  const std::string& dir = s_.checkpoint_dir;
  const std::string target = epoch_dir(dir, epochs_done);
  try {
    if (bs_->rank() == 0) {
      // A killed run's leftover of this epoch (never the one the state names: epochs only
      // grow) is ours to replace.
      if (is_our_epoch_dir(target)) fs::remove_all(target);
      fs::create_directories(target);
    }
    bs_->barrier();
    embedding::store_checkpoint(input_, target + "/input");
    embedding::store_checkpoint(output_, target + "/output");
  } catch (...) {
    std::error_code ec;
    if (bs_->rank() == 0 && is_our_epoch_dir(target)) fs::remove_all(target, ec);
    throw;
  }
  bs_->barrier();
  if (bs_->rank() == 0) {
    saved_state st;
    st.epoch = epochs_done;
    st.nodes = nodes_;
    st.dim = s_.dim;
    st.mode = train_mode_name(s_.mode);
    st.settings = saved_settings(s_);
    st.curve = curve;
    write_state(dir, st);
    // Older epochs' tables are no longer named by the state (only directories of our own
    // shape go: claim_checkpoint_dir checked them, and checks again here).
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().filename() != fs::path(target).filename() && is_our_epoch_dir(entry.path()))
        fs::remove_all(entry.path());
    }
  }
  last_stored_epoch_ = epochs_done;
  bs_->barrier();
}

}  // namespace detail

train_result train_embeddings(std::shared_ptr<wm::bootstrap> bs, const graph::edge_split& split,
                              const train_settings& settings, const train_callbacks& callbacks) {
  detail::check_settings(settings);
  WM_EXPECTS(split.train.num_edges() > 0, "the training graph has no edges: nothing to train on ("
                                              << split.train.num_nodes << " nodes)");
  WM_EXPECTS(!split.test_edges.empty() && !split.test_non_edges.empty(),
             "no held-out edges to evaluate on: raise the hold-out fraction");
  detail::trainer t(std::move(bs), split, settings);
  return t.run(callbacks);
}

}  // namespace wholestore::train
