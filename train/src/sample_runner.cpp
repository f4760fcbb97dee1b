// The sampling epoch runner (include/train/sample_runner.hpp): seeds per rank and batch, the
// CPU and GPU batch paths, and the figures all ranks share at the end.
#include <train/sample_runner.hpp>

#include <graph/random.hpp>
#include <wholememory/cuda_stream.hpp>
#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#if defined(WHOLESTORE_HAS_CUDA)
#include <cuda_runtime_api.h>
#endif

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace wholestore::train {

namespace {

namespace wm = wholememory;
using graph::mix64;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

double peak_rss_mib() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;  // KiB on Linux
}

double gpu_used_mib() {
#if defined(WHOLESTORE_HAS_CUDA)
  std::size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) return (total_b - free_b) / 1048576.0;
#endif
  return 0.0;
}

void check_options(const sample_run_options& o, const graph::csr_graph& g) {
  WM_EXPECTS(o.batch_size >= 1, "sample run: batch_size must be >= 1, got 0");
  WM_EXPECTS(o.epochs >= 1, "sample run: epochs must be >= 1, got 0");
  WM_EXPECTS(o.order == seed_order::random_batches || o.warmup_batches == 0,
             "sample run: warmup_batches (" + std::to_string(o.warmup_batches) +
                 ") needs seed_order::random_batches");
  WM_EXPECTS(o.order == seed_order::shuffled_epochs || o.batches >= 1,
             "sample run: random_batches needs batches >= 1, got 0");
  WM_EXPECTS(o.order == seed_order::shuffled_epochs || g.num_nodes > 0,
             "sample run: random_batches needs a graph with nodes");
  WM_EXPECTS(o.method != graph::sample_method::weighted || g.has_weights(),
             "sample run: method weighted needs edge weights, and the graph has none");
#if !defined(WHOLESTORE_HAS_CUDA)
  WM_EXPECTS(!o.use_gpu, "sample run: the GPU sampler needs a build with CUDA");
#endif
}

}  // namespace

seed_split split_seeds(std::uint64_t num_seeds, int rank, int ranks, std::uint64_t batch_size,
                       std::uint64_t max_batches) {
  WM_EXPECTS(
      ranks >= 1 && rank >= 0 && rank < ranks,
      "split_seeds: rank " + std::to_string(rank) + " outside [0, " + std::to_string(ranks) + ")");
  WM_EXPECTS(batch_size >= 1, "split_seeds: batch_size must be >= 1, got 0");
  seed_split s;
  s.first = num_seeds * static_cast<std::uint64_t>(rank) / static_cast<std::uint64_t>(ranks);
  s.last = num_seeds * static_cast<std::uint64_t>(rank + 1) / static_cast<std::uint64_t>(ranks);
  s.local_batches = (s.last - s.first + batch_size - 1) / batch_size;
  if (max_batches > 0) s.local_batches = std::min(s.local_batches, max_batches);
  return s;
}

std::vector<std::int64_t> shuffled_seeds(std::uint64_t num_nodes, std::uint64_t seed,
                                         std::uint64_t epoch) {
  std::vector<std::int64_t> ids(num_nodes);
  for (std::uint64_t i = 0; i < num_nodes; ++i) ids[i] = static_cast<std::int64_t>(i);
  const std::uint64_t key = mix64(seed ^ mix64(epoch + 0x5851F42D4C957F2Dull));
  for (std::uint64_t i = num_nodes; i > 1; --i) {
    const std::uint64_t j = mix64(key + i) % i;
    std::swap(ids[i - 1], ids[j]);
  }
  return ids;
}

// One batch at a time: sample the seeds' neighborhoods, gather the input nodes' features, add
// the counts and times to a rank's figures.  The CPU path on host buffers; the GPU path with
// its sampler, stream and device buffers, kept across batches and runs.
struct sample_runner::impl {
  std::shared_ptr<wm::bootstrap> bs;
  graph::csr_graph& g;
  std::vector<unsigned char> host_out;
#if defined(WHOLESTORE_HAS_CUDA)
  std::unique_ptr<graph::gpu_sampler> gs;
  wm::cuda_stream stream = nullptr;
  wm::device_buffer d_seeds, d_out;
  std::size_t d_seeds_bytes = 0, d_out_bytes = 0;
#endif

  impl(std::shared_ptr<wm::bootstrap> b, graph::csr_graph& graph) : bs(std::move(b)), g(graph) {}
  impl(const impl&) = delete;
  impl& operator=(const impl&) = delete;
  ~impl() {
#if defined(WHOLESTORE_HAS_CUDA)
    gs.reset();  // before its stream
#endif
  }

  std::size_t row_bytes(const sample_run_options& o) const {
    return o.gather_features && g.has_features() ? g.feature_dim * wm::dtype_size(g.feature_type)
                                                 : 0;
  }

  // Makes the GPU sampler, its stream and a seed buffer of batch_size on first use.
  void prepare_gpu(const sample_run_options& o) {
#if defined(WHOLESTORE_HAS_CUDA)
    if (!gs) {
      gs = std::make_unique<graph::gpu_sampler>(g);
      // Blocking: the seeds go up through the legacy default stream (copy_bytes).
      stream = wm::cuda_stream(wm::stream_flags::blocking);
    }
    const std::size_t bytes = o.batch_size * sizeof(std::int64_t);
    if (bytes > d_seeds_bytes) {
      d_seeds.reset();
      d_seeds = wm::device_buffer(bytes, wm::current_device());
      d_seeds_bytes = bytes;
    }
#else
    (void)o;
#endif
  }

  // One batch; returns the rows gathered (the batch's input nodes).
  std::size_t run_batch(const std::int64_t* seeds, std::size_t count,
                        const graph::sample_options& so, const sample_run_options& o,
                        sample_figures& mine) {
    return o.use_gpu ? run_gpu(seeds, count, so, o, mine) : run_cpu(seeds, count, so, o, mine);
  }

  std::size_t run_cpu(const std::int64_t* seeds, std::size_t count, const graph::sample_options& so,
                      const sample_run_options& o, sample_figures& mine) {
    const unsigned threads = o.threads ? o.threads : wm::default_host_threads();
    auto t0 = std::chrono::steady_clock::now();
    graph::sample_result r = graph::sample_host(g, seeds, count, so, threads);
    for (const auto& blk : r.blocks)
      mine.sampled_edges += static_cast<std::uint64_t>(blk.num_edges());
    const double s = seconds_since(t0);
    mine.sample_s += s;
    mine.sampler_s += s;
    const std::size_t rb = row_bytes(o);
    if (rb == 0) return 0;
    const std::vector<std::int64_t> empty;
    const std::vector<std::int64_t>& input = r.blocks.empty() ? empty : r.input_nodes();
    const std::size_t rows = input.size();
    if (host_out.size() < rows * rb) host_out.resize(rows * rb);
    t0 = std::chrono::steady_clock::now();
    wm::index_array idx{input.data(), wm::dtype::int64, rows};
    wm::dense_matrix out{host_out.data(), g.feature_type, rows, g.feature_dim, g.feature_dim};
    wm::gather_host(g.features_tensor(), idx, out, threads);
    mine.gather_s += seconds_since(t0);
    return rows;
  }

  std::size_t run_gpu(const std::int64_t* seeds, std::size_t count, const graph::sample_options& so,
                      const sample_run_options& o, sample_figures& mine) {
#if defined(WHOLESTORE_HAS_CUDA)
    auto t0 = std::chrono::steady_clock::now();
    if (count) wm::copy_bytes(d_seeds.data(), seeds, count * sizeof(std::int64_t));
    const auto s0 = std::chrono::steady_clock::now();
    std::vector<graph::device_block> blocks =
        gs->sample(d_seeds.data_as<const std::int64_t>(), count, so, stream);
    if (cudaStreamSynchronize(stream) != cudaSuccess)
      WM_FAIL(wm::cuda_error, "sampling stream failed");
    for (const auto& blk : blocks) mine.sampled_edges += static_cast<std::uint64_t>(blk.num_edges);
    mine.sample_s += seconds_since(t0);
    mine.sampler_s += seconds_since(s0);
    const std::size_t rb = row_bytes(o);
    if (rb == 0) return 0;
    const std::size_t rows = blocks.empty() ? 0 : static_cast<std::size_t>(blocks.back().num_src);
    if (rows * rb > d_out_bytes) {
      d_out.reset();
      d_out_bytes = std::max(rows * rb, d_out_bytes * 2);
      d_out = wm::device_buffer(d_out_bytes, wm::current_device());
    }
    t0 = std::chrono::steady_clock::now();
    wm::index_array idx{blocks.empty() ? nullptr : blocks.back().src_nodes, wm::dtype::int64, rows};
    wm::dense_matrix out{d_out.data(), g.feature_type, rows, g.feature_dim, g.feature_dim};
    wm::gather(g.features_tensor(), idx, out, stream);
    if (cudaStreamSynchronize(stream) != cudaSuccess)
      WM_FAIL(wm::cuda_error, "gather stream failed");
    mine.gather_s += seconds_since(t0);
    return rows;
#else
    (void)seeds;
    (void)count;
    (void)so;
    (void)o;
    (void)mine;
    WM_FAIL(wm::logic_error, "the GPU sampler needs a build with CUDA");
#endif
  }

  // Adds one call's counts (count 0: a padding call, not a batch).
  static void count_batch(std::size_t count, std::size_t rows, std::size_t rb,
                          sample_figures& mine) {
    if (count) {
      ++mine.batches;
      mine.seeds += count;
    }
    mine.gathered_rows += rows;
    mine.gathered_bytes += rows * rb;
  }

  // Every epoch of shuffled seeds: this rank's chunk, padded with empty calls when collective.
  void shuffled_epochs(const sample_run_options& o, graph::sample_options& so,
                       const sample_progress& progress, sample_run_result& res) {
    const seed_split& p = res.split;
    const std::uint64_t total_calls = res.calls_per_epoch * o.epochs;
    const std::size_t rb = row_bytes(o);
    for (std::uint64_t epoch = 0; epoch < o.epochs; ++epoch) {
      const std::vector<std::int64_t> order = shuffled_seeds(g.num_nodes, o.random_seed, epoch);
      // The sampler's randomness differs per epoch only: a node's sample in an epoch is then the
      // same whichever rank or batch takes it, for any rank count and batch size.
      so.random_seed = mix64(o.random_seed ^ mix64(epoch));
      for (std::uint64_t b = 0; b < res.calls_per_epoch; ++b) {
        const std::uint64_t begin = std::min(p.last, p.first + b * o.batch_size);
        const std::uint64_t end =
            b < p.local_batches ? std::min(p.last, begin + o.batch_size) : begin;  // padding
        const std::size_t count = static_cast<std::size_t>(end - begin);
        const std::size_t rows = run_batch(order.data() + begin, count, so, o, res.rank);
        count_batch(count, rows, rb, res.rank);
        if (progress) progress(epoch * res.calls_per_epoch + b + 1, total_calls);
      }
    }
  }

  // Random batch b of this rank (warm-up batches included in b), counted in `figures`.
  void random_batch(std::uint64_t b, const sample_run_options& o, graph::sample_options& so,
                    std::vector<std::int64_t>& seeds, sample_figures& figures) {
    const std::uint64_t batch_id =
        b * static_cast<std::uint64_t>(bs->size()) + static_cast<std::uint64_t>(bs->rank());
    for (std::size_t i = 0; i < seeds.size(); ++i)
      seeds[i] = static_cast<std::int64_t>(
          mix64(o.random_seed ^ mix64(batch_id * o.batch_size + i)) % g.num_nodes);
    so.random_seed = mix64(o.random_seed + batch_id);
    const std::size_t rows = run_batch(seeds.data(), seeds.size(), so, o, figures);
    count_batch(seeds.size(), rows, row_bytes(o), figures);
  }

  sample_run_result run(const sample_run_options& o, const sample_progress& progress) {
    check_options(o, g);
    if (o.use_gpu) prepare_gpu(o);
    sample_run_result res;
    const int ranks = bs->size();
    std::vector<std::int64_t> seeds;
    graph::sample_options so;
    so.fanouts = o.fanouts;
    so.method = o.method;
    so.edge_ids = o.edge_ids;
    if (o.order == seed_order::shuffled_epochs) {
      res.split = split_seeds(g.num_nodes, bs->rank(), ranks, o.batch_size, o.batches);
      std::vector<std::uint64_t> all(static_cast<std::size_t>(ranks));
      bs->allgather(&res.split.local_batches, all.data(), sizeof(std::uint64_t));
      // Distributed memory makes sampling and gathering collective: every rank calls equally
      // often.
      const bool collective =
          g.type() == wm::memory_type::distributed ||
          (row_bytes(o) > 0 && g.node_features.type() == wm::memory_type::distributed);
      res.calls_per_epoch =
          collective ? *std::max_element(all.begin(), all.end()) : res.split.local_batches;
    } else {
      res.calls_per_epoch = o.batches;
      seeds.resize(o.batch_size);
      sample_figures untimed;
      for (std::uint64_t b = 0; b < o.warmup_batches; ++b) random_batch(b, o, so, seeds, untimed);
    }
    bs->barrier();
    const auto loop_t0 = std::chrono::steady_clock::now();
    if (o.order == seed_order::shuffled_epochs) {
      shuffled_epochs(o, so, progress, res);
    } else {
      const std::uint64_t total = o.epochs * o.batches;
      for (std::uint64_t c = 0; c < total; ++c) {
        random_batch(o.warmup_batches + c, o, so, seeds, res.rank);
        if (progress) progress(c + 1, total);
      }
    }
    res.rank.loop_s = seconds_since(loop_t0);
    res.rank.rss_mib = peak_rss_mib();
    res.rank.gpu_mib = o.use_gpu ? gpu_used_mib() : 0.0;

    std::vector<sample_figures> all(static_cast<std::size_t>(ranks));
    bs->allgather(&res.rank, all.data(), sizeof(sample_figures));
    sample_figures& t = res.total;
    for (const auto& f : all) {
      t.sample_s = std::max(t.sample_s, f.sample_s);
      t.sampler_s = std::max(t.sampler_s, f.sampler_s);
      t.gather_s = std::max(t.gather_s, f.gather_s);
      t.loop_s = std::max(t.loop_s, f.loop_s);
      t.batches += f.batches;
      t.seeds += f.seeds;
      t.sampled_edges += f.sampled_edges;
      t.gathered_rows += f.gathered_rows;
      t.gathered_bytes += f.gathered_bytes;
      t.rss_mib = std::max(t.rss_mib, f.rss_mib);
      t.gpu_mib = std::max(t.gpu_mib, f.gpu_mib);
      res.rss_sum_mib += f.rss_mib;
    }
    return res;
  }
};

sample_runner::sample_runner(std::shared_ptr<wm::bootstrap> bs, graph::csr_graph& graph)
    : impl_(std::make_unique<impl>(std::move(bs), graph)) {
  WM_EXPECTS(impl_->bs != nullptr, "sample_runner: no bootstrap");
}

sample_runner::~sample_runner() = default;
sample_runner::sample_runner(sample_runner&&) noexcept = default;
sample_runner& sample_runner::operator=(sample_runner&&) noexcept = default;

sample_run_result sample_runner::run(const sample_run_options& options,
                                     const sample_progress& progress) {
  return impl_->run(options, progress);
}

bool sample_runner::served_by_owners() const {
#if defined(WHOLESTORE_HAS_CUDA)
  return impl_->gs && impl_->gs->served_by_owners();
#else
  return false;
#endif
}

std::uint64_t sample_runner::padded_hops() const {
#if defined(WHOLESTORE_HAS_CUDA)
  return impl_->gs ? impl_->gs->padded_hops() : 0;
#else
  return 0;
#endif
}

sample_run_result run_sampling(std::shared_ptr<wm::bootstrap> bs, graph::csr_graph& graph,
                               const sample_run_options& options, const sample_progress& progress) {
  sample_runner runner(std::move(bs), graph);
  return runner.run(options, progress);
}

}  // namespace wholestore::train
