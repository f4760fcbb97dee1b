// `wholestore train`: node embeddings by skip-gram with negative sampling over random walks
// (DeepWalk, node2vec) or edges (LINE), scored by link prediction on held-out edges.  This file
// is config -> train_settings -> train::train_embeddings -> report: it reads the config, loads
// and splits the graph, shows progress and writes the outputs; the trainer is the train/
// library's (train/trainer.hpp).
#include "cli.hpp"
#include "commands.hpp"
#include "config.hpp"
#include "npy.hpp"
#include "report.hpp"
#include "svg_plot.hpp"

#include <embedding/table.hpp>
#include <graph/convert.hpp>
#include <graph/dataset.hpp>
#include <graph/edge_split.hpp>
#include <graph/generate.hpp>
#include <train/trainer.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>
#include <wholememory/memory_type.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace wholestore::apps {

namespace {

namespace wm = wholememory;
using train::epoch_record;
using train::train_callbacks;
using train::train_mode;
using train::train_mode_name;
using train::train_result;
using train::train_schedule;
using train::train_settings;

const std::vector<config_key> train_schema = {
    {"dataset", value_kind::string, "",
     "dataset directory ([docs/dataset-format.md](dataset-format.md)) or an edge-list text file "
     "(`src dst [weight]`, converted in memory like `wholestore convert`); empty: generate the "
     "`gen.*` graph"},
    {"undirected", value_kind::boolean, "true",
     "edge-list file: add the reverse of every edge (self loops and duplicates dropped)"},
    {"gen.num_nodes", value_kind::integer, "10000", "generated graph: nodes"},
    {"gen.num_edges", value_kind::integer, "100000",
     "generated graph: R-MAT edges drawn (symmetrized)"},
    {"gen.seed", value_kind::integer, "0", "generated graph: random seed"},
    {"graph.type", value_kind::string, "continuous",
     "memory type of the training graph: `continuous`, `chunked` or `distributed` (each node's "
     "edges on the rank that holds it; its walks are collective, served by the owners of the "
     "walks' nodes, and are not overlapped with the steps on the GPU)"},
    {"graph.location", value_kind::string, "host",
     "`host` or `device` (`device` needs `device: gpu`)"},
    {"graph.replicate", value_kind::boolean, "false",
     "every rank holds the whole training graph (continuous or chunked): walks read no other "
     "GPU's memory (a shared graph's walks cross NVLink for most reads on several GPUs)"},
    {"mode", value_kind::string, "deepwalk",
     "`deepwalk` (uniform walks), `node2vec` (walks biased by `p`, `q`) or `line` (edges as "
     "pairs)"},
    {"walk_length", value_kind::integer, "20", "steps per walk (>= 1)"},
    {"window", value_kind::integer, "3", "context half-width in a walk (>= 1)"},
    {"walks_per_node", value_kind::integer, "2", "walks started from every node per epoch"},
    {"p", value_kind::number, "1", "node2vec return parameter (> 0)"},
    {"q", value_kind::number, "1", "node2vec in-out parameter (> 0)"},
    {"negatives", value_kind::integer, "5", "negatives per positive pair (>= 1)"},
    {"negative_distribution", value_kind::string, "degree",
     "`degree` (out-degree^0.75) or `uniform`"},
    {"dim", value_kind::integer, "128", "embedding dimension"},
    {"batch_size", value_kind::integer, "4096", "positive pair slots per step, all ranks together"},
    {"epochs", value_kind::integer, "2", "passes over the pair slots"},
    {"lr", value_kind::number, "0.1", "initial learning rate"},
    {"min_lr_fraction", value_kind::number, "0.0001",
     "the linear decay stops at this fraction of `lr`"},
    {"optimizer", value_kind::string, "adagrad",
     "`sgd`, `adam`, `adagrad`, `rowwise_adagrad` or `rmsprop` (embedding tables' sparse "
     "optimizers)"},
    {"schedule", value_kind::string, "global",
     "how several ranks share the steps: `global` (every step over both whole tables, the same "
     "embeddings on any rank count) or `blocks` (the tables cut into `partitions`; each round "
     "every rank trains one node partition against one context partition on its own GPU, "
     "GraphVite-style: the same embeddings on every rank count that divides `partitions`)"},
    {"partitions", value_kind::integer, "0",
     "blocks: partitions of the tables, a multiple of the rank count (0: the rank count)"},
    {"block_steps", value_kind::integer, "0",
     "blocks: steps per block and round on average (the episode is block_steps x batch_size x "
     "partitions pair slots); 0: episodes of about 32 pair slots per node"},
    {"block_batch", value_kind::integer, "0",
     "blocks: pairs a block trains per step (0: batch_size / partitions)"},
    {"table.type", value_kind::string, "continuous",
     "memory type of both embedding tables: `continuous`, `chunked`, `distributed`"},
    {"table.location", value_kind::string, "host",
     "`host` or `device` (`device` needs `device: gpu`)"},
    {"device", value_kind::string, "cpu",
     "`cpu`, `gpu` (walks, lookups, loss, gradients and updates on the GPU) or `auto` (the GPU "
     "when the build has CUDA and one is visible)"},
    {"seed", value_kind::integer, "0",
     "seed of the edge split, initial weights, walks, negatives and pair order"},
    {"holdout", value_kind::number, "0.1", "fraction of edges held out for evaluation, in (0, 1)"},
    {"eval_every", value_kind::integer, "1", "evaluate every N epochs (0: after the last only)"},
    {"hits_k", value_kind::integer, "50", "K of Hits@K"},
    {"threads", value_kind::integer, "0", "CPU threads per rank (0: all cores)"},
    {"checkpoint_every", value_kind::integer, "1",
     "epochs between checkpoints (with --checkpoint)"},
    {"stop_after_epochs", value_kind::integer, "0",
     "end this run after N epochs (0: run all `epochs`); `--resume` continues it"},
    {"timeout_s", value_kind::number, "300",
     "seconds a collective waits for a missing rank before it fails on every rank, in (0, "
     "31536000]; `WHOLESTORE_TIMEOUT`, when set, replaces it"},
};

const std::vector<std::string> train_options = {"--plot", "--export", "--checkpoint", "--resume"};

template <typename Parse>
auto parse_key(const config& cfg, const std::string& key, Parse parse) {
  try {
    return parse(cfg.get_string(key));
  } catch (const wm::logic_error& e) {
    throw config_error(key + ": " + e.what() + " (" + cfg.origin.at(key) + ")");
  }
}

std::string where(const config& cfg, const std::string& key) {
  return " (" + cfg.origin.at(key) + ")";
}

train_settings read_settings(const config& cfg, const command_args& args) {
  train_settings s;
  const std::string& mode = cfg.get_string("mode");
  if (mode == "deepwalk")
    s.mode = train_mode::deepwalk;
  else if (mode == "node2vec")
    s.mode = train_mode::node2vec;
  else if (mode == "line")
    s.mode = train_mode::line;
  else
    throw config_error("mode must be deepwalk, node2vec or line, got '" + mode + "'" +
                       where(cfg, "mode"));
  auto at_least = [&](const char* key, std::int64_t min) {
    const std::int64_t v = cfg.get_int(key);
    if (v < min)
      throw config_error(std::string(key) + " must be at least " + std::to_string(min) + ", got " +
                         std::to_string(v) + where(cfg, key));
    return v;
  };
  // The trainer's int settings: a value past int would wrap (negatives 4294967297 became 1), so
  // it is refused here; train_embeddings refuses, naming it, what is past the setting's bound.
  auto int_at_least = [&](const char* key, std::int64_t min) {
    const std::int64_t v = at_least(key, min);
    if (v > std::numeric_limits<int>::max())
      throw config_error(std::string(key) + " must be at most " +
                         std::to_string(std::numeric_limits<int>::max()) + ", got " +
                         std::to_string(v) + where(cfg, key));
    return static_cast<int>(v);
  };
  s.walk_length = int_at_least("walk_length", 1);
  s.window = int_at_least("window", 1);
  s.walks_per_node = int_at_least("walks_per_node", 1);
  for (const char* key : {"p", "q"}) {
    const double v = cfg.get_number(key);
    if (!(v > 0) || !std::isfinite(v))
      throw config_error(std::string(key) + " must be a positive number, got " +
                         cfg.values.at(key) + where(cfg, key));
  }
  s.p = cfg.get_number("p");
  s.q = cfg.get_number("q");
  s.negatives = int_at_least("negatives", 1);
  const std::string& dist = cfg.get_string("negative_distribution");
  if (dist != "degree" && dist != "uniform")
    throw config_error("negative_distribution must be degree or uniform, got '" + dist + "'" +
                       where(cfg, "negative_distribution"));
  s.negatives_by_degree = dist == "degree";
  s.dim = static_cast<std::size_t>(at_least("dim", 1));
  s.batch_size = static_cast<std::uint64_t>(at_least("batch_size", 1));
  s.epochs = int_at_least("epochs", 1);
  s.lr = static_cast<float>(cfg.get_positive_number("lr"));
  const double min_frac = cfg.get_number("min_lr_fraction");
  if (!(min_frac >= 0 && min_frac <= 1))
    throw config_error("min_lr_fraction must be in [0, 1], got " +
                       cfg.values.at("min_lr_fraction") + where(cfg, "min_lr_fraction"));
  s.min_lr_fraction = static_cast<float>(min_frac);
  s.optimizer.kind = parse_key(cfg, "optimizer", embedding::parse_optimizer);
  const std::string& schedule = cfg.get_string("schedule");
  if (schedule != "global" && schedule != "blocks")
    throw config_error("schedule must be global or blocks, got '" + schedule + "'" +
                       where(cfg, "schedule"));
  s.schedule = schedule == "blocks" ? train_schedule::blocks : train_schedule::global;
  s.partitions = int_at_least("partitions", 0);
  s.block_steps = int_at_least("block_steps", 0);
  s.block_batch = static_cast<std::uint64_t>(at_least("block_batch", 0));
  s.graph_type = parse_key(cfg, "graph.type", wm::parse_memory_type);
  s.graph_location = parse_key(cfg, "graph.location", wm::parse_memory_location);
  s.replicate_graph = cfg.get_bool("graph.replicate");
  s.table_type = parse_key(cfg, "table.type", wm::parse_memory_type);
  s.table_location = parse_key(cfg, "table.location", wm::parse_memory_location);
  const std::string& device = cfg.get_string("device");
  if (device != "cpu" && device != "gpu" && device != "auto")
    throw config_error("device must be cpu, gpu or auto, got '" + device + "'" +
                       where(cfg, "device"));
  const bool gpu_present = wm::device_count() > 0;
  s.use_gpu = device == "gpu" || (device == "auto" && gpu_present);
  if (s.use_gpu && !gpu_present)
    throw config_error("device: gpu needs a CUDA build and a visible GPU" + where(cfg, "device") +
                       "; use cpu or auto");
  if (!s.use_gpu && (s.graph_location == wm::memory_location::device ||
                     s.table_location == wm::memory_location::device))
    throw config_error("device: cpu needs graph.location and table.location host");
  s.seed = static_cast<std::uint64_t>(at_least("seed", 0));
  s.eval_every = int_at_least("eval_every", 0);
  s.hits_k = int_at_least("hits_k", 1);
  s.threads = static_cast<unsigned>(at_least("threads", 0));
  if (s.threads == 0) s.threads = wm::default_host_threads();
  s.checkpoint_every = int_at_least("checkpoint_every", 1);
  s.stop_after_epochs = int_at_least("stop_after_epochs", 0);
  auto option = [&](const char* flag) {
    auto it = args.options.find(flag);
    return it == args.options.end() ? std::string() : it->second;
  };
  s.checkpoint_dir = option("--checkpoint");
  s.resume_dir = option("--resume");
  s.keep_embeddings = !option("--export").empty();
  return s;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The whole graph on this rank: a dataset, an edge-list file, or the generated gen.* graph.
graph::host_csr read_graph(const config& cfg, std::string& source) {
  const std::string& dataset = cfg.get_string("dataset");
  if (dataset.empty()) {
    graph::generate_options go;
    go.num_nodes = static_cast<std::uint64_t>(cfg.get_int_at_least("gen.num_nodes", 1));
    go.num_edges = static_cast<std::uint64_t>(cfg.get_int_at_least("gen.num_edges", 0));
    go.seed = static_cast<std::uint64_t>(cfg.get_int_at_least("gen.seed", 0));
    go.symmetrize = true;
    go.drop_self_loops = true;
    std::ostringstream s;
    s << "R-MAT (" << go.num_nodes << " nodes, " << go.num_edges << " edges, seed " << go.seed
      << ", symmetrized)";
    source = s.str();
    return graph::generate_graph(go);
  }
  source = dataset;
  if (is_regular_file(dataset)) {
    graph::convert_options co;
    co.symmetrize = cfg.get_bool("undirected");
    co.drop_self_loops = true;
    co.drop_duplicates = true;
    return graph::convert_edge_list(dataset, co);
  }
  return graph::read_dataset(dataset);
}

// Rank 0's progress: a bar with the running loss on a terminal, a line every ~10% otherwise.
class loss_progress {
 public:
  explicit loss_progress(bool enabled) : enabled_(enabled), tty_(enabled && ::isatty(1)) {}
  void update(int epoch, int epochs, std::uint64_t done, std::uint64_t total, double loss) {
    if (!enabled_ || total == 0) return;
    const int pct =
        static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total));
    if (tty_) {
      if (done % 16 != 0 && done != total) return;
      const int width = 30, fill = pct * width / 100;
      std::printf("\r  epoch %d/%d [%s%s] %3d%%  loss %.4f", epoch, epochs,
                  std::string(fill, '#').c_str(), std::string(width - fill, '.').c_str(), pct,
                  loss);
      if (done >= total) std::printf("\n");
      std::fflush(stdout);
    } else if (epoch != epoch_ || pct >= next_pct_) {
      if (epoch != epoch_) next_pct_ = 0;
      epoch_ = epoch;
      if (pct < next_pct_) return;
      std::printf("  epoch %d/%d %3d%% (%llu/%llu steps)  loss %.4f\n", epoch, epochs, pct,
                  static_cast<unsigned long long>(done), static_cast<unsigned long long>(total),
                  loss);
      std::fflush(stdout);
      next_pct_ = (pct / 25 + 1) * 25;
    }
  }

 private:
  bool enabled_, tty_;
  int epoch_ = 0, next_pct_ = 0;
};

std::vector<std::pair<std::string, std::string>> shared_settings(const config& cfg,
                                                                 const train_settings& s) {
  std::vector<std::pair<std::string, std::string>> v;
  for (const config_key& key : train_schema) {
    if (key.path == "threads" || key.path == "timeout_s") continue;
    v.emplace_back(key.path, cfg.values.at(key.path));
  }
  v.emplace_back("device (effective)", s.use_gpu ? "gpu" : "cpu");
  v.emplace_back("--checkpoint", s.checkpoint_dir);
  v.emplace_back("--resume", s.resume_dir);
  return v;
}

void write_train_report(const std::string& path, const config& cfg, const train_settings& s,
                        const std::string& source, const graph::edge_split& split, int ranks,
                        const train_result& r, double pairs_per_s) {
  std::vector<report_row> curve;
  for (const epoch_record& e : r.epochs) {
    curve.push_back(
        {{"epoch", e.epoch}, {"loss", e.loss}, {"pairs", e.pairs}, {"seconds", e.seconds}});
    if (e.evaluated) {
      curve.back().emplace_back("roc_auc", e.scores.auc);
      curve.back().emplace_back("hits_at_k", e.scores.hits);
    }
  }
  report_body report("train");
  report.precision(10)
      .add("ranks", ranks)
      .add("device", s.use_gpu ? "gpu" : "cpu")
      .add("source", report_value::quoted(source))
      .add("num_nodes", split.train.num_nodes)
      .add("train_edges", split.train.num_edges())
      .add("held_out_edges", split.test_edges.size())
      .add("mode", train_mode_name(s.mode))
      .add("first_epoch", r.first_epoch)
      .add("last_epoch", r.last_epoch)
      .add("roc_auc", r.final_scores.auc)
      .add("hits_at_k", r.final_scores.hits)
      .add("hits_k", s.hits_k)
      .add("pairs", r.pairs)
      .add("steps", r.steps)
      .add("train_s", r.train_s)
      .add("pairs_per_s", pairs_per_s)
      .add_rows("curve", std::move(curve));
  write_report(path, report, &cfg);
}

void write_plot(const std::string& path, const train_result& r, const std::string& source) {
  plot_series loss{"loss", "#1f77b4", {}, {}}, auc{"ROC-AUC", "#d62728", {}, {}};
  for (const epoch_record& e : r.epochs) {
    loss.x.push_back(e.epoch);
    loss.y.push_back(e.loss);
    if (e.evaluated) {
      auc.x.push_back(e.epoch);
      auc.y.push_back(e.scores.auc);
    }
  }
  write_svg(path, svg_line_chart("wholestore train: " + source, "epoch", loss, auc));
}

// Where `--export FILE.npy` puts the original id of each row: FILE.ids.npy (any other name gets
// `.ids.npy` appended); none for an export to a device or a FIFO (/dev/null), whose directory
// is not the user's.
std::string export_ids_file(const std::string& export_file) {
  struct stat st {};
  if (export_file.empty() || (::stat(export_file.c_str(), &st) == 0 && !S_ISREG(st.st_mode)))
    return "";
  const std::string npy = ".npy";
  std::string stem = export_file;
  if (stem.size() > npy.size() && stem.compare(stem.size() - npy.size(), npy.size(), npy) == 0)
    stem.resize(stem.size() - npy.size());
  return stem + ".ids.npy";
}

// Two outputs named the same file (`--export X --plot X`) would leave only the last one
// written: refused before the run, on every rank, naming both options.  Paths are compared
// after resolving `.`, `..` and symbolic links, and existing files by identity.
void check_distinct_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  namespace fs = std::filesystem;
  auto resolved = [](const std::string& file) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::absolute(file, ec), ec);
    return ec ? fs::absolute(file, ec).lexically_normal() : p;
  };
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    for (std::size_t j = i + 1; j < outputs.size(); ++j) {
      const auto& [flag_a, file_a] = outputs[i];
      const auto& [flag_b, file_b] = outputs[j];
      if (file_a.empty() || file_b.empty()) continue;
      std::error_code ec;
      if (resolved(file_a) == resolved(file_b) || fs::equivalent(file_a, file_b, ec))
        throw config_error(flag_a + " " + file_a + " and " + flag_b + " " + file_b +
                           " name the same file: give each output its own; nothing was run");
    }
  }
}

// The size of the job before it starts (issue 36): pair slots and steps per epoch, so a run of
// days shows as one before it begins.  In doubles: settings past the trainer's bounds, which
// train_embeddings refuses right after, must not wrap the figures.
void print_job_size(const train_settings& s, const graph::edge_split& split, int ranks) {
  const double steps_of = static_cast<double>(s.batch_size);
  double slots = 0;
  std::ostringstream what;
  if (s.mode == train_mode::line) {
    slots = static_cast<double>(split.train.num_edges());
    what << "one per training edge";
  } else {
    const std::uint64_t per_walk = train::slots_per_walk(s.walk_length, s.window);
    const double walks = static_cast<double>(split.train.num_nodes) * s.walks_per_node;
    slots = walks * static_cast<double>(per_walk);
    what.precision(0);
    what << std::fixed << walks << " walks x " << per_walk << " slots";
  }
  std::printf(
      "  job: %.0f pair slots per epoch (%s), %.0f step(s) of %llu slots per epoch, %d "
      "epoch(s)\n",
      slots, what.str().c_str(), std::ceil(slots / steps_of),
      static_cast<unsigned long long>(s.batch_size), s.epochs);
  if (s.schedule == train_schedule::blocks) {
    const int parts = s.partitions > 0 ? s.partitions : ranks;
    const double target =
        static_cast<double>(train::episode_slots(s, split.train.num_nodes, parts));
    const double episodes = std::max(1.0, std::round(slots / target)), episode = slots / episodes;
    std::printf(
        "  schedule blocks: %d partitions, %.0f episode(s) of %.0f slots per epoch, each "
        "%d rounds of steps of %llu pairs per block\n",
        parts, episodes, episode, parts,
        static_cast<unsigned long long>(
            s.block_batch > 0 ? s.block_batch : std::max<std::uint64_t>(1, s.batch_size / parts)));
  }
}

int run_train(int argc, char** argv) {
  command_args args = parse_command_args(argc, argv, train_options);
  config cfg = load_config(train_schema, args.config_file, args.overrides);
  const train_settings s = read_settings(cfg, args);
  const double holdout = cfg.get_number("holdout");
  if (!(holdout > 0 && holdout < 1))
    throw config_error("holdout must be in (0, 1), got " + cfg.values.at("holdout") +
                       where(cfg, "holdout"));
  auto option = [&](const char* flag) {
    auto it = args.options.find(flag);
    return it == args.options.end() ? std::string() : it->second;
  };
  const std::string plot_file = option("--plot"), export_file = option("--export");
  const std::string ids_file = export_ids_file(export_file);
  check_distinct_outputs({{"--export", export_file},
                          {"--export's ids", ids_file},
                          {"--plot", plot_file},
                          {"--report", args.report_file}});
  // Output files are checked before the run (by the rank that writes them, as --report is), so
  // a typo costs nothing.
  const char* rank_env = std::getenv("RANK");
  if (rank_env == nullptr) rank_env = std::getenv("OMPI_COMM_WORLD_RANK");
  if (rank_env == nullptr || std::string(rank_env) == "0") {
    for (const auto& [flag, file] : {std::pair<std::string, std::string>{"--plot", plot_file},
                                     {"--export", export_file},
                                     {"--export", ids_file}}) {
      if (file.empty()) continue;
      try {
        check_report_file(file);
      } catch (const config_error& e) {  // its message names --report: name the option given
        std::string what = e.what();
        if (what.rfind("--report", 0) == 0) what = flag + what.substr(8);
        throw config_error(what);
      }
    }
    if (!s.checkpoint_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(s.checkpoint_dir, ec);
      if (ec || !std::filesystem::is_directory(s.checkpoint_dir))
        throw config_error("--checkpoint: cannot create the directory " + s.checkpoint_dir +
                           (ec ? ": " + ec.message() : ""));
    }
  }

  std::shared_ptr<wm::bootstrap> bs = wm::make_job_bootstrap(collective_timeout(cfg));
  wm::agree_on_values(*bs, "the config of every rank must match", shared_settings(cfg, s));
  const bool lead = bs->rank() == 0;
  const int ranks = bs->size();
  if (lead) {
    std::printf("wholestore train: %d rank(s), %s, %s, dim %zu, %d negatives\n", ranks,
                s.use_gpu ? "gpu" : "cpu", train_mode_name(s.mode), s.dim, s.negatives);
    std::fflush(stdout);
  }
  auto t0 = std::chrono::steady_clock::now();
  std::string source;
  graph::host_csr g = read_graph(cfg, source);
  if (g.num_edges() == 0)
    throw config_error(source + " has no edges: nothing to train on (" +
                       std::to_string(g.num_nodes) + " nodes)");
  graph::edge_split split = graph::split_edges(g, holdout, s.seed);
  if (split.test_edges.empty()) {
    // round(holdout x edges) is 0: say what would help (issue 36: a one-edge graph was told
    // to raise the fraction, which cannot help it).
    const std::uint64_t edges = g.directed ? g.num_edges() : (g.num_edges() + 1) / 2;
    std::ostringstream m;
    m << "no held-out edges to evaluate on: " << source << " has " << edges
      << " edge(s), and holding out " << holdout << " of them rounds to none; ";
    if (edges < 2) {
      m << "train needs at least 2 edges (one to train on, one to evaluate)";
    } else {
      m << "raise holdout to at least " << 0.5 / static_cast<double>(edges)
        << " (below 1) or give a larger graph";
    }
    throw config_error(m.str());
  }
  g = graph::host_csr();
  const double prep_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (lead) {
    std::printf(
        "  graph: %s: %llu nodes, %llu training edges (directed entries), %zu held out "
        "+ %zu non-edges (%.2f s)\n",
        source.c_str(), static_cast<unsigned long long>(split.train.num_nodes),
        static_cast<unsigned long long>(split.train.num_edges()), split.test_edges.size(),
        split.test_non_edges.size(), prep_s);
    if (!s.resume_dir.empty()) std::printf("  resuming from %s\n", s.resume_dir.c_str());
    print_job_size(s, split, ranks);
    std::fflush(stdout);
  }

  loss_progress bar(lead);
  train_callbacks cb;
  cb.step = [&](int epoch, std::uint64_t step, std::uint64_t steps, double loss) {
    bar.update(epoch, s.epochs, step, steps, loss);
  };
  cb.epoch = [&](const epoch_record& e) {
    if (!lead) return;
    std::printf("  epoch %d: loss %.4f, %llu pairs, %.2f s", e.epoch, e.loss,
                static_cast<unsigned long long>(e.pairs), e.seconds);
    if (e.evaluated)
      std::printf(", ROC-AUC %.4f, Hits@%d %.4f", e.scores.auc, s.hits_k, e.scores.hits);
    std::printf("\n");
    std::fflush(stdout);
  };
  const train_result r = train::train_embeddings(bs, split, s, cb);
  const double pairs_per_s = r.train_s > 0 ? static_cast<double>(r.pairs) / r.train_s : 0.0;
  if (lead) {
    std::printf(
        "  step      %.2f s training (slowest rank); rank 0: %.2f s walks+negatives%s, "
        "%.2f s lookups+loss+gradients+updates\n",
        r.train_s, r.walk_s, s.use_gpu ? " (waited for: the rest overlaps the steps)" : "",
        r.step_s);
    if (s.use_gpu) {
      std::printf(
          "  gpu       rank 0's stream: %.2f s lookups, %.2f s loss+gradients, %.2f s input "
          "update%s, %.2f s output update\n",
          r.gpu_lookup_s, r.gpu_sgns_s, r.gpu_input_update_s,
          ranks == 1 ? " (after the output update, beside which most of it ran)" : "",
          r.gpu_output_update_s);
    }
    if (s.use_gpu && s.schedule == train_schedule::blocks) {
      std::printf(
          "  blocks    rank 0's stream: %.2f s taking partitions, %.2f s training blocks, %.2f s "
          "giving partitions back; pairs per rank %llu to %llu (last epoch)\n",
          r.gpu_block_load_s, r.gpu_block_train_s, r.gpu_block_store_s,
          static_cast<unsigned long long>(r.rank_pairs_min),
          static_cast<unsigned long long>(r.rank_pairs_max));
      std::printf(
          "  blocks    rank 0's host: %.2f s exchanging pairs, %.2f s in partition loads, %.2f s "
          "enqueueing steps, %.2f s in partition stores, %.2f s at round ends\n",
          r.host_exchange_s, r.host_load_s, r.host_steps_s, r.host_store_s, r.host_round_end_s);
    }
    std::printf(
        "summary: %d rank(s), %s, %s, %d epoch(s), ROC-AUC %.4f, Hits@%d %.4f, loss %.4f, "
        "%.0f pairs/s (whole step), %.2f s\n",
        ranks, s.use_gpu ? "gpu" : "cpu", train_mode_name(s.mode), r.last_epoch, r.final_scores.auc,
        s.hits_k, r.final_scores.hits, r.epochs.empty() ? 0.0 : r.epochs.back().loss, pairs_per_s,
        r.train_s);
    std::fflush(stdout);
    if (!export_file.empty()) {
      write_npy(export_file, r.embeddings.data(), split.train.num_nodes, s.dim);
      // After the embeddings: an export that fails leaves both files as they were.
      if (!ids_file.empty()) write_npy_ids(ids_file, split.train.node_ids, split.train.num_nodes);
    }
    if (!plot_file.empty()) write_plot(plot_file, r, source);
    if (!args.report_file.empty())
      write_train_report(args.report_file, cfg, s, source, split, ranks, r, pairs_per_s);
  }
  bs->barrier();
  return exit_success;
}

}  // namespace

const command_info& train_command() {
  static const command_info info{
      "train",
      "node embeddings (DeepWalk, node2vec, LINE) scored by link prediction",
      "[CONFIG.yaml] [--set KEY=VALUE]... [--report FILE] [OPTION X]...",
      "Learns an embedding per node by skip-gram with negative sampling (logistic loss, "
      "`negatives` per positive pair, two tables: input and output vectors) over random-walk "
      "windows (`deepwalk`, `node2vec`) or over edges (`line`). Every rank reads the graph, "
      "holds out `holdout` of its edges (an undirected edge with both directions) and as many "
      "non-edges, and trains on the rest; at the end (and every `eval_every` epochs) the "
      "held-out edges are scored by the dot product of input vectors: ROC-AUC (ties count "
      "half) and Hits@K (the share of held-out edges scored above the K-th highest non-edge). "
      "Ranks split each batch and get the same embeddings bit for bit as one rank; the CPU and "
      "the GPU do too.\n\n"
      "OPTION is one of these, each with its value X (`--plot X` or `--plot=X`): `--plot "
      "FILE.svg` draws loss and ROC-AUC per epoch; "
      "`--export FILE.npy` writes the input vectors (nodes x dim float32, `numpy.load` reads "
      "it) and beside them `FILE.ids.npy`, the original id of each row: int64 (0, 1, ... for a "
      "generated graph or a dataset without `node_ids.txt`; the edge list's own ids where "
      "train or `wholestore convert` remapped them), or strings (NumPy's `<U`) when some id is "
      "not an integer; an export to a device such as /dev/null has no ids file; "
      "`--checkpoint DIR` stores both tables, their optimizer state and the epoch count "
      "every `checkpoint_every` epochs; `--resume DIR` continues from such a checkpoint with "
      "the same config, and ends with the same embeddings bit for bit as a run that never "
      "stopped.\n\n"
      "A node without out-edges in the training graph ends every walk that reaches it (the "
      "walk is padded with -1 and the pairs with a -1 are skipped): a node with no edges at "
      "all keeps its initial vector and is never drawn as a negative.",
      {{"", "configs/train.yaml", "", &train_schema,
        "The summary (and `--report`): `pairs_per_s` is all ranks' positive pairs over the "
        "slowest rank's training time for the whole step (walks, negatives, lookups, loss, "
        "gradients, updates; evaluation excluded). Every rank must run with the same settings "
        "apart from `threads` and `timeout_s`."}},
      {"wholestore train configs/train.yaml --set dataset=../shared/data/facebook_combined.txt",
       "wholestore train configs/train.yaml --set mode=node2vec --set p=0.5 --set q=2 --plot "
       "/tmp/train.svg --export /tmp/emb.npy",
       "wholestore launch -n 2 -- wholestore train configs/train.yaml --checkpoint /tmp/ckpt"},
      run_train};
  return info;
}

}  // namespace wholestore::apps
