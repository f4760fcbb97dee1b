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
#include "bench_common.hpp"
#include "commands.hpp"
#include "config.hpp"
#include "report.hpp"

#include <embedding/table.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
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
#include <sstream>
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
    {"lr", value_kind::number, "0.01", "learning rate"},
    {"repeats", value_kind::integer, "10", "timed calls per case (median reported)"},
    {"warmup", value_kind::integer, "2", "untimed calls per case"},
    {"threads", value_kind::integer, "0", "CPU path threads (0: all cores)"},
    {"seed", value_kind::integer, "1234", "seed of indices and gradients"},
    {"timeout_s", value_kind::number, "900", "collective timeout, seconds"},
};

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
};

}  // namespace

const std::vector<config_key>& bench_embedding_keys() { return bench_embedding_schema; }

int run_bench_embedding(int argc, char** argv) {
  command_args args = parse_command_args(argc, argv);
  config cfg = load_config(bench_embedding_schema, args.config_file, args.overrides);
  auto list = [&](const char* key) { return split_list(cfg.get_string(key), ','); };
  auto positive = [&](const char* key) {
    const std::int64_t v = cfg.get_int(key);
    if (v < 1) throw config_error(std::string(key) + " must be >= 1 (" + cfg.origin.at(key) + ")");
    return static_cast<std::uint64_t>(v);
  };
  const bool gpu = wm::device_count() > 0;
  const std::uint64_t rows = positive(gpu ? "rows" : "cpu_rows");
  std::vector<std::size_t> dims, batches;
  for (const auto& d : list("dims")) dims.push_back(std::stoull(d));
  for (const auto& b : list(gpu ? "batches" : "cpu_batches")) batches.push_back(std::stoull(b));
  std::vector<wm::dtype> dtypes;
  std::vector<emb::optimizer_kind> optimizers;
  std::vector<wm::memory_type> types;
  std::vector<wm::memory_location> locations;
  try {
    for (const auto& t : list("dtypes")) dtypes.push_back(wm::parse_dtype(t));
    for (const auto& o : list("optimizers")) optimizers.push_back(emb::parse_optimizer(o));
    for (const auto& t : list("types")) types.push_back(wm::parse_memory_type(t));
    for (const auto& l : list("locations")) {
      const auto loc = wm::parse_memory_location(l);
      if (loc == wm::memory_location::device && !gpu) continue;
      locations.push_back(loc);
    }
  } catch (const wm::logic_error& e) {
    throw config_error(std::string("dtypes/optimizers/types/locations: ") + e.what());
  }
  if (!gpu && locations.empty()) locations.push_back(wm::memory_location::host);
  const auto streams = list("streams");
  for (const auto& s : streams)
    if (s != "uniform" && s != "powerlaw")
      throw config_error("streams: unknown stream '" + s + "' (uniform or powerlaw)");
  const double exponent = cfg.get_number("powerlaw_exponent");
  if (!(exponent > 1.0)) throw config_error("powerlaw_exponent must be > 1");
  const float lr = static_cast<float>(cfg.get_number("lr"));
  const int repeats = static_cast<int>(positive("repeats"));
  const int warmup = static_cast<int>(std::max<std::int64_t>(0, cfg.get_int("warmup")));
  unsigned threads = static_cast<unsigned>(std::max<std::int64_t>(0, cfg.get_int("threads")));
  if (threads == 0) threads = wm::default_host_threads();
  const auto seed = static_cast<std::uint64_t>(cfg.get_int("seed"));
  const auto timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(cfg.get_number("timeout_s") * 1000.0));

  std::shared_ptr<wm::bootstrap> bs = wm::make_job_bootstrap(timeout);
  std::shared_ptr<wm::communicator> host_comm = wm::make_host_communicator(bs);
  std::shared_ptr<wm::communicator> nccl_comm;
  const int rank = host_comm->rank(), ranks = host_comm->size();
  const bool lead = rank == 0;
  int device = -1;
  cudaStream_t stream = nullptr;
  double ceiling = 0;
  const char* ceiling_name = "host memcpy";
#if defined(WHOLESTORE_HAS_CUDA)
  if (gpu) {
    device = wm::default_device(*host_comm);
    wm::set_device(device);
    WM_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    // One rank at a time, so that ranks sharing a GPU do not share the measurement.
    for (int r = 0; r < ranks; ++r) {
      if (r == rank) ceiling = device_copy_rate(device, stream);
      bs->barrier();
    }
    ceiling_name = "device copy";
    if (std::find(types.begin(), types.end(), wm::memory_type::distributed) != types.end()) {
      const wm::gpu_sharing sharing = wm::describe_gpu_sharing(*bs, device);
      if (!sharing.shared()) {
        nccl_comm = wm::make_nccl_communicator(bs, device);
      } else {
        types.erase(std::remove(types.begin(), types.end(), wm::memory_type::distributed),
                    types.end());
        if (lead)
          std::printf("note: distributed tables skipped: %s (NCCL needs one GPU per rank)\n",
                      sharing.description.c_str());
      }
    }
  }
#endif
  if (!gpu) ceiling = 2.0 * host_memcpy_rate(threads);  // read + write, like the device
  if (lead) {
    std::printf(
        "wholestore bench (embedding): %d rank(s), %s path, %llu rows, ceiling: %s %.0f GB/s "
        "(read + write)\n",
        ranks, gpu ? "GPU" : "CPU", static_cast<unsigned long long>(rows), ceiling_name,
        ceiling / 1e9);
    std::printf("%-44s %9s %9s | %9s %9s %7s | %9s %9s %7s | %9s %9s\n", "case", "batch", "unique",
                "lookup ms", "GB/s", "ceil%", "update ms", "GB/s", "ceil%", "step ms", "Mlookup/s");
    std::fflush(stdout);
  }

  std::vector<case_line> lines;
  for (auto loc : locations) {
    for (auto type : types) {
      auto comm = (gpu && type == wm::memory_type::distributed) ? nccl_comm : host_comm;
      for (auto dt : dtypes) {
        for (std::size_t dim : dims) {
          for (auto opt : optimizers) {
            emb::table_options o;
            o.rows = rows;
            o.dim = dim;
            o.dtype = dt;
            o.type = type;
            o.location = loc;
            o.init.method = emb::init_options::uniform;
            o.init.seed = seed;
            o.optimizer.kind = opt;
            emb::table t = emb::table::create(comm, o);
            const double e = static_cast<double>(wm::dtype_size(dt));
            const double s = state_per_element(opt, dim);
            const double d = static_cast<double>(dim);
            for (const auto& stream_kind : streams) {
              for (std::size_t n : batches) {
                case_line line;
                line.what = std::string(wm::memory_type_name(type)) + "/" +
                            wm::memory_location_name(loc) + " " + wm::dtype_name(dt) + " d" +
                            std::to_string(dim) + " " + emb::optimizer_name(opt) + " " +
                            stream_kind;
                line.batch = n;
                const auto idx =
                    index_stream(stream_kind, n, rows, exponent, seed + 1000003ull * rank + n);
                line.unique = unique_count(idx);
                std::vector<float> grads(n * dim);
                for (std::size_t i = 0; i < grads.size(); ++i)
                  grads[i] =
                      static_cast<float>(unit(mix64(seed ^ (i * 0x2545F4914F6CDD1Dull))) - 0.5) *
                      1e-3f;
                // Buffers where the path reads them: device memory on the GPU path.
                wm::device_buffer d_idx, d_grads, d_out;
                const void* idx_ptr = idx.data();
                const void* grad_ptr = grads.data();
                std::vector<unsigned char> host_out;
                void* out_ptr = nullptr;
                if (gpu) {
                  d_idx = wm::device_buffer(n * 8, device);
                  d_grads = wm::device_buffer(n * dim * 4, device);
                  d_out = wm::device_buffer(n * dim * wm::dtype_size(dt), device);
                  wm::copy_bytes(d_idx.data(), idx.data(), n * 8);
                  wm::copy_bytes(d_grads.data(), grads.data(), n * dim * 4);
                  idx_ptr = d_idx.data();
                  grad_ptr = d_grads.data();
                  out_ptr = d_out.data();
                } else {
                  host_out.resize(n * dim * wm::dtype_size(dt));
                  out_ptr = host_out.data();
                }
                const wm::index_array ia{idx_ptr, wm::dtype::int64, n};
                const wm::dense_matrix out{out_ptr, dt, n, dim, dim};
                const wm::dense_matrix gm{const_cast<void*>(grad_ptr), wm::dtype::float32, n, dim,
                                          dim};
                auto lookup = [&] {
                  if (gpu) {
                    t.lookup(ia, out, stream);
#if defined(WHOLESTORE_HAS_CUDA)
                    WM_CUDA_TRY(cudaStreamSynchronize(stream));
#endif
                  } else {
                    t.lookup_host(ia, out, threads);
                  }
                };
                auto update = [&] {
                  if (gpu) {
                    t.apply_gradients(ia, gm, lr, stream);
#if defined(WHOLESTORE_HAS_CUDA)
                    WM_CUDA_TRY(cudaStreamSynchronize(stream));
#endif
                  } else {
                    t.apply_gradients_host(ia, gm, lr, threads);
                  }
                };
                auto timed = [&](auto&& body) {
                  for (int w = 0; w < warmup; ++w) body();
                  std::vector<double> ts;
                  for (int r = 0; r < repeats; ++r) {
                    bs->barrier();
                    auto t0 = std::chrono::steady_clock::now();
                    body();
                    ts.push_back(seconds_since(t0));
                  }
                  return median(ts);
                };
                line.lookup_ms = timed(lookup) * 1e3;
                line.update_ms = timed(update) * 1e3;
                const double nn = static_cast<double>(n), u = static_cast<double>(line.unique);
                line.lookup_bytes = nn * (8 + 2 * e * d);
                line.update_bytes = nn * (8 + 4 * d) + u * d * (2 * e + 8 * s);
                lines.push_back(line);
                if (lead) {
                  auto gbs = [&](double bytes, double ms) { return bytes / (ms * 1e-3) / 1e9; };
                  const double lg = gbs(line.lookup_bytes, line.lookup_ms) * ranks;
                  const double ug = gbs(line.update_bytes, line.update_ms) * ranks;
                  const double cg = ceiling * ranks / 1e9;
                  std::printf(
                      "%-44s %9zu %9zu | %9.3f %9.1f %6.1f%% | %9.3f %9.1f %6.1f%% | %9.3f "
                      "%9.1f\n",
                      line.what.c_str(), n, line.unique, line.lookup_ms, lg, 100.0 * lg / cg,
                      line.update_ms, ug, 100.0 * ug / cg, line.lookup_ms + line.update_ms,
                      nn * ranks / ((line.lookup_ms + line.update_ms) * 1e-3) / 1e6);
                  std::fflush(stdout);
                }
              }
            }
          }
        }
      }
    }
  }
#if defined(WHOLESTORE_HAS_CUDA)
  if (stream) cudaStreamDestroy(stream);
#endif
  if (lead && !args.report_file.empty()) {
    std::ostringstream report;
    report << "command: bench\nsuite: embedding\nranks: " << ranks
           << "\npath: " << (gpu ? "gpu" : "cpu") << "\nceiling_name: " << ceiling_name
           << "\nceiling_gbps: " << ceiling / 1e9 << "\ncases:\n";
    for (const auto& l : lines) {
      report << "  - {case: \"" << l.what << "\", batch: " << l.batch << ", unique: " << l.unique
             << ", lookup_ms: " << l.lookup_ms << ", update_ms: " << l.update_ms
             << ", lookup_bytes: " << l.lookup_bytes << ", update_bytes: " << l.update_bytes
             << "}\n";
    }
    write_report(args.report_file, report.str(), &cfg);
  }
  return 0;
}

}  // namespace wholestore::apps
