// The GPU sampler: gpu_sampler and device_block::to_host.  Kernels in sampling_kernels.cuh.
#include "sampling_kernels.cuh"

#include <graph/sampling.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/detail/cuda_check.hpp>
#include <wholememory/detail/cuda_memory.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace wholestore::graph {

namespace wm = ::wholememory;
using gpu::kWarp;

namespace {

constexpr int kThreads = 256;

/// Blocks for `items` work items of `per_item` threads each; 0 items need no launch.
unsigned grid_for(std::int64_t items, int per_item = 1) {
  const std::int64_t threads = items * per_item;
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

/// Grow-only device scratch.  Growing waits for `stream` first: the old buffer may still be
/// read by work queued before.
class scratch {
 public:
  void* reserve(std::size_t bytes, int device, cudaStream_t stream) {
    bytes = std::max<std::size_t>(bytes, 16);
    if (bytes > bytes_) {
      const std::size_t want = std::max(bytes, bytes_ + bytes_ / 2);
      if (owner_) WM_CUDA_TRY(cudaStreamSynchronize(stream));
      owner_.reset();
      ptr_ = nullptr;
      bytes_ = 0;
      owner_ = wm::detail::allocate_device_buffer(want, device, &ptr_);
      bytes_ = want;
    }
    return ptr_;
  }
  template <typename T>
  T* get(std::size_t count, int device, cudaStream_t stream) {
    return static_cast<T*>(reserve(count * sizeof(T), device, stream));
  }

 private:
  std::unique_ptr<wm::detail::resource> owner_;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Number of bits that hold every id below num_nodes (at least 1).
int key_bits(std::uint64_t num_nodes) {
  int bits = 1;
  while (bits < 64 && ((num_nodes - 1) >> bits) != 0) ++bits;
  return bits;
}

template <typename T>
void copy_to_host(std::vector<T>& out, const T* src, std::int64_t count, cudaStream_t stream) {
  out.resize(static_cast<std::size_t>(count));
  if (count > 0) {
    WM_EXPECTS(src != nullptr, "device_block: null array with " << count << " elements");
    WM_CUDA_TRY(cudaMemcpyAsync(out.data(), src, sizeof(T) * static_cast<std::size_t>(count),
                                cudaMemcpyDefault, stream));
  }
}

}  // namespace

block device_block::to_host(cudaStream_t stream) const {
  block b;
  b.num_dst = num_dst;
  copy_to_host(b.src_nodes, src_nodes, num_src, stream);
  if (offsets == nullptr && num_dst == 0) {
    b.offsets.assign(1, 0);  // a default-constructed (empty) block
  } else {
    copy_to_host(b.offsets, offsets, num_dst + 1, stream);
  }
  copy_to_host(b.src_index, src_index, num_edges, stream);
  if (edge_ids != nullptr) copy_to_host(b.edge_ids, edge_ids, num_edges, stream);
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  return b;
}

struct gpu_sampler::impl {
  const csr_graph* graph = nullptr;
  int device = 0;
  bool distributed = false;
  bool chunked = false;
  const void* ro_ptr = nullptr;  // continuous: data(); chunked: device view
  const void* col_ptr = nullptr;
  const void* w_ptr = nullptr;
  int bits = 1;
  bool wide_keys = false;  // uint64 keys (num_nodes > 2^32)

  // Per-hop outputs, kept until the next call.
  struct hop_buffers {
    scratch src_nodes, offsets, src_index, edge_ids;
  };
  std::vector<std::unique_ptr<hop_buffers>> hops;
  scratch seeds_unique;
  // Shared scratch.
  scratch keys_a, keys_b, vals_a, vals_b, new_flag, new_rank, head_a, head_b;
  scratch start, deg, npos, counts, eid, tmp, cub_temp;
  scratch ro2, row_idx, wbase, wbuf, widx, gathered_cols, flag;
  long long* host_info = nullptr;  // pinned: [0] bad position, [1] num_src, [2] total, [3] any
  scratch info;                    // device copy of the same

  ~impl() {
    if (host_info != nullptr) WM_CUDA_WARN(cudaFreeHost(host_info));
  }

  void* cub(std::size_t bytes, cudaStream_t stream) {
    return cub_temp.reserve(bytes, device, stream);
  }

  /// Copies `count` info words to the host and waits for the stream.
  void fetch_info(int count, cudaStream_t stream) {
    WM_CUDA_TRY(cudaMemcpyAsync(host_info, info.reserve(64, device, stream),
                                sizeof(long long) * count, cudaMemcpyDeviceToHost, stream));
    WM_CUDA_TRY(cudaStreamSynchronize(stream));
  }

  /// Throws when host_info[0] names a bad seed (on any rank, for distributed memory).
  void check_seeds(const std::int64_t* seeds, cudaStream_t stream);
  template <typename K>
  void relabel(std::int64_t n_dst, std::int64_t total, std::int32_t* src_index,
               std::int64_t* src_nodes, cudaStream_t stream);
  template <typename K>
  std::vector<device_block> run(const std::int64_t* seeds, std::size_t count,
                                const sample_options& options, cudaStream_t stream);
  template <typename W>
  void fill(const std::int64_t* dst, std::int64_t n, const std::int64_t* offsets,
            const sample_options& options, int hop, W w, std::int64_t* eid_out,
            cudaStream_t stream);
};

void gpu_sampler::impl::check_seeds(const std::int64_t* seeds, cudaStream_t stream) {
  const std::int64_t num_nodes = static_cast<std::int64_t>(graph->num_nodes);
  const long long no_bad = 0x7F7F7F7F7F7F7F7FLL;  // the memset pattern of info[0]
  const long long bad_pos = host_info[0];
  if (distributed) {
    // Every rank learns whether any rank had a bad seed, so that none is left waiting in a
    // collective.
    long long* any = flag.get<long long>(1, device, stream);
    host_info[3] = bad_pos != no_bad ? 1 : 0;
    WM_CUDA_TRY(
        cudaMemcpyAsync(any, host_info + 3, sizeof(long long), cudaMemcpyHostToDevice, stream));
    graph->row_offsets.comm().allreduce_sum(any, any, 1, wm::dtype::int64, stream);
    graph->row_offsets.comm().synchronize(stream);
    WM_CUDA_TRY(
        cudaMemcpyAsync(host_info + 3, any, sizeof(long long), cudaMemcpyDeviceToHost, stream));
    WM_CUDA_TRY(cudaStreamSynchronize(stream));
    if (host_info[3] > 0 && bad_pos == no_bad) {
      WM_FAIL(wm::logic_error,
              "sample: a seed outside [0, " << num_nodes << ") was passed on another rank");
    }
  }
  if (bad_pos != no_bad) {
    std::int64_t value = 0;
    WM_CUDA_TRY(cudaMemcpyAsync(&value, seeds + bad_pos, sizeof value, cudaMemcpyDefault, stream));
    WM_CUDA_TRY(cudaStreamSynchronize(stream));
    WM_FAIL(wm::logic_error, "sample: seed " << value << " at position " << bad_pos
                                             << " is outside [0, " << num_nodes << ")");
  }
}

// Sorts the entries already in keys_a / vals_a (total of them) and writes src_index and
// src_nodes; the number of src nodes goes to info[1] on the device.
template <typename K>
void gpu_sampler::impl::relabel(std::int64_t n_dst, std::int64_t total, std::int32_t* src_index,
                                std::int64_t* src_nodes, cudaStream_t stream) {
  long long* d_info = static_cast<long long*>(info.reserve(64, device, stream));
  if (total == 0) {
    WM_CUDA_TRY(cudaMemsetAsync(d_info + 1, 0, sizeof(long long), stream));
    return;
  }
  const std::size_t n = static_cast<std::size_t>(total);
  K* ka = static_cast<K*>(keys_a.reserve(n * sizeof(K), device, stream));
  K* kb = keys_b.get<K>(n, device, stream);
  std::int32_t* va = static_cast<std::int32_t*>(vals_a.reserve(n * 4, device, stream));
  std::int32_t* vb = vals_b.get<std::int32_t>(n, device, stream);
  std::int32_t* fl = new_flag.get<std::int32_t>(n, device, stream);
  std::int32_t* rk = new_rank.get<std::int32_t>(n, device, stream);
  std::int32_t* ha = head_a.get<std::int32_t>(n, device, stream);
  std::int32_t* hb = head_b.get<std::int32_t>(n, device, stream);
  const int items = static_cast<int>(total);

  cub::DoubleBuffer<K> kbuf(ka, kb);
  cub::DoubleBuffer<std::int32_t> vbuf(va, vb);
  std::size_t sort_bytes = 0, max_bytes = 0, sum_bytes = 0;
  WM_CUDA_TRY(
      cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, kbuf, vbuf, items, 0, bits, stream));
  WM_CUDA_TRY(
      cub::DeviceScan::InclusiveScan(nullptr, max_bytes, ha, hb, gpu::max_op{}, items, stream));
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, sum_bytes, fl, rk, items, stream));
  void* temp = cub(std::max({sort_bytes, max_bytes, sum_bytes}), stream);

  WM_CUDA_TRY(
      cub::DeviceRadixSort::SortPairs(temp, sort_bytes, kbuf, vbuf, items, 0, bits, stream));
  const K* keys = kbuf.Current();
  const std::int32_t* vals = vbuf.Current();
  gpu::mark_heads_kernel<K>
      <<<grid_for(total), kThreads, 0, stream>>>(keys, vals, total, n_dst, fl, ha);
  WM_CUDA_CHECK_LAUNCH();
  WM_CUDA_TRY(
      cub::DeviceScan::InclusiveScan(temp, max_bytes, ha, hb, gpu::max_op{}, items, stream));
  WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(temp, sum_bytes, fl, rk, items, stream));
  gpu::assign_kernel<K><<<grid_for(total), kThreads, 0, stream>>>(
      keys, vals, hb, fl, rk, total, n_dst, src_index, src_nodes, d_info + 1);
  WM_CUDA_CHECK_LAUNCH();
}

template <typename W>
void gpu_sampler::impl::fill(const std::int64_t* dst, std::int64_t n, const std::int64_t* offsets,
                             const sample_options& options, int hop, W w, std::int64_t* eid_out,
                             cudaStream_t stream) {
  if (n == 0) return;
  const int fanout = options.fanouts[static_cast<std::size_t>(hop)];
  if (options.method != sample_method::weighted && fanout >= 0 && fanout <= 16) {
    const std::int64_t* st = start.get<std::int64_t>(n, device, stream);
    const std::int64_t* dg = deg.get<std::int64_t>(n, device, stream);
    if (fanout <= 4) {
      gpu::fill_small_kernel<4><<<grid_for(n, 4), kThreads, 0, stream>>>(
          dst, st, dg, offsets, n, options.method, fanout, options.random_seed, hop, eid_out);
    } else if (fanout <= 8) {
      gpu::fill_small_kernel<8><<<grid_for(n, 8), kThreads, 0, stream>>>(
          dst, st, dg, offsets, n, options.method, fanout, options.random_seed, hop, eid_out);
    } else {
      gpu::fill_small_kernel<16><<<grid_for(n, 16), kThreads, 0, stream>>>(
          dst, st, dg, offsets, n, options.method, fanout, options.random_seed, hop, eid_out);
    }
    WM_CUDA_CHECK_LAUNCH();
    return;
  }
  gpu::fill_kernel<W><<<grid_for(n, kWarp), kThreads, 0, stream>>>(
      dst, start.get<std::int64_t>(n, device, stream), deg.get<std::int64_t>(n, device, stream),
      npos.get<std::int64_t>(n, device, stream), offsets, n, options.method,
      options.fanouts[static_cast<std::size_t>(hop)], options.random_seed, hop, w, eid_out,
      tmp.get<std::int64_t>(0, device, stream));
  WM_CUDA_CHECK_LAUNCH();
}

namespace {

using ro_direct = wm::PtrGen<const std::int64_t, const std::int64_t>;
using ro_chunked = wm::PtrGen<const wm::chunked_view, const std::int64_t>;

}  // namespace

template <typename K>
std::vector<device_block> gpu_sampler::impl::run(const std::int64_t* seeds, std::size_t count,
                                                 const sample_options& options,
                                                 cudaStream_t stream) {
  const csr_graph& g = *graph;
  const std::int64_t num_nodes = static_cast<std::int64_t>(g.num_nodes);
  const bool weighted = options.method == sample_method::weighted;
  const int num_hops = static_cast<int>(options.fanouts.size());
  long long* d_info = static_cast<long long*>(info.reserve(64, device, stream));

  // Hop 0 destinations: the unique seeds.  Their check rides on hop 0's sync: an
  // out-of-range seed became node 0 in the keys, so nothing reads outside the graph before.
  const std::int64_t n_seeds = static_cast<std::int64_t>(count);
  WM_EXPECTS(n_seeds < std::numeric_limits<std::int32_t>::max(),
             "sample: " << n_seeds << " seeds are more than a batch can hold");
  WM_CUDA_TRY(cudaMemsetAsync(d_info, 0x7F, sizeof(long long), stream));
  std::int64_t* uniq = seeds_unique.get<std::int64_t>(count, device, stream);
  if (n_seeds > 0) {
    K* ka = static_cast<K*>(keys_a.reserve(count * sizeof(K), device, stream));
    std::int32_t* va = static_cast<std::int32_t*>(vals_a.reserve(count * 4, device, stream));
    gpu::seed_keys_kernel<K><<<grid_for(n_seeds), kThreads, 0, stream>>>(
        seeds, n_seeds, num_nodes, ka, va, reinterpret_cast<unsigned long long*>(d_info));
    WM_CUDA_CHECK_LAUNCH();
  }
  relabel<K>(0, n_seeds, nullptr, uniq, stream);  // info[1] = number of unique seeds
  bool checked = false;
  if (distributed || num_hops == 0 || num_nodes == 0) {
    fetch_info(2, stream);
    check_seeds(seeds, stream);
    checked = true;
  }

  while (hops.size() < static_cast<std::size_t>(num_hops)) {
    hops.push_back(std::make_unique<hop_buffers>());
  }
  std::vector<device_block> blocks;
  const std::int64_t* dst = uniq;
  // The dst count of a hop is info[1] on the device (the previous relabel's src count); the
  // host knows `bound` >= it until the hop's sync.  Distributed memory needs it on the host
  // (gather counts), so it syncs for it first.
  std::int64_t bound = n_seeds;
  const long long* live = distributed ? nullptr : d_info + 1;
  for (int h = 0; h < num_hops; ++h) {
    const int fanout = options.fanouts[static_cast<std::size_t>(h)];
    hop_buffers& out = *hops[static_cast<std::size_t>(h)];
    if (distributed) {
      if (h > 0) fetch_info(2, stream);
      bound = host_info[1];
    }
    const std::size_t nd = static_cast<std::size_t>(bound);
    std::int64_t n_dst = bound;  // exact for distributed memory; else set at the sync below
    std::int64_t* offsets = out.offsets.get<std::int64_t>(nd + 1, device, stream);
    std::int64_t* st = start.get<std::int64_t>(nd, device, stream);
    std::int64_t* dg = deg.get<std::int64_t>(nd, device, stream);
    std::int64_t* np = npos.get<std::int64_t>(nd, device, stream);
    std::int64_t* cnt = counts.get<std::int64_t>(nd + 1, device, stream);
    const float* wb = nullptr;
    const std::int64_t* wbs = nullptr;

    // 1. start and degree of every dst node.
    if (distributed) {
      std::int64_t* idx = row_idx.get<std::int64_t>(2 * nd, device, stream);
      std::int64_t* r2 = ro2.get<std::int64_t>(2 * nd, device, stream);
      if (n_dst > 0) {
        gpu::row_index_kernel<<<grid_for(n_dst), kThreads, 0, stream>>>(dst, n_dst, idx);
        WM_CUDA_CHECK_LAUNCH();
      }
      wm::wm_tensor t{&g.row_offsets, wm::dtype::int64, g.num_nodes + 1, 1, 1, 0};
      wm::gather(t, wm::index_array{idx, wm::dtype::int64, 2 * nd},
                 wm::dense_matrix{r2, wm::dtype::int64, 2 * nd, 1, 1}, stream);
      if (n_dst > 0) {
        gpu::node_info_gathered_kernel<<<grid_for(n_dst), kThreads, 0, stream>>>(r2, n_dst, st, dg);
        WM_CUDA_CHECK_LAUNCH();
      }
      if (weighted && fanout >= 0) {
        // Weights of every frontier edge: scan the degrees, then gather them.
        std::int64_t* base = wbase.get<std::int64_t>(nd + 1, device, stream);
        gpu::count_kernel<<<grid_for(n_dst + 1), kThreads, 0, stream>>>(
            dg, n_dst, nullptr, sample_method::uniform, -1, cnt);  // counts = degrees
        WM_CUDA_CHECK_LAUNCH();
        std::size_t bytes = 0;
        WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, cnt, base, n_dst + 1, stream));
        WM_CUDA_TRY(
            cub::DeviceScan::ExclusiveSum(cub(bytes, stream), bytes, cnt, base, n_dst + 1, stream));
        WM_CUDA_TRY(cudaMemcpyAsync(host_info + 2, base + n_dst, sizeof(long long),
                                    cudaMemcpyDeviceToHost, stream));
        WM_CUDA_TRY(cudaStreamSynchronize(stream));
        const std::size_t frontier = static_cast<std::size_t>(host_info[2]);
        std::int64_t* fidx = widx.get<std::int64_t>(frontier, device, stream);
        float* fw = wbuf.get<float>(frontier, device, stream);
        if (n_dst > 0) {
          gpu::frontier_edges_kernel<<<grid_for(n_dst, kWarp), kThreads, 0, stream>>>(st, dg, base,
                                                                                      n_dst, fidx);
          WM_CUDA_CHECK_LAUNCH();
        }
        wm::wm_tensor wt{&g.edge_weights, wm::dtype::float32, g.num_edges, 1, 1, 0};
        wm::gather(wt, wm::index_array{fidx, wm::dtype::int64, frontier},
                   wm::dense_matrix{fw, wm::dtype::float32, frontier, 1, 1}, stream);
        wb = fw;
        wbs = base;
      }
    } else if (bound > 0) {
      if (chunked) {
        gpu::node_info_kernel<<<grid_for(bound), kThreads, 0, stream>>>(
            dst, bound, live, ro_chunked(static_cast<const wm::chunked_view*>(ro_ptr)), st, dg);
      } else {
        gpu::node_info_kernel<<<grid_for(bound), kThreads, 0, stream>>>(
            dst, bound, live, ro_direct(static_cast<const std::int64_t*>(ro_ptr)), st, dg);
      }
      WM_CUDA_CHECK_LAUNCH();
    }

    // 2. counts and offsets.
    if (weighted && fanout >= 0) {
      const unsigned grid = grid_for(bound + 1, kWarp);
      if (distributed) {
        gpu::count_weighted_kernel<<<grid, kThreads, 0, stream>>>(
            st, dg, bound, live, fanout, gpu::gathered_weights{wb, wbs}, cnt, np);
      } else if (chunked) {
        using wg = wm::PtrGen<const wm::chunked_view, const float>;
        gpu::count_weighted_kernel<<<grid, kThreads, 0, stream>>>(
            st, dg, bound, live, fanout,
            gpu::direct_weights<wg>{wg(static_cast<const wm::chunked_view*>(w_ptr))}, cnt, np);
      } else {
        using wg = wm::PtrGen<const float, const float>;
        gpu::count_weighted_kernel<<<grid, kThreads, 0, stream>>>(
            st, dg, bound, live, fanout,
            gpu::direct_weights<wg>{wg(static_cast<const float*>(w_ptr))}, cnt, np);
      }
    } else {
      gpu::count_kernel<<<grid_for(bound + 1), kThreads, 0, stream>>>(dg, bound, live,
                                                                      options.method, fanout, cnt);
    }
    WM_CUDA_CHECK_LAUNCH();
    {
      std::size_t bytes = 0;
      WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, bytes, cnt, offsets, bound + 1, stream));
      WM_CUDA_TRY(cub::DeviceScan::ExclusiveSum(cub(bytes, stream), bytes, cnt, offsets, bound + 1,
                                                stream));
    }
    // The one sync of the hop: the dst count (info[1]), the seed check (info[0]) and the
    // edge count (offsets[bound]: the counts past the dst count are 0).
    WM_CUDA_TRY(
        cudaMemcpyAsync(host_info, d_info, 2 * sizeof(long long), cudaMemcpyDeviceToHost, stream));
    WM_CUDA_TRY(cudaMemcpyAsync(host_info + 2, offsets + bound, sizeof(long long),
                                cudaMemcpyDeviceToHost, stream));
    WM_CUDA_TRY(cudaStreamSynchronize(stream));
    if (!checked) {
      check_seeds(seeds, stream);
      checked = true;
    }
    n_dst = host_info[1];
    WM_EXPECTS(n_dst >= 0 && n_dst <= bound,
               "sample: hop " << h << " has " << n_dst << " destinations, bound " << bound);
    if (h > 0) blocks.back().num_src = n_dst;
    const std::int64_t n_edges = host_info[2];
    const std::int64_t total = n_dst + n_edges;
    WM_EXPECTS(n_edges >= 0 && total < std::numeric_limits<std::int32_t>::max(),
               "sample: hop " << h << " has " << n_dst << " destinations and " << n_edges
                              << " edges, more than 32-bit local indices can address");
    const std::size_t ne = static_cast<std::size_t>(n_edges);

    // 3. the sampled positions as global edge ids.
    std::int64_t* eids = options.edge_ids ? out.edge_ids.get<std::int64_t>(ne, device, stream)
                                          : eid.get<std::int64_t>(ne, device, stream);
    tmp.get<std::int64_t>(ne, device, stream);
    if (weighted && fanout >= 0) {
      if (distributed) {
        fill(dst, n_dst, offsets, options, h, gpu::gathered_weights{wb, wbs}, eids, stream);
      } else if (chunked) {
        using wg = wm::PtrGen<const wm::chunked_view, const float>;
        fill(dst, n_dst, offsets, options, h,
             gpu::direct_weights<wg>{wg(static_cast<const wm::chunked_view*>(w_ptr))}, eids,
             stream);
      } else {
        using wg = wm::PtrGen<const float, const float>;
        fill(dst, n_dst, offsets, options, h,
             gpu::direct_weights<wg>{wg(static_cast<const float*>(w_ptr))}, eids, stream);
      }
    } else {
      // Weights are never read: any accessor type will do.
      fill(dst, n_dst, offsets, options, h, gpu::gathered_weights{nullptr, nullptr}, eids, stream);
    }

    // 4. relabel: entries are the dst nodes, then the neighbors in edge order.
    std::int64_t* src_nodes = out.src_nodes.get<std::int64_t>(total, device, stream);
    std::int32_t* src_index = out.src_index.get<std::int32_t>(ne, device, stream);
    K* ka = static_cast<K*>(
        keys_a.reserve(static_cast<std::size_t>(total) * sizeof(K), device, stream));
    std::int32_t* va = static_cast<std::int32_t*>(
        vals_a.reserve(static_cast<std::size_t>(total) * 4, device, stream));
    const std::int64_t* gathered = nullptr;
    if (distributed) {
      std::int64_t* gc = gathered_cols.get<std::int64_t>(ne, device, stream);
      wm::wm_tensor t{&g.col_indices, g.col_type, g.num_edges, 1, 1, 0};
      wm::gather(t, wm::index_array{eids, wm::dtype::int64, ne},
                 wm::dense_matrix{gc, wm::dtype::int64, ne, 1, 1}, stream);
      gathered = gc;
    }
    if (total > 0) {
      const unsigned grid = grid_for(total);
      if (distributed) {
        gpu::hop_keys_kernel<<<grid, kThreads, 0, stream>>>(
            dst, n_dst, eids, gathered, ro_direct(static_cast<const std::int64_t*>(nullptr)), total,
            ka, va);
      } else if (g.col_type == wm::dtype::int32) {
        if (chunked) {
          using cg = wm::PtrGen<const wm::chunked_view, const std::int32_t>;
          gpu::hop_keys_kernel<<<grid, kThreads, 0, stream>>>(
              dst, n_dst, eids, gathered, cg(static_cast<const wm::chunked_view*>(col_ptr)), total,
              ka, va);
        } else {
          using cg = wm::PtrGen<const std::int32_t, const std::int32_t>;
          gpu::hop_keys_kernel<<<grid, kThreads, 0, stream>>>(
              dst, n_dst, eids, gathered, cg(static_cast<const std::int32_t*>(col_ptr)), total, ka,
              va);
        }
      } else {
        if (chunked) {
          using cg = wm::PtrGen<const wm::chunked_view, const std::int64_t>;
          gpu::hop_keys_kernel<<<grid, kThreads, 0, stream>>>(
              dst, n_dst, eids, gathered, cg(static_cast<const wm::chunked_view*>(col_ptr)), total,
              ka, va);
        } else {
          using cg = wm::PtrGen<const std::int64_t, const std::int64_t>;
          gpu::hop_keys_kernel<<<grid, kThreads, 0, stream>>>(
              dst, n_dst, eids, gathered, cg(static_cast<const std::int64_t*>(col_ptr)), total, ka,
              va);
        }
      }
      WM_CUDA_CHECK_LAUNCH();
    }
    relabel<K>(n_dst, total, src_index, src_nodes, stream);  // info[1]: the src count

    device_block b;
    b.num_dst = n_dst;
    b.num_src = -1;  // known at the next sync
    b.num_edges = n_edges;
    b.src_nodes = src_nodes;
    b.offsets = offsets;
    b.src_index = src_index;
    b.edge_ids = options.edge_ids ? eids : nullptr;
    blocks.push_back(b);
    dst = src_nodes;
    bound = total;
  }
  if (num_hops > 0) {
    fetch_info(2, stream);
    blocks.back().num_src = host_info[1];
  }
  return blocks;
}

gpu_sampler::gpu_sampler(const csr_graph& graph) : impl_(std::make_unique<impl>()) {
  impl& s = *impl_;
  s.graph = &graph;
  WM_CUDA_TRY(cudaGetDevice(&s.device));
  WM_EXPECTS(graph.row_offsets && graph.col_indices, "gpu_sampler: the graph has no arrays");
  WM_EXPECTS(graph.num_nodes > 0 || graph.num_edges == 0, "gpu_sampler: edges without nodes");
  WM_EXPECTS(
      graph.col_type == wm::dtype::int32 || graph.col_type == wm::dtype::int64,
      "gpu_sampler: col_indices must be int32 or int64, not " << wm::dtype_name(graph.col_type));
  const wm::memory_type type = graph.type();
  s.distributed = type == wm::memory_type::distributed;
  s.chunked = type == wm::memory_type::chunked;
  if (s.distributed) {
    WM_EXPECTS(graph.row_offsets.comm().get_backend() == wm::backend::nccl,
               "gpu_sampler: distributed memory needs an NCCL communicator");
  } else if (s.chunked) {
    s.ro_ptr = graph.row_offsets.device_view(s.device);
    s.col_ptr = graph.col_indices.device_view(s.device);
    if (graph.has_weights()) s.w_ptr = graph.edge_weights.device_view(s.device);
  } else {
    s.ro_ptr = graph.row_offsets.data();
    s.col_ptr = graph.col_indices.data();
    if (graph.has_weights()) s.w_ptr = graph.edge_weights.data();
  }
  s.bits = graph.num_nodes > 0 ? key_bits(graph.num_nodes) : 1;
  s.wide_keys = graph.num_nodes > (std::uint64_t{1} << 32);
  void* host = nullptr;
  WM_CUDA_TRY(cudaHostAlloc(&host, 64, cudaHostAllocDefault));
  s.host_info = static_cast<long long*>(host);
}

gpu_sampler::~gpu_sampler() = default;

std::vector<device_block> gpu_sampler::sample(const std::int64_t* seeds, std::size_t count,
                                              const sample_options& options, cudaStream_t stream) {
  impl& s = *impl_;
  for (std::size_t h = 0; h < options.fanouts.size(); ++h) {
    WM_EXPECTS(options.fanouts[h] >= -1,
               "sample: fanout " << options.fanouts[h] << " of hop " << h << " is below -1");
  }
  if (options.method == sample_method::weighted) {
    WM_EXPECTS(s.graph->has_weights(), "sample: weighted sampling needs edge weights");
  }
  WM_EXPECTS(count == 0 || seeds != nullptr, "sample: null seeds with " << count << " seeds");
  wm::detail::device_guard guard(s.device);
  if (s.wide_keys) return s.run<std::uint64_t>(seeds, count, options, stream);
  return s.run<std::uint32_t>(seeds, count, options, stream);
}

}  // namespace wholestore::graph
