// `wholestore bench`: gather/scatter bandwidth on every memory type x location, next to the
// machine's ceilings measured in the same run (device copy, peer copy, pinned host-to-device
// copy; host memcpy on CPU-only machines).  Runs on the ranks present, one GPU per rank.
#include "bench_common.hpp"
#include "commands.hpp"
#include "config.hpp"
#include "report.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_stream.hpp>
#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#if defined(WHOLESTORE_HAS_CUDA)
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace wholestore::apps {

namespace {

const std::vector<config_key> bench_schema = {
    {"suite", value_kind::string, "gather",
     "`gather` (this suite; also when the key is absent), `sample`, `embedding` or "
     "`symmetric`"},
    {"row_bytes", value_kind::string, "64,128,256,512,1024,4096",
     "row sizes in bytes, comma-separated (multiples of the dtype size)"},
    {"table_gib", value_kind::number, "8", "table size over all ranks, GiB (GPU runs)"},
    {"lookups", value_kind::integer, "4194304",
     "uniform random indices per rank per call (GPU runs)"},
    {"cpu_table_gib", value_kind::number, "0.25", "table size without a GPU"},
    {"cpu_lookups", value_kind::integer, "262144", "indices per rank without a GPU"},
    {"types", value_kind::string, "continuous,chunked,distributed", "memory types to run"},
    {"locations", value_kind::string, "device,host",
     "memory locations (`device` is skipped without a GPU)"},
    {"ops", value_kind::string, "gather,scatter", "operations to time: `gather`, `scatter`"},
    {"dtype", value_kind::string, "float32", "element type of the table and the dense side"},
    {"index_dtype", value_kind::string, "int64", "`int32` or `int64`"},
    {"repeats", value_kind::integer, "10", "timed calls per case; the median is reported"},
    {"warmup", value_kind::integer, "2", "untimed calls per case"},
    {"sorted_host", value_kind::boolean, "true",
     "GPU on host memory: also time gathers in address-sorted order"},
    {"kernel_only", value_kind::boolean, "false",
     "GPU, continuous and chunked gathers: also time the bare row-copy kernel (no index check, "
     "no synchronization inside) to show the per-call overhead"},
    {"pipelined", value_kind::boolean, "false",
     "GPU, continuous and chunked gathers: also time 8 checked gathers enqueued back to back "
     "with one synchronization (per call), as a training loop issues them"},
    {"scatter_unique", value_kind::boolean, "true",
     "GPU: also time scatter with `unique_indices` (no duplicate-resolving sort)"},
    {"threads", value_kind::integer, "0", "CPU path threads, 0 = all hardware threads"},
    {"seed", value_kind::integer, "1234", "seed of the indices and table contents"},
    {"timeout_s", value_kind::number, "600",
     "seconds a collective waits for a missing rank before it fails on every rank, in (0, "
     "31536000]; `WHOLESTORE_TIMEOUT`, when set, replaces it"},
};

struct ceilings {
  double d2d = 0;     // device copy, bytes read + written per second
  double peer = 0;    // peer copy to the next GPU, bytes per second (0: none)
  double h2d = 0;     // pinned host to device, bytes per second
  double memcpy = 0;  // host memcpy on the CPU path's threads, bytes copied per second
};

/// Checked gathers per timed call of the "pipelined" order.
constexpr int pipeline_depth = 8;
/// Below this share of distinct rows a gather line says that its indices repeat rows.
constexpr double distinct_note_below = 0.95;

struct result_row {
  std::string op, type, location, order;
  std::size_t row_bytes = 0, lookups = 0;
  /// gather: the share of the lookups that name distinct rows, over all ranks' streams (a
  /// stream that repeats rows lets caches serve the repeats, so its rate can pass a bus rate).
  double distinct = 1.0;
  double ms = 0, gbps_rank = 0, gbps_total = 0;
  std::string ceiling_name;
  double ceiling_gbps = 0, ratio = 0;
};

#if defined(WHOLESTORE_HAS_CUDA)
#define BENCH_CUDA(call)                                                                \
  do {                                                                                  \
    cudaError_t bench_err_ = (call);                                                    \
    if (bench_err_ != cudaSuccess)                                                      \
      WM_FAIL(::wholememory::cuda_error, #call ": " << cudaGetErrorString(bench_err_)); \
  } while (0)

/// Times `body` (enqueued on `stream`) with events; median of `reps` after one warm-up.
template <typename Body>
double time_stream(cudaStream_t stream, int reps, Body body) {
  wholememory::cuda_event start(wholememory::event_flags::timing);
  wholememory::cuda_event stop(wholememory::event_flags::timing);
  body();
  BENCH_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    start.record(stream);
    body();
    stop.record(stream);
    stop.synchronize();
    times.push_back(wholememory::elapsed_ms(start, stop) / 1e3);
  }
  return median(times);
}

ceilings measure_gpu_ceilings(int device, cudaStream_t stream) {
  ceilings c;
  const std::size_t bytes = std::size_t(1) << 30;
  wholememory::device_buffer buffer_a(bytes, device), buffer_b(bytes, device);
  void* a = buffer_a.data();
  void* b = buffer_b.data();
  double t = time_stream(stream, 10, [&] {
    BENCH_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  c.d2d = 2.0 * bytes / t;

  void* pinned = nullptr;
  BENCH_CUDA(cudaMallocHost(&pinned, bytes));
  std::memset(pinned, 1, bytes);
  t = time_stream(stream, 10, [&] {
    BENCH_CUDA(cudaMemcpyAsync(a, pinned, bytes, cudaMemcpyHostToDevice, stream));
  });
  c.h2d = bytes / t;
  BENCH_CUDA(cudaFreeHost(pinned));

  int count = wholememory::device_count();
  if (count > 1) {
    int peer = (device + 1) % count, can = 0;
    BENCH_CUDA(cudaDeviceCanAccessPeer(&can, device, peer));
    if (can) {
      wholememory::device_buffer remote_buffer(bytes, peer);
      void* remote = remote_buffer.data();
      cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
      if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled) BENCH_CUDA(err);
      cudaGetLastError();
      t = time_stream(stream, 10, [&] {
        BENCH_CUDA(cudaMemcpyPeerAsync(remote, peer, a, device, bytes, stream));
      });
      c.peer = bytes / t;
      BENCH_CUDA(cudaSetDevice(device));
    }
  }
  return c;
}
#endif

/// Least common multiple of the row sizes (the allocation granularity), capped.
std::size_t lcm_of(const std::vector<std::size_t>& v) {
  std::size_t l = 1;
  for (std::size_t x : v) l = std::lcm(l, x);
  return l;
}

/// Fills this rank's part with pseudo-random bytes (one random 64 MiB block, repeated).
void fill_part(const wholememory::allocation& wm, std::uint64_t seed) {
  wholememory::part_info mine = wm.local_part();
  const std::size_t block = std::min<std::size_t>(mine.bytes, std::size_t(64) << 20);
  if (block == 0) return;
  std::vector<std::uint64_t> buf(block / 8 + 1);
  std::mt19937_64 rng(seed + mine.offset);
  for (auto& w : buf) w = rng();
  for (std::size_t off = 0; off < mine.bytes; off += block) {
    std::size_t n = std::min(block, mine.bytes - off);
    wholememory::copy_bytes(static_cast<char*>(mine.ptr) + off, buf.data(), n);
  }
}

// A count of lookups the bench cannot hold is refused before anything is allocated (issue 36:
// 1e8 lookups of 4 KiB rows ask for 400 GB of gathered rows, and the allocation fails only
// after the table is made): at most 2^31 indices (an index array of 16 GiB), and the gathered
// rows of a call (lookups x row_bytes, on the host or the device) at most 64 GiB per rank.
void check_lookups(const config& cfg, const char* key, const std::vector<std::size_t>& row_sizes) {
  constexpr std::uint64_t max_lookups = std::uint64_t{1} << 31;
  constexpr std::uint64_t max_gathered_bytes = std::uint64_t{64} << 30;
  const auto lookups = static_cast<std::uint64_t>(cfg.get_int_at_least(key, 1));
  if (lookups > max_lookups)
    throw config_error(std::string(key) + " must be at most " + std::to_string(max_lookups) +
                       " (2^31 indices per rank per call: an index array of 16 GiB), got " +
                       std::to_string(lookups) + " (" + cfg.origin.at(key) + "); lower " + key);
  const std::uint64_t row_bytes = *std::max_element(row_sizes.begin(), row_sizes.end());
  if (lookups > max_gathered_bytes / row_bytes)
    throw config_error(
        std::string(key) + " must be at most " + std::to_string(max_gathered_bytes / row_bytes) +
        " with row_bytes " + std::to_string(row_bytes) + ", got " + std::to_string(lookups) + " (" +
        cfg.origin.at(key) +
        "): a call gathers lookups x row_bytes bytes, more than 64 GiB per rank; lower " + key +
        " or row_bytes");
}

}  // namespace

int run_bench(int argc, char** argv) {
  const std::string suite = bench_suite(argc, argv);
  if (suite == "sample") return run_bench_sample(argc, argv);
  if (suite == "embedding") return run_bench_embedding(argc, argv);
  if (suite == "symmetric") return run_bench_symmetric(argc, argv);
  if (suite != "gather")
    throw config_error("suite must be gather, sample, embedding or symmetric, got '" + suite + "'");
  command_args args = parse_command_args(argc, argv);
  config cfg = load_config(bench_schema, args.config_file, args.overrides);
  auto timeout = collective_timeout(cfg);
  const bool gpu = wholememory::device_count() > 0;

  std::vector<std::size_t> row_sizes;
  for (const auto& s : split_list(cfg.get_string("row_bytes"), ',')) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || v <= 0) {
      throw config_error("row_bytes: '" + s + "' is not a positive number of bytes (" +
                         cfg.origin.at("row_bytes") + ")");
    }
    row_sizes.push_back(static_cast<std::size_t>(v));
  }
  if (row_sizes.empty())
    throw config_error("row_bytes: no row size given (" + cfg.origin.at("row_bytes") + ")");
  const wholememory::dtype type = wholememory::parse_dtype(cfg.get_string("dtype"));
  const wholememory::dtype index_type = wholememory::parse_dtype(cfg.get_string("index_dtype"));
  const std::size_t elem = wholememory::dtype_size(type);
  for (std::size_t r : row_sizes)
    if (r == 0 || r % elem != 0)
      throw config_error("row_bytes: " + std::to_string(r) + " is not a multiple of the " +
                         std::to_string(elem) + "-byte " + cfg.get_string("dtype"));
  if (index_type != wholememory::dtype::int32 && index_type != wholememory::dtype::int64)
    throw config_error("index_dtype must be int32 or int64");
  // Both size pairs are checked whether or not a GPU is present, so a bad config fails the
  // same way on every machine.
  for (const char* key : {"lookups", "cpu_lookups"}) check_lookups(cfg, key, row_sizes);
  const char* table_key = gpu ? "table_gib" : "cpu_table_gib";
  const double table_gib = cfg.get_positive_number(table_key);
  const auto lookups =
      static_cast<std::size_t>(cfg.get_int_at_least(gpu ? "lookups" : "cpu_lookups", 1));
  const int repeats = static_cast<int>(cfg.get_int_at_least("repeats", 1));
  const int warmup = static_cast<int>(cfg.get_int_at_least("warmup", 0));
  unsigned threads = static_cast<unsigned>(cfg.get_int_at_least("threads", 0));
  if (threads == 0) threads = wholememory::default_host_threads();
  std::vector<wholememory::memory_location> locations;
  for (const auto& l : split_list(cfg.get_string("locations"), ',')) {
    auto loc = wholememory::parse_memory_location(l);
    if (loc == wholememory::memory_location::device && !gpu) continue;
    locations.push_back(loc);
  }
  std::vector<wholememory::memory_type> types;
  for (const auto& t : split_list(cfg.get_string("types"), ','))
    types.push_back(wholememory::parse_memory_type(t));
  const auto ops = split_list(cfg.get_string("ops"), ',');
  const std::uint64_t seed = static_cast<std::uint64_t>(cfg.get_int("seed"));
  const std::size_t granularity = lcm_of(row_sizes);
  std::size_t table_bytes = 0;
  for (const char* key : {"table_gib", "cpu_table_gib"}) {
    const double gib = cfg.get_positive_number(key);
    if (gib > 1024.0 * 1024.0) {
      throw config_error(std::string(key) + " " + cfg.get_string(key) +
                         " is more than a PiB: surely a typo");
    }
    const auto wanted = static_cast<std::size_t>(gib * double(1ull << 30));
    const std::size_t bytes = wanted / granularity * granularity;
    if (bytes < *std::max_element(row_sizes.begin(), row_sizes.end())) {
      throw config_error(std::string(key) + " " + cfg.get_string(key) + " (" +
                         std::to_string(wanted) +
                         " bytes) is too small for one row of every row_bytes size");
    }
    if (std::string(key) == table_key) table_bytes = bytes;
  }

  // The config is checked: join the job.
  std::shared_ptr<wholememory::bootstrap> bs = wholememory::make_job_bootstrap(timeout);
  agree_on_config(*bs, cfg, "bench", {"timeout_s", "threads"});
  // Over several hosts (real or launch --hosts) continuous and chunked memory is per host.
  auto host_comm = wholememory::make_local_host_communicator(bs);
  const int rank = bs->rank(), ranks = bs->size();
  const bool lead = rank == 0;

  // ---- ceilings, one rank at a time so they do not share the links ---------------------------
  ceilings ceil;
  int device = -1;
  wholememory::cuda_stream stream = nullptr;  // the GPU path's (none on the CPU path)
  std::shared_ptr<wholememory::communicator> nccl_comm;
#if defined(WHOLESTORE_HAS_CUDA)
  if (gpu) {
    device = wholememory::default_device(*host_comm);
    wholememory::set_device(device);
    stream = wholememory::cuda_stream(wholememory::stream_flags::non_blocking);
    // gather/scatter take their scratch from the device's stream-ordered pool; keep what they
    // free cached between calls, as a training loop would, instead of unmapping it each time.
    cudaMemPool_t pool;
    BENCH_CUDA(cudaDeviceGetDefaultMemPool(&pool, device));
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    BENCH_CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    for (int r = 0; r < ranks; ++r) {
      if (r == rank) ceil = measure_gpu_ceilings(device, stream);
      bs->barrier();
    }
    if (std::find(types.begin(), types.end(), wholememory::memory_type::distributed) !=
        types.end()) {
      // NCCL needs a GPU per rank: with ranks sharing one, distributed memory is skipped.
      const wholememory::gpu_sharing sharing = wholememory::describe_gpu_sharing(*bs, device);
      if (!sharing.shared()) {
        nccl_comm = wholememory::make_nccl_communicator(bs, device);
      } else {
        types.erase(std::remove(types.begin(), types.end(), wholememory::memory_type::distributed),
                    types.end());
        if (lead)
          std::printf("note: distributed memory skipped: %s (NCCL needs one GPU per rank)\n",
                      sharing.description.c_str());
      }
    }
  }
#endif
  ceil.memcpy = host_memcpy_rate(threads);
  if (lead) {
    std::printf(
        "wholestore bench: %d rank(s), %s, %s rows, %s indices, table %.2f GiB, "
        "%zu lookups per rank\n",
        ranks, gpu ? "GPU path" : "CPU path (no GPU)", cfg.get_string("dtype").c_str(),
        cfg.get_string("index_dtype").c_str(), table_gib, lookups);
    std::printf(
        "ceilings (rank 0): device copy %.1f GB/s (read+write), peer copy %.1f GB/s, "
        "pinned H2D %.1f GB/s, host memcpy %.1f GB/s (%u threads)\n",
        ceil.d2d / 1e9, ceil.peer / 1e9, ceil.h2d / 1e9, ceil.memcpy / 1e9, threads);
    std::fflush(stdout);
  }

  // ---- cases ------------------------------------------------------------------------------
  std::vector<result_row> results;

  for (auto loc : locations) {
    for (auto mtype : types) {
      auto comm = (mtype == wholememory::memory_type::distributed && gpu) ? nccl_comm : host_comm;
      wholememory::allocation_options opts;
      opts.granularity = granularity;
      auto wm = wholememory::allocation::create(comm, table_bytes, mtype, loc, opts);
      fill_part(wm, seed);
      bs->barrier();
      for (std::size_t row_bytes : row_sizes) {
        const std::size_t rows = table_bytes / row_bytes;
        const std::size_t cols = row_bytes / elem;
        wholememory::wm_tensor tensor{&wm, type, rows, cols, cols, 0};
        // Indices: uniform over the table, seeded per rank.
        std::mt19937_64 rng(seed * 7919 + rank * 104729 + row_bytes);
        std::uniform_int_distribution<std::int64_t> pick(0, static_cast<std::int64_t>(rows) - 1);
        const std::size_t isize = wholememory::dtype_size(index_type);
        std::vector<char> host_idx(lookups * isize);
        // Distinct rows of the stream (a bitmap of rows: up to 16 MiB for 128 Mi rows).
        std::vector<bool> seen(rows, false);
        std::uint64_t distinct_here = 0;
        for (std::size_t i = 0; i < lookups; ++i) {
          std::int64_t v = pick(rng);
          if (!seen[static_cast<std::size_t>(v)]) {
            seen[static_cast<std::size_t>(v)] = true;
            ++distinct_here;
          }
          if (isize == 4) {
            auto v32 = static_cast<std::int32_t>(v);
            std::memcpy(host_idx.data() + 4 * i, &v32, 4);
          } else {
            std::memcpy(host_idx.data() + 8 * i, &v, 8);
          }
        }
        // The smallest share of distinct rows among the ranks' gather streams.
        double distinct_share = lookups ? static_cast<double>(distinct_here) / lookups : 1.0;
        {
          std::vector<double> shares(static_cast<std::size_t>(ranks));
          bs->allgather(&distinct_share, shares.data(), sizeof(double));
          distinct_share = *std::min_element(shares.begin(), shares.end());
        }
        // Scatter writes distinct rows, disjoint between ranks (a training step's updates after
        // its own reduction): entries [rank * n, (rank + 1) * n) of an affine permutation of
        // the rows, so both scatter variants move the same bytes and no rank races another.
        const std::size_t scatter_n = std::min(lookups, rows / static_cast<std::size_t>(ranks));
        std::vector<char> host_sidx(scatter_n * isize);
        if (scatter_n > 0) {
          std::uint64_t a = (rng() | 1) % rows;
          while (std::gcd(a, static_cast<std::uint64_t>(rows)) != 1) a = (a + 2) % rows;
          const std::uint64_t b = rng() % rows;
          for (std::size_t i = 0; i < scatter_n; ++i) {
            const unsigned __int128 k = static_cast<unsigned __int128>(rank * scatter_n + i);
            const auto v = static_cast<std::int64_t>((k * a + b) % rows);
            if (isize == 4) {
              auto v32 = static_cast<std::int32_t>(v);
              std::memcpy(host_sidx.data() + 4 * i, &v32, 4);
            } else {
              std::memcpy(host_sidx.data() + 8 * i, &v, 8);
            }
          }
        }
        const std::size_t out_bytes = lookups * row_bytes;
        std::vector<char> host_out;
        void* idx_ptr = host_idx.data();
        void* sidx_ptr = host_sidx.data();
        void* out_ptr = nullptr;
        wholememory::device_buffer own_idx, own_sidx, own_out;
        if (gpu) {
          own_idx = wholememory::device_buffer(host_idx.size(), device);
          idx_ptr = own_idx.data();
          wholememory::copy_bytes(idx_ptr, host_idx.data(), host_idx.size());
          own_sidx = wholememory::device_buffer(std::max<std::size_t>(host_sidx.size(), 1), device);
          sidx_ptr = own_sidx.data();
          wholememory::copy_bytes(sidx_ptr, host_sidx.data(), host_sidx.size());
          own_out = wholememory::device_buffer(out_bytes, device);
          out_ptr = own_out.data();
        } else {
          host_out.assign(out_bytes, 0);
          out_ptr = host_out.data();
        }
        wholememory::index_array indices{idx_ptr, index_type, lookups};
        wholememory::index_array scatter_indices{sidx_ptr, index_type, scatter_n};
        wholememory::dense_matrix dense{out_ptr, type, lookups, cols, cols};
        wholememory::dense_matrix scatter_in{out_ptr, type, scatter_n, cols, cols};

        for (const auto& op : ops) {
          if (op != "gather" && op != "scatter") throw config_error("ops: unknown op '" + op + "'");
          // gather: "random" (as given) and, for host memory, "sorted" (address order);
          // scatter: "dedup" (duplicates resolved by a sort) and "unique" (no sort).
          std::vector<std::string> orders;
          if (op == "gather") {
            orders.push_back("random");
            if (gpu && loc == wholememory::memory_location::host && cfg.get_bool("sorted_host"))
              orders.push_back("sorted");
            if (gpu && mtype != wholememory::memory_type::distributed &&
                cfg.get_bool("kernel_only"))
              orders.push_back("kernel");
            if (gpu && mtype != wholememory::memory_type::distributed && cfg.get_bool("pipelined"))
              orders.push_back("pipelined");
          } else {
            orders.push_back("dedup");
            if (gpu && cfg.get_bool("scatter_unique")) orders.push_back("unique");
          }
          for (const auto& order : orders) {
            // Gather on host memory: "random" forces the unsorted visit to show what sorting
            // buys; scatter runs with the library's defaults (sorted visiting on host memory).
            wholememory::gather_options options;
            if (op == "gather")
              options.sort_host_threshold =
                  order == "sorted" ? 0 : std::numeric_limits<std::size_t>::max();
            options.unique_indices = order == "unique";
            const std::size_t moved_bytes = (op == "gather" ? lookups : scatter_n) * row_bytes;
            auto call = [&] {
              if (!gpu) {
                if (op == "gather") {
                  wholememory::gather_host(tensor, indices, dense, threads);
                } else {
                  wholememory::scatter_host(scatter_in, scatter_indices, tensor, threads);
                }
              } else if (order == "kernel") {
                wholememory::gather_unchecked_async(tensor, indices, dense, stream);
              } else if (order == "pipelined") {
                for (int k = 0; k < pipeline_depth; ++k)
                  wholememory::gather(tensor, indices, dense, options, stream);
              } else if (op == "gather") {
                wholememory::gather(tensor, indices, dense, options, stream);
              } else {
                wholememory::scatter(scatter_in, scatter_indices, tensor, options, stream);
              }
            };
            std::vector<double> times;
            for (int r = 0; r < warmup + repeats; ++r) {
              bs->barrier();
              auto t0 = std::chrono::steady_clock::now();
              call();
#if defined(WHOLESTORE_HAS_CUDA)
              if (gpu) BENCH_CUDA(cudaStreamSynchronize(stream));
#endif
              double s =
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
              if (order == "pipelined") s /= pipeline_depth;
              if (r >= warmup) times.push_back(s);
            }
            const double t = median(times);
            std::vector<double> all(ranks);
            bs->allgather(&t, all.data(), sizeof(double));
            const double slowest = *std::max_element(all.begin(), all.end());
            result_row row;
            row.op = op;
            row.type = wholememory::memory_type_name(mtype);
            row.location = wholememory::memory_location_name(loc);
            row.order = order;
            row.row_bytes = row_bytes;
            row.lookups = op == "gather" ? lookups : scatter_n;
            if (op == "gather") row.distinct = distinct_share;
            row.ms = t * 1e3;
            row.gbps_rank = moved_bytes / t / 1e9;
            row.gbps_total = double(moved_bytes) * ranks / slowest / 1e9;
            if (!gpu) {
              row.ceiling_name = "host memcpy";
              row.ceiling_gbps = ceil.memcpy / 1e9;
            } else if (loc == wholememory::memory_location::host) {
              row.ceiling_name = "pinned H2D";
              row.ceiling_gbps = ceil.h2d / 1e9;
            } else if (ranks > 1 && ceil.peer > 0) {
              // (n-1)/n of the rows cross NVLink; the local ones are much faster, so the
              // remote share bounds a call: n/(n-1) x the peer copy rate (2 x on 2 GPUs).
              row.ceiling_name =
                  ranks == 2 ? std::string("2 x peer")
                             : std::to_string(ranks) + "/" + std::to_string(ranks - 1) + " x peer";
              row.ceiling_gbps = ceil.peer * ranks / (ranks - 1) / 1e9;
            } else {
              row.ceiling_name = "D2D / 2";
              row.ceiling_gbps = ceil.d2d / 2 / 1e9;
            }
            row.ratio = row.gbps_rank / row.ceiling_gbps;
            results.push_back(row);
            if (lead) {
              // A stream that repeats rows is partly served by caches: say so beside the ratio,
              // which may then pass the bus rate it is measured against.
              char repeats_note[96] = "";
              if (row.distinct < distinct_note_below)
                std::snprintf(repeats_note, sizeof repeats_note,
                              "  [indices repeat rows: %.1f%% distinct]", 100 * row.distinct);
              std::printf(
                  "%-7s %-11s %-6s %-6s %6zu B  %9.3f ms  %8.1f GB/s/rank  %8.1f GB/s "
                  "total  %5.1f%% of %s (%.1f GB/s)%s\n",
                  row.op.c_str(), row.type.c_str(), row.location.c_str(), row.order.c_str(),
                  row.row_bytes, row.ms, row.gbps_rank, row.gbps_total, 100 * row.ratio,
                  row.ceiling_name.c_str(), row.ceiling_gbps, repeats_note);
              std::fflush(stdout);
            }
          }
        }
      }
      bs->barrier();
    }
  }
  stream.reset();

  if (lead) {
    std::printf(
        "summary: %zu cases; ratios are per-rank bandwidth (bytes of rows moved per "
        "second) over the ceiling named; distributed memory is compared with the peer "
        "ceiling as well (its target is a fraction of the continuous figure)\n",
        results.size());
    if (!args.report_file.empty()) {
      std::time_t now = std::time(nullptr);
      char date[64];
      std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
      std::vector<report_row> cases;
      for (const auto& r : results) {
        cases.push_back({{"op", r.op},
                         {"type", r.type},
                         {"location", r.location},
                         {"order", r.order},
                         {"row_bytes", r.row_bytes},
                         {"lookups", r.lookups},
                         {"distinct_share", r.distinct},
                         {"ms", r.ms},
                         {"gbps_per_rank", r.gbps_rank},
                         {"gbps_total", r.gbps_total},
                         {"ceiling", report_value::quoted(r.ceiling_name)},
                         {"ceiling_gbps", r.ceiling_gbps},
                         {"ratio", r.ratio}});
      }
      report_body report("bench");
      report.add("date", date)
          .add("ranks", ranks)
          .add("gpu", gpu)
          .add_mapping("ceilings_gbps", {{"d2d_read_write", ceil.d2d / 1e9},
                                         {"peer", ceil.peer / 1e9},
                                         {"pinned_h2d", ceil.h2d / 1e9},
                                         {"host_memcpy", ceil.memcpy / 1e9}})
          .add_rows("cases", std::move(cases));
      write_report(args.report_file, report, &cfg);
    }
  }
  return 0;
}

const command_info& bench_command() {
  static const command_info info{
      "bench",
      "gather/scatter bandwidth, sampler or embedding throughput",
      "",
      "Four suites, chosen by the config's `suite` key (or `--set suite=...`): `gather` (the "
      "default), `sample`, `embedding` and `symmetric`, each with its own keys, below. Every suite "
      "runs on "
      "the ranks present (one GPU per rank; without a GPU, the CPU paths at the `cpu_*` sizes) "
      "and prints each case next to a ceiling or target measured or stated in the same run; "
      "rank 0 prints the all-rank figures and writes `--report`. Measured figures are in "
      "[docs/benchmarks.md](benchmarks.md).",
      {{"suite `gather`", "configs/bench_gather.yaml",
        "Gather/scatter bandwidth on every memory type x location next to the machine's "
        "ceilings measured in the same run (device copy, peer copy, pinned host-to-device copy; "
        "host memcpy on CPU-only machines); see [docs/benchmarks.md](benchmarks.md). GPU runs "
        "use `table_gib` and `lookups`, runs without a GPU `cpu_table_gib` and `cpu_lookups`. "
        "A gather line whose uniform indices name under 95% distinct rows (more lookups than "
        "the table has rows) says so, with the share: caches serve the repeats, and the ratio "
        "may pass the ceiling.",
        &bench_schema, ""},
       {"suite `sample`", "configs/bench_sample.yaml",
        "A config with `suite: sample` (or `--set suite=sample`) makes `wholestore bench` time "
        "the neighbor samplers instead of gather/scatter. Every rank generates the same R-MAT "
        "graph, places it in WholeMemory per case (memory type x location) and runs, per "
        "sampler x method x fanouts, `warmup` untimed and then `batches` (GPU) or `cpu_batches` "
        "(CPU) timed batches of `batch_size` distinct seeds. Rank 0 prints per case the sampled "
        "edges per second (all ranks' edges over the slowest rank's time in the sampler), "
        "batches per second, mean sampled edges per batch and the ratio to the target. The GPU "
        "sampler runs on both locations, the CPU sampler on host memory only; without a GPU "
        "only the CPU sampler runs, on the `cpu_*` graph size. Every memory type and location "
        "samples the same seeds, so a sampler x method x fanouts case must sample as many "
        "edges on each of them; when one differs the bench names the case and exits with 1.",
        &bench_sample_keys(), ""},
       {"suite `embedding`", "configs/bench_embedding.yaml",
        "A config with `suite: embedding` times embedding tables: lookup and a training step "
        "(`apply_gradients`) per memory type x location x dtype x dim x optimizer x index "
        "stream x batch size. Each line gives the bytes an ideal fused implementation moves "
        "and that traffic's rate as a share of the device copy rate measured in the same run "
        "(host memcpy on CPU-only machines); rank 0 prints rank 0's times and all-rank rates. "
        "Without a GPU the `cpu_*` sizes apply and the CPU path runs on host memory.",
        &bench_embedding_keys(),
        "Ideal traffic for N indices, U unique rows, dim D, element size E and S float32 state "
        "values per element (SGD 0, AdaGrad and RMSProp 1, Adam 2, row-wise AdaGrad 1/D): "
        "lookup = N (8 + 2 E D) (index, row read, output write); update = N (8 + 4 D) + "
        "U D (2 E + 8 S) (index and gradient read; row and state read and written)."},
       {"suite `symmetric`", "configs/bench_symmetric.yaml",
        "A config with `suite: symmetric` times put and get between rank 0 and rank 1 through "
        "the symmetric heap (`wholememory/symmetric.hpp`), per size: `copy` is cudaMemcpyAsync "
        "between the two blocks' addresses, `kernel` the library's row-copy kernel (4 KiB rows) "
        "loading or storing the peer's block; next to cudaMemcpyPeerAsync between private "
        "buffers on the two GPUs of the same size, measured in the same run. Every copy is "
        "checked byte for byte afterwards. Needs two ranks, each with its own GPU; without a "
        "GPU the heap is in shared host memory (memcpy and gather_host against host memcpy, "
        "`cpu_sizes_kib`). One rank, or ranks sharing a GPU: a note, nothing measured.",
        &bench_symmetric_keys(), ""}},
      {"wholestore bench configs/bench_gather.yaml --set types=continuous",
       "wholestore launch -n 2 -- wholestore bench configs/bench_sample.yaml",
       "wholestore bench configs/bench_embedding.yaml --set dims=32,64,128 "
       "--set optimizers=sgd,adam",
       "wholestore launch -n 2 -- wholestore bench configs/bench_symmetric.yaml"},
      run_bench};
  return info;
}

}  // namespace wholestore::apps
