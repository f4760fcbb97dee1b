// `wholestore bench configs/bench_symmetric.yaml` (suite: symmetric): put and get between two
// ranks through the symmetric heap (wholememory/symmetric.hpp), per size, next to the peer
// copy ceiling measured in the same run.  Rank 0 moves bytes between its block and rank 1's;
// the other ranks only join the collectives.
//
// Per size, four ways: "copy" is cudaMemcpyAsync between the two blocks' addresses (the copy
// engines), "kernel" the library's row-copy kernel (gather_unchecked_async over the heap's
// chunked memory, 4 KiB rows) reading or writing the peer's block with loads and stores, as a
// user kernel would through the heap's accessor.  "put" writes rank 1's block from rank 0's,
// "get" reads rank 1's block into a private buffer of rank 0.  The ceiling is
// cudaMemcpyPeerAsync between two private buffers on the two GPUs.  Without a GPU the heap is
// in shared host memory and the ways are memcpy and gather_host against host memcpy.
// Every measured copy is checked afterwards: a wrong byte fails the bench.
#include "bench_common.hpp"
#include "commands.hpp"
#include "config.hpp"

#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/cuda_stream.hpp>
#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>
#include <wholememory/symmetric.hpp>

#if defined(WHOLESTORE_HAS_CUDA)
#include <cuda_runtime_api.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace wholestore::apps {

namespace {

namespace wm = wholememory;

constexpr std::size_t row_bytes = 4096;  // the kernel way's row: 1024 float32
constexpr std::uint64_t max_size_kib = std::uint64_t{64} << 20;  // 64 GiB

const std::vector<config_key> bench_symmetric_schema = {
    {"suite", value_kind::string, "symmetric",
     "`symmetric` selects this suite (a bench config without `suite` runs the gather suite)"},
    {"sizes_kib", value_kind::string, "1024,4096,16384,65536,262144,1048576",
     "transfer sizes in KiB, each a multiple of 4 (1 MiB to 1 GiB by default)"},
    {"cpu_sizes_kib", value_kind::string, "1024,16384",
     "transfer sizes in KiB without a GPU (the heap in shared host memory)"},
    {"repeats", value_kind::integer, "10", "timed repetitions per case (the median is shown)"},
    {"warmup", value_kind::integer, "2", "untimed repetitions before them"},
    {"threads", value_kind::integer, "0", "CPU path: gather_host threads (0: all cores)"},
    {"timeout_s", value_kind::number, "300",
     "collective timeout in seconds (WHOLESTORE_TIMEOUT, when set, replaces it)"},
};

/// The byte at `offset` of rank r's pattern.
unsigned char pattern(int rank, std::size_t offset) {
  return static_cast<unsigned char>((offset * 131 + offset / 4093 + 17 * rank + 1) & 0xff);
}

std::vector<unsigned char> pattern_bytes(int rank, std::size_t bytes) {
  std::vector<unsigned char> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = pattern(rank, i);
  return v;
}

/// Fails naming the case when `bytes` bytes at `where` (any address copy_bytes reads) differ
/// from rank r's pattern.
void expect_pattern(const void* where, std::size_t bytes, int rank, const std::string& what) {
  std::vector<unsigned char> got(bytes);
  wm::copy_bytes(got.data(), where, bytes);
  for (std::size_t i = 0; i < bytes; ++i) {
    if (got[i] != pattern(rank, i)) {
      WM_FAIL(wm::logic_error, "bench symmetric: " << what << " copied a wrong byte at offset " << i
                                                   << " (" << int(got[i]) << ", expected "
                                                   << int(pattern(rank, i)) << ")");
    }
  }
}

struct result_line {
  std::size_t bytes = 0;
  std::string direction, way;
  double seconds = 0;
  double ceiling_rate = 0;  // bytes per second of the ceiling at this size
};

/// Host bytes that start on a page.  memcpy between two buffers whose addresses differ by a
/// few bytes modulo 4 KiB runs far below its rate on some CPUs (4K aliasing: 1.3 against
/// 42 GB/s for 64 KiB on the development VM), and two heap vectors made one after the other
/// differ by 16; the heap's blocks start on a page, so every host buffer here does too.
class page_bytes {
 public:
  page_bytes() = default;
  explicit page_bytes(std::size_t bytes)
      : data_(static_cast<unsigned char*>(
            std::aligned_alloc(page, (bytes + page - 1) / page * page))) {
    if (bytes > 0 && !data_)
      WM_FAIL(wm::out_of_memory, "bench symmetric: no " << bytes << " bytes of host memory");
    if (bytes > 0) std::memset(data_.get(), 0, bytes);  // resident before it is timed
  }
  unsigned char* data() const { return data_.get(); }

 private:
  static constexpr std::size_t page = 4096;
  struct free_bytes {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  std::unique_ptr<unsigned char, free_bytes> data_;
};

/// Times one repetition: begin() before it, end() after, returning the seconds between once
/// the repetition's work is done.  On the host a steady clock; on a GPU two events on the
/// stream the cases run on (so launch and synchronization costs stay out of small sizes).
struct repetition_clock {
  virtual ~repetition_clock() = default;
  virtual void begin() = 0;
  virtual double end() = 0;
};

class host_clock final : public repetition_clock {
 public:
  void begin() override { t0_ = std::chrono::steady_clock::now(); }
  double end() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  std::chrono::steady_clock::time_point t0_;
};

#if defined(WHOLESTORE_HAS_CUDA)
/// The stream of the GPU cases, on the current device, and the events that time them.
class gpu_clock final : public repetition_clock {
 public:
  cudaStream_t stream() const { return stream_; }
  void begin() override { start_.record(stream_); }
  double end() override {
    stop_.record(stream_);
    stop_.synchronize();
    return wm::elapsed_ms(start_, stop_) / 1e3;
  }

 private:
  wm::cuda_stream stream_{wm::stream_flags::non_blocking};
  wm::cuda_event start_{wm::event_flags::timing}, stop_{wm::event_flags::timing};
};
#endif

/// Median seconds of `body` over `repeats` repetitions after `warmup` untimed ones.
double time_it(int warmup, int repeats, const std::function<void()>& body,
               repetition_clock& clock) {
  for (int i = 0; i < warmup; ++i) {
    clock.begin();
    body();
    clock.end();
  }
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    clock.begin();
    body();
    times.push_back(clock.end());
  }
  return median(times);
}

}  // namespace

const std::vector<config_key>& bench_symmetric_keys() { return bench_symmetric_schema; }

int run_bench_symmetric(int argc, char** argv) {
  command_args args = parse_command_args(argc, argv);
  config cfg = load_config(bench_symmetric_schema, args.config_file, args.overrides);
  const bool gpu = wm::describe_cuda_environment().cuda_built && wm::device_count() > 0;
  const std::string sizes_key = gpu ? "sizes_kib" : "cpu_sizes_kib";
  const std::vector<std::uint64_t> sizes_kib =
      parse_counts(cfg.get_string(sizes_key), sizes_key, cfg.origin.at(sizes_key), max_size_kib);
  for (std::uint64_t kib : sizes_kib) {
    if (kib % (row_bytes / 1024) != 0)
      throw config_error(sizes_key + ": " + std::to_string(kib) +
                         " KiB is not a multiple of 4 KiB (the kernel way's row)");
  }
  const std::int64_t repeats = cfg.get_int_at_least("repeats", 1);
  const std::int64_t warmup = cfg.get_int_at_least("warmup", 0);
  const std::int64_t threads_value = cfg.get_int_at_least("threads", 0);
  const unsigned threads =
      threads_value == 0 ? wm::default_host_threads() : static_cast<unsigned>(threads_value);

  std::shared_ptr<wm::bootstrap> bs = wm::make_job_bootstrap(collective_timeout(cfg));
  agree_on_config(*bs, cfg, "bench", {"timeout_s", "threads"});
  std::shared_ptr<wm::communicator> host_comm = wm::make_host_communicator(bs);
  const int rank = host_comm->rank(), ranks = host_comm->size();
  const bool lead = rank == 0;
  if (ranks < 2) {
    if (lead) {
      std::printf(
          "note: bench symmetric needs two ranks (wholestore launch -n 2 -- wholestore bench "
          "configs/bench_symmetric.yaml); nothing measured\n");
    }
    return 0;
  }
  wm::symmetric_env env;
  if (gpu) {
    const int device = wm::default_device(*host_comm);
    const wm::gpu_sharing sharing = wm::describe_gpu_sharing(*bs, device);
    if (sharing.shared()) {
      if (lead) {
        std::printf("note: bench symmetric needs a GPU per rank and %s; nothing measured\n",
                    sharing.description.c_str());
      }
      return 0;
    }
    // The heap over this job's own NCCL communicator: symmetric_init without one would make a
    // second bootstrap on the job's port.
    wm::set_device(device);
    env = wm::symmetric_init(device, wm::make_nccl_communicator(bs, device));
  } else {
    env = wm::symmetric_init(-1, host_comm);
  }
  const wm::memory_location location =
      gpu ? wm::memory_location::device : wm::memory_location::host;
  const std::size_t max_bytes = *std::max_element(sizes_kib.begin(), sizes_kib.end()) * 1024;
  wm::symmetric_memory heap = wm::symmetric_memory::allocate(env.comm, max_bytes, location);
  // Every rank writes its pattern into its block; rank 0 then reads and writes rank 1's.
  {
    const std::vector<unsigned char> mine = pattern_bytes(rank, max_bytes);
    wm::copy_bytes(heap.local_block(), mine.data(), max_bytes);
  }
  bs->barrier();

  std::vector<result_line> lines;
  double ceiling = 0;  // bytes per second at the largest size
  if (lead) {
    const std::size_t rows_per_block = heap.block_bytes() / row_bytes;
    const wm::wm_tensor table{&heap.memory(), wm::dtype::float32, rows_per_block * ranks,
                              row_bytes / 4,  row_bytes / 4,      0};
    std::vector<std::int64_t> idx_host(max_bytes / row_bytes);
    void* peer = heap.block(1);
    void* local = heap.local_block();
    host_clock on_host;
    repetition_clock* clock = &on_host;
#if defined(WHOLESTORE_HAS_CUDA)
    std::unique_ptr<gpu_clock> on_gpu;
    cudaStream_t stream = nullptr;
    if (gpu) {
      on_gpu = std::make_unique<gpu_clock>();
      clock = on_gpu.get();
      stream = on_gpu->stream();
    }
#endif
    page_bytes host_scratch(gpu ? 0 : max_bytes);
    wm::device_buffer d_scratch, d_idx;
    void* scratch = host_scratch.data();
    if (gpu) {
      d_scratch = wm::device_buffer(max_bytes, env.device);
      d_idx = wm::device_buffer(idx_host.size() * 8, env.device);
      scratch = d_scratch.data();
    }
    for (std::uint64_t kib : sizes_kib) {
      const std::size_t bytes = kib * 1024, rows = bytes / row_bytes;
      const std::string size_name = std::to_string(kib) + " KiB";
      // Ceiling: a private copy across the two devices (or in host memory).
      double ceil_s = 0;
#if defined(WHOLESTORE_HAS_CUDA)
      if (gpu) {
        const int other = env.device == 0 ? 1 : 0;
        wm::device_buffer a(bytes, env.device), b(bytes, other);
        wm::set_device(env.device);
        // Without peer access the copy is staged through host memory (38 GB/s on two H200s
        // instead of NVLink's ~396): the ceiling is the direct path, as the heap's is.
        int can = 0;
        WM_CUDA_TRY(cudaDeviceCanAccessPeer(&can, env.device, other));
        if (can) {
          const cudaError_t err = cudaDeviceEnablePeerAccess(other, 0);
          if (err != cudaErrorPeerAccessAlreadyEnabled) WM_CUDA_TRY(err);
          cudaGetLastError();
        }
        ceil_s = time_it(
            static_cast<int>(warmup), static_cast<int>(repeats),
            [&] {
              WM_CUDA_TRY(
                  cudaMemcpyPeerAsync(b.data(), other, a.data(), env.device, bytes, stream));
            },
            *clock);
      }
#endif
      if (!gpu) {
        page_bytes a(bytes), b(bytes);
        ceil_s = time_it(
            static_cast<int>(warmup), static_cast<int>(repeats),
            [&] { std::memcpy(b.data(), a.data(), bytes); }, *clock);
      }
      const double ceiling_rate = bytes / ceil_s;
      if (bytes == max_bytes) ceiling = ceiling_rate;
      // The kernel way's rows: rank 1's first `rows` (get) or rank 0's (put).
      auto copy_way = [&](const std::string& direction) {
        void* dst = direction == "put" ? peer : scratch;
        const void* src = direction == "put" ? local : peer;
#if defined(WHOLESTORE_HAS_CUDA)
        if (gpu) {
          WM_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
          return;
        }
#endif
        std::memcpy(dst, src, bytes);
      };
      auto kernel_way = [&](const std::string& direction) {
        const wm::index_array idx{gpu ? d_idx.data() : idx_host.data(), wm::dtype::int64, rows};
        const wm::dense_matrix out{direction == "put" ? peer : scratch, wm::dtype::float32, rows,
                                   row_bytes / 4, row_bytes / 4};
        if (gpu) {
#if defined(WHOLESTORE_HAS_CUDA)
          wm::gather_unchecked_async(table, idx, out, stream);
#endif
        } else {
          wm::gather_host(table, idx, out, threads);
        }
      };
      for (const std::string direction : {"get", "put"}) {
        // get reads rank 1's rows, put reads rank 0's (and writes them into rank 1's block).
        const std::size_t first_row = direction == "get" ? rows_per_block : 0;
        for (std::size_t i = 0; i < rows; ++i)
          idx_host[i] = static_cast<std::int64_t>(first_row + i);
        if (gpu) wm::copy_bytes(d_idx.data(), idx_host.data(), rows * 8);
        for (const std::string way : {"copy", "kernel"}) {
          const std::string what = direction + " " + way + " " + size_name;
          const auto body = [&] {
            if (way == "copy") {
              copy_way(direction);
            } else {
              kernel_way(direction);
            }
          };
          lines.push_back(
              {bytes, direction, way,
               time_it(static_cast<int>(warmup), static_cast<int>(repeats), body, *clock),
               ceiling_rate});
          // get: the scratch holds rank 1's pattern; put: rank 1's block holds rank 0's.
          expect_pattern(direction == "get" ? scratch : peer, bytes, direction == "get" ? 1 : 0,
                         what);
          if (direction == "put") {  // rank 1's pattern back for the next cases
            const std::vector<unsigned char> theirs = pattern_bytes(1, bytes);
            wm::copy_bytes(peer, theirs.data(), bytes);
          }
        }
      }
    }
  }
  bs->barrier();
  heap.free();
  if (lead) {
    std::printf(
        "wholestore bench (symmetric): %d rank(s), %s heap, rank 0 <-> rank 1, ceiling: %s\n",
        ranks, gpu ? "device" : "host",
        gpu ? "peer copy (cudaMemcpyPeerAsync, private buffers)" : "host memcpy");
    std::printf("%-12s %-9s %-7s %12s %12s %8s\n", "size", "direction", "way", "GB/s",
                "ceiling GB/s", "ceil%");
    for (const result_line& l : lines) {
      const double rate = l.bytes / l.seconds, ceil = l.ceiling_rate;
      std::printf("%-12s %-9s %-7s %12.1f %12.1f %7.1f%%\n",
                  (std::to_string(l.bytes / 1024) + " KiB").c_str(), l.direction.c_str(),
                  l.way.c_str(), rate / 1e9, ceil / 1e9, 100.0 * rate / ceil);
    }
    std::printf("summary: symmetric put/get, largest size %zu KiB: ceiling %.1f GB/s\n",
                max_bytes / 1024, ceiling / 1e9);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace wholestore::apps
