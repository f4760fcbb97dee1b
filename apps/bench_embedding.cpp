// `wholestore bench configs/bench_embedding.yaml` (suite: embedding): embedding-table lookup and
// training-step throughput per memory type x location x dtype x dim x optimizer x index stream x
// batch size, each line with the bytes an ideal fused implementation moves and that traffic's
// rate as a share of the device copy rate measured in the same run (host memcpy on CPU-only
// machines).  Runs on the ranks present; rank 0 prints rank 0's times and all-rank rates.
//
// Ideal traffic for N indices, U unique rows, dim D, element size E and S float32 state values
// per element (SGD 0, AdaGrad and RMSProp 1, Adam 2, row-wise AdaGrad 1/D):
//   lookup = N * (8 + 2 * E * D)                      (index, row read, output write)
//   update = N * (8 + 4 * D) + U * D * (2 * E + 8 * S) (index and gradient read; row and state
//                                                       read and written)
//
// The cache case (GPU runs, key `cache`): a host-located table behind a device_cache of a
// fraction of its rows, next to the same table without it and a device-resident table of the
// same shape, with the cache's hit rate and the cost of write-through coherence on the step.
#include "bench_common.hpp"
#include "commands.hpp"
#include "config.hpp"
#include "report.hpp"

#include <embedding/cache.hpp>
#include <embedding/table.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_stream.hpp>
#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#if defined(WHOLESTORE_HAS_CUDA)
#include <wholememory/cuda_check.hpp>

#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace wholestore::apps {

namespace {

namespace wm = wholememory;
namespace emb = wholestore::embedding;

const std::vector<config_key> bench_embedding_schema = {
    {"suite", value_kind::string, "embedding", "`embedding` selects this suite"},
    {"rows", value_kind::integer, "10000000", "table rows, GPU runs"},
    {"cpu_rows", value_kind::integer, "200000", "table rows when no GPU is present"},
    {"dims", value_kind::string, "128", "embedding dims, comma-separated"},
    {"dtypes", value_kind::string, "float32", "table dtypes: `float32`, `float16`, `bfloat16`"},
    {"optimizers", value_kind::string, "sgd,adam,adagrad,rowwise_adagrad,rmsprop",
     "optimizers to run: `sgd`, `adam`, `adagrad`, `rowwise_adagrad`, `rmsprop`"},
    {"streams", value_kind::string, "uniform,powerlaw", "index streams: `uniform`, `powerlaw`"},
    {"powerlaw_exponent", value_kind::number, "1.1",
     "powerlaw stream: P(row of rank k) ~ k^-exponent (rows ranked by a fixed permutation); "
     "> 1"},
    {"batches", value_kind::string, "16384,262144,1048576,4194304",
     "indices per rank per call, GPU runs"},
    {"cpu_batches", value_kind::string, "16384,65536", "indices per rank per call, no GPU"},
    {"types", value_kind::string, "continuous", "memory types"},
    {"locations", value_kind::string, "device", "memory locations (host only without a GPU)"},
    {"exchange", value_kind::string, "peer",
     "how several GPUs move gradient rows to their owners: `peer` (written once into buffers "
     "every GPU of the host maps, read by the owners) or `collective` (NCCL all-to-all)"},
    {"lr", value_kind::number, "0.01", "learning rate"},
    {"comm", value_kind::string, "auto",
     "communicator of continuous and chunked tables on GPU runs: `auto` (NCCL when every rank "
     "has a GPU of its own, else the host communicator) or `host`; distributed tables use NCCL"},
    {"repeats", value_kind::integer, "10", "timed calls per case (median reported)"},
    {"warmup", value_kind::integer, "2", "untimed calls per case"},
    {"threads", value_kind::integer, "0", "CPU path threads (0: all cores)"},
    {"seed", value_kind::integer, "1234", "seed of indices and gradients"},
    {"timeout_s", value_kind::number, "900", "collective timeout, seconds"},
    {"cache", value_kind::boolean, "true",
     "run the cache case: continuous/chunked tables in host memory, uncached, behind a "
     "`device_cache`, and in device memory (GPU runs; skipped with a note otherwise)"},
    {"cache_fractions", value_kind::string, "0.1",
     "cache case: share of the table's rows each cache holds, comma-separated, each in (0, 1]"},
    {"cache_sample", value_kind::number, "1",
     "cache case: size of the access sample whose hottest rows are cached, in table rows; a "
     "draw of its own from the same stream, not the measured batches"},
    {"cache_optimizer", value_kind::string, "sgd",
     "cache case: optimizer of the training step (through the cache: write-through)"},
};

// Without CUDA a device_cache cannot be made (its constructor throws logic_error).
#if defined(WHOLESTORE_HAS_CUDA)
constexpr bool built_with_cuda = true;
#else
constexpr bool built_with_cuda = false;
#endif

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

double unit(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

/// N row ids: uniform, or power-law ranks (continuous inverse CDF of k^-s on [1, rows]) mapped
/// through a fixed bijection of [0, rows) so that hot rows are spread over the table.
std::vector<std::int64_t> index_stream(const std::string& kind, std::size_t n, std::uint64_t rows,
                                       double exponent, std::uint64_t seed) {
  std::vector<std::int64_t> out(n);
  // An odd multiplier that shares no factor with rows: k -> (k * mult + 7) mod rows is a bijection.
  std::uint64_t mult = 0x9E3779B97F4A7C15ull % rows | 1;
  while (std::gcd(mult, rows) != 1) mult += 2;
  const double s = exponent, r = static_cast<double>(rows);
  for (std::size_t i = 0; i < n; ++i) {
    const double u = unit(mix64(seed ^ mix64(i)));
    std::uint64_t k;
    if (kind == "uniform") {
      k = static_cast<std::uint64_t>(u * r);
    } else {
      const double x = std::pow((std::pow(r, 1.0 - s) - 1.0) * u + 1.0, 1.0 / (1.0 - s));
      k = static_cast<std::uint64_t>(x) - 1;
      k = static_cast<std::uint64_t>((static_cast<unsigned __int128>(k) * mult + 7) % rows);
    }
    out[i] = static_cast<std::int64_t>(std::min<std::uint64_t>(k, rows - 1));
  }
  return out;
}

std::size_t unique_count(std::vector<std::int64_t> v) {
  std::sort(v.begin(), v.end());
  return static_cast<std::size_t>(std::unique(v.begin(), v.end()) - v.begin());
}

/// float32 state values per element of each optimizer (row-wise AdaGrad: one per row).
double state_per_element(emb::optimizer_kind k, std::size_t dim) {
  switch (k) {
    case emb::optimizer_kind::sgd:
      return 0;
    case emb::optimizer_kind::adam:
      return 2;
    case emb::optimizer_kind::adagrad:
    case emb::optimizer_kind::rmsprop:
      return 1;
    case emb::optimizer_kind::rowwise_adagrad:
      return 1.0 / static_cast<double>(dim);
  }
  return 0;
}

#if defined(WHOLESTORE_HAS_CUDA)
/// Device-to-device cudaMemcpy rate, bytes read + written per second (median of 10).
double device_copy_rate(int device, cudaStream_t stream) {
  const std::size_t bytes = std::size_t(1) << 30;
  wm::device_buffer a(bytes, device), b(bytes, device);
  std::vector<double> times;
  for (int rep = 0; rep < 11; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    WM_CUDA_TRY(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, stream));
    WM_CUDA_TRY(cudaStreamSynchronize(stream));
    if (rep > 0) times.push_back(seconds_since(t0));
  }
  return 2.0 * bytes / median(times);
}
#endif

struct case_line {
  std::string what;  // type/location dtype dim optimizer stream
  std::size_t batch = 0, unique = 0;
  double lookup_ms = 0, update_ms = 0;
  double lookup_bytes = 0, update_bytes = 0;
  /// Several ranks: rank 0's bootstrap rounds per training step (lookup + update) beyond the
  /// bench's own barriers, and the same case on rank 0's GPU alone in the same run.
  double rounds_per_step = 0;
  double solo_lookup_ms = 0, solo_update_ms = 0;
};

/// The suite's settings, read from the config once (the argument handling of the command).
struct settings {
  bool gpu = false;
  emb::table_options::exchange_kind exchange = emb::table_options::exchange_kind::peer;
  std::uint64_t rows = 0;
  std::vector<std::size_t> dims, batches;
  std::vector<wm::dtype> dtypes;
  std::vector<emb::optimizer_kind> optimizers;
  std::vector<wm::memory_type> types;
  std::vector<wm::memory_location> locations;
  std::vector<std::string> streams;
  double exponent = 0;
  float lr = 0;
  int repeats = 1, warmup = 0;
  unsigned threads = 1;
  std::uint64_t seed = 0;
  std::chrono::milliseconds timeout{0};
  bool host_comm = false;  ///< comm: host
  bool cache = false;
  std::vector<double> cache_fractions;
  double cache_sample = 0;
  emb::optimizer_kind cache_optimizer = emb::optimizer_kind::sgd;
};

// A batch the bench cannot hold is refused before anything is allocated (issue 36: a batch of
// 1e8 indices on a table of 1,000 rows ran on for a long time or died in an allocation).  `key`'s
// batches run on a table of `rows_key` rows at every one of `dims`.
void check_batches_fit(const config& cfg, const char* key,
                       const std::vector<std::uint64_t>& batches, const char* rows_key,
                       const std::vector<std::size_t>& dims) {
  // Indices are drawn from the table's rows: past 64 a row a batch only repeats them.
  constexpr std::uint64_t max_per_row = 64;
  // A batch's gradients are batch x dim float32, on the host and again on the device, beside
  // as many looked-up elements: 2^31 of them is 8 GiB a copy, per rank.
  constexpr std::uint64_t max_elements = std::uint64_t{1} << 31;
  const std::int64_t rows_value = cfg.get_int(rows_key);
  if (rows_value < 1)
    throw config_error(std::string(rows_key) + " must be >= 1 (" + cfg.origin.at(rows_key) + ")");
  const auto rows = static_cast<std::uint64_t>(rows_value);
  const std::uint64_t dim = *std::max_element(dims.begin(), dims.end());
  for (std::uint64_t batch : batches) {
    if (rows <= (std::uint64_t{1} << 40) && batch > max_per_row * rows)
      throw config_error(std::string(key) + ": " + std::to_string(batch) + " is more than 64 x " +
                         rows_key + " " + std::to_string(rows) + " = " +
                         std::to_string(max_per_row * rows) + " (" + cfg.origin.at(key) +
                         "): its indices are drawn from the table's rows, so a larger batch "
                         "only repeats each row more than 64 times; lower it or raise " +
                         rows_key);
    if (batch > max_elements / dim)
      throw config_error(std::string(key) + ": " + std::to_string(batch) + " x dims " +
                         std::to_string(dim) + " is more than 2^31 gradient elements (" +
                         cfg.origin.at(key) +
                         "): 8 GiB of float32 per rank for the gradients alone (on the GPU path "
                         "on the host and again on the device); lower the batch or the dim");
  }
}

settings read_settings(const config& cfg) {
  auto list = [&](const char* key) { return split_list(cfg.get_string(key), ','); };
  auto positive = [&](const char* key) {
    const std::int64_t v = cfg.get_int(key);
    if (v < 1) throw config_error(std::string(key) + " must be >= 1 (" + cfg.origin.at(key) + ")");
    return static_cast<std::uint64_t>(v);
  };
  settings s;
  s.gpu = wm::device_count() > 0;
  s.rows = positive(s.gpu ? "rows" : "cpu_rows");
  // Dims up to 64 Ki elements; batches up to 2^31 indices per call (the index arrays' and
  // gradient buffers' sizes are products of the two).
  for (auto d : parse_counts(cfg.get_string("dims"), "dims", cfg.origin.at("dims"), 65536))
    s.dims.push_back(static_cast<std::size_t>(d));
  // Both batch lists are checked whichever applies, so a bad value is found on any machine.
  auto batches = [&](const char* key) {
    return parse_counts(cfg.get_string(key), key, cfg.origin.at(key), std::uint64_t{1} << 31);
  };
  const auto gpu_batches = batches("batches");
  const auto cpu_batches = batches("cpu_batches");
  check_batches_fit(cfg, "batches", gpu_batches, "rows", s.dims);
  check_batches_fit(cfg, "cpu_batches", cpu_batches, "cpu_rows", s.dims);
  for (auto b : s.gpu ? gpu_batches : cpu_batches) s.batches.push_back(static_cast<std::size_t>(b));
  try {
    for (const auto& t : list("dtypes")) s.dtypes.push_back(wm::parse_dtype(t));
    for (const auto& o : list("optimizers")) s.optimizers.push_back(emb::parse_optimizer(o));
    for (const auto& t : list("types")) s.types.push_back(wm::parse_memory_type(t));
    for (const auto& l : list("locations")) {
      const auto loc = wm::parse_memory_location(l);
      if (loc == wm::memory_location::device && !s.gpu) continue;
      s.locations.push_back(loc);
    }
  } catch (const wm::logic_error& e) {
    throw config_error(std::string("dtypes/optimizers/types/locations: ") + e.what());
  }
  if (!s.gpu && s.locations.empty()) s.locations.push_back(wm::memory_location::host);
  const std::string exchange = cfg.get_string("exchange");
  if (exchange == "collective") {
    s.exchange = emb::table_options::exchange_kind::collective;
  } else if (exchange != "peer") {
    throw config_error("exchange must be peer or collective, got '" + exchange + "' (" +
                       cfg.origin.at("exchange") + ")");
  }
  s.streams = list("streams");
  for (const auto& k : s.streams)
    if (k != "uniform" && k != "powerlaw")
      throw config_error("streams: unknown stream '" + k + "' (uniform or powerlaw)");
  s.exponent = cfg.get_number("powerlaw_exponent");
  if (!(s.exponent > 1.0)) throw config_error("powerlaw_exponent must be > 1");
  s.lr = static_cast<float>(cfg.get_number("lr"));
  s.repeats = static_cast<int>(positive("repeats"));
  s.warmup = static_cast<int>(std::max<std::int64_t>(0, cfg.get_int("warmup")));
  s.threads = static_cast<unsigned>(std::max<std::int64_t>(0, cfg.get_int("threads")));
  if (s.threads == 0) s.threads = wm::default_host_threads();
  s.seed = static_cast<std::uint64_t>(cfg.get_int("seed"));
  s.timeout = collective_timeout(cfg);  // timeout_s, or WHOLESTORE_TIMEOUT when set
  const std::string comm = cfg.get_string("comm");
  if (comm != "auto" && comm != "host")
    throw config_error("comm: '" + comm + "' is not `auto` or `host` (" + cfg.origin.at("comm") +
                       ")");
  s.host_comm = comm == "host";
  s.cache = cfg.get_bool("cache");
  for (const auto& f : list("cache_fractions")) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(f, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != f.size() || !(v > 0.0 && v <= 1.0))
      throw config_error("cache_fractions: '" + f + "' is not a fraction in (0, 1] (" +
                         cfg.origin.at("cache_fractions") + ")");
    s.cache_fractions.push_back(v);
  }
  if (s.cache && s.cache_fractions.empty())
    throw config_error("cache_fractions: no fraction given (" + cfg.origin.at("cache_fractions") +
                       "); set cache: false to skip the cache case");
  s.cache_sample = cfg.get_number("cache_sample");
  if (!(s.cache_sample > 0.0))
    throw config_error("cache_sample must be > 0 (" + cfg.origin.at("cache_sample") + ")");
  try {
    s.cache_optimizer = emb::parse_optimizer(cfg.get_string("cache_optimizer"));
  } catch (const wm::logic_error& e) {
    throw config_error(std::string("cache_optimizer: ") + e.what());
  }
  return s;
}

/// What every case of a run shares: the communicators, this rank's GPU and stream, and the
/// copy ceiling measured at the start.
struct bench_context {
  std::shared_ptr<wm::bootstrap> bs;
  std::shared_ptr<wm::communicator> host_comm, nccl_comm;
  /// Several ranks: communicators of rank 0 alone (null elsewhere), for the one-GPU figure of
  /// every case in the same run.
  std::shared_ptr<wm::communicator> solo_host_comm, solo_nccl_comm;
  int rank = 0, ranks = 1;
  bool lead = true;
  int device = -1;
  wm::cuda_stream stream = nullptr;  ///< the GPU path's (none on the CPU path)
  double ceiling = 0;                ///< bytes read + written per second, one rank
  const char* ceiling_name = "host memcpy";
};

/// One batch of a case: the indices and gradients, with the buffers the path reads (device
/// memory on the GPU path, host vectors on the CPU path).
struct batch_data {
  std::vector<std::int64_t> idx;
  std::vector<float> grads;
  std::size_t unique = 0;
  wm::device_buffer d_idx, d_grads, d_out;
  std::vector<unsigned char> host_out;
  wm::index_array indices;
  wm::dense_matrix out, grad_matrix;
};

/// Batch `n` of `stream_kind` for a table of `dim` x `dt`, this rank's own draw.
batch_data make_batch(const settings& s, const bench_context& c, const std::string& stream_kind,
                      std::size_t n, std::size_t dim, wm::dtype dt) {
  batch_data b;
  b.idx = index_stream(stream_kind, n, s.rows, s.exponent, s.seed + 1000003ull * c.rank + n);
  b.unique = unique_count(b.idx);
  b.grads.resize(n * dim);
  for (std::size_t i = 0; i < b.grads.size(); ++i)
    b.grads[i] =
        static_cast<float>(unit(mix64(s.seed ^ (i * 0x2545F4914F6CDD1Dull))) - 0.5) * 1e-3f;
  const void* idx_ptr = b.idx.data();
  const void* grad_ptr = b.grads.data();
  void* out_ptr = nullptr;
  if (s.gpu) {
    b.d_idx = wm::device_buffer(n * 8, c.device);
    b.d_grads = wm::device_buffer(n * dim * 4, c.device);
    b.d_out = wm::device_buffer(n * dim * wm::dtype_size(dt), c.device);
    wm::copy_bytes(b.d_idx.data(), b.idx.data(), n * 8);
    wm::copy_bytes(b.d_grads.data(), b.grads.data(), n * dim * 4);
    idx_ptr = b.d_idx.data();
    grad_ptr = b.d_grads.data();
    out_ptr = b.d_out.data();
  } else {
    b.host_out.resize(n * dim * wm::dtype_size(dt));
    out_ptr = b.host_out.data();
  }
  b.indices = wm::index_array{idx_ptr, wm::dtype::int64, n};
  b.out = wm::dense_matrix{out_ptr, dt, n, dim, dim};
  b.grad_matrix = wm::dense_matrix{const_cast<void*>(grad_ptr), wm::dtype::float32, n, dim, dim};
  return b;
}

void sync(cudaStream_t stream) {
#if defined(WHOLESTORE_HAS_CUDA)
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
#else
  (void)stream;
#endif
}

/// Median seconds of `repeats` calls of `body` after `warmup` untimed ones, every rank starting
/// each timed call together.
template <typename Body>
double timed_median(const settings& s, wm::bootstrap& bs, Body&& body) {
  for (int w = 0; w < s.warmup; ++w) body();
  std::vector<double> ts;
  for (int r = 0; r < s.repeats; ++r) {
    bs.barrier();
    auto t0 = std::chrono::steady_clock::now();
    body();
    ts.push_back(seconds_since(t0));
  }
  return median(ts);
}

double gbs(double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; }

/// What time_table measured.
struct table_timing {
  double lookup_ms = 0, update_ms = 0;
  double rounds_per_step = 0;  ///< bootstrap rounds of `counted` per lookup + update
};

/// The lookup's and the update's median ms of table `t` on batch `b` (every rank of `bs`
/// together), and the steady state's bootstrap rounds on `counted` (the table's
/// communicator's): one untimed lookup and update first (one-time buffers, such as the peer
/// exchange's, are made there), then the rounds of the warmup and timed calls less the
/// bench's own barriers.
table_timing time_table(const settings& s, const bench_context& c, emb::table& t,
                        const batch_data& b, wm::bootstrap& bs, const wm::bootstrap& counted) {
  auto lookup = [&] {
    if (s.gpu) {
      t.lookup(b.indices, b.out, c.stream);
      sync(c.stream);
    } else {
      t.lookup_host(b.indices, b.out, s.threads);
    }
  };
  auto update = [&] {
    if (s.gpu) {
      t.apply_gradients(b.indices, b.grad_matrix, s.lr, c.stream);
      sync(c.stream);
    } else {
      t.apply_gradients_host(b.indices, b.grad_matrix, s.lr, s.threads);
    }
  };
  lookup();
  update();
  const std::uint64_t rounds_before = counted.rounds();
  table_timing out;
  out.lookup_ms = timed_median(s, bs, lookup) * 1e3;
  out.update_ms = timed_median(s, bs, update) * 1e3;
  const double own_barriers = &counted == &bs ? 2.0 * s.repeats : 0.0;
  out.rounds_per_step = (static_cast<double>(counted.rounds() - rounds_before) - own_barriers) /
                        (s.warmup + s.repeats);
  return out;
}

/// Lookup and training step per memory type x location x dtype x dim x optimizer x index
/// stream x batch size: the suite's main table.  With several ranks each case runs again on
/// rank 0's GPU alone (its own table of the same shape, the same batch), so the speed-up over
/// one GPU comes from one run and one binary.
std::vector<case_line> run_table_cases(const settings& s, const bench_context& c) {
  std::vector<case_line> lines;
  for (auto loc : s.locations) {
    for (auto type : s.types) {
      const bool nccl =
          s.gpu && c.nccl_comm && (!s.host_comm || type == wm::memory_type::distributed);
      auto comm = nccl ? c.nccl_comm : c.host_comm;
      auto solo_comm = nccl ? c.solo_nccl_comm : c.solo_host_comm;
      for (auto dt : s.dtypes) {
        for (std::size_t dim : s.dims) {
          for (auto opt : s.optimizers) {
            emb::table_options o;
            o.rows = s.rows;
            o.dim = dim;
            o.dtype = dt;
            o.type = type;
            o.location = loc;
            o.init.method = emb::init_options::uniform;
            o.init.seed = s.seed;
            o.optimizer.kind = opt;
            o.exchange = s.exchange;
            emb::table t = emb::table::create(comm, o);
            const double e = static_cast<double>(wm::dtype_size(dt));
            const double st = state_per_element(opt, dim);
            const double d = static_cast<double>(dim);
            for (const auto& stream_kind : s.streams) {
              for (std::size_t n : s.batches) {
                case_line line;
                line.what = std::string(wm::memory_type_name(type)) + "/" +
                            wm::memory_location_name(loc) + " " + wm::dtype_name(dt) + " d" +
                            std::to_string(dim) + " " + emb::optimizer_name(opt) + " " +
                            stream_kind;
                line.batch = n;
                const batch_data b = make_batch(s, c, stream_kind, n, dim, dt);
                line.unique = b.unique;
                const table_timing tm = time_table(s, c, t, b, *c.bs, comm->get_bootstrap());
                line.lookup_ms = tm.lookup_ms;
                line.update_ms = tm.update_ms;
                line.rounds_per_step = tm.rounds_per_step;
                if (c.ranks > 1) {
                  if (solo_comm) {
                    emb::table solo = emb::table::create(solo_comm, o);
                    const table_timing one = time_table(s, c, solo, b, solo_comm->get_bootstrap(),
                                                        solo_comm->get_bootstrap());
                    line.solo_lookup_ms = one.lookup_ms;
                    line.solo_update_ms = one.update_ms;
                  }
                  c.bs->barrier();
                }
                const double nn = static_cast<double>(n), u = static_cast<double>(line.unique);
                line.lookup_bytes = nn * (8 + 2 * e * d);
                line.update_bytes = nn * (8 + 4 * d) + u * d * (2 * e + 8 * st);
                lines.push_back(line);
                if (c.lead) {
                  const double lg = gbs(line.lookup_bytes, line.lookup_ms) * c.ranks;
                  const double ug = gbs(line.update_bytes, line.update_ms) * c.ranks;
                  const double cg = c.ceiling * c.ranks / 1e9;
                  const double rate =
                      nn * c.ranks / ((line.lookup_ms + line.update_ms) * 1e-3) / 1e6;
                  std::printf(
                      "%-44s %9zu %9zu | %9.3f %9.1f %6.1f%% | %9.3f %9.1f %6.1f%% | %9.3f "
                      "%9.1f",
                      line.what.c_str(), n, line.unique, line.lookup_ms, lg, 100.0 * lg / cg,
                      line.update_ms, ug, 100.0 * ug / cg, line.lookup_ms + line.update_ms, rate);
                  if (c.ranks > 1) {
                    const double solo =
                        nn / ((line.solo_lookup_ms + line.solo_update_ms) * 1e-3) / 1e6;
                    std::printf(" | %9.1f %9.1f %7.2fx %9.1f", rate / c.ranks, solo, rate / solo,
                                line.rounds_per_step);
                  }
                  std::printf("\n");
                  std::fflush(stdout);
                }
              }
            }
          }
        }
      }
    }
  }
  return lines;
}

/// One case of the cache table: a host-located table behind a device_cache, next to the same
/// table without it and a device-resident table of the same shape.
struct cache_line {
  std::string what;  // type/host dtype dim stream cache fraction
  std::size_t batch = 0, unique = 0, cached_rows = 0;
  double hit_rate = 0;  ///< this rank's cache_stats over the case's lookups (rank 0 prints its own)
  double host_lookup_ms = 0, cache_lookup_ms = 0, device_lookup_ms = 0;
  double host_update_ms = 0, cache_update_ms = 0;
  double lookup_bytes = 0, update_bytes = 0;
};

/// "10%" for 0.1.
std::string percent_label(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%%", fraction * 100.0);
  return buf;
}

/// `value` printed with `format`, or "-" when it is negative (not measured).
std::string field(const char* format, double value) {
  if (value < 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

/// One row of the cache table (lead rank): all-rank rates of rank 0's times, lookups/s and
/// their ratio to the host table's, and the step (lookup + update); a negative hit rate or
/// update time prints "-".
void print_cache_row(const bench_context& c, const std::string& what, std::size_t n,
                     std::size_t unique, double hit_rate, double lookup_ms, double host_lookup_ms,
                     double update_ms, double lookup_bytes, double update_bytes) {
  const double cg = c.ceiling * c.ranks / 1e9;
  const double lg = gbs(lookup_bytes, lookup_ms) * c.ranks;
  const double ug = update_ms < 0 ? -1 : gbs(update_bytes, update_ms) * c.ranks;
  const double mlookups = static_cast<double>(n) * c.ranks / (lookup_ms * 1e-3) / 1e6;
  std::printf("%-48s %9zu %9zu | %6s | %9.3f %9.1f %6.1f%% %9.1f %7.2fx | %9s %9s %7s | %9s\n",
              what.c_str(), n, unique, field("%.1f", 100.0 * hit_rate).c_str(), lookup_ms, lg,
              100.0 * lg / cg, mlookups, host_lookup_ms / lookup_ms,
              field("%.3f", update_ms).c_str(), field("%.1f", ug).c_str(),
              (ug < 0 ? std::string("-") : field("%.1f", 100.0 * ug / cg) + "%").c_str(),
              field("%.3f", update_ms < 0 ? -1 : lookup_ms + update_ms).c_str());
}

/// The cache case, GPU runs: per memory type (continuous, chunked) x dtype x dim x stream x
/// batch, lookups and a training step (lookup + apply_gradients with `cache_optimizer`) on a
/// host-located table, without a cache and through a device_cache of each fraction in
/// `cache_fractions`, and the lookup of a device-resident table of the same shape for
/// reference.  The cached rows are hottest_rows of an access sample drawn from the same stream
/// with its own seed, never the measured batches.  Prints a note and returns nothing where the
/// case cannot run (no CUDA, no GPU, distributed memory).
std::vector<cache_line> run_cache_cases(const settings& s, const bench_context& c) {
  std::vector<cache_line> lines;
  if (!s.cache) return lines;
  auto note = [&](const std::string& text) {
    if (c.lead) std::printf("note: cache case skipped: %s\n", text.c_str());
    std::fflush(stdout);
  };
  if (!built_with_cuda) {
    note("this build has no CUDA (device_cache needs it: WHOLESTORE_WITH_CUDA=ON)");
    return lines;
  }
  if (!s.gpu) {
    note("no GPU (device_cache keeps its rows in device memory)");
    return lines;
  }
  std::vector<wm::memory_type> types;
  for (auto type : s.types) {
    if (type == wm::memory_type::distributed)
      note(
          "distributed tables (device_cache refuses them: their remote rows are reached only "
          "through the exchange)");
    else
      types.push_back(type);
  }
  if (types.empty()) return lines;

  // The access samples (one per stream, the same on every rank) and the rows each fraction
  // caches: chosen before any measured batch is drawn, from a draw of their own.
  const auto sample_size = static_cast<std::size_t>(
      std::max(1.0, std::round(s.cache_sample * static_cast<double>(s.rows))));
  const std::uint64_t sample_seed = mix64(s.seed ^ 0x63616368655F7331ull);
  std::vector<std::vector<std::vector<std::int64_t>>> hot(s.streams.size());
  for (std::size_t k = 0; k < s.streams.size(); ++k) {
    const auto sample = index_stream(s.streams[k], sample_size, s.rows, s.exponent, sample_seed);
    for (double f : s.cache_fractions) {
      const auto capacity =
          static_cast<std::size_t>(std::max(1.0, std::round(f * static_cast<double>(s.rows))));
      hot[k].push_back(emb::hottest_rows(sample, s.rows, capacity));
    }
  }
  if (c.lead) {
    std::printf(
        "cache case: tables in pinned host memory, uncached (host), behind a device_cache "
        "(cacheF%%)\n"
        "  and for reference in device memory (device); cached rows: hottest_rows of an access "
        "sample\n"
        "  of %zu indices per stream, drawn apart from the measured batches (its own seed);\n"
        "  step: lookup + apply_gradients (%s), write-through through the cache;\n"
        "  hit%%: rank 0's cache_stats; x host: lookups/s over the host table's\n",
        sample_size, emb::optimizer_name(s.cache_optimizer));
    std::printf("%-48s %9s %9s | %6s | %9s %9s %7s %9s %8s | %9s %9s %7s | %9s\n", "case", "batch",
                "unique", "hit%", "lookup ms", "GB/s", "ceil%", "Mlookup/s", "x host", "update ms",
                "GB/s", "ceil%", "step ms");
    std::fflush(stdout);
  }

  for (auto type : types) {
    for (auto dt : s.dtypes) {
      for (std::size_t dim : s.dims) {
        emb::table_options o;
        o.rows = s.rows;
        o.dim = dim;
        o.dtype = dt;
        o.type = type;
        o.location = wm::memory_location::host;
        o.init.method = emb::init_options::uniform;
        o.init.seed = s.seed;
        o.optimizer.kind = s.cache_optimizer;
        emb::table host_table = emb::table::create(c.host_comm, o);
        o.location = wm::memory_location::device;
        o.optimizer.kind = emb::optimizer_kind::sgd;  // lookups only: no state
        emb::table device_table = emb::table::create(c.host_comm, o);
        const double e = static_cast<double>(wm::dtype_size(dt));
        const double st = state_per_element(s.cache_optimizer, dim);
        const double d = static_cast<double>(dim);
        const std::string shape = std::string(wm::dtype_name(dt)) + " d" + std::to_string(dim);
        for (std::size_t k = 0; k < s.streams.size(); ++k) {
          const std::string& stream_kind = s.streams[k];
          std::vector<emb::device_cache> caches;
          for (const auto& rows : hot[k]) caches.emplace_back(host_table, rows, c.device);
          // After a write that one cache did not see, every rank's update is done before the
          // re-read (the table's own update, or another fraction's cache).
          auto flush_except = [&](std::size_t skip) {
            sync(c.stream);
            c.bs->barrier();
            for (std::size_t j = 0; j < caches.size(); ++j)
              if (j != skip) caches[j].flush(c.stream);
            sync(c.stream);
          };
          for (std::size_t n : s.batches) {
            const batch_data b = make_batch(s, c, stream_kind, n, dim, dt);
            const double nn = static_cast<double>(n), u = static_cast<double>(b.unique);
            const double lookup_bytes = nn * (8 + 2 * e * d);
            const double update_bytes = nn * (8 + 4 * d) + u * d * (2 * e + 8 * st);
            const double host_lookup_ms = 1e3 * timed_median(s, *c.bs, [&] {
                                            host_table.lookup(b.indices, b.out, c.stream);
                                            sync(c.stream);
                                          });
            const double device_lookup_ms = 1e3 * timed_median(s, *c.bs, [&] {
                                              device_table.lookup(b.indices, b.out, c.stream);
                                              sync(c.stream);
                                            });
            const double host_update_ms =
                1e3 * timed_median(s, *c.bs, [&] {
                  host_table.apply_gradients(b.indices, b.grad_matrix, s.lr, c.stream);
                  sync(c.stream);
                });
            flush_except(caches.size());
            const std::string prefix =
                std::string(wm::memory_type_name(type)) + "/host " + shape + " " + stream_kind;
            if (c.lead) {
              print_cache_row(c, prefix + " host", n, b.unique, -1, host_lookup_ms, host_lookup_ms,
                              host_update_ms, lookup_bytes, update_bytes);
            }
            for (std::size_t j = 0; j < caches.size(); ++j) {
              emb::device_cache& cache = caches[j];
              cache_line line;
              line.what = prefix + " cache" + percent_label(s.cache_fractions[j]);
              line.batch = n;
              line.unique = b.unique;
              line.cached_rows = cache.capacity();
              line.host_lookup_ms = host_lookup_ms;
              line.device_lookup_ms = device_lookup_ms;
              line.host_update_ms = host_update_ms;
              line.lookup_bytes = lookup_bytes;
              line.update_bytes = update_bytes;
              cache.reset_stats(c.stream);
              line.cache_lookup_ms = 1e3 * timed_median(s, *c.bs, [&] {
                                       cache.lookup(b.indices, b.out, c.stream);
                                       sync(c.stream);
                                     });
              line.hit_rate = cache.stats(c.stream).hit_rate();
              line.cache_update_ms =
                  1e3 * timed_median(s, *c.bs, [&] {
                    cache.apply_gradients(b.indices, b.grad_matrix, s.lr, c.stream);
                    sync(c.stream);
                  });
              if (caches.size() > 1) flush_except(j);
              if (c.lead)
                print_cache_row(c, line.what, n, b.unique, line.hit_rate, line.cache_lookup_ms,
                                host_lookup_ms, line.cache_update_ms, lookup_bytes, update_bytes);
              lines.push_back(line);
            }
            if (c.lead) {
              print_cache_row(c,
                              std::string(wm::memory_type_name(type)) + "/device " + shape + " " +
                                  stream_kind + " device",
                              n, b.unique, -1, device_lookup_ms, host_lookup_ms, -1, lookup_bytes,
                              update_bytes);
              for (std::size_t j = lines.size() - caches.size(); j < lines.size(); ++j) {
                const cache_line& l = lines[j];
                const double extra = l.cache_update_ms - l.host_update_ms;
                std::printf(
                    "  %s: %zu of %llu rows cached, hit rate %.1f%%; lookups %.2fx the host "
                    "table's (device table %.2fx), step %.2fx; write-through update %+.3f ms "
                    "(%+.1f%%) over the host table's\n",
                    l.what.c_str(), l.cached_rows, static_cast<unsigned long long>(s.rows),
                    100.0 * l.hit_rate, l.host_lookup_ms / l.cache_lookup_ms,
                    l.host_lookup_ms / l.device_lookup_ms,
                    (l.host_lookup_ms + l.host_update_ms) / (l.cache_lookup_ms + l.cache_update_ms),
                    extra, 100.0 * extra / l.host_update_ms);
              }
              std::fflush(stdout);
            }
          }
        }
      }
    }
  }
  return lines;
}

void write_embedding_report(const std::string& file, const config& cfg, const settings& s,
                            const bench_context& c, const std::vector<case_line>& lines,
                            const std::vector<cache_line>& cache_lines) {
  std::vector<report_row> cases, cache_cases;
  for (const auto& l : lines) {
    cases.push_back({{"case", report_value::quoted(l.what)},
                     {"batch", l.batch},
                     {"unique", l.unique},
                     {"lookup_ms", l.lookup_ms},
                     {"update_ms", l.update_ms},
                     {"lookup_bytes", l.lookup_bytes},
                     {"update_bytes", l.update_bytes},
                     {"rounds_per_step", l.rounds_per_step},
                     {"one_gpu_lookup_ms", l.solo_lookup_ms},
                     {"one_gpu_update_ms", l.solo_update_ms}});
  }
  for (const auto& l : cache_lines) {
    cache_cases.push_back({{"case", report_value::quoted(l.what)},
                           {"batch", l.batch},
                           {"unique", l.unique},
                           {"cached_rows", l.cached_rows},
                           {"hit_rate", l.hit_rate},
                           {"host_lookup_ms", l.host_lookup_ms},
                           {"cache_lookup_ms", l.cache_lookup_ms},
                           {"device_lookup_ms", l.device_lookup_ms},
                           {"host_update_ms", l.host_update_ms},
                           {"cache_update_ms", l.cache_update_ms},
                           {"lookup_bytes", l.lookup_bytes},
                           {"update_bytes", l.update_bytes}});
  }
  report_body report("bench");
  report.add("suite", "embedding")
      .add("ranks", c.ranks)
      .add("path", s.gpu ? "gpu" : "cpu")
      .add("ceiling_name", c.ceiling_name)
      .add("ceiling_gbps", c.ceiling / 1e9)
      .add_rows("cases", std::move(cases))
      .add_rows("cache_cases", std::move(cache_cases));
  write_report(file, report, &cfg);
}

}  // namespace

const std::vector<config_key>& bench_embedding_keys() { return bench_embedding_schema; }

int run_bench_embedding(int argc, char** argv) {
  command_args args = parse_command_args(argc, argv);
  config cfg = load_config(bench_embedding_schema, args.config_file, args.overrides);
  settings s = read_settings(cfg);

  bench_context c;
  c.bs = wm::make_job_bootstrap(s.timeout);
  agree_on_config(*c.bs, cfg, "bench", {"timeout_s", "threads"});
  // Over several hosts (real or launch --hosts) continuous and chunked tables are per host.
  c.host_comm = wm::make_local_host_communicator(c.bs);
  c.rank = c.bs->rank();
  c.ranks = c.bs->size();
  c.lead = c.rank == 0;
#if defined(WHOLESTORE_HAS_CUDA)
  if (s.gpu) {
    c.device = wm::default_device(*c.host_comm);
    wm::set_device(c.device);
    c.stream = wm::cuda_stream(wm::stream_flags::non_blocking);
    // One rank at a time, so that ranks sharing a GPU do not share the measurement.
    for (int r = 0; r < c.ranks; ++r) {
      if (r == c.rank) c.ceiling = device_copy_rate(c.device, c.stream);
      c.bs->barrier();
    }
    c.ceiling_name = "device copy";
    // One GPU per rank: every table gets the NCCL communicator, so apply_gradients sends
    // gradient rows to their owners peer to peer.  With the host communicator the rows went
    // through host memory: a 1M-index SGD update of a continuous table took 268 ms on two
    // H200s against 0.7 ms on one.  Ranks sharing a GPU keep the host communicator and skip
    // distributed tables (NCCL needs a GPU per rank).
    const wm::gpu_sharing sharing = wm::describe_gpu_sharing(*c.bs, c.device);
    if (!sharing.shared()) {
      c.nccl_comm = wm::make_nccl_communicator(c.bs, c.device);
    } else if (std::find(s.types.begin(), s.types.end(), wm::memory_type::distributed) !=
               s.types.end()) {
      s.types.erase(std::remove(s.types.begin(), s.types.end(), wm::memory_type::distributed),
                    s.types.end());
      if (c.lead)
        std::printf("note: distributed tables skipped: %s (NCCL needs one GPU per rank)\n",
                    sharing.description.c_str());
    }
  }
#endif
  if (!s.gpu) c.ceiling = 2.0 * host_memcpy_rate(s.threads);  // read + write, like the device
  if (c.lead) {
    std::printf(
        "wholestore bench (embedding): %d rank(s), %s path, %llu rows, ceiling: %s %.0f GB/s "
        "(read + write)\n",
        c.ranks, s.gpu ? "GPU" : "CPU", static_cast<unsigned long long>(s.rows), c.ceiling_name,
        c.ceiling / 1e9);
    std::printf("%-44s %9s %9s | %9s %9s %7s | %9s %9s %7s | %9s %9s", "case", "batch", "unique",
                "lookup ms", "GB/s", "ceil%", "update ms", "GB/s", "ceil%", "step ms", "Mlookup/s");
    // Several ranks: Mlookup/s is all ranks'; then per rank, rank 0 alone (its GPU) in this run,
    // the speed-up over it, and bootstrap (TCP) rounds per step.
    if (c.ranks > 1) std::printf(" | %9s %9s %8s %9s", "per rank", "1 rank", "speedup", "rounds");
    std::printf("\n");
    std::fflush(stdout);
  }

  if (c.ranks > 1) {  // collective over each communicator: rank 0 alone, the others none
    const int color = c.rank == 0 ? 0 : -1;
    c.solo_host_comm = c.host_comm->split(color, 0);
    if (c.nccl_comm) c.solo_nccl_comm = c.nccl_comm->split(color, 0);
  }
  const std::vector<case_line> lines = run_table_cases(s, c);
  const std::vector<cache_line> cache_lines = run_cache_cases(s, c);
  if (c.lead && !args.report_file.empty())
    write_embedding_report(args.report_file, cfg, s, c, lines, cache_lines);
  return 0;
}

}  // namespace wholestore::apps
