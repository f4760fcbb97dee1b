// train_embeddings (train_loop.hpp): pair slots -> walks and negatives -> lookups -> SGNS
// gradients -> apply_gradients on both tables, batch by batch; evaluation and checkpoints at
// epoch ends.
#include "train_loop.hpp"

#include <embedding/checkpoint.hpp>
#include <embedding/sgns.hpp>
#include <embedding/table.hpp>
#include <graph/csr_graph.hpp>
#include <graph/detail/sample_select.hpp>
#include <graph/negatives.hpp>
#include <graph/walk_pairs.hpp>
#include <graph/walks.hpp>
#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#if defined(WHOLESTORE_HAS_CUDA)
#include <cuda_runtime_api.h>
#else
// The event type as CUDA's driver_types.h declares it (as wholememory/stream.hpp does for
// streams): the GPU members exist, unused, in a build without CUDA.
struct CUevent_st;
typedef struct CUevent_st* cudaEvent_t;
#endif

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

namespace wholestore::apps {

namespace wm = wholememory;
namespace fs = std::filesystem;
using graph::detail::mix64;

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

std::uint64_t slots_per_walk(int walk_length, int window) {
  return graph::window_slots(walk_length, window);
}

link_scores score_links(const std::vector<double>& positive, const std::vector<double>& negative,
                        int hits_k) {
  WM_EXPECTS(!positive.empty() && !negative.empty(),
             "score_links: needs positives and negatives, got " << positive.size() << " and "
                                                                << negative.size());
  // Total on any input: a NaN score ranks as -infinity (below every number, tied with -inf),
  // so the sort's order is strict-weak and the tie loop below always advances.
  auto ranked = [](double s) {
    return std::isnan(s) ? -std::numeric_limits<double>::infinity() : s;
  };
  std::vector<std::pair<double, int>> all;
  all.reserve(positive.size() + negative.size());
  for (double s : positive) all.emplace_back(ranked(s), 1);
  for (double s : negative) all.emplace_back(ranked(s), 0);
  std::sort(all.begin(), all.end());
  // Mann-Whitney: each positive counts the negatives below it, and half of those tied with it.
  double wins = 0, negatives_below = 0;
  for (std::size_t i = 0; i < all.size();) {
    std::size_t j = i;
    double pos = 0, neg = 0;
    for (; j < all.size() && all[j].first == all[i].first; ++j) (all[j].second ? pos : neg) += 1;
    wins += pos * (negatives_below + 0.5 * neg);
    negatives_below += neg;
    i = j;
  }
  link_scores out;
  out.auc = wins / (static_cast<double>(positive.size()) * static_cast<double>(negative.size()));
  if (hits_k < 1 || static_cast<std::size_t>(hits_k) > negative.size()) {
    out.hits = 1.0;
  } else {
    std::vector<double> neg(negative.size());
    std::transform(negative.begin(), negative.end(), neg.begin(), ranked);
    std::nth_element(neg.begin(), neg.begin() + (hits_k - 1), neg.end(), std::greater<double>());
    const double threshold = neg[static_cast<std::size_t>(hits_k - 1)];
    std::size_t above = 0;
    for (double s : positive) above += ranked(s) > threshold ? 1 : 0;
    out.hits = static_cast<double>(above) / static_cast<double>(positive.size());
  }
  return out;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

constexpr double loss_unit = 16777216.0;  // 2^24: losses summed as integers of 2^-24
// A step whose mean loss per pair is over this many times the untrained tables' stops the run.
constexpr double divergence_factor = 10.0;

void check_settings(const train_settings& s) {
  WM_EXPECTS(s.walk_length >= 1, "walk_length must be at least 1, got " << s.walk_length);
  WM_EXPECTS(s.window >= 1, "window must be at least 1, got " << s.window);
  WM_EXPECTS(s.walks_per_node >= 1, "walks_per_node must be at least 1, got " << s.walks_per_node);
  WM_EXPECTS(s.p > 0 && std::isfinite(s.p), "p must be a positive number, got " << s.p);
  WM_EXPECTS(s.q > 0 && std::isfinite(s.q), "q must be a positive number, got " << s.q);
  WM_EXPECTS(s.negatives >= 1, "negatives must be at least 1, got " << s.negatives);
  WM_EXPECTS(s.dim >= 1, "dim must be at least 1, got " << s.dim);
  WM_EXPECTS(s.batch_size >= 1, "batch_size must be at least 1, got " << s.batch_size);
  WM_EXPECTS(s.epochs >= 1, "epochs must be at least 1, got " << s.epochs);
  WM_EXPECTS(s.lr > 0 && std::isfinite(s.lr), "lr must be a positive number, got " << s.lr);
  WM_EXPECTS(s.min_lr_fraction >= 0 && s.min_lr_fraction <= 1,
             "min_lr_fraction must be in [0, 1], got " << s.min_lr_fraction);
  WM_EXPECTS(s.hits_k >= 1, "hits_k must be at least 1, got " << s.hits_k);
  WM_EXPECTS(s.eval_every >= 0, "eval_every must be >= 0, got " << s.eval_every);
  WM_EXPECTS(s.checkpoint_every >= 1,
             "checkpoint_every must be at least 1, got " << s.checkpoint_every);
  WM_EXPECTS(s.use_gpu || (s.graph_location == wm::memory_location::host &&
                           s.table_location == wm::memory_location::host),
             "device memory for the graph or the tables needs the GPU path (device: gpu)");
}

// A shuffle of all nodes keyed by (seed, epoch, round): Fisher-Yates on a counter-based mix.
std::vector<std::int64_t> round_order(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch,
                                      std::uint64_t round) {
  std::vector<std::int64_t> ids(n);
  for (std::uint64_t i = 0; i < n; ++i) ids[i] = static_cast<std::int64_t>(i);
  const std::uint64_t key = mix64(mix64(seed ^ 0x6a09e667f3bcc909ull) ^ mix64(epoch) ^
                                  mix64(round + 0x3c6ef372fe94f82bull));
  for (std::uint64_t i = n; i > 1; --i) {
    const std::uint64_t j = graph::detail::rand_below(mix64(key + i), i);
    std::swap(ids[i - 1], ids[j]);
  }
  return ids;
}

std::uint64_t epoch_key(std::uint64_t seed, std::uint64_t epoch, std::uint64_t purpose) {
  return mix64(mix64(seed + purpose * 0x9e3779b97f4a7c15ull) ^ epoch);
}

// ---- checkpoints: DIR/state.txt names the epoch whose tables are DIR/epoch-N/{input,output} --

struct saved_state {
  int epoch = 0;
  std::uint64_t nodes = 0, dim = 0;
  std::string mode;
  std::vector<epoch_record> curve;
};

void write_state(const std::string& dir, const saved_state& st) {
  std::ostringstream o;
  o << "format: wholestore-train 1\nepoch: " << st.epoch << "\nnodes: " << st.nodes
    << "\ndim: " << st.dim << "\nmode: " << st.mode << "\n";
  char line[256];
  for (const epoch_record& e : st.curve) {
    std::snprintf(line, sizeof line, "curve: %d %.17g %" PRIu64 " %d %.17g %.17g %.17g\n", e.epoch,
                  e.loss, e.pairs, e.evaluated ? 1 : 0, e.scores.auc, e.scores.hits, e.seconds);
    o << line;
  }
  const std::string tmp = dir + "/state.txt.tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << o.str();
    f.flush();
    WM_EXPECTS(f.good(), "checkpoint: cannot write " << tmp);
  }
  fs::rename(tmp, dir + "/state.txt");
}

saved_state read_state(const std::string& dir) {
  const std::string path = dir + "/state.txt";
  std::ifstream f(path);
  WM_EXPECTS(f.good(), "resume: " << dir << " is not a train checkpoint (no state.txt)");
  saved_state st;
  std::string line;
  bool format_ok = false;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "format:") {
      std::string name, version;
      in >> name >> version;
      format_ok = name == "wholestore-train" && version == "1";
    } else if (key == "epoch:") {
      in >> st.epoch;
    } else if (key == "nodes:") {
      in >> st.nodes;
    } else if (key == "dim:") {
      in >> st.dim;
    } else if (key == "mode:") {
      in >> st.mode;
    } else if (key == "curve:") {
      epoch_record e;
      int evaluated = 0;
      in >> e.epoch >> e.loss >> e.pairs >> evaluated >> e.scores.auc >> e.scores.hits >> e.seconds;
      e.evaluated = evaluated != 0;
      st.curve.push_back(e);
    }
  }
  WM_EXPECTS(format_ok && st.epoch >= 1, "resume: " << path << " is not a train checkpoint state");
  return st;
}

std::string epoch_dir(const std::string& dir, int epoch) {
  return dir + "/epoch-" + std::to_string(epoch);
}

// "epoch-" and decimal digits: the name of an epoch's tables.
bool is_epoch_name(const std::string& name) {
  return name.size() > 6 && name.size() <= 6 + 10 && name.rfind("epoch-", 0) == 0 &&
         name.find_first_not_of("0123456789", 6) == std::string::npos;
}

// An epoch directory as store() writes it: the two tables' stores, or what a killed store of
// them left (their temporary siblings), nothing else.
bool is_our_epoch_dir(const fs::path& path) {
  std::error_code ec;
  if (!is_epoch_name(path.filename().string()) || !fs::is_directory(fs::symlink_status(path, ec)))
    return false;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != "input" && name != "output" && name.rfind("input.tmp-", 0) != 0 &&
        name.rfind("output.tmp-", 0) != 0)
      return false;
  }
  return !ec;
}

// Checks that `dir` is a train checkpoint directory or can become one (missing or empty), and
// returns the epoch its state names (0: none yet).  train owns such a directory: it removes
// older epochs from it, so a directory holding anything else is refused before any change.
int claim_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return 0;
  WM_EXPECTS(fs::is_directory(st), "checkpoint: " << dir << " is not a directory");
  bool has_state = false;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name == "state.txt") {
      has_state = true;
      continue;
    }
    WM_EXPECTS(name == "state.txt.tmp" || is_our_epoch_dir(entry.path()),
               "checkpoint: " << dir << " holds '" << name
                              << "', which train --checkpoint did not write; give a new or "
                                 "empty directory, or one of train's checkpoints (nothing "
                                 "was changed)");
  }
  WM_EXPECTS(!ec, "checkpoint: cannot list " << dir << ": " << ec.message());
  if (!has_state) return 0;
  try {
    return read_state(dir).epoch;
  } catch (const wm::logic_error&) {
    WM_FAIL(wm::logic_error, "checkpoint: " << dir
                                            << "/state.txt is not a train checkpoint's state; give "
                                               "a new or empty directory (nothing was changed)");
  }
}

// ---- the per-rank machinery ------------------------------------------------------------------

class trainer {
 public:
  trainer(std::shared_ptr<wm::bootstrap> bs, const graph::edge_split& split,
          const train_settings& s)
      : bs_(std::move(bs)), split_(split), s_(s), nodes_(split.train.num_nodes) {
    comm_ = wm::make_host_communicator(bs_);
    if (s_.use_gpu) {
      device_ = wm::default_device(*comm_);
      wm::set_device(device_);
#if defined(WHOLESTORE_HAS_CUDA)
      if (cudaStreamCreate(&stream_) != cudaSuccess) WM_FAIL(wm::cuda_error, "cudaStreamCreate");
      // Non-blocking: the walks of the next batch must not wait for the legacy stream's
      // implicit order with stream_ (assemble() enqueues only on this stream).
      if (cudaStreamCreateWithFlags(&walk_stream_, cudaStreamNonBlocking) != cudaSuccess ||
          cudaStreamCreateWithFlags(&input_stream_, cudaStreamNonBlocking) != cudaSuccess)
        WM_FAIL(wm::cuda_error, "cudaStreamCreateWithFlags");
#endif
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
    graph_ = graph::make_graph(comm_, split.train, s_.graph_type, s_.graph_location);
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
    negatives_ = std::make_unique<graph::negative_sampler>(comm_, split.train.row_offsets, no);
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
  }

  ~trainer() {
#if defined(WHOLESTORE_HAS_CUDA)
    // A step that threw may have left work on either stream.
    if (walk_stream_) cudaStreamSynchronize(walk_stream_);
    if (input_stream_) cudaStreamSynchronize(input_stream_);
    if (stream_) cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : {sgns_done_, output_done_, input_done_})
      if (e) cudaEventDestroy(e);
    for (int set = 0; set < 2; ++set) {
      if (pairs_ready_[set]) cudaEventDestroy(pairs_ready_[set]);
      if (pairs_free_[set]) cudaEventDestroy(pairs_free_[set]);
    }
    if (walk_stream_) cudaStreamDestroy(walk_stream_);
    if (input_stream_) cudaStreamDestroy(input_stream_);
    if (stream_) cudaStreamDestroy(stream_);
#endif
  }

  train_result run(const train_callbacks& cb) {
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
                 "resume: the checkpoint in " << s_.resume_dir << " was trained with mode "
                                              << st.mode << ", this run has "
                                              << train_mode_name(s_.mode));
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
      epoch_record rec = run_epoch(epoch, cb, result);
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

 private:
  // This rank's pairs of global slots [lo, hi), in slot order: center indices and (1 + K)
  // target indices each (context, then negatives), in centers_/targets_ on the CPU path and in
  // pair set `set` (d_centers_[set], d_targets_[set]) on the GPU path; returns the pair count.
  // The GPU path enqueues on assembly_stream_ only, after the last step that read the set
  // (pairs_free_), and marks the set ready (pairs_ready_), so it may run on a worker thread
  // while a step of the other set runs on stream_ (run_epoch).  It reads no table.
  // With a distributed graph in a walk mode (collective_walks) every rank must call this once
  // per batch, in step with the others, even for an empty [lo, hi): it walks then collectively.
  std::size_t assemble(std::uint64_t epoch, std::uint64_t lo, std::uint64_t hi, int set) {
    if (lo >= hi) {
      // This rank has no slots in the batch; it joins the other ranks' walks with none.
      if (collective_walks()) walk(nullptr, 0, walk_options_of(epoch, 0), nullptr);
      return 0;
    }
    if (s_.use_gpu) wait_event(assembly_stream_, pairs_free_[set]);
    const std::size_t pairs = assemble_into(epoch, lo, hi, set);
    if (s_.use_gpu) record_event(pairs_ready_[set], assembly_stream_);
    return pairs;
  }

  // Whether the walks are collective: a distributed graph walked (DeepWalk or node2vec) by
  // random_walks_host or gpu_walker, every rank in step over the graph's communicator.
  bool collective_walks() const {
    return s_.graph_type == wm::memory_type::distributed && s_.mode != train_mode::line;
  }

  // The walker's options for epoch `epoch`, walk index `first_walk` first; every rank passes
  // the same length, p and q.
  graph::walk_options walk_options_of(std::uint64_t epoch, std::uint64_t first_walk) const {
    graph::walk_options wo;
    wo.length = s_.walk_length;
    if (s_.mode == train_mode::node2vec) {
      wo.p = s_.p;
      wo.q = s_.q;
    }
    wo.seed = epoch_key(s_.seed, epoch, 1);
    wo.first_walk = first_walk;
    return wo;
  }

  // `count` walks from `starts` into `out`: host arrays on the CPU path, device arrays walked
  // on assembly_stream_ on the GPU path (synchronous either way).
  void walk(const std::int64_t* starts, std::size_t count, const graph::walk_options& wo,
            std::int64_t* out) {
    if (s_.use_gpu) {
      walker_->walk(starts, count, wo, out, assembly_stream_);
    } else {
      graph::random_walks_host(graph_, starts, count, wo, out, s_.threads);
    }
  }

  std::size_t assemble_into(std::uint64_t epoch, std::uint64_t lo, std::uint64_t hi, int set) {
    const std::uint64_t k = static_cast<std::uint64_t>(s_.negatives);
    const std::uint64_t draw_key = epoch_key(s_.seed, epoch, 2);
    const std::size_t slots = static_cast<std::size_t>(hi - lo);
    if (line_on_gpu()) {
      // Edges as pairs on the device: the negatives drawn there, then one thread per slot.
      auto* d_draws = static_cast<std::int64_t*>(
          d_draws_.reserve_discard(std::max<std::size_t>(slots * k, 1) * 8, device_));
      if (k) negatives_->sample(draw_key, lo * k, slots * k, d_draws, assembly_stream_);
      graph::edge_pairs_args ea;
      ea.key = epoch_key(s_.seed, epoch, 3);
      ea.lo = lo;
      ea.hi = hi;
      ea.negatives = d_draws;
      ea.negatives_per_pair = s_.negatives;
      ea.centers = device_indices(d_centers_[set], slots);
      ea.targets = device_indices(d_targets_[set], slots * (k + 1));
      graph::edge_pairs(graph_, ea, assembly_stream_);
      return slots;
    }
    if (s_.mode == train_mode::line) {
      // Edges as pairs on the host: the CPU path, and a distributed graph on the GPU path.
      draws_.resize(slots * k);
      negatives_->sample_host(draw_key, lo * k, draws_.size(), draws_.data(), s_.threads);
      centers_.resize(slots);
      targets_.resize(slots * (k + 1));
      const std::uint64_t key = epoch_key(s_.seed, epoch, 3);
      const std::uint64_t edges = split_.train.num_edges();
      for (std::uint64_t slot = lo; slot < hi; ++slot) {
        const auto e = graph::detail::rand_below(graph::detail::draw(key, slot), edges);
        const std::size_t p = static_cast<std::size_t>(slot - lo);
        centers_[p] = edge_src_[e];
        targets_[p * (k + 1)] = split_.train.col_indices[e];
        std::copy(draws_.begin() + p * k, draws_.begin() + (p + 1) * k,
                  targets_.begin() + p * (k + 1) + 1);
      }
      if (s_.use_gpu) {
        wm::copy_bytes(device_indices(d_centers_[set], slots), centers_.data(), slots * 8);
        wm::copy_bytes(device_indices(d_targets_[set], slots * (k + 1)), targets_.data(),
                       slots * (k + 1) * 8);
      }
      return slots;
    }
    const std::uint64_t w0 = lo / slots_, w1 = (hi - 1) / slots_ + 1;
    const std::size_t count = static_cast<std::size_t>(w1 - w0);
    const std::size_t row = static_cast<std::size_t>(s_.walk_length) + 1;
    starts_.resize(count);
    for (std::uint64_t w = w0; w < w1; ++w) {
      const std::uint64_t round = w / nodes_;
      if (epoch != order_epoch_ || round != order_round_) {  // O(nodes): once per round
        order_ = round_order(nodes_, s_.seed, epoch, round);
        order_epoch_ = epoch;
        order_round_ = round;
      }
      starts_[w - w0] = order_[w % nodes_];
    }
    const graph::walk_options wo = walk_options_of(epoch, w0);
    graph::window_pairs_args pa;
    pa.first_walk = w0;
    pa.walk_count = count;
    pa.walk_length = s_.walk_length;
    pa.window = s_.window;
    pa.lo = lo;
    pa.hi = hi;
    pa.negatives_per_pair = s_.negatives;
    if (s_.use_gpu) {
      // Walks, negatives and pairs on the device: only the starts go up and the pair count
      // comes back.
      auto* d_starts = static_cast<std::int64_t*>(d_starts_.reserve_discard(count * 8, device_));
      auto* d_walks =
          static_cast<std::int64_t*>(d_walks_.reserve_discard(count * row * 8, device_));
      auto* d_draws = static_cast<std::int64_t*>(d_draws_.reserve_discard(slots * k * 8, device_));
      // On assembly_stream_, not through the legacy stream (copy_bytes), which would wait for
      // the step running on stream_.  The walk waits for assembly_stream_ before it returns,
      // so starts_ is free again before the next call.
      copy_on(assembly_stream_, d_starts, starts_.data(), count * 8);
      walk(d_starts, count, wo, d_walks);
      negatives_->sample(draw_key, lo * k, slots * k, d_draws, assembly_stream_);
      pa.walks = d_walks;
      pa.negatives = d_draws;
      pa.centers = device_indices(d_centers_[set], slots);
      pa.targets = device_indices(d_targets_[set], slots * (k + 1));
      return gpu_pairs_.build(pa, assembly_stream_);
    }
    walks_.resize(count * row);
    walk(starts_.data(), count, wo, walks_.data());
    draws_.resize(slots * k);
    negatives_->sample_host(draw_key, lo * k, draws_.size(), draws_.data(), s_.threads);
    centers_.resize(slots);
    targets_.resize(slots * (k + 1));
    pa.walks = walks_.data();
    pa.negatives = draws_.data();
    pa.centers = centers_.data();
    pa.targets = targets_.data();
    return graph::window_pairs_host(pa);
  }

  // LINE's pairs on the device: the GPU path with a graph it can read in place.
  bool line_on_gpu() const {
    return s_.use_gpu && s_.mode == train_mode::line &&
           s_.graph_type != wm::memory_type::distributed;
  }

  std::int64_t* device_indices(wm::device_buffer& b, std::size_t count) {
    return static_cast<std::int64_t*>(
        b.reserve_discard(std::max<std::size_t>(count, 1) * 8, device_));
  }

  // What a step reports: its pairs' losses in loss units, and the pairs whose scores were NaN
  // or infinite (a diverged table: they add no loss units).
  struct step_totals {
    std::int64_t loss_units = 0;
    std::uint64_t nonfinite = 0;
  };

  // One step on this rank's assembled pairs.
  // `while_running` starts the next batch's assembly: on the GPU path once this step is
  // enqueued (so that starting it never holds back the step's first kernel), before it
  // otherwise.
  step_totals step(float lr, const std::function<void()>& while_running) {
    if (s_.use_gpu) return step_gpu(lr, while_running);
    while_running();
    const std::size_t n = n_pairs_, nt = n * (static_cast<std::size_t>(s_.negatives) + 1);
    const std::size_t dim = s_.dim;
    center_rows_.resize(n * dim);
    target_rows_.resize(nt * dim);
    center_grads_.resize(n * dim);
    target_grads_.resize(nt * dim);
    input_.lookup_host({centers_.data(), wm::dtype::int64, n},
                       {center_rows_.data(), wm::dtype::float32, n, dim, dim}, s_.threads);
    output_.lookup_host({targets_.data(), wm::dtype::int64, nt},
                        {target_rows_.data(), wm::dtype::float32, nt, dim, dim}, s_.threads);
    long long units = 0;
    unsigned long long nonfinite = 0;
    embedding::sgns_batch b{center_rows_.data(),  target_rows_.data(),  n,      s_.negatives, dim,
                            center_grads_.data(), target_grads_.data(), nullptr};
    b.loss_units = &units;
    b.nonfinite_pairs = &nonfinite;
    b.loss_scale = loss_unit;
    embedding::sgns_gradients_host(b, s_.threads);
    input_.apply_gradients_host({centers_.data(), wm::dtype::int64, n},
                                {center_grads_.data(), wm::dtype::float32, n, dim, dim}, lr,
                                s_.threads);
    output_.apply_gradients_host({targets_.data(), wm::dtype::int64, nt},
                                 {target_grads_.data(), wm::dtype::float32, nt, dim, dim}, lr,
                                 s_.threads);
    return {units, nonfinite};
  }

  // The output table takes its gradients by reference (coefficient x the pair's center row
  // of the input table, recomputed during its update: table::apply_scaled_gradients) where
  // that is built: one rank, continuous or chunked tables.  Elsewhere the SGNS step writes the
  // gradient rows.  The bits are the same either way.
  bool output_by_reference() const {
    return bs_->size() == 1 && s_.table_type != wm::memory_type::distributed;
  }

  // The GPU step; returns the batch's loss in loss units.  Continuous and chunked tables are
  // read by the SGNS kernel itself (the lookups fused in); distributed tables are looked up
  // first (their rows may be on other ranks' GPUs, reached through NCCL).  The output table
  // is updated before the input table: by reference it reads the input table's rows as they
  // were when the gradients were computed.  (Each update touches only its own table and every
  // gradient comes from the old values, so the order does not change the result.)
  step_totals step_gpu(float lr, const std::function<void()>& while_running) {
    const std::size_t n = n_pairs_, per_pair = static_cast<std::size_t>(s_.negatives) + 1;
    const std::size_t nt = n * per_pair, dim = s_.dim;
    const bool by_reference = output_by_reference();
    // assemble() left the indices in pair set use_, on assembly_stream_.
    auto* ci = d_centers_[use_].data_as<std::int64_t>();
    auto* ti = d_targets_[use_].data_as<std::int64_t>();
    wait_event(stream_, pairs_ready_[use_]);
    auto* cg = static_cast<float*>(d_center_grads_.reserve_discard((n + 1) * dim * 4, device_));
    float* tg = nullptr;
    float* tc = nullptr;
    if (by_reference) {
      tc = static_cast<float*>(d_target_coefs_.reserve_discard((nt + 1) * 4, device_));
    } else {
      tg = static_cast<float*>(d_target_grads_.reserve_discard((nt + 1) * dim * 4, device_));
    }
    // Word 0: the loss units; word 1: the first bad row position (~0: none); word 2: the pairs
    // with non-finite scores.
    auto* totals = static_cast<long long*>(d_totals_.reserve_discard(3 * 8, device_));
    copy_async(totals, totals_init, sizeof(totals_init));
    embedding::sgns_batch b{nullptr, nullptr, n, s_.negatives, dim, cg, tg, nullptr};
    b.loss_units = totals;
    b.nonfinite_pairs = reinterpret_cast<unsigned long long*>(totals + 2);
    b.loss_scale = loss_unit;
    b.target_coefs = tc;
    mark(0);
    if (s_.table_type != wm::memory_type::distributed) {
      mark(1);
      embedding::sgns_table_batch tb;
      tb.input = input_.view(device_);
      tb.output = output_.view(device_);
      tb.center_rows = ci;
      tb.target_rows = ti;
      tb.out = b;
      tb.first_bad = reinterpret_cast<unsigned long long*>(totals + 1);
      embedding::sgns_gradients_from_tables(tb, stream_);
    } else {
      auto* cr = static_cast<float*>(d_center_rows_.reserve_discard((n + 1) * dim * 4, device_));
      auto* tr = static_cast<float*>(d_target_rows_.reserve_discard((nt + 1) * dim * 4, device_));
      input_.lookup({ci, wm::dtype::int64, n}, {cr, wm::dtype::float32, n, dim, dim}, stream_);
      output_.lookup({ti, wm::dtype::int64, nt}, {tr, wm::dtype::float32, nt, dim, dim}, stream_);
      mark(1);
      b.centers = cr;
      b.targets = tr;
      embedding::sgns_gradients(b, stream_);
    }
    mark(2);
    // The tables check their indices on the device into the same word and skip their updates
    // once it is set, so nothing waits before the loss comes back.
    embedding::apply_options checked;
    checked.deferred_check = reinterpret_cast<unsigned long long*>(totals + 1);
    // One rank: the input table's call runs on its own stream from here, beside the output
    // table's; only its row writes wait for the output update (which reads the input rows by
    // reference).  Several ranks keep one stream: both calls exchange over one communicator,
    // and collectives on two streams could interleave differently on different ranks.
    const bool side = bs_->size() == 1;
    cudaStream_t input_stream = side ? input_stream_ : stream_;
    if (side) {
      record_event(sgns_done_, stream_);
      wait_event(input_stream_, sgns_done_);
    }
    if (by_reference) {
      embedding::scaled_rows by_center;
      by_center.source = &input_;
      by_center.source_rows = {ci, wm::dtype::int64, n};
      by_center.group = per_pair;
      by_center.coefs = tc;
      output_.apply_scaled_gradients({ti, wm::dtype::int64, nt}, by_center, lr, stream_, checked);
    } else {
      output_.apply_gradients({ti, wm::dtype::int64, nt}, {tg, wm::dtype::float32, nt, dim, dim},
                              lr, stream_, checked);
    }
    mark(3);
    embedding::apply_options after_output = checked;
    if (side) {
      record_event(output_done_, stream_);
      after_output.update_after = output_done_;
    }
    input_.apply_gradients({ci, wm::dtype::int64, n}, {cg, wm::dtype::float32, n, dim, dim}, lr,
                           input_stream, after_output);
    if (side) {
      record_event(input_done_, input_stream_);
      wait_event(stream_, input_done_);
    }
    mark(4);
    record_event(pairs_free_[use_], stream_);  // the next assemble into this set may write
    while_running();
    long long host_totals[3] = {0, 0, 0};
    copy_async(host_totals, totals, sizeof(host_totals));
    sync();
    add_phase_times();
    // The fused read and the tables' deferred checks share the word; the SGNS step reads
    // every center and target before either update, so a bad row stops both updates.
    WM_EXPECTS(host_totals[1] == -1,
               "train: a row index outside its table at position "
                   << static_cast<unsigned long long>(host_totals[1])
                   << " of the batch's pairs; neither table was changed by this batch");
    return {host_totals[0], static_cast<std::uint64_t>(host_totals[2])};
  }

  // CUDA events between the GPU step's phases (train_result::gpu_*_s).
  void mark(int i) {
#if defined(WHOLESTORE_HAS_CUDA)
    if (!events_[i] && cudaEventCreate(&events_[i]) != cudaSuccess)
      WM_FAIL(wm::cuda_error, "train: cudaEventCreate failed");
    if (cudaEventRecord(events_[i], stream_) != cudaSuccess)
      WM_FAIL(wm::cuda_error, "train: cudaEventRecord failed");
#else
    (void)i;
#endif
  }

  void add_phase_times() {
#if defined(WHOLESTORE_HAS_CUDA)
    for (int i = 0; i < phases; ++i) {
      float ms = 0;
      if (cudaEventElapsedTime(&ms, events_[i], events_[i + 1]) != cudaSuccess)
        WM_FAIL(wm::cuda_error, "train: cudaEventElapsedTime failed");
      phase_s_[i] += ms / 1e3;
    }
#endif
  }

  // Host <-> device on the stream, for a few bytes of pageable memory (which makes the copy
  // wait for the stream's earlier work when it reads the device).
  void copy_async(void* dst, const void* src, std::size_t bytes) {
    copy_on(stream_, dst, src, bytes);
  }

  void copy_on(cudaStream_t stream, void* dst, const void* src, std::size_t bytes) {
#if defined(WHOLESTORE_HAS_CUDA)
    if (cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream) != cudaSuccess)
      WM_FAIL(wm::cuda_error, "train: cudaMemcpyAsync of " << bytes << " bytes failed");
#else
    (void)stream;
    wm::copy_bytes(dst, src, bytes);
#endif
  }

  // The pair sets' dependencies between the two streams (events without timing, made on first
  // use; waiting for one never recorded is a no-op).
  void record_event(cudaEvent_t& e, cudaStream_t stream) {
#if defined(WHOLESTORE_HAS_CUDA)
    if (!e && cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess)
      WM_FAIL(wm::cuda_error, "train: cudaEventCreateWithFlags failed");
    if (cudaEventRecord(e, stream) != cudaSuccess)
      WM_FAIL(wm::cuda_error, "train: cudaEventRecord failed");
#else
    (void)e;
    (void)stream;
#endif
  }

  void wait_event(cudaStream_t stream, cudaEvent_t e) {
#if defined(WHOLESTORE_HAS_CUDA)
    if (e && cudaStreamWaitEvent(stream, e, 0) != cudaSuccess)
      WM_FAIL(wm::cuda_error, "train: cudaStreamWaitEvent failed");
#else
    (void)stream;
    (void)e;
#endif
  }

  void sync() {
#if defined(WHOLESTORE_HAS_CUDA)
    if (stream_ && cudaStreamSynchronize(stream_) != cudaSuccess)
      WM_FAIL(wm::cuda_error, "train: the GPU stream failed");
#endif
  }

  // The loss of untrained tables per positive pair: (1 + K) ln 2 (output vectors are zeros).
  double untrained_loss() const { return (1.0 + s_.negatives) * std::log(2.0); }

  // The ranks' step totals combined (an allgather: also the step's barrier); throws
  // train_diverged on every rank when a pair's score was not finite or the step's mean loss
  // per pair passed divergence_factor times the untrained loss (scores are clamped, so the
  // loss of tables blowing up grows towards about 30 times the untrained loss, never past
  // it; a run that learns only goes down from 1).
  void check_step(int epoch, std::uint64_t b, float lr, const step_totals& st,
                  std::size_t step_pairs) {
    struct totals {
      std::int64_t loss;
      std::uint64_t nonfinite, pairs;
    } mine{st.loss_units, st.nonfinite, step_pairs};
    std::vector<totals> all(static_cast<std::size_t>(bs_->size()));
    bs_->allgather(&mine, all.data(), sizeof(totals));
    totals sum{0, 0, 0};
    for (const totals& x : all) {
      sum.loss += x.loss;
      sum.nonfinite += x.nonfinite;
      sum.pairs += x.pairs;
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

  static std::string number(double x) {
    std::ostringstream o;
    o << x;
    return o.str();
  }

  // Throws train_diverged: where, why, what was kept and the way out.
  [[noreturn]] void diverged(const std::string& where, const std::string& why) const {
    std::ostringstream m;
    m << "training diverged " << where << ": " << why << ". ";
    if (!s_.checkpoint_dir.empty() && last_stored_epoch_ > 0) {
      m << "The last good checkpoint, " << epoch_dir(s_.checkpoint_dir, last_stored_epoch_)
        << ", is unchanged; ";
    } else {
      m << "Nothing was stored; ";
    }
    m << "lower the learning rate (lr " << s_.lr << ", e.g. --set lr=" << s_.lr / 10 << ")";
    if (s_.optimizer.kind == embedding::optimizer_kind::sgd)
      m << " or use the adam or adagrad optimizer, whose steps are bounded";
    throw train_diverged(m.str());
  }

  epoch_record run_epoch(int epoch, const train_callbacks& cb, train_result& result) {
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
      const double decay =
          std::max(static_cast<double>(s_.min_lr_fraction),
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
        cb.step(
            epoch + 1, b + 1, steps_per_epoch_,
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
    for (const totals& x : all) {
      loss_total += x.loss;
      rec.pairs += x.pairs;
      rec.seconds = std::max(rec.seconds, x.seconds);
    }
    rec.loss = rec.pairs
                   ? static_cast<double>(loss_total) / loss_unit / static_cast<double>(rec.pairs)
                   : 0.0;
    result.pairs += rec.pairs;
    return rec;
  }

  // Input vectors of `nodes` (every rank calls: distributed memory makes lookup collective).
  std::vector<float> read_rows(const std::vector<std::int64_t>& nodes) {
    const std::size_t n = nodes.size(), dim = s_.dim;
    std::vector<float> out(n * dim);
    if (!s_.use_gpu) {
      input_.lookup_host({nodes.data(), wm::dtype::int64, n},
                         {out.data(), wm::dtype::float32, n, dim, dim}, s_.threads);
      return out;
    }
    wm::device_buffer idx(std::max<std::size_t>(n, 1) * 8, device_);
    wm::device_buffer rows(std::max<std::size_t>(n, 1) * dim * 4, device_);
    if (n) wm::copy_bytes(idx.data(), nodes.data(), n * 8);
    input_.lookup({idx.data(), wm::dtype::int64, n}, {rows.data(), wm::dtype::float32, n, dim, dim},
                  stream_);
    sync();
    if (n) wm::copy_bytes(out.data(), rows.data(), n * dim * 4);
    return out;
  }

  link_scores evaluate(int epoch) {
    // Every rank computes the same scores (their tables are the same), a chunk of pairs at a
    // time so that a large graph's held-out set is never looked up whole.
    constexpr std::size_t chunk = std::size_t{1} << 18;
    const std::size_t dim = s_.dim;
    std::uint64_t nonfinite = 0;
    auto scores = [&](const std::vector<std::pair<std::int64_t, std::int64_t>>& list) {
      std::vector<double> out(list.size());
      std::vector<std::int64_t> nodes;
      for (std::size_t begin = 0; begin < list.size(); begin += chunk) {
        const std::size_t end = std::min(list.size(), begin + chunk);
        nodes.clear();
        for (std::size_t k = begin; k < end; ++k) {
          nodes.push_back(list[k].first);
          nodes.push_back(list[k].second);
        }
        const std::vector<float> rows = read_rows(nodes);
        for (std::size_t k = begin; k < end; ++k) {
          const float* a = rows.data() + 2 * (k - begin) * dim;
          const float* b = a + dim;
          double s = 0;
          for (std::size_t c = 0; c < dim; ++c)
            s += static_cast<double>(a[c]) * static_cast<double>(b[c]);
          out[k] = s;
          nonfinite += std::isfinite(s) ? 0 : 1;
        }
      }
      return out;
    };
    const std::vector<double> positive = scores(split_.test_edges);
    const std::vector<double> negative = scores(split_.test_non_edges);
    // Every rank reads the same rows, so every rank stops here alike.
    if (nonfinite) {
      diverged("by epoch " + std::to_string(epoch) + "'s end",
               std::to_string(nonfinite) + " of the " +
                   std::to_string(positive.size() + negative.size()) +
                   " held-out pairs scored NaN or infinite (the embeddings hold NaN or Inf)");
    }
    return score_links(positive, negative, s_.hits_k);
  }

  // Epoch `epochs_done`'s tables into DIR/epoch-N, then state.txt names it (renamed into
  // place: the commit), then older epochs go.  A failure leaves DIR as it was: the state names
  // the last good epoch and the new epoch's directory is removed.
  void store(int epochs_done, const std::vector<epoch_record>& curve) {
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
      st.curve = curve;
      write_state(dir, st);
      // Older epochs' tables are no longer named by the state (only directories of our own
      // shape go: claim_checkpoint_dir checked them, and checks again here).
      for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().filename() != fs::path(target).filename() &&
            is_our_epoch_dir(entry.path()))
          fs::remove_all(entry.path());
      }
    }
    last_stored_epoch_ = epochs_done;
    bs_->barrier();
  }

  std::shared_ptr<wm::bootstrap> bs_;
  const graph::edge_split& split_;
  train_settings s_;
  std::uint64_t nodes_;
  std::shared_ptr<wm::communicator> comm_;
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  cudaStream_t walk_stream_ = nullptr;  // assemble()'s GPU work (run_epoch overlaps it)
  // One rank: the input table's update beside the output table's (step_gpu).
  cudaStream_t input_stream_ = nullptr;
  cudaEvent_t sgns_done_ = nullptr, output_done_ = nullptr, input_done_ = nullptr;
  // The stream assemble() enqueues on: walk_stream_, or stream_ for a distributed graph's
  // collective walks (not overlapped).
  cudaStream_t assembly_stream_ = nullptr;
  static constexpr int phases = 4;  // lookups, SGNS, output update, input update
#if defined(WHOLESTORE_HAS_CUDA)
  cudaEvent_t events_[phases + 1] = {};
#endif
  cudaEvent_t pairs_ready_[2] = {}, pairs_free_[2] = {};  // per pair set
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
  static constexpr long long totals_init[3] = {0, -1, 0};
};

}  // namespace

train_result train_embeddings(std::shared_ptr<wm::bootstrap> bs, const graph::edge_split& split,
                              const train_settings& settings, const train_callbacks& callbacks) {
  check_settings(settings);
  WM_EXPECTS(split.train.num_edges() > 0, "the training graph has no edges: nothing to train on ("
                                              << split.train.num_nodes << " nodes)");
  WM_EXPECTS(!split.test_edges.empty() && !split.test_non_edges.empty(),
             "no held-out edges to evaluate on: raise the hold-out fraction");
  trainer t(std::move(bs), split, settings);
  return t.run(callbacks);
}

}  // namespace wholestore::apps
