/*
 * R-MAT and uniform random graphs on the host, multi-threaded, identical on any machine.
 *
 * Every random number is a pure function of (seed, stream, counter): a stream's key is
 * mix(mix(seed) ^ (kind << 32 | index)) and its counter-th value is mix(key ^ mix(counter)),
 * where mix is SplitMix64's output function applied to z + 0x9E3779B97F4A7C15 (so mix(0) is
 * SplitMix64's first value from state 0).  Only integer arithmetic decides edges, so no
 * platform's <random> or floating-point mode can change them.  The streams:
 *
 *   rmat,     index attempt:  counter e * 32 + k holds R-MAT levels 2k (high 32 bits) and
 *                             2k + 1 (low 32 bits) of edge e
 *   uniform,  index 0:        counter 2e: source of edge e, 2e + 1: destination
 *   weight,   index 0:        counter e: weight of edge e (its reverse, if any, shares it)
 *   feature,  index 0:        counter node * feature_dim + column
 *   scramble, index 0:        counters 0..7: the id permutation's round constants
 *
 * R-MAT draws in [0, 2^scale), scale = ceil(log2(num_nodes)), and when either endpoint is
 * >= num_nodes redraws the whole edge from the next attempt's stream (rejection keeps the
 * R-MAT distribution restricted to [0, num_nodes)^2).  After max_rmat_attempts rejections,
 * reachable only with extreme a, b, c, d, the last draw is taken modulo num_nodes.
 */
#include <graph/generate.hpp>

#include <wholememory/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

namespace wholestore::graph {

namespace {

constexpr std::uint64_t max_nodes = std::uint64_t{1} << 40;
// Keeps e * 32 + k (the R-MAT counter) and 2e + 1 far from overflow.
constexpr std::uint64_t max_edges = std::uint64_t{1} << 48;
constexpr int max_rmat_attempts = 64;

std::uint64_t mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

enum class stream_kind : std::uint64_t {
  rmat = 1,
  uniform = 2,
  weight = 3,
  feature = 4,
  scramble = 5,
  sbm_edge = 6,
  sbm_noise = 7,
  sbm_mean = 8,
  sbm_split = 9
};

// One independent sequence of random 64-bit values, addressed by counter.
class random_stream {
 public:
  random_stream(std::uint64_t seed, stream_kind kind, std::uint32_t index = 0)
      : key_(mix(mix(seed) ^ (static_cast<std::uint64_t>(kind) << 32 | index))) {}
  std::uint64_t operator()(std::uint64_t counter) const { return mix(key_ ^ mix(counter)); }

 private:
  std::uint64_t key_;
};

// Maps 64 random bits to [0, n) by the high half of the 128-bit product (bias <= n / 2^64).
std::uint64_t bounded(std::uint64_t r, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(r) * n) >> 64);
}

// Smallest s with 2^s >= n (0 for n <= 1).
std::uint32_t ceil_log2(std::uint64_t n) {
  std::uint32_t s = 0;
  while (s < 64 && (std::uint64_t{1} << s) < n) ++s;
  return s;
}

// Runs f(chunk, begin, end) over `chunks` contiguous ranges of [0, n), one thread each.  The
// split depends only on (chunks, n), which the CSR build relies on to pair its passes.
template <typename F>
void parallel_ranges(int chunks, std::uint64_t n, F&& f) {
  auto bound = [&](int t) {
    std::uint64_t q = n / chunks, r = n % chunks;
    return q * t + std::min<std::uint64_t>(t, r);
  };
  std::vector<std::thread> workers;
  workers.reserve(chunks - 1);
  for (int t = 1; t < chunks; ++t) workers.emplace_back([&, t] { f(t, bound(t), bound(t + 1)); });
  f(0, bound(0), bound(1));
  for (auto& w : workers) w.join();
}

// parallel_ranges with progress: f(chunk, begin, end) over pieces of each chunk's range, and
// chunk 0 (the calling thread, whose share is as large as any) reports the share it has done
// after each piece.  Pieces split ranges only: every element is visited once, by its chunk.
template <typename F>
void parallel_ranges_reporting(int chunks, std::uint64_t n, const generate_options& o,
                               const char* phase, F&& f) {
  constexpr std::uint64_t piece = std::uint64_t{1} << 20;
  parallel_ranges(chunks, n, [&](int t, std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t b = begin; b < end; b += piece) {
      const std::uint64_t e = std::min(end, b + piece);
      f(t, b, e);
      if (t == 0 && o.progress)
        o.progress(phase, static_cast<double>(e - begin) / static_cast<double>(end - begin));
    }
  });
  if (o.progress) o.progress(phase, 1.0);
}

// Draws R-MAT edges: each level picks a quadrant with probabilities a, b, c, d from 32
// random bits compared with integer thresholds.
class rmat_sampler {
 public:
  rmat_sampler(const generate_options& o) : n_(o.num_nodes), scale_(ceil_log2(o.num_nodes)) {
    auto threshold = [](double p) {
      return std::min<std::uint64_t>(static_cast<std::uint64_t>(std::floor(std::ldexp(p, 32))),
                                     std::uint64_t{1} << 32);
    };
    t_a_ = threshold(o.a);
    t_ab_ = threshold(o.a + o.b);
    t_abc_ = threshold(o.a + o.b + o.c);
    for (int k = 0; k < max_rmat_attempts; ++k) {
      attempts_.emplace_back(o.seed, stream_kind::rmat, static_cast<std::uint32_t>(k));
    }
  }

  void edge(std::uint64_t e, std::uint64_t& u, std::uint64_t& v) const {
    for (const random_stream& s : attempts_) {
      draw(s, e, u, v);
      if (u < n_ && v < n_) return;
    }
    u %= n_;
    v %= n_;
  }

 private:
  void draw(const random_stream& s, std::uint64_t e, std::uint64_t& u, std::uint64_t& v) const {
    u = v = 0;
    for (std::uint32_t level = 0; level < scale_; level += 2) {
      std::uint64_t r = s(e * 32 + level / 2);
      quadrant(r >> 32, u, v);
      if (level + 1 < scale_) quadrant(r & 0xFFFFFFFFull, u, v);
    }
  }
  void quadrant(std::uint64_t q, std::uint64_t& u, std::uint64_t& v) const {
    u = u << 1 | (q >= t_ab_);
    v = v << 1 | ((q >= t_a_ && q < t_ab_) || q >= t_abc_);
  }

  std::uint64_t n_;
  std::uint32_t scale_;
  std::uint64_t t_a_, t_ab_, t_abc_;
  std::vector<random_stream> attempts_;
};

// A bijection of [0, n) from the seed: four rounds of (multiply by an odd number, add, fold
// the high half into the low half), each a bijection of [0, 2^scale), then cycle-walking
// until the value falls below n (a walk stays inside the cycle of its start, so the result
// is a bijection of [0, n); n > 2^(scale-1) makes the expected walk shorter than 2 steps).
class id_scrambler {
 public:
  id_scrambler(std::uint64_t seed, std::uint64_t n)
      : n_(n), scale_(ceil_log2(n)), mask_((std::uint64_t{1} << scale_) - 1) {
    random_stream s(seed, stream_kind::scramble);
    for (int r = 0; r < rounds; ++r) {
      mul_[r] = s(2 * r) | 1;
      add_[r] = s(2 * r + 1);
    }
  }

  std::uint64_t operator()(std::uint64_t x) const {
    do {
      x = step(x);
    } while (x >= n_);
    return x;
  }

 private:
  static constexpr int rounds = 4;
  std::uint64_t step(std::uint64_t x) const {
    const std::uint32_t shift = (scale_ + 1) / 2;
    for (int r = 0; r < rounds; ++r) {
      x = (x * mul_[r] + add_[r]) & mask_;
      if (shift > 0) x ^= x >> shift;
    }
    return x;
  }

  std::uint64_t n_;
  std::uint32_t scale_;
  std::uint64_t mask_;
  std::uint64_t mul_[rounds], add_[rounds];
};

// (0, 1]: 24 random bits plus one, times 2^-24, exact in float32.
float unit_weight(std::uint64_t r) { return static_cast<float>((r >> 40) + 1) * 0x1p-24f; }

// [-1, 1): 24 random bits times 2^-23 minus 1, exact in float32.
float unit_feature(std::uint64_t r) { return static_cast<float>(r >> 40) * 0x1p-23f - 1.0f; }

void validate(const generate_options& o) {
  WM_EXPECTS(o.num_nodes < max_nodes,
             "num_nodes " << o.num_nodes << " must be < 2^40 (" << max_nodes << ")");
  WM_EXPECTS(o.num_edges < max_edges,
             "num_edges " << o.num_edges << " must be < 2^48 (" << max_edges << ")");
  WM_EXPECTS(o.num_edges == 0 || o.num_nodes >= 1,
             "num_edges " << o.num_edges << " needs num_nodes >= 1, got " << o.num_nodes);
  WM_EXPECTS(o.threads >= 0, "threads " << o.threads << " must be >= 0 (0: all cores)");
  WM_EXPECTS(
      o.feature_dim == 0 || o.num_nodes <= (std::uint64_t{1} << 62) / o.feature_dim,
      "num_nodes " << o.num_nodes << " x feature_dim " << o.feature_dim << " features is too many");
  if (o.rmat) {
    const double sum = o.a + o.b + o.c + o.d;
    // Written so that NaN fails too.
    const bool ok = o.a >= 0 && o.b >= 0 && o.c >= 0 && o.d >= 0 && std::fabs(sum - 1) <= 1e-9;
    if (!ok) {
      WM_FAIL(wholememory::logic_error, "R-MAT probabilities a=" << o.a << " b=" << o.b
                                                                 << " c=" << o.c << " d=" << o.d
                                                                 << " must each be >= 0 and sum "
                                                                    "to 1 (within 1e-9); sum is "
                                                                 << sum);
    }
  }
}

// The CSR of drawn edges (src[e], dst[e]) by a counting sort on the source, with o's
// symmetrize, drop_self_loops and with_weights; no features.  Frees src and dst.
host_csr csr_from_edges(std::vector<std::int64_t>& src, std::vector<std::int64_t>& dst,
                        const generate_options& o, int threads) {
  const std::uint64_t n = o.num_nodes, m = src.size();
  // CSR by a counting sort on the source.  Chunk t of the edges counts into its own histogram,
  // which then turns into chunk t's write positions, so each row lists its edges in edge order
  // (a reverse edge right where its edge is) whatever the number of chunks.  Histograms cost
  // chunks x num_nodes x 8 bytes; fewer chunks keep that under 1 GiB on huge node counts.
  const bool keep_loops = !o.drop_self_loops, sym = o.symmetrize;
  const int chunks = static_cast<int>(std::max<std::uint64_t>(
      1, std::min<std::uint64_t>(threads, (std::uint64_t{1} << 30) / (8 * (n + 1)))));
  // Allocated here, not in the workers, so that bad_alloc reaches the caller (an exception
  // leaving a std::thread terminates the process).
  std::vector<std::vector<std::int64_t>> next(chunks, std::vector<std::int64_t>(n, 0));
  parallel_ranges_reporting(chunks, m, o, "count",
                            [&](int t, std::uint64_t begin, std::uint64_t end) {
                              std::vector<std::int64_t>& count = next[t];
                              for (std::uint64_t e = begin; e < end; ++e) {
                                if (src[e] == dst[e]) {
                                  count[src[e]] += keep_loops;
                                } else {
                                  ++count[src[e]];
                                  if (sym) ++count[dst[e]];
                                }
                              }
                            });

  host_csr g;
  g.num_nodes = n;
  g.directed = !sym;
  g.row_offsets.assign(n + 1, 0);
  // Degrees and per-block sums, then each block's prefix, then offsets and chunk positions.
  std::vector<std::int64_t> block_sum(threads + 1, 0);
  parallel_ranges(threads, n, [&](int b, std::uint64_t begin, std::uint64_t end) {
    std::int64_t sum = 0;
    for (std::uint64_t v = begin; v < end; ++v) {
      std::int64_t degree = 0;
      for (const auto& count : next) degree += count[v];
      g.row_offsets[v + 1] = degree;
      sum += degree;
    }
    block_sum[b + 1] = sum;
  });
  for (int b = 0; b < threads; ++b) block_sum[b + 1] += block_sum[b];
  parallel_ranges(threads, n, [&](int b, std::uint64_t begin, std::uint64_t end) {
    std::int64_t offset = block_sum[b];
    for (std::uint64_t v = begin; v < end; ++v) {
      std::int64_t pos = offset;
      for (auto& count : next) {
        std::int64_t c = count[v];
        count[v] = pos;
        pos += c;
      }
      offset += g.row_offsets[v + 1];
      g.row_offsets[v + 1] = offset;
    }
  });

  const std::uint64_t total = static_cast<std::uint64_t>(block_sum[threads]);
  g.col_indices.resize(total);
  if (o.with_weights) g.edge_weights.resize(total);
  const random_stream weight_stream(o.seed, stream_kind::weight);
  parallel_ranges_reporting(
      chunks, m, o, "fill", [&](int t, std::uint64_t begin, std::uint64_t end) {
        std::vector<std::int64_t>& pos = next[t];
        for (std::uint64_t e = begin; e < end; ++e) {
          const std::int64_t u = src[e], v = dst[e];
          const bool loop = u == v;
          if (loop && !keep_loops) continue;
          const float w = o.with_weights ? unit_weight(weight_stream(e)) : 0.0f;
          std::int64_t p = pos[u]++;
          g.col_indices[p] = v;
          if (o.with_weights) g.edge_weights[p] = w;
          if (sym && !loop) {
            p = pos[v]++;
            g.col_indices[p] = u;
            if (o.with_weights) g.edge_weights[p] = w;
          }
        }
      });
  next.clear();
  src = {};
  dst = {};

  return g;
}

}  // namespace

host_csr generate_graph(const generate_options& o) {
  validate(o);
  const std::uint64_t n = o.num_nodes, m = o.num_edges;
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  // Endpoints of every drawn edge, edge e at index e.
  std::vector<std::int64_t> src(m), dst(m);
  if (o.rmat) {
    const rmat_sampler sampler(o);
    const id_scrambler scramble(o.seed, n);
    parallel_ranges_reporting(threads, m, o, "draw",
                              [&](int, std::uint64_t begin, std::uint64_t end) {
                                for (std::uint64_t e = begin; e < end; ++e) {
                                  std::uint64_t u = 0, v = 0;
                                  sampler.edge(e, u, v);
                                  if (o.scramble_ids) {
                                    u = scramble(u);
                                    v = scramble(v);
                                  }
                                  src[e] = static_cast<std::int64_t>(u);
                                  dst[e] = static_cast<std::int64_t>(v);
                                }
                              });
  } else {
    const random_stream stream(o.seed, stream_kind::uniform);
    parallel_ranges_reporting(threads, m, o, "draw",
                              [&](int, std::uint64_t begin, std::uint64_t end) {
                                for (std::uint64_t e = begin; e < end; ++e) {
                                  src[e] = static_cast<std::int64_t>(bounded(stream(2 * e), n));
                                  dst[e] = static_cast<std::int64_t>(bounded(stream(2 * e + 1), n));
                                }
                              });
  }

  host_csr g = csr_from_edges(src, dst, o, threads);
  if (o.feature_dim > 0) {
    const std::uint64_t dim = o.feature_dim;
    g.feature_dim = dim;
    g.node_features.resize(n * dim);
    const random_stream stream(o.seed, stream_kind::feature);
    parallel_ranges_reporting(threads, n * dim, o, "features",
                              [&](int, std::uint64_t begin, std::uint64_t end) {
                                for (std::uint64_t i = begin; i < end; ++i)
                                  g.node_features[i] = unit_feature(stream(i));
                              });
  }
  return g;
}

namespace {

// Uniform in (0, 1): 53 random bits, never 0.
double open_unit(std::uint64_t r) { return (static_cast<double>(r >> 11) + 0.5) * 0x1p-53; }

void validate(const sbm_options& o) {
  WM_EXPECTS(o.num_nodes >= 1 && o.num_nodes < max_nodes,
             "sbm: num_nodes " << o.num_nodes << " must be in [1, 2^40)");
  WM_EXPECTS(o.classes >= 2 && o.classes <= o.num_nodes,
             "sbm: classes " << o.classes << " must be in [2, num_nodes = " << o.num_nodes << "]");
  WM_EXPECTS(o.homophily >= 0 && o.homophily <= 1,
             "sbm: homophily " << o.homophily << " must be in [0, 1]");
  WM_EXPECTS(std::isfinite(o.snr) && o.snr >= 0, "sbm: snr " << o.snr << " must be >= 0");
  WM_EXPECTS(std::isfinite(o.avg_degree) && o.avg_degree >= 0 &&
                 o.avg_degree * static_cast<double>(o.num_nodes) < static_cast<double>(max_edges),
             "sbm: avg_degree " << o.avg_degree
                                << " must be >= 0 and num_nodes x avg_degree "
                                   "under 2^48 edges");
  WM_EXPECTS(o.train_fraction >= 0 && o.train_fraction <= 1 && o.val_fraction >= 0 &&
                 o.val_fraction <= 1 && o.train_fraction + o.val_fraction <= 1 + 1e-12,
             "sbm: train_fraction " << o.train_fraction << " and val_fraction " << o.val_fraction
                                    << " must each be in [0, 1] and sum to at most 1");
  WM_EXPECTS(o.threads >= 0, "sbm: threads " << o.threads << " must be >= 0 (0: all cores)");
  WM_EXPECTS(o.feature_dim == 0 || o.num_nodes <= (std::uint64_t{1} << 62) / o.feature_dim,
             "sbm: num_nodes " << o.num_nodes << " x feature_dim " << o.feature_dim
                               << " features is too many");
}

// Nodes of class c among [0, n): c, c + classes, ...
std::uint64_t class_size(std::uint64_t n, std::uint64_t classes, std::uint64_t c) {
  return (n - c + classes - 1) / classes;
}

}  // namespace

host_csr generate_sbm(const sbm_options& o) {
  validate(o);
  const std::uint64_t n = o.num_nodes, k = o.classes;
  const auto m = static_cast<std::uint64_t>(std::llround(o.avg_degree * static_cast<double>(n)));
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::vector<std::int64_t> src(m), dst(m);
  const random_stream edges(o.seed, stream_kind::sbm_edge);
  parallel_ranges(threads, m, [&](int, std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t e = begin; e < end; ++e) {
      const std::uint64_t u = bounded(edges(4 * e), n);
      const std::uint64_t cu = u % k;
      std::uint64_t c = cu;
      if (open_unit(edges(4 * e + 1)) >= o.homophily)
        c = (cu + 1 + bounded(edges(4 * e + 2), k - 1)) % k;
      const std::uint64_t v = c + k * bounded(edges(4 * e + 3), class_size(n, k, c));
      src[e] = static_cast<std::int64_t>(u);
      dst[e] = static_cast<std::int64_t>(v);
    }
  });
  generate_options go;
  go.num_nodes = n;
  go.num_edges = m;
  go.seed = o.seed;
  go.symmetrize = o.symmetrize;
  go.drop_self_loops = o.drop_self_loops;
  go.threads = threads;
  host_csr g = csr_from_edges(src, dst, go, threads);
  g.num_classes = o.classes;
  g.node_labels.resize(n);
  g.node_split.resize(n);
  const random_stream splits(o.seed, stream_kind::sbm_split);
  parallel_ranges(threads, n, [&](int, std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t v = begin; v < end; ++v) {
      g.node_labels[v] = static_cast<std::int32_t>(v % k);
      const double u = open_unit(splits(v));
      g.node_split[v] = u < o.train_fraction ? 0 : u < o.train_fraction + o.val_fraction ? 1 : 2;
    }
  });
  if (o.feature_dim > 0) {
    const std::uint64_t dim = o.feature_dim;
    g.feature_dim = dim;
    g.node_features.resize(n * dim);
    const random_stream means(o.seed, stream_kind::sbm_mean);
    const random_stream noise(o.seed, stream_kind::sbm_noise);
    const auto snr = static_cast<float>(o.snr);
    parallel_ranges(threads, n, [&](int, std::uint64_t begin, std::uint64_t end) {
      for (std::uint64_t v = begin; v < end; ++v) {
        const std::uint64_t c = v % k;
        for (std::uint64_t j = 0; j < dim; ++j) {
          const float mean = (means(c * dim + j) >> 63) ? snr : -snr;
          // Box-Muller from two open uniforms of this (node, column).
          const std::uint64_t i = v * dim + j;
          const double r = std::sqrt(-2.0 * std::log(open_unit(noise(2 * i))));
          const double z = r * std::cos(6.283185307179586 * open_unit(noise(2 * i + 1)));
          g.node_features[i] = mean + static_cast<float>(z);
        }
      }
    });
  }
  return g;
}

}  // namespace wholestore::graph
