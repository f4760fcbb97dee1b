// `wholestore bench configs/bench_sample.yaml` (suite: sample): neighbor-sampler throughput on a
// products-shaped R-MAT graph in WholeMemory, per sampler x memory type x location x method x
// fanouts, next to the targets (GPU 500M sampled edges/s, CPU 5M); then random walks (DeepWalk,
// node2vec) per walker x type x location in walk steps/s (GPU target 1e9).  Runs on the ranks
// present, one GPU per rank; rank 0 prints the all-rank aggregate of every case.
#include "commands.hpp"
#include "config.hpp"
#include "report.hpp"

#include <graph/csr_graph.hpp>
#include <graph/generate.hpp>
#include <graph/random.hpp>
#include <graph/sampling.hpp>
#include <graph/walks.hpp>
#include <train/sample_runner.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <yaml-cpp/yaml.h>

#if defined(WHOLESTORE_HAS_CUDA)
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace wholestore::apps {

namespace {

namespace wm = wholememory;

const std::vector<config_key> bench_sample_schema = {
    {"suite", value_kind::string, "sample",
     "`sample` selects this suite (a bench config without `suite` runs the gather suite)"},
    {"num_nodes", value_kind::integer, "2449029",
     "graph nodes when a GPU is present (ogbn-products)"},
    {"num_edges", value_kind::integer, "61859140",
     "R-MAT edges drawn when a GPU is present (ogbn-products)"},
    {"cpu_num_nodes", value_kind::integer, "200000", "graph nodes without a GPU"},
    {"cpu_num_edges", value_kind::integer, "4000000", "R-MAT edges drawn without a GPU"},
    {"weights", value_kind::boolean, "true",
     "float32 edge weights (the `weighted` cases need them)"},
    {"gen_seed", value_kind::integer, "0", "random seed of the graph"},
    {"gen_threads", value_kind::integer, "0",
     "generator threads per rank; 0: the host's cores divided among its ranks"},
    {"fanouts", value_kind::string, "15,10,5;25,10;30,30,30",
     "fanout cases: `;` between cases, `,` between hops"},
    {"methods", value_kind::string, "uniform,weighted",
     "methods: `uniform`, `uniform_with_replacement`, `weighted`"},
    {"types", value_kind::string, "continuous", "memory types of the graph"},
    {"locations", value_kind::string, "device,host",
     "graph locations; `device` runs with the GPU sampler only"},
    {"samplers", value_kind::string, "gpu,cpu", "samplers; `gpu` is skipped without a GPU"},
    {"batch_size", value_kind::integer, "1024", "seeds per batch"},
    {"warmup", value_kind::integer, "3", "untimed batches per case"},
    {"batches", value_kind::integer, "50", "timed batches per rank per case, GPU sampler"},
    {"cpu_batches", value_kind::integer, "5", "timed batches per rank per case, CPU sampler"},
    {"threads", value_kind::integer, "0", "CPU sampler threads (0: all cores)"},
    {"random_seed", value_kind::integer, "1234", "seed of the batches' seeds and of the sampler"},
    {"gpu_target", value_kind::number, "500e6",
     "GPU target, sampled edges per second (the ratio column)"},
    {"cpu_target", value_kind::number, "5e6", "CPU target, sampled edges per second"},
    {"walks", value_kind::string, "deepwalk,node2vec",
     "random-walk cases: `deepwalk`, `node2vec` (empty: none); the GPU walker on distributed "
     "graphs needs a GPU per rank. Every type must take as many steps, else the bench exits "
     "with 1"},
    {"walk_length", value_kind::integer, "80", "steps per walk"},
    {"walk_batch", value_kind::integer, "65536", "walks per call"},
    {"walk_calls", value_kind::integer, "10", "timed calls per rank per walk case (GPU)"},
    {"cpu_walk_calls", value_kind::integer, "2", "timed calls per rank per walk case (CPU)"},
    {"node2vec_p", value_kind::number, "0.5", "node2vec return parameter"},
    {"node2vec_q", value_kind::number, "2", "node2vec in-out parameter"},
    {"walk_target", value_kind::number, "1e9", "GPU target, walk steps per second"},
    {"cpu_walk_target", value_kind::number, "20e6", "CPU target, walk steps per second"},
    {"timeout_s", value_kind::number, "600",
     "seconds a collective waits for a missing rank before it fails on every rank, in (0, "
     "31536000]; `WHOLESTORE_TIMEOUT`, when set, replaces it"},
};

// SplitMix64 (the sampler's own mixer) for seed orders and per-batch random seeds.
using graph::mix64;

graph::sample_method method_of(const std::string& m) {
  try {
    return graph::parse_sample_method(m);
  } catch (const wholememory::logic_error& e) {
    throw config_error(std::string("methods: ") + e.what());
  }
}

const char* method_name(graph::sample_method m) { return graph::sample_method_name(m); }

struct case_result {
  std::string sampler, type, location, method, fanouts;
  std::uint64_t batches = 0, edges = 0;
  double seconds = 0;  // slowest rank
  double edges_per_s = 0, batches_per_s = 0, mean_edges = 0, target = 0;
};

}  // namespace

const std::vector<config_key>& bench_sample_keys() { return bench_sample_schema; }

std::string bench_suite(int argc, char** argv) {
  command_args args = parse_command_args(argc, argv);
  std::string suite = "gather";
  if (!args.config_file.empty()) {
    try {
      YAML::Node root = YAML::LoadFile(args.config_file);
      if (root.IsMap() && root["suite"] && root["suite"].IsScalar()) suite = root["suite"].Scalar();
    } catch (const YAML::Exception&) {
      // load_config reports the file's problem with its line.
    }
  }
  for (const auto& o : args.overrides)
    if (o.rfind("suite=", 0) == 0) suite = o.substr(6);
  return suite;
}

struct walk_result {
  std::string walker, type, location, walk;
  int length = 0;
  std::uint64_t walks = 0, steps = 0;
  double seconds = 0, steps_per_s = 0, target = 0;
};

/// Steps taken in a block of walks: the filled entries after each start.
std::uint64_t steps_in(const std::vector<std::int64_t>& out, std::size_t width) {
  std::uint64_t steps = 0;
  for (std::size_t i = 0; i < out.size(); ++i)
    if (i % width != 0 && out[i] >= 0) ++steps;
  return steps;
}

/// The random-walk cases: every rank walks its own starts; rank 0 prints all ranks' steps
/// over the slowest rank's time.
std::vector<walk_result> run_walk_cases(const config& cfg, const graph::host_csr& host,
                                        const std::vector<std::string>& walkers,
                                        const std::vector<wm::memory_type>& types,
                                        const std::vector<wm::memory_location>& locations,
                                        const std::shared_ptr<wm::communicator>& comm,
                                        const std::shared_ptr<wm::communicator>& nccl_comm,
                                        wm::bootstrap& bs, cudaStream_t stream, unsigned threads) {
  std::vector<walk_result> results;
  const std::vector<std::string> kinds = split_list(cfg.get_string("walks"), ',');
  for (const auto& k : kinds)
    if (k != "deepwalk" && k != "node2vec")
      throw config_error("walks: unknown walk '" + k + "' (deepwalk or node2vec)");
  if (kinds.empty()) return results;
  // Both checked, with their bounds, before anything was allocated (check_walk_sizes).
  const std::int64_t length = cfg.get_int("walk_length");
  const std::int64_t batch = cfg.get_int("walk_batch");
  const double p = cfg.get_number("node2vec_p"), q = cfg.get_number("node2vec_q");
  if (!(p > 0) || !(q > 0)) throw config_error("node2vec_p and node2vec_q must be > 0");
  const int rank = bs.rank(), ranks = bs.size();
  const bool lead = rank == 0;
  const auto n = static_cast<std::size_t>(batch);
  const std::size_t width = static_cast<std::size_t>(length) + 1;
  std::vector<std::int64_t> starts(n), out(n * width);
  if (lead) {
    std::printf("%-4s %-11s %-6s %-9s %6s %14s %12s %8s\n", "walk", "type", "loc", "walk", "len",
                "steps/s", "walks/s", "target");
    std::fflush(stdout);
  }
  for (const auto& walker : walkers) {
    const bool on_gpu = walker == "gpu";
    const auto calls = static_cast<std::uint64_t>(
        std::max<std::int64_t>(1, cfg.get_int(on_gpu ? "walk_calls" : "cpu_walk_calls")));
    const double target = cfg.get_number(on_gpu ? "walk_target" : "cpu_walk_target");
    for (auto type : types) {
      // Both walkers walk distributed graphs (each step served by the owners), the GPU walker
      // over NCCL, so not with ranks sharing a GPU.
      const bool over_nccl = type == wm::memory_type::distributed && on_gpu;
      if (over_nccl && !nccl_comm) continue;
      for (auto loc : locations) {
        if (loc == wm::memory_location::device && !on_gpu) continue;
        graph::csr_graph g = graph::make_graph(over_nccl ? nccl_comm : comm, host, type, loc);
#if defined(WHOLESTORE_HAS_CUDA)
        std::unique_ptr<graph::gpu_walker> gw;
        wm::device_buffer d_starts, d_out;
        if (on_gpu) {
          gw = std::make_unique<graph::gpu_walker>(g);
          d_starts = wm::device_buffer(n * 8, wm::current_device());
          d_out = wm::device_buffer(n * width * 8, wm::current_device());
        }
#endif
        for (const auto& kind : kinds) {
          graph::walk_options o;
          o.length = static_cast<int>(length);
          if (kind == "node2vec") {
            o.p = p;
            o.q = q;
          }
          std::uint64_t steps = 0;
          double seconds = 0;
          for (std::uint64_t c = 0; c < calls + 1; ++c) {  // call 0 warms up
            const std::uint64_t call_id = c * static_cast<std::uint64_t>(ranks) + rank;
            for (std::size_t i = 0; i < n; ++i)
              starts[i] = static_cast<std::int64_t>(mix64(call_id * n + i) % host.num_nodes);
            o.seed = mix64(call_id);
            o.first_walk = call_id * n;
            auto s0 = std::chrono::steady_clock::now();
            if (on_gpu) {
#if defined(WHOLESTORE_HAS_CUDA)
              wm::copy_bytes(d_starts.data(), starts.data(), n * 8);
              s0 = std::chrono::steady_clock::now();
              gw->walk(d_starts.data_as<const std::int64_t>(), n, o, d_out.data_as<std::int64_t>(),
                       stream);
              const double s =
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
              wm::copy_bytes(out.data(), d_out.data(), out.size() * 8);
              if (c > 0) seconds += s;
#endif
            } else {
              graph::random_walks_host(g, starts.data(), n, o, out.data(), threads);
              const double s =
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count();
              if (c > 0) seconds += s;
            }
            if (c > 0) steps += steps_in(out, width);
          }
          struct figures {
            double seconds;
            std::uint64_t steps;
          } own{seconds, steps};
          std::vector<figures> all(static_cast<std::size_t>(ranks));
          bs.allgather(&own, all.data(), sizeof(figures));
          walk_result r;
          r.walker = walker;
          r.type = wm::memory_type_name(type);
          r.location = wm::memory_location_name(loc);
          r.walk = kind;
          r.length = o.length;
          r.walks = calls * n * static_cast<std::uint64_t>(ranks);
          for (const auto& a : all) {
            r.seconds = std::max(r.seconds, a.seconds);
            r.steps += a.steps;
          }
          r.steps_per_s = r.seconds > 0 ? r.steps / r.seconds : 0.0;
          r.target = target > 0 ? r.steps_per_s / target : 0.0;
          if (lead) {
            std::printf("%-4s %-11s %-6s %-9s %6d %14.0f %12.0f %7.2fx\n", r.walker.c_str(),
                        r.type.c_str(), r.location.c_str(), r.walk.c_str(), r.length, r.steps_per_s,
                        r.seconds > 0 ? r.walks / r.seconds : 0.0, r.target);
            std::fflush(stdout);
          }
          results.push_back(r);
        }
      }
    }
  }
  return results;
}

namespace {

// The sampler cases asked for, checked before anything collective.
struct bench_sample_settings {
  // Cases between ';', hops between ','.
  std::vector<std::vector<int>> fanout_cases;
  std::vector<std::string> fanout_names;
  std::vector<graph::sample_method> methods;
  std::vector<wm::memory_type> types;
  std::vector<wm::memory_location> locations;
  std::vector<std::string> samplers;  // those that run here (`gpu` only with a GPU)
  std::uint64_t batch_size = 0, warmup = 0, gpu_batches = 0, cpu_batches = 0, random_seed = 0;
  unsigned threads = 0;
  bool gpu = false;  // a GPU is present
  std::chrono::milliseconds timeout{};
};

// An empty case ("5;;5") or hop is an error, not skipped.
void read_fanout_cases(const config& cfg, bench_sample_settings& set) {
  const std::string& text = cfg.get_string("fanouts");
  const std::string where = cfg.origin.at("fanouts");
  std::stringstream cases(text);
  std::string c;
  while (std::getline(cases, c, ';')) {
    c.erase(0, c.find_first_not_of(" \t"));
    c.erase(c.find_last_not_of(" \t") + 1);
    if (c.empty()) {
      throw config_error("fanouts: '" + text + "' has an empty case (" + where + ")");
    }
    set.fanout_cases.push_back(parse_fanouts(c, where));
    set.fanout_names.push_back(c);
  }
  if (set.fanout_cases.empty()) throw config_error("fanouts: no case given (" + where + ")");
}

// A batch the bench cannot hold is refused before anything is allocated (issue 36: a batch of
// 1e8 seeds on a 1,000-node graph ran on for a long time or died in an allocation).  The
// sampler cases' seeds per batch: at most 2^31 (a sampled block indexes its nodes with 32
// bits), and at most 64 a node of the graph that runs (`nodes_key`): seeds are drawn from its
// nodes, so a larger batch only repeats them while its blocks (up to the batch x the fanouts'
// product edges) outgrow memory instead of measuring anything new.
void check_batch_size(const config& cfg, const char* nodes_key) {
  constexpr std::uint64_t max_seeds = std::uint64_t{1} << 31;
  constexpr std::uint64_t max_per_node = 64;
  const auto seeds = static_cast<std::uint64_t>(cfg.get_int_at_least("batch_size", 1));
  const auto nodes = static_cast<std::uint64_t>(cfg.get_int_at_least(nodes_key, 1));
  const std::string got = ", got " + std::to_string(seeds) + " (" + cfg.origin.at("batch_size");
  if (seeds > max_seeds)
    throw config_error("batch_size must be at most " + std::to_string(max_seeds) +
                       " (2^31: a sampled block indexes its nodes with 32 bits)" + got +
                       "); lower batch_size");
  if (nodes <= max_seeds / max_per_node && seeds > max_per_node * nodes)
    throw config_error("batch_size must be at most " + std::to_string(max_per_node * nodes) +
                       " (64 x " + nodes_key + " " + std::to_string(nodes) + ")" + got +
                       "): its seeds are drawn from the graph's nodes, so a larger batch only "
                       "repeats each node over 64 times while its samples grow past what memory "
                       "holds; lower batch_size or raise " +
                       nodes_key);
}

// The walk cases' sizes, when `walks` asks for any: walk_length and walk_batch at least 1, and
// a call's walks (walk_batch rows of walk_length + 1 ids, on the host and on the device) at
// most 2^31 ids.
void check_walk_sizes(const config& cfg) {
  if (split_list(cfg.get_string("walks"), ',').empty()) return;
  constexpr std::uint64_t max_ids = std::uint64_t{1} << 31;
  const auto width = static_cast<std::uint64_t>(cfg.get_int_at_least("walk_length", 1)) + 1;
  const auto walks = static_cast<std::uint64_t>(cfg.get_int_at_least("walk_batch", 1));
  if (walks > max_ids / width)
    throw config_error("walk_batch x (walk_length + 1) must be at most " + std::to_string(max_ids) +
                       " node ids per call (2^31: 16 GiB of int64 per rank), got " +
                       std::to_string(walks) + " x " + std::to_string(width) + " (" +
                       cfg.origin.at("walk_batch") + ", " + cfg.origin.at("walk_length") +
                       "); lower walk_batch or walk_length");
}

bench_sample_settings read_bench_settings(const config& cfg) {
  bench_sample_settings set;
  set.timeout = collective_timeout(cfg);
  set.gpu = wm::device_count() > 0;
  read_fanout_cases(cfg, set);
  for (const auto& m : split_list(cfg.get_string("methods"), ','))
    set.methods.push_back(method_of(m));
  try {
    for (const auto& t : split_list(cfg.get_string("types"), ','))
      set.types.push_back(wm::parse_memory_type(t));
    for (const auto& l : split_list(cfg.get_string("locations"), ','))
      set.locations.push_back(wm::parse_memory_location(l));
  } catch (const wm::logic_error& e) {
    throw config_error(std::string("types/locations: ") + e.what());
  }
  for (const auto& s : split_list(cfg.get_string("samplers"), ',')) {
    if (s != "gpu" && s != "cpu") throw config_error("samplers: unknown sampler '" + s + "'");
    if (s == "gpu" && !set.gpu) continue;
    set.samplers.push_back(s);
  }
  set.batch_size = static_cast<std::uint64_t>(cfg.get_int_at_least("batch_size", 1));
  set.warmup = static_cast<std::uint64_t>(cfg.get_int_at_least("warmup", 0));
  set.gpu_batches = static_cast<std::uint64_t>(cfg.get_int_at_least("batches", 1));
  set.cpu_batches = static_cast<std::uint64_t>(cfg.get_int_at_least("cpu_batches", 1));
  // Both graph sizes are checked whether or not a GPU is present.
  for (const char* key : {"num_nodes", "cpu_num_nodes"}) cfg.get_int_at_least(key, 1);
  const char* nodes_key = set.gpu ? "num_nodes" : "cpu_num_nodes";  // the graph that runs
  check_batch_size(cfg, nodes_key);
  check_walk_sizes(cfg);
  for (const char* key : {"gpu_target", "cpu_target"}) cfg.get_positive_number(key);
  set.threads = static_cast<unsigned>(cfg.get_int_at_least("threads", 0));
  if (set.threads == 0) set.threads = wm::default_host_threads();
  set.random_seed = static_cast<std::uint64_t>(cfg.get_int_at_least("random_seed", 0));
  return set;
}

// The ranks met, agreed on the config and hold their communicators (NCCL for the GPU sampler
// on distributed graphs, when every rank has its own GPU) and the walks' stream.
struct bench_job {
  std::shared_ptr<wm::bootstrap> bs;
  std::shared_ptr<wm::communicator> host_comm, nccl_comm;
  cudaStream_t stream = nullptr;
  int rank = 0, ranks = 1;
  bool lead = true;

  bench_job() = default;
  bench_job(const bench_job&) = delete;
  bench_job& operator=(const bench_job&) = delete;
  ~bench_job() {
#if defined(WHOLESTORE_HAS_CUDA)
    if (stream) cudaStreamDestroy(stream);
#endif
  }
};

void join_bench(const config& cfg, const bench_sample_settings& set, bench_job& job) {
  job.bs = wm::make_job_bootstrap(set.timeout);
  agree_on_config(*job.bs, cfg, "bench", {"timeout_s", "threads", "gen_threads"});
  // Over several hosts (real or launch --hosts) continuous and chunked graphs are per host.
  job.host_comm = wm::make_local_host_communicator(job.bs);
  job.rank = job.bs->rank();
  job.ranks = job.bs->size();
  job.lead = job.rank == 0;
#if defined(WHOLESTORE_HAS_CUDA)
  if (!set.gpu) return;
  wm::set_device(wm::default_device(*job.host_comm));
  if (cudaStreamCreateWithFlags(&job.stream, cudaStreamNonBlocking) != cudaSuccess)
    WM_FAIL(wm::cuda_error, "cudaStreamCreateWithFlags failed");
  if (std::find(set.types.begin(), set.types.end(), wm::memory_type::distributed) !=
      set.types.end()) {
    // NCCL needs a GPU per rank; with ranks sharing one, the GPU sampler skips distributed
    // graphs (the CPU sampler still runs them over the host communicator).
    const wm::gpu_sharing sharing = wm::describe_gpu_sharing(*job.bs, wm::current_device());
    if (!sharing.shared()) {
      job.nccl_comm = wm::make_nccl_communicator(job.bs);
    } else if (job.lead) {
      std::printf(
          "note: GPU sampler on distributed graphs skipped: %s (NCCL needs one GPU "
          "per rank)\n",
          sharing.description.c_str());
    }
  }
#else
  (void)set;
#endif
}

// The graph, the same on every rank; rank 0 prints what runs.
graph::host_csr generate_bench_graph(const config& cfg, const bench_sample_settings& set,
                                     const bench_job& job, double& gen_s) {
  graph::generate_options go;
  go.num_nodes =
      static_cast<std::uint64_t>(cfg.get_int_at_least(set.gpu ? "num_nodes" : "cpu_num_nodes", 1));
  go.num_edges =
      static_cast<std::uint64_t>(cfg.get_int_at_least(set.gpu ? "num_edges" : "cpu_num_edges", 0));
  go.with_weights = cfg.get_bool("weights");
  go.seed = static_cast<std::uint64_t>(cfg.get_int_at_least("gen_seed", 0));
  go.threads = static_cast<int>(cfg.get_int_at_least("gen_threads", 0));
  if (go.threads == 0)
    go.threads = static_cast<int>(std::max(
        1u, wm::default_host_threads() / static_cast<unsigned>(job.host_comm->local_size())));
  if (job.lead) {
    std::printf(
        "wholestore bench (sample): %d rank(s), %s, R-MAT %llu nodes, %llu edges%s, batch %llu, "
        "%llu warm-up + %llu (gpu) / %llu (cpu) timed batches per rank\n",
        job.ranks, set.gpu ? "GPU present" : "no GPU (CPU sampler, cpu_* sizes)",
        static_cast<unsigned long long>(go.num_nodes),
        static_cast<unsigned long long>(go.num_edges), go.with_weights ? ", weights" : "",
        static_cast<unsigned long long>(set.batch_size),
        static_cast<unsigned long long>(set.warmup),
        static_cast<unsigned long long>(set.gpu_batches),
        static_cast<unsigned long long>(set.cpu_batches));
    std::fflush(stdout);
  }
  const auto t0 = std::chrono::steady_clock::now();
  graph::host_csr host = graph::generate_graph(go);
  gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (job.lead) {
    std::printf("  generated in %.2f s (%d threads per rank)\n", gen_s, go.threads);
    std::printf("%-4s %-11s %-6s %-24s %-9s %14s %10s %12s %8s\n", "smp", "type", "loc", "method",
                "fanouts", "edges/s", "batches/s", "edges/batch", "target");
    std::fflush(stdout);
  }
  return host;
}

// One case's options: random batches (distinct seeds for every batch of every rank), sampling
// only, warm-up batches untimed.
train::sample_run_options case_options(const bench_sample_settings& set, bool on_gpu,
                                       graph::sample_method method,
                                       const std::vector<int>& fanouts) {
  train::sample_run_options o;
  o.order = train::seed_order::random_batches;
  o.fanouts = fanouts;
  o.method = method;
  o.batch_size = set.batch_size;
  o.epochs = 1;
  o.batches = on_gpu ? set.gpu_batches : set.cpu_batches;
  o.warmup_batches = set.warmup;
  o.random_seed = set.random_seed;
  o.use_gpu = on_gpu;
  o.gather_features = false;
  o.threads = set.threads;
  return o;
}

// Every sampler x type x location x method x fanouts case: all ranks' sampled edges over the
// slowest rank's time in the sampler; rank 0 prints each case.  Collective over job.bs.
std::vector<case_result> run_sample_cases(const config& cfg, const bench_sample_settings& set,
                                          const graph::host_csr& host, const bench_job& job) {
  std::vector<case_result> results;
  for (const auto& sampler : set.samplers) {
    const bool on_gpu = sampler == "gpu";
    const double target = on_gpu ? cfg.get_number("gpu_target") : cfg.get_number("cpu_target");
    for (auto type : set.types) {
      for (auto loc : set.locations) {
        if (loc == wm::memory_location::device && (!set.gpu || !on_gpu)) continue;
        const bool over_nccl = on_gpu && type == wm::memory_type::distributed;
        if (over_nccl && !job.nccl_comm) continue;
        graph::csr_graph g =
            graph::make_graph(over_nccl ? job.nccl_comm : job.host_comm, host, type, loc);
        train::sample_runner runner(job.bs, g);
        bool path_noted = !over_nccl;
        for (auto method : set.methods) {
          if (method == graph::sample_method::weighted && !g.has_weights()) continue;
          for (std::size_t f = 0; f < set.fanout_cases.size(); ++f) {
            const train::sample_run_result run =
                runner.run(case_options(set, on_gpu, method, set.fanout_cases[f]));
            case_result r;
            r.sampler = sampler;
            r.type = wm::memory_type_name(type);
            r.location = wm::memory_location_name(loc);
            r.method = method_name(method);
            r.fanouts = set.fanout_names[f];
            r.batches = run.total.batches;
            r.seconds = run.total.sampler_s;
            r.edges = run.total.sampled_edges;
            r.edges_per_s = r.seconds > 0 ? r.edges / r.seconds : 0.0;
            r.batches_per_s = r.seconds > 0 ? r.batches / r.seconds : 0.0;
            r.mean_edges = static_cast<double>(r.edges) / static_cast<double>(r.batches);
            r.target = target > 0 ? r.edges_per_s / target : 0.0;
            if (job.lead) {
              std::printf("%-4s %-11s %-6s %-24s %-9s %14.0f %10.1f %12.0f %7.2fx\n",
                          r.sampler.c_str(), r.type.c_str(), r.location.c_str(), r.method.c_str(),
                          r.fanouts.c_str(), r.edges_per_s, r.batches_per_s, r.mean_edges,
                          r.target);
              if (!path_noted) {
                // Which path the figures of this distributed graph come from.
                if (runner.served_by_owners()) {
                  std::printf(
                      "     (distributed graph: hops served by the nodes' owners; %llu of them "
                      "so far sized by bounds, without a wait for counts)\n",
                      static_cast<unsigned long long>(runner.padded_hops()));
                } else {
                  std::printf(
                      "     (distributed graph: hops read through the gathers' exchanges)\n");
                }
              }
              std::fflush(stdout);
            }
            path_noted = true;
            results.push_back(r);
          }
        }
      }
    }
  }
  return results;
}

// Every memory type and location samples the same seeds with the same options, so a case
// must sample the same number of edges on all of them: a difference means the samples
// differ (a node's sample depends on the seed, the hop and the node only), and the bench
// fails instead of printing rates of unlike work.
std::vector<std::string> find_mismatches(const std::vector<case_result>& results,
                                         const std::vector<walk_result>& walk_results) {
  std::vector<std::string> mismatches;
  for (const walk_result& a : walk_results) {
    for (const walk_result& b : walk_results) {
      if (&b == &a) break;
      if (a.walker == b.walker && a.walk == b.walk && a.length == b.length && a.steps != b.steps) {
        mismatches.push_back(a.walker + " " + a.walk + " walks: " + a.type + "/" + a.location +
                             " took " + std::to_string(a.steps) + " steps, " + b.type + "/" +
                             b.location + " " + std::to_string(b.steps));
        break;
      }
    }
  }
  for (const case_result& a : results) {
    for (const case_result& b : results) {
      if (&b == &a) break;
      if (a.sampler == b.sampler && a.method == b.method && a.fanouts == b.fanouts &&
          a.edges != b.edges) {
        mismatches.push_back(a.sampler + " " + a.method + " [" + a.fanouts + "]: " + a.type + "/" +
                             a.location + " sampled " + std::to_string(a.edges) + " edges, " +
                             b.type + "/" + b.location + " " + std::to_string(b.edges));
        break;
      }
    }
  }
  return mismatches;
}

// Rank 0's summary and, with --report, the YAML report.
void report_bench(const command_args& args, const config& cfg, int ranks,
                  const graph::host_csr& host, double gen_s,
                  const std::vector<case_result>& results,
                  const std::vector<walk_result>& walk_results,
                  const std::vector<std::string>& mismatches) {
  for (const std::string& m : mismatches) {
    std::fprintf(stderr, "bench: the samples differ between memory types: %s\n", m.c_str());
  }
  std::printf(
      "summary: %zu case(s); edges/s are all ranks' sampled edges over the slowest "
      "rank's time; target: GPU %.0fM, CPU %.0fM edges/s\n",
      results.size(), cfg.get_number("gpu_target") / 1e6, cfg.get_number("cpu_target") / 1e6);
  if (args.report_file.empty()) return;
  std::vector<report_row> cases, walk_cases;
  for (const auto& r : results) {
    cases.push_back({{"sampler", r.sampler},
                     {"type", r.type},
                     {"location", r.location},
                     {"method", r.method},
                     {"fanouts", report_value::quoted(r.fanouts)},
                     {"batches", r.batches},
                     {"edges", r.edges},
                     {"seconds", r.seconds},
                     {"edges_per_s", r.edges_per_s},
                     {"batches_per_s", r.batches_per_s},
                     {"mean_edges_per_batch", r.mean_edges},
                     {"target_ratio", r.target}});
  }
  for (const auto& w : walk_results) {
    walk_cases.push_back({{"walker", w.walker},
                          {"type", w.type},
                          {"location", w.location},
                          {"walk", w.walk},
                          {"length", w.length},
                          {"walks", w.walks},
                          {"steps", w.steps},
                          {"seconds", w.seconds},
                          {"steps_per_s", w.steps_per_s},
                          {"target_ratio", w.target}});
  }
  report_body report("bench");
  report.add("suite", "sample")
      .add("ranks", ranks)
      .add("num_nodes", host.num_nodes)
      .add("num_edges", host.num_edges())
      .add("generate_s", gen_s)
      .add_rows("cases", std::move(cases));
  if (!walk_cases.empty()) report.add_rows("walk_cases", std::move(walk_cases));
  write_report(args.report_file, report, &cfg);
}

}  // namespace

int run_bench_sample(int argc, char** argv) {
  command_args args = parse_command_args(argc, argv);
  config cfg = load_config(bench_sample_schema, args.config_file, args.overrides);
  const bench_sample_settings set = read_bench_settings(cfg);
  bench_job job;
  join_bench(cfg, set, job);
  double gen_s = 0;
  const graph::host_csr host = generate_bench_graph(cfg, set, job, gen_s);
  const std::vector<case_result> results = run_sample_cases(cfg, set, host, job);
  const std::vector<walk_result> walk_results =
      run_walk_cases(cfg, host, set.samplers, set.types, set.locations, job.host_comm,
                     job.nccl_comm, *job.bs, job.stream, set.threads);
  const std::vector<std::string> mismatches = find_mismatches(results, walk_results);
  if (job.lead) {
    report_bench(args, cfg, job.ranks, host, gen_s, results, walk_results, mismatches);
  }
  return mismatches.empty() ? 0 : 1;
}

}  // namespace wholestore::apps
