// `wholestore sample`: the main job.  Every rank joins, loads a dataset into WholeMemory (or
// generates the same R-MAT graph in memory when no dataset is given), takes its share of the
// shuffled training seeds, samples multi-hop neighborhoods batch by batch on the CPU or GPU
// sampler and gathers the input nodes' features, as a GNN training loop would; rank 0 prints
// load, sampling and gather rates over all ranks.
#include "commands.hpp"
#include "config.hpp"
#include "progress.hpp"
#include "report.hpp"

#include <graph/csr_graph.hpp>
#include <graph/generate.hpp>
#include <graph/sampling.hpp>
#include <train/sample_runner.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace wholestore::apps {

namespace {

namespace wm = wholememory;

const std::vector<config_key> sample_schema = {
    {"dataset", value_kind::string, "",
     "dataset directory ([docs/dataset-format.md](dataset-format.md)), which must exist; "
     "empty: generate the `gen.*` graph in memory"},
    {"gen.num_nodes", value_kind::integer, "200000", "generated graph: nodes"},
    {"gen.num_edges", value_kind::integer, "4000000", "generated graph: R-MAT edges drawn"},
    {"gen.feature_dim", value_kind::integer, "64", "generated graph: features per node (0: none)"},
    {"gen.features_dtype", value_kind::string, "float32",
     "generated graph: `float32`, `float16` or `bfloat16` in WholeMemory"},
    {"gen.weights", value_kind::boolean, "true",
     "generated graph: float32 edge weights (needed by `method: weighted`)"},
    {"gen.seed", value_kind::integer, "0", "generated graph: random seed (same seed, same graph)"},
    {"gen.threads", value_kind::integer, "0", "generator threads per rank (0: all cores)"},
    {"graph.type", value_kind::string, "continuous",
     "memory type of row offsets, column indices and weights: `continuous`, `chunked`, "
     "`distributed`"},
    {"graph.location", value_kind::string, "host",
     "`host` or `device` (`device` needs the GPU sampler)"},
    {"features.type", value_kind::string, "",
     "memory type of the node features; empty: `graph.type`"},
    {"features.location", value_kind::string, "",
     "location of the node features; empty: `graph.location`"},
    {"load.verify_checksums", value_kind::boolean, "false",
     "check every file's checksum before loading (reads each file once more)"},
    {"load.threads", value_kind::integer, "0", "reader threads per rank (0: up to 4)"},
    {"sampler", value_kind::string, "auto",
     "`cpu`, `gpu`, or `auto` (the GPU sampler when the build has CUDA and a GPU is visible); "
     "`gpu` gives each rank one GPU (its local rank modulo the GPUs)"},
    {"method", value_kind::string, "uniform",
     "`uniform` (without replacement), `uniform_with_replacement`, `weighted`"},
    {"fanouts", value_kind::string, "15,10,5",
     "neighbors per hop, comma-separated; `-1` takes all neighbors"},
    {"batch_size", value_kind::integer, "1024", "seeds per batch"},
    {"random_seed", value_kind::integer, "0",
     "seed of the per-epoch shuffle and of the sampler (each batch derives its own)"},
    {"epochs", value_kind::integer, "1", "passes over the seeds"},
    {"batches", value_kind::integer, "0",
     "batches per rank per epoch; `0`: all of the rank's seeds"},
    {"edge_ids", value_kind::boolean, "false", "have the sampler return edge ids"},
    {"threads", value_kind::integer, "0", "CPU sampler and `gather_host` threads (0: all cores)"},
    {"timeout_s", value_kind::number, "300",
     "seconds a collective waits for a missing rank before it fails on every rank, in (0, "
     "31536000]; `WHOLESTORE_TIMEOUT`, when set, replaces it"},
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A key whose value must parse with `parse` (which throws logic_error): rethrown naming it.
template <typename Parse>
auto parse_key(const config& cfg, const std::string& key, Parse parse) {
  try {
    return parse(cfg.get_string(key));
  } catch (const wm::logic_error& e) {
    throw config_error(key + ": " + e.what() + " (" + cfg.origin.at(key) + ")");
  }
}

graph::sample_method parse_method(const config& cfg) {
  try {
    return graph::parse_sample_method(cfg.get_string("method"));
  } catch (const wholememory::logic_error& e) {
    throw config_error(std::string("method: ") + e.what() + " (" + cfg.origin.at("method") + ")");
  }
}

// What a sample run is asked for: the config, checked before anything collective.
struct sample_settings {
  graph::load_options where;  // memory type and location of the graph and the features
  wm::memory_type graph_type, features_type;
  wm::memory_location graph_location, features_location;
  graph::sample_method method;
  wm::dtype gen_dtype;
  std::vector<int> fanouts;
  std::uint64_t batch_size, epochs, max_batches, random_seed;
  unsigned threads;
  bool use_gpu;
  std::string dataset;
  bool generate;  // no dataset named: generate the gen.* graph
  std::chrono::milliseconds timeout;
};

sample_settings read_settings(const config& cfg) {
  sample_settings set;
  set.graph_type = parse_key(cfg, "graph.type", wm::parse_memory_type);
  set.graph_location = parse_key(cfg, "graph.location", wm::parse_memory_location);
  graph::load_options& where = set.where;
  where.type = set.graph_type;
  where.location = set.graph_location;
  if (!cfg.get_string("features.type").empty())
    where.features_type = parse_key(cfg, "features.type", wm::parse_memory_type);
  if (!cfg.get_string("features.location").empty())
    where.features_location = parse_key(cfg, "features.location", wm::parse_memory_location);
  set.features_type = where.features_type.value_or(set.graph_type);
  set.features_location = where.features_location.value_or(set.graph_location);
  set.method = parse_method(cfg);
  set.gen_dtype = parse_key(cfg, "gen.features_dtype", wm::parse_dtype);
  set.fanouts = parse_fanouts(cfg.get_string("fanouts"), cfg.origin.at("fanouts"));
  set.batch_size = static_cast<std::uint64_t>(cfg.get_int_at_least("batch_size", 1));
  set.epochs = static_cast<std::uint64_t>(cfg.get_int_at_least("epochs", 1));
  set.max_batches = static_cast<std::uint64_t>(cfg.get_int_at_least("batches", 0));
  set.random_seed = static_cast<std::uint64_t>(cfg.get_int_at_least("random_seed", 0));
  set.threads = static_cast<unsigned>(cfg.get_int_at_least("threads", 0));
  if (set.threads == 0) set.threads = wm::default_host_threads();
  const std::string& sampler_name = cfg.get_string("sampler");
  if (sampler_name != "cpu" && sampler_name != "gpu" && sampler_name != "auto") {
    throw config_error("sampler must be cpu, gpu or auto, got '" + sampler_name + "' (" +
                       cfg.origin.at("sampler") + ")");
  }
  const bool gpu_present = wm::device_count() > 0;
  set.use_gpu = sampler_name == "gpu" || (sampler_name == "auto" && gpu_present);
  if (set.use_gpu && !gpu_present) {
    throw config_error("sampler: gpu needs a CUDA build and a visible GPU (" +
                       cfg.origin.at("sampler") + "); use cpu or auto");
  }
  if (!set.use_gpu && (set.graph_location == wm::memory_location::device ||
                       set.features_location == wm::memory_location::device)) {
    throw config_error("the cpu sampler needs graph.location and features.location host");
  }
  set.dataset = cfg.get_string("dataset");
  // A dataset that is named must exist (load_graph says so on every rank); only an empty
  // `dataset` generates.
  set.generate = set.dataset.empty();
  set.timeout = collective_timeout(cfg);
  return set;
}

// The effective settings every rank must share, as (key, value) for agree_on_values: those
// that decide the graph, the collectives or the batches (threads and timeouts may differ).
std::vector<std::pair<std::string, std::string>> shared_settings(const config& cfg,
                                                                 const sample_settings& set) {
  std::vector<std::pair<std::string, std::string>> v;
  // Values as parsed, so that 64 and 064 agree.
  auto integer = [&](const char* key) { v.emplace_back(key, std::to_string(cfg.get_int(key))); };
  auto boolean = [&](const char* key) {
    v.emplace_back(key, cfg.get_bool(key) ? "true" : "false");
  };
  v.emplace_back("dataset", set.generate ? "(none: generated)" : "(loaded)");
  if (set.generate) {
    for (const char* key : {"gen.num_nodes", "gen.num_edges", "gen.feature_dim", "gen.seed"}) {
      integer(key);
    }
    v.emplace_back("gen.features_dtype", wm::dtype_name(set.gen_dtype));
    boolean("gen.weights");
  } else {
    boolean("load.verify_checksums");
  }
  v.emplace_back("graph.type", wm::memory_type_name(set.graph_type));
  v.emplace_back("graph.location", wm::memory_location_name(set.graph_location));
  v.emplace_back("features.type", wm::memory_type_name(set.features_type));
  v.emplace_back("features.location", wm::memory_location_name(set.features_location));
  v.emplace_back("sampler", set.use_gpu ? "gpu" : "cpu");
  v.emplace_back("method", graph::sample_method_name(set.method));
  std::string list;
  for (int f : set.fanouts) list += (list.empty() ? "" : ",") + std::to_string(f);
  v.emplace_back("fanouts", list);
  for (const char* key : {"batch_size", "random_seed", "epochs", "batches"}) integer(key);
  return v;
}

// The graph a run samples, and how it got into WholeMemory.
struct loaded_graph {
  graph::csr_graph g;
  std::string source;            // the dataset directory, or the generated graph's description
  double gen_s = 0, load_s = 0;  // load_s: the slowest rank's load (or placement)
  double check_s = 0;            // the CSR checks' CPU time on the busiest rank (loads only)
  std::uint64_t load_bytes = 0;
};

// Loads `set.dataset` or, when there is none, generates the gen.* graph on every rank and places
// it in WholeMemory; rank 0 (`lead`) shows progress and the graph.  Collective over comm and bs.
loaded_graph load_or_generate(const config& cfg, const sample_settings& set,
                              const std::shared_ptr<wm::communicator>& comm,
                              const std::shared_ptr<wm::communicator>& features_comm,
                              wm::bootstrap& bs, bool lead) {
  loaded_graph out;
  graph::load_options where = set.where;
  where.features_comm = features_comm;
  if (!set.generate) {
    out.source = set.dataset;
    where.verify_checksums = cfg.get_bool("load.verify_checksums");
    where.threads = static_cast<unsigned>(cfg.get_int_at_least("load.threads", 0));
    progress_display bar(lead, "load");
    where.progress = [&](std::uint64_t done, std::uint64_t total) { bar.update(done, total); };
    if (lead) std::printf("  loading %s\n", set.dataset.c_str());
    graph::load_stats st;
    out.g = graph::load_graph(comm, set.dataset, where, &st);
    out.load_s = st.seconds;
    out.check_s = st.validate_seconds;
    out.load_bytes = st.total_bytes;
  } else {
    graph::generate_options go;
    go.num_nodes = static_cast<std::uint64_t>(cfg.get_int_at_least("gen.num_nodes", 1));
    go.num_edges = static_cast<std::uint64_t>(cfg.get_int_at_least("gen.num_edges", 0));
    go.feature_dim = static_cast<std::uint64_t>(cfg.get_int_at_least("gen.feature_dim", 0));
    go.with_weights = cfg.get_bool("gen.weights");
    go.seed = static_cast<std::uint64_t>(cfg.get_int_at_least("gen.seed", 0));
    go.threads = static_cast<int>(cfg.get_int_at_least("gen.threads", 0));
    go.rmat = true;
    std::ostringstream s;
    s << "R-MAT (" << go.num_nodes << " nodes, " << go.num_edges << " edges, seed " << go.seed
      << ")";
    out.source = s.str();
    if (lead) {
      std::printf("  no dataset: generating %s on every rank\n", out.source.c_str());
      std::fflush(stdout);
    }
    auto t0 = std::chrono::steady_clock::now();
    graph::host_csr host = graph::generate_graph(go);
    out.gen_s = seconds_since(t0);
    bs.barrier();
    t0 = std::chrono::steady_clock::now();
    out.g = graph::make_graph(comm, host, where, set.gen_dtype);
    out.load_s = seconds_since(t0);
    out.load_bytes = out.g.row_offsets.size() + out.g.col_indices.size() +
                     (out.g.has_weights() ? out.g.edge_weights.size() : 0) +
                     (out.g.has_features() ? out.g.node_features.size() : 0);
    double all_s = 0;
    std::vector<double> times(static_cast<std::size_t>(bs.size()));
    bs.allgather(&out.load_s, times.data(), sizeof(double));
    for (double t : times) all_s = std::max(all_s, t);
    out.load_s = all_s;
  }
  if (lead) {
    if (set.generate) std::printf("  generate  %8.3f s (rank 0)\n", out.gen_s);
    std::printf("  %-9s %8.3f s  %7.2f GB/s  (%.1f MB, all ranks)\n",
                set.generate ? "place" : "load", out.load_s,
                out.load_s > 0 ? out.load_bytes / out.load_s / 1e9 : 0.0, out.load_bytes / 1e6);
    if (!set.generate) {
      std::printf("  check     %8.3f s  (CSR structure, readers' CPU time, busiest rank)\n",
                  out.check_s);
    }
    std::printf("  graph: %llu nodes, %llu edges (%s cols)%s, %llu x %s features\n",
                static_cast<unsigned long long>(out.g.num_nodes),
                static_cast<unsigned long long>(out.g.num_edges), wm::dtype_name(out.g.col_type),
                out.g.has_weights() ? ", weights" : "",
                static_cast<unsigned long long>(out.g.feature_dim),
                out.g.has_features() ? wm::dtype_name(out.g.feature_type) : "no");
    std::fflush(stdout);
  }
  if (lead && out.g.num_nodes == 0) {
    std::fprintf(stderr, "wholestore sample: warning: %s has no nodes: nothing to sample\n",
                 out.source.c_str());
  }
  if (set.method == graph::sample_method::weighted && !out.g.has_weights()) {
    throw config_error("method: weighted needs edge weights, and " + out.source + " has none");
  }
  return out;
}

// What rank 0 prints and reports at the end.
struct sample_outcome {
  int ranks = 0;
  bool use_gpu = false;
  std::string source;  // the dataset directory, or the generated graph's description
  bool generated = false;
  std::uint64_t num_nodes = 0, num_edges = 0, feature_dim = 0, epochs = 0;
  double gen_s = 0, load_s = 0;  // load_s: the slowest rank's load (or placement)
  double check_s = 0;
  std::uint64_t load_bytes = 0;
  train::sample_run_result run;  // the figures of the sampling loop
};

struct sample_rates {
  double load_gbps, batches_per_s, edges_per_s, gather_gbps;
};

sample_rates rates_of(const sample_outcome& o) {
  auto rate = [](double x, double s) { return s > 0 ? x / s : 0.0; };
  const train::sample_figures& tot = o.run.total;
  return {rate(static_cast<double>(o.load_bytes), o.load_s) / 1e9,
          rate(static_cast<double>(tot.batches), tot.loop_s),
          rate(static_cast<double>(tot.sampled_edges), tot.sample_s),
          rate(static_cast<double>(tot.gathered_bytes), tot.gather_s) / 1e9};
}

void print_summary(const sample_outcome& o) {
  const train::sample_figures& tot = o.run.total;
  const sample_rates r = rates_of(o);
  std::printf("  sample    %8.3f s  %10.0f edges/s  (%llu edges, %llu batches, %llu seeds)\n",
              tot.sample_s, r.edges_per_s, static_cast<unsigned long long>(tot.sampled_edges),
              static_cast<unsigned long long>(tot.batches),
              static_cast<unsigned long long>(tot.seeds));
  std::printf("  gather    %8.3f s  %7.2f GB/s  (%llu rows, %.1f MB)\n", tot.gather_s,
              r.gather_gbps, static_cast<unsigned long long>(tot.gathered_rows),
              tot.gathered_bytes / 1e6);
  std::printf("  loop      %8.3f s  %7.1f batches/s\n", tot.loop_s, r.batches_per_s);
  std::printf("  memory    peak RSS %.1f MiB (max rank), %.1f MiB (all ranks)", o.run.total.rss_mib,
              o.run.rss_sum_mib);
  if (o.use_gpu) std::printf(", GPU used %.1f MiB (max device)", o.run.total.gpu_mib);
  std::printf("\n");
  std::printf(
      "summary: %d rank(s), %s sampler, %llu batches, %llu sampled edges, %.0f edges/s, "
      "%.1f batches/s, load %.2f GB/s, gather %.2f GB/s\n",
      o.ranks, o.use_gpu ? "gpu" : "cpu", static_cast<unsigned long long>(tot.batches),
      static_cast<unsigned long long>(tot.sampled_edges), r.edges_per_s, r.batches_per_s,
      r.load_gbps, r.gather_gbps);
  std::fflush(stdout);
}

void write_sample_report(const std::string& path, const sample_outcome& o, const config& cfg) {
  const train::sample_figures& tot = o.run.total;
  const sample_rates r = rates_of(o);
  report_body report("sample");
  report.add("ranks", o.ranks)
      .add("sampler", o.use_gpu ? "gpu" : "cpu")
      .add("source", report_value::quoted(o.source))
      .add("generated", o.generated)
      .add("num_nodes", o.num_nodes)
      .add("num_edges", o.num_edges)
      .add("feature_dim", o.feature_dim)
      .add("generate_s", o.gen_s)
      .add("load_s", o.load_s)
      .add("load_bytes", o.load_bytes)
      .add("load_gbps", r.load_gbps)
      .add("check_s", o.check_s)
      .add("epochs", o.epochs)
      .add("batches", tot.batches)
      .add("seeds", tot.seeds)
      .add("sampled_edges", tot.sampled_edges)
      .add("sample_s", tot.sample_s)
      .add("sampled_edges_per_s", r.edges_per_s)
      .add("loop_s", tot.loop_s)
      .add("batches_per_s", r.batches_per_s)
      .add("gathered_rows", tot.gathered_rows)
      .add("gathered_bytes", tot.gathered_bytes)
      .add("gather_s", tot.gather_s)
      .add("gathered_gbps", r.gather_gbps)
      .add("peak_rss_mib", o.run.total.rss_mib)
      .add("peak_rss_mib_all_ranks", o.run.rss_sum_mib)
      .add("gpu_used_mib", o.run.total.gpu_mib);
  write_report(path, report, &cfg);
}

// The job as this run sees it: the ranks met, agreed on the config and have their
// communicator (and, on the GPU path, their device).
struct sample_job {
  std::shared_ptr<wm::bootstrap> bs;
  std::shared_ptr<wm::communicator> comm;
  /// The features' communicator when it is not `comm` (several hosts: the graph per host, the
  /// features distributed over every rank through NCCL).
  std::shared_ptr<wm::communicator> features_comm;
  wm::gpu_sharing sharing;
  int rank = 0, ranks = 1;
  bool lead = true;
};

// Joins the job.  The host communicator serves continuous and chunked memory, also for ranks
// that share a GPU; only distributed memory on the GPU path needs NCCL (its sampler and gather
// exchange rows through it), and NCCL needs a GPU per rank: refused here, before any work,
// with the ways out.  A job over several hosts (real, or simulated with launch --hosts) gives
// every host its own copy of the graph, in memory over that host's ranks (the host
// communicator cannot span hosts), except distributed memory on the GPU path, which spans
// every host through NCCL; the seeds are split over all ranks either way.  Rank 0 prints what
// runs.
sample_job join_job(const config& cfg, const sample_settings& set) {
  sample_job job;
  job.bs = wm::make_job_bootstrap(set.timeout);
  // Every rank runs the same job: a rank with other values would build or sample a different
  // graph, or wait in a collective the others never call.
  wm::agree_on_values(*job.bs, "the config of every rank must match", shared_settings(cfg, set));
  job.comm = wm::make_local_host_communicator(job.bs);
  const int num_hosts = wm::discover_topology(*job.bs).num_hosts;
  if (set.use_gpu) {
    wm::set_device(wm::default_device(*job.comm));
    job.sharing = wm::describe_gpu_sharing(*job.bs, wm::current_device());
    const bool distributed = set.graph_type == wm::memory_type::distributed ||
                             set.features_type == wm::memory_type::distributed;
    if (distributed && job.sharing.shared()) {
      throw config_error(
          "distributed memory on the GPU sampler needs one GPU per rank (NCCL), and " +
          job.sharing.description + " (" + std::to_string(job.sharing.ranks) + " ranks, " +
          std::to_string(job.sharing.gpus) +
          " GPU(s)); use graph.type/features.type continuous or chunked (ranks may share a "
          "GPU), run as many ranks as GPUs (WHOLESTORE_RANKS or launch -n), give each rank its "
          "own GPU (CUDA_VISIBLE_DEVICES), or sampler=cpu");
    }
    const bool graph_per_host = num_hosts > 1 && set.graph_type != wm::memory_type::distributed;
    if (distributed && graph_per_host) {
      // The seed's multi-node layout: each host keeps its copy of the graph (continuous or
      // chunked over its own ranks); the features are distributed over every rank.
      job.features_comm = wm::make_nccl_communicator(job.bs);
    } else if (distributed) {
      job.comm = wm::make_nccl_communicator(job.bs);
    }
  }
  job.rank = job.bs->rank();
  job.ranks = job.bs->size();
  job.lead = job.rank == 0;
  if (job.lead) {
    std::printf("wholestore sample: %d rank(s), %s sampler, graph %s %s, features %s %s\n",
                job.ranks, set.use_gpu ? "gpu" : "cpu", wm::memory_type_name(set.graph_type),
                wm::memory_location_name(set.graph_location),
                wm::memory_type_name(set.features_type),
                wm::memory_location_name(set.features_location));
    if (num_hosts > 1) {
      std::printf("  %d hosts: %s\n", num_hosts,
                  job.features_comm ? "a copy of the graph per host, the features distributed "
                                      "over every host (NCCL)"
                  : job.comm->get_backend() == wm::backend::nccl
                      ? "distributed memory over every host (NCCL)"
                      : "every host holds its own copy of the graph and features");
    }
    if (set.use_gpu) {
      std::printf("  %d GPU(s) in use, %d rank(s) per GPU at most, %s communicator\n",
                  job.sharing.gpus, job.sharing.max_ranks_per_gpu,
                  wm::backend_name(job.comm->get_backend()));
    }
    std::fflush(stdout);
  }
  return job;
}

// The sampling loop's options from the settings (the seeds shuffled per epoch, all nodes).
train::sample_run_options run_options(const config& cfg, const sample_settings& set) {
  train::sample_run_options o;
  o.order = train::seed_order::shuffled_epochs;
  o.fanouts = set.fanouts;
  o.method = set.method;
  o.edge_ids = cfg.get_bool("edge_ids");
  o.batch_size = set.batch_size;
  o.epochs = set.epochs;
  o.batches = set.max_batches;
  o.random_seed = set.random_seed;
  o.use_gpu = set.use_gpu;
  o.gather_features = true;
  o.threads = set.threads;
  return o;
}

// Every epoch's batches on every rank, rank 0 showing progress.  Collective over job.bs (and
// over the communicator for distributed memory).
train::sample_run_result run_loop(const sample_job& job, const train::sample_run_options& o,
                                  graph::csr_graph& g) {
  progress_display bar(job.lead, "sample");
  return train::run_sampling(
      job.bs, g, o, [&](std::uint64_t done, std::uint64_t total) { bar.update(done, total); });
}

sample_outcome outcome_of(const sample_job& job, const sample_settings& set,
                          const loaded_graph& loaded, train::sample_run_result run) {
  sample_outcome outcome;
  outcome.ranks = job.ranks;
  outcome.use_gpu = set.use_gpu;
  outcome.source = loaded.source;
  outcome.generated = set.generate;
  outcome.num_nodes = loaded.g.num_nodes;
  outcome.num_edges = loaded.g.num_edges;
  outcome.feature_dim = loaded.g.feature_dim;
  outcome.epochs = set.epochs;
  outcome.gen_s = loaded.gen_s;
  outcome.load_s = loaded.load_s;
  outcome.check_s = loaded.check_s;
  outcome.load_bytes = loaded.load_bytes;
  outcome.run = std::move(run);
  return outcome;
}

}  // namespace

int run_sample(int argc, char** argv) {
  command_args args = parse_command_args(argc, argv);
  config cfg = load_config(sample_schema, args.config_file, args.overrides);
  const sample_settings set = read_settings(cfg);
  const sample_job job = join_job(cfg, set);
  loaded_graph loaded = load_or_generate(cfg, set, job.comm, job.features_comm, *job.bs, job.lead);
  train::sample_run_result run = run_loop(job, run_options(cfg, set), loaded.g);
  const sample_outcome outcome = outcome_of(job, set, loaded, std::move(run));
  if (job.lead) {
    print_summary(outcome);
    if (!args.report_file.empty()) write_sample_report(args.report_file, outcome, cfg);
  }
  return 0;
}

const command_info& sample_command() {
  static const command_info info{
      "sample",
      "load or generate a graph, sample neighborhoods, gather features",
      "",
      "The main job (`scripts/run.sh` runs it, one rank per GPU). Every rank joins the job, loads "
      "`dataset` (or, when it is empty, generates the `gen.*` graph in memory: the same seed "
      "gives the same graph on every rank), takes its share of the training seeds (all nodes, "
      "shuffled per epoch "
      "from `random_seed`), samples batch by batch and gathers the features of each batch's "
      "input nodes (the last hop's source nodes). Memory of type `distributed` makes sampling "
      "and gathering collective: every rank makes as many calls as the rank with the most "
      "batches, padding with empty batches.",
      {{"", "configs/sample.yaml", "", &sample_schema,
        "The summary (and `--report`): `load_s`/`load_gbps` are the load's wall time (slowest "
        "rank) and the bytes all ranks read over it (for a generated graph: placing it in "
        "WholeMemory); `check_s` (loads only) the CPU time the readers of the busiest rank "
        "spent checking the CSR's structure; `sampled_edges_per_s` is all ranks' sampled edges "
        "over the slowest "
        "rank's time in the sampler; `gathered_gbps` all ranks' gathered feature bytes over the "
        "slowest rank's gather time; `batches_per_s` all ranks' non-empty batches over the "
        "slowest rank's whole loop; `peak_rss_mib` the largest peak resident set of a rank "
        "(`getrusage`), `gpu_used_mib` the device memory in use at the end (largest over "
        "ranks; ranks sharing a GPU see the same figure).\n\nEvery rank must run with the same "
        "settings, apart from `threads`, `load.threads`, `gen.threads`, `timeout_s` and "
        "`edge_ids`: right after the ranks meet they compare the effective values (a loaded "
        "dataset or the `gen.*` keys of a generated one, memory types and locations, the "
        "sampler, `method`, `fanouts`, `batch_size`, `random_seed`, `epochs`, `batches`) and all "
        "fail naming the first key that differs and which rank has which value. Loading then "
        "compares the ranks' manifests, and placing a generated graph a digest of each rank's "
        "graph."}},
      {"wholestore sample configs/sample.yaml --set sampler=cpu --set batches=20",
       "wholestore launch -n 2 -- wholestore sample configs/sample.yaml "
       "--set dataset=datasets/rmat-small --set graph.type=chunked --set method=weighted",
       "wholestore sample configs/sample.yaml --set fanouts=25,10 --report /tmp/sample.yaml"},
      run_sample};
  return info;
}

}  // namespace wholestore::apps
