// generate_graph: determinism over seeds and thread counts, CSR validity, edge counts, the
// shape of R-MAT and uniform graphs, scrambling, value ranges, argument checks, and a golden
// check against an independent implementation of the random streams that pins them.
#include <graph/generate.hpp>

#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <thread>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace wholestore::graph {
namespace {

// ---- Reference implementation of the documented streams (graph/src/generate.cpp) ----

std::uint64_t ref_mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
std::uint64_t ref_key(std::uint64_t seed, std::uint64_t kind, std::uint64_t index) {
  return ref_mix(ref_mix(seed) ^ (kind << 32 | index));
}
std::uint64_t ref_value(std::uint64_t key, std::uint64_t counter) {
  return ref_mix(key ^ ref_mix(counter));
}
std::uint64_t ref_bounded(std::uint64_t r, std::uint64_t n) {
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(r) * n) >> 64);
}

using edge_list = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

edge_list ref_uniform(std::uint64_t seed, std::uint64_t n, std::uint64_t m) {
  const std::uint64_t key = ref_key(seed, 2, 0);
  edge_list edges;
  for (std::uint64_t e = 0; e < m; ++e) {
    edges.emplace_back(ref_bounded(ref_value(key, 2 * e), n),
                       ref_bounded(ref_value(key, 2 * e + 1), n));
  }
  return edges;
}

// One R-MAT draw in [0, 2^scale) from attempt `attempt`'s stream, one level at a time.
std::pair<std::uint64_t, std::uint64_t> ref_rmat_draw(std::uint64_t seed, std::uint64_t attempt,
                                                      std::uint64_t e, unsigned scale) {
  const double a = 0.57, b = 0.19, c = 0.19;
  const auto t_a = static_cast<std::uint64_t>(std::floor(a * 4294967296.0));
  const auto t_ab = static_cast<std::uint64_t>(std::floor((a + b) * 4294967296.0));
  const auto t_abc = static_cast<std::uint64_t>(std::floor((a + b + c) * 4294967296.0));
  const std::uint64_t key = ref_key(seed, 1, attempt);
  std::uint64_t u = 0, v = 0;
  for (unsigned level = 0; level < scale; ++level) {
    std::uint64_t r = ref_value(key, e * 32 + level / 2);
    std::uint64_t q = level % 2 == 0 ? r >> 32 : r & 0xFFFFFFFFull;
    bool src_bit = q >= t_ab;                             // quadrants c and d
    bool dst_bit = (q >= t_a && q < t_ab) || q >= t_abc;  // quadrants b and d
    u = 2 * u + src_bit;
    v = 2 * v + dst_bit;
  }
  return {u, v};
}

edge_list ref_rmat(std::uint64_t seed, std::uint64_t n, std::uint64_t m, unsigned scale) {
  edge_list edges;
  for (std::uint64_t e = 0; e < m; ++e) {
    for (std::uint64_t attempt = 0;; ++attempt) {
      auto [u, v] = ref_rmat_draw(seed, attempt, e, scale);
      if (u < n && v < n) {
        edges.emplace_back(u, v);
        break;
      }
    }
  }
  return edges;
}

// CSR of an edge list, rows in edge order (a stable sort by source).
host_csr ref_csr(std::uint64_t n, const edge_list& edges) {
  host_csr g;
  g.num_nodes = n;
  g.row_offsets.assign(n + 1, 0);
  for (auto& [u, v] : edges) ++g.row_offsets[u + 1];
  for (std::uint64_t i = 0; i < n; ++i) g.row_offsets[i + 1] += g.row_offsets[i];
  std::vector<std::int64_t> pos(g.row_offsets.begin(), g.row_offsets.end() - 1);
  g.col_indices.resize(edges.size());
  for (auto& [u, v] : edges) g.col_indices[pos[u]++] = static_cast<std::int64_t>(v);
  return g;
}

// ---- Helpers ----

void expect_valid_csr(const host_csr& g) {
  ASSERT_EQ(g.row_offsets.size(), g.num_nodes + 1);
  EXPECT_EQ(g.row_offsets.front(), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(g.row_offsets.back()), g.num_edges());
  for (std::uint64_t v = 0; v < g.num_nodes; ++v) {
    ASSERT_LE(g.row_offsets[v], g.row_offsets[v + 1]) << "row " << v;
  }
  for (std::int64_t c : g.col_indices) {
    ASSERT_GE(c, 0);
    ASSERT_LT(static_cast<std::uint64_t>(c), g.num_nodes);
  }
}

std::vector<std::int64_t> out_degrees(const host_csr& g) {
  std::vector<std::int64_t> d(g.num_nodes);
  for (std::uint64_t v = 0; v < g.num_nodes; ++v) d[v] = g.row_offsets[v + 1] - g.row_offsets[v];
  return d;
}

std::vector<std::int64_t> in_degrees(const host_csr& g) {
  std::vector<std::int64_t> d(g.num_nodes);
  for (std::int64_t c : g.col_indices) ++d[c];
  return d;
}

std::uint64_t self_loops(const host_csr& g) {
  std::uint64_t loops = 0;
  for (std::uint64_t v = 0; v < g.num_nodes; ++v) {
    for (auto i = g.row_offsets[v]; i < g.row_offsets[v + 1]; ++i) {
      loops += static_cast<std::uint64_t>(g.col_indices[i]) == v;
    }
  }
  return loops;
}

void expect_same_graph(const host_csr& x, const host_csr& y) {
  EXPECT_EQ(x.num_nodes, y.num_nodes);
  EXPECT_EQ(x.row_offsets, y.row_offsets);
  EXPECT_EQ(x.col_indices, y.col_indices);
  EXPECT_EQ(x.edge_weights, y.edge_weights);
  EXPECT_EQ(x.node_features, y.node_features);
  EXPECT_EQ(x.feature_dim, y.feature_dim);
  EXPECT_EQ(x.directed, y.directed);
}

generate_options rmat_options(std::uint64_t n, std::uint64_t m, std::uint64_t seed = 1) {
  generate_options o;
  o.num_nodes = n;
  o.num_edges = m;
  o.seed = seed;
  o.threads = 2;
  return o;
}

generate_options uniform_options(std::uint64_t n, std::uint64_t m, std::uint64_t seed = 1) {
  generate_options o = rmat_options(n, m, seed);
  o.rmat = false;
  return o;
}

// ---- Golden: the streams are pinned ----

TEST(GenerateGolden, ReferenceStreamsMatchPinnedValues) {
  // SplitMix64's first output from state 0, from its published reference implementation.
  EXPECT_EQ(ref_mix(0), 0xE220A8397B1DCDAFull);
  // Values from a third implementation (Python, exact integers) of the documented streams.
  const edge_list uniform = ref_uniform(42, 1000, 4);
  EXPECT_EQ(uniform, (edge_list{{491, 295}, {585, 336}, {543, 35}, {93, 841}}));
  const edge_list rmat = {ref_rmat_draw(7, 0, 0, 10), ref_rmat_draw(7, 0, 1, 10),
                          ref_rmat_draw(7, 0, 2, 10), ref_rmat_draw(7, 0, 3, 10)};
  EXPECT_EQ(rmat, (edge_list{{128, 68}, {609, 712}, {128, 220}, {336, 8}}));
}

TEST(GenerateGolden, UniformMatchesReference) {
  host_csr g = generate_graph(uniform_options(1000, 300, 42));
  host_csr want = ref_csr(1000, ref_uniform(42, 1000, 300));
  EXPECT_EQ(g.row_offsets, want.row_offsets);
  EXPECT_EQ(g.col_indices, want.col_indices);
}

TEST(GenerateGolden, RmatMatchesReferenceWithRejection) {
  // 1000 nodes draw in [0, 1024) and redraw edges with an endpoint >= 1000.
  generate_options o = rmat_options(1000, 300, 7);
  o.scramble_ids = false;
  host_csr g = generate_graph(o);
  host_csr want = ref_csr(1000, ref_rmat(7, 1000, 300, 10));
  EXPECT_EQ(g.row_offsets, want.row_offsets);
  EXPECT_EQ(g.col_indices, want.col_indices);
}

TEST(GenerateGolden, WeightsAndFeaturesMatchReference) {
  generate_options o = uniform_options(50, 40, 3);
  o.with_weights = true;
  o.feature_dim = 3;
  host_csr g = generate_graph(o);
  // Row order is edge order, so the k-th edge of the stable sort carries weight stream value e.
  const edge_list edges = ref_uniform(3, 50, 40);
  std::vector<std::uint64_t> order(edges.size());
  for (std::uint64_t e = 0; e < order.size(); ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(),
                   [&](auto x, auto y) { return edges[x].first < edges[y].first; });
  const std::uint64_t wkey = ref_key(3, 3, 0), fkey = ref_key(3, 4, 0);
  ASSERT_EQ(g.edge_weights.size(), edges.size());
  for (std::uint64_t k = 0; k < order.size(); ++k) {
    double want = static_cast<double>((ref_value(wkey, order[k]) >> 40) + 1) / 16777216.0;
    EXPECT_EQ(g.edge_weights[k], static_cast<float>(want)) << "edge slot " << k;
  }
  ASSERT_EQ(g.node_features.size(), 50u * 3);
  for (std::uint64_t i = 0; i < g.node_features.size(); ++i) {
    double want = static_cast<double>(ref_value(fkey, i) >> 40) / 8388608.0 - 1.0;
    EXPECT_EQ(g.node_features[i], static_cast<float>(want)) << "feature " << i;
  }
}

// ---- Determinism ----

TEST(GenerateDeterminism, SameOptionsAndAnyThreadCountGiveTheSameGraph) {
  for (bool rmat : {true, false}) {
    generate_options o = rmat ? rmat_options(3001, 20000, 9) : uniform_options(3001, 20000, 9);
    o.with_weights = true;
    o.feature_dim = 5;
    o.symmetrize = true;
    o.threads = 1;
    const host_csr base = generate_graph(o);
    expect_same_graph(base, generate_graph(o));
    for (int threads : {2, 3, 7, 16}) {
      o.threads = threads;
      SCOPED_TRACE("rmat " + std::to_string(rmat) + " threads " + std::to_string(threads));
      expect_same_graph(base, generate_graph(o));
    }
  }
}

// The progress callback sees every phase, in order, each ending at 1 and never going back,
// on the calling thread; and it does not change the graph.
TEST(GenerateProgress, PhasesInOrderMonotoneAndTheGraphUnchanged) {
  for (int threads : {1, 3}) {
    generate_options o = rmat_options(3001, 3'000'000, 9);
    o.feature_dim = 2;
    o.threads = threads;
    const host_csr base = generate_graph(o);
    std::vector<std::string> phases;
    double last = 0;
    bool monotone = true, in_range = true;
    const auto caller = std::this_thread::get_id();
    bool on_caller = true;
    o.progress = [&](const char* phase, double done) {
      on_caller = on_caller && std::this_thread::get_id() == caller;
      in_range = in_range && done >= 0.0 && done <= 1.0 + 1e-12;
      if (phases.empty() || phases.back() != phase) {
        phases.emplace_back(phase);
        last = 0;
      }
      monotone = monotone && done >= last;
      last = done;
    };
    expect_same_graph(base, generate_graph(o));
    EXPECT_EQ(phases, (std::vector<std::string>{"draw", "count", "fill", "features"}));
    EXPECT_TRUE(monotone);
    EXPECT_TRUE(in_range);
    EXPECT_TRUE(on_caller);
    EXPECT_EQ(last, 1.0);
  }
}

TEST(GenerateDeterminism, DifferentSeedsGiveDifferentGraphs) {
  for (bool rmat : {true, false}) {
    generate_options o = rmat ? rmat_options(1000, 5000, 1) : uniform_options(1000, 5000, 1);
    o.with_weights = true;
    o.feature_dim = 2;
    host_csr x = generate_graph(o);
    o.seed = 2;
    host_csr y = generate_graph(o);
    EXPECT_NE(x.col_indices, y.col_indices);
    EXPECT_NE(x.edge_weights, y.edge_weights);
    EXPECT_NE(x.node_features, y.node_features);
  }
}

// ---- Counts and CSR validity ----

TEST(GenerateCounts, EdgesDrawnSymmetrizedAndWithoutSelfLoops) {
  // Few nodes, so self-loops are common.
  for (bool rmat : {true, false}) {
    SCOPED_TRACE(rmat ? "rmat" : "uniform");
    generate_options o = rmat ? rmat_options(37, 2000, 5) : uniform_options(37, 2000, 5);
    o.with_weights = true;
    host_csr plain = generate_graph(o);
    expect_valid_csr(plain);
    EXPECT_TRUE(plain.directed);
    EXPECT_EQ(plain.num_edges(), 2000u);
    const std::uint64_t loops = self_loops(plain);
    ASSERT_GT(loops, 0u);

    o.drop_self_loops = true;
    host_csr dropped = generate_graph(o);
    expect_valid_csr(dropped);
    EXPECT_EQ(dropped.num_edges(), 2000u - loops);
    EXPECT_EQ(self_loops(dropped), 0u);

    // Symmetrize: every drawn edge plus the reverse of every drawn edge that is not a loop.
    o.drop_self_loops = false;
    o.symmetrize = true;
    host_csr sym = generate_graph(o);
    expect_valid_csr(sym);
    EXPECT_FALSE(sym.directed);
    EXPECT_EQ(sym.num_edges(), 2000u + (2000u - loops));
    EXPECT_EQ(self_loops(sym), loops);
    // The edge multiset, with weights, equals its reverse.
    std::map<std::tuple<std::int64_t, std::int64_t, float>, int> forward, reverse;
    for (std::uint64_t v = 0; v < sym.num_nodes; ++v) {
      for (auto i = sym.row_offsets[v]; i < sym.row_offsets[v + 1]; ++i) {
        ++forward[{static_cast<std::int64_t>(v), sym.col_indices[i], sym.edge_weights[i]}];
        ++reverse[{sym.col_indices[i], static_cast<std::int64_t>(v), sym.edge_weights[i]}];
      }
    }
    EXPECT_EQ(forward, reverse);

    o.drop_self_loops = true;
    host_csr both = generate_graph(o);
    expect_valid_csr(both);
    EXPECT_EQ(both.num_edges(), 2 * (2000u - loops));
    EXPECT_EQ(self_loops(both), 0u);
  }
}

TEST(GenerateCounts, EdgeCases) {
  // No edges.
  host_csr empty = generate_graph(rmat_options(5, 0));
  EXPECT_EQ(empty.row_offsets, std::vector<std::int64_t>(6, 0));
  EXPECT_TRUE(empty.col_indices.empty());
  host_csr nothing = generate_graph(uniform_options(0, 0));
  EXPECT_EQ(nothing.row_offsets, std::vector<std::int64_t>{0});
  // One node: every edge is a loop.
  for (bool rmat : {true, false}) {
    host_csr one = generate_graph(rmat ? rmat_options(1, 10) : uniform_options(1, 10));
    EXPECT_EQ(one.row_offsets, (std::vector<std::int64_t>{0, 10}));
    EXPECT_EQ(one.col_indices, std::vector<std::int64_t>(10, 0));
  }
  // More threads than edges and nodes.
  generate_options o = rmat_options(3, 2);
  o.threads = 8;
  o.feature_dim = 1;
  host_csr tiny = generate_graph(o);
  expect_valid_csr(tiny);
  EXPECT_EQ(tiny.num_edges(), 2u);
  EXPECT_EQ(tiny.node_features.size(), 3u);
}

// ---- Shape ----

TEST(GenerateShape, RmatIsSkewedAndUniformIsNot) {
  host_csr rmat = generate_graph(rmat_options(4096, 65536));
  expect_valid_csr(rmat);
  auto deg = out_degrees(rmat);
  const double mean = 65536.0 / 4096;
  EXPECT_GT(*std::max_element(deg.begin(), deg.end()), 8 * mean);

  host_csr uniform = generate_graph(uniform_options(1000, 100000));
  expect_valid_csr(uniform);
  deg = out_degrees(uniform);
  const double umean = 100.0, sigma = 10.0;  // Poisson-like: variance about the mean
  EXPECT_LT(*std::max_element(deg.begin(), deg.end()), umean + 6 * sigma);
  EXPECT_GT(*std::min_element(deg.begin(), deg.end()), umean - 6 * sigma);
}

TEST(GenerateShape, UniformEndpointsPassChiSquare) {
  const std::uint64_t n = 1000, m = 100000, buckets = 100;
  host_csr g = generate_graph(uniform_options(n, m, 11));
  std::vector<double> src(buckets), dst(buckets);
  for (std::uint64_t v = 0; v < n; ++v) {
    src[v * buckets / n] += static_cast<double>(g.row_offsets[v + 1] - g.row_offsets[v]);
  }
  for (std::int64_t c : g.col_indices) dst[c * buckets / n] += 1;
  auto chi2 = [&](const std::vector<double>& counts) {
    const double expected = static_cast<double>(m) / buckets;
    double s = 0;
    for (double c : counts) s += (c - expected) * (c - expected) / expected;
    return s;
  };
  // 99 degrees of freedom: mean 99, standard deviation 14; 200 is beyond 7 sigma.
  EXPECT_LT(chi2(src), 200.0);
  EXPECT_LT(chi2(dst), 200.0);
}

TEST(GenerateShape, ScrambleIdsPermutesNodes) {
  // 3000 is not a power of two: rejection and the cycle-walk both take part.
  generate_options o = rmat_options(3000, 30000, 4);
  o.scramble_ids = false;
  host_csr plain = generate_graph(o);
  o.scramble_ids = true;
  host_csr scrambled = generate_graph(o);
  expect_valid_csr(scrambled);
  auto sorted = [](std::vector<std::int64_t> d) {
    std::sort(d.begin(), d.end());
    return d;
  };
  EXPECT_EQ(sorted(out_degrees(plain)), sorted(out_degrees(scrambled)));
  EXPECT_EQ(sorted(in_degrees(plain)), sorted(in_degrees(scrambled)));
  EXPECT_EQ(self_loops(plain), self_loops(scrambled));
  // Unscrambled R-MAT puts the heaviest node at id 0; scrambled, the heaviest ten are spread.
  auto plain_deg = out_degrees(plain), deg = out_degrees(scrambled);
  EXPECT_EQ(std::max_element(plain_deg.begin(), plain_deg.end()) - plain_deg.begin(), 0);
  std::vector<std::int64_t> ids(deg.size());
  for (std::uint64_t v = 0; v < ids.size(); ++v) ids[v] = static_cast<std::int64_t>(v);
  std::partial_sort(ids.begin(), ids.begin() + 10, ids.end(),
                    [&](auto x, auto y) { return deg[x] > deg[y]; });
  EXPECT_GT(*std::max_element(ids.begin(), ids.begin() + 10), 1500);
}

// ---- Values ----

TEST(GenerateValues, WeightsInZeroOneAndFeaturesInMinusOneOne) {
  generate_options o = uniform_options(2000, 50000, 8);
  o.with_weights = true;
  o.feature_dim = 16;
  host_csr g = generate_graph(o);
  ASSERT_EQ(g.edge_weights.size(), g.num_edges());
  ASSERT_EQ(g.node_features.size(), 2000u * 16);
  EXPECT_EQ(g.feature_dim, 16u);
  double wsum = 0, fsum = 0;
  for (float w : g.edge_weights) {
    ASSERT_GT(w, 0.0f);
    ASSERT_LE(w, 1.0f);
    wsum += w;
  }
  float fmin = 1, fmax = -1;
  for (float f : g.node_features) {
    ASSERT_GE(f, -1.0f);
    ASSERT_LT(f, 1.0f);
    fmin = std::min(fmin, f);
    fmax = std::max(fmax, f);
    fsum += f;
  }
  EXPECT_NEAR(wsum / g.edge_weights.size(), 0.5, 0.01);
  EXPECT_NEAR(fsum / g.node_features.size(), 0.0, 0.02);
  EXPECT_LT(fmin, -0.99f);
  EXPECT_GT(fmax, 0.99f);
  // Without the options, nothing extra.
  host_csr bare = generate_graph(uniform_options(10, 10));
  EXPECT_TRUE(bare.edge_weights.empty());
  EXPECT_TRUE(bare.node_features.empty());
  EXPECT_EQ(bare.feature_dim, 0u);
}

// ---- Arguments ----

TEST(GenerateArguments, BadRmatProbabilitiesThrow) {
  generate_options o = rmat_options(100, 100);
  o.a = 0.5;  // sum 0.93
  try {
    generate_graph(o);
    FAIL() << "expected logic_error";
  } catch (const wholememory::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("a=0.5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("d=0.05"), std::string::npos) << e.what();
  }
  o = rmat_options(100, 100);
  o.a = 0.62;
  o.d = -0.0;  // -0 is >= 0: fine
  EXPECT_NO_THROW(generate_graph(o));
  o.a = 0.67;
  o.d = -0.05;
  EXPECT_THROW(generate_graph(o), wholememory::logic_error);
  o = rmat_options(100, 100);
  o.b = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(generate_graph(o), wholememory::logic_error);
  o = rmat_options(100, 100);
  o.c += 2e-9;
  EXPECT_THROW(generate_graph(o), wholememory::logic_error);
  o.c -= 1.5e-9;  // within 1e-9
  EXPECT_NO_THROW(generate_graph(o));
  // Uniform graphs do not use them.
  o = uniform_options(100, 100);
  o.a = 5;
  EXPECT_NO_THROW(generate_graph(o));
}

TEST(GenerateArguments, BadSizesThrow) {
  EXPECT_THROW(generate_graph(rmat_options(0, 1)), wholememory::logic_error);
  EXPECT_THROW(generate_graph(uniform_options(0, 1)), wholememory::logic_error);
  EXPECT_THROW(generate_graph(rmat_options(std::uint64_t{1} << 40, 0)), wholememory::logic_error);
  EXPECT_THROW(generate_graph(uniform_options(1, std::uint64_t{1} << 48)),
               wholememory::logic_error);
  generate_options o = rmat_options(10, 10);
  o.threads = -1;
  EXPECT_THROW(generate_graph(o), wholememory::logic_error);
}

// ---- stochastic block model ------------------------------------------------------------------

sbm_options sbm_case() {
  sbm_options o;
  o.num_nodes = 20000;
  o.classes = 5;
  o.avg_degree = 6;
  o.homophily = 0.7;
  o.feature_dim = 16;
  o.snr = 0.8;
  o.seed = 11;
  o.symmetrize = false;
  o.drop_self_loops = false;
  o.threads = 3;
  return o;
}

// The share of edges inside a class, the class sizes, the split shares and the features'
// per-class means and noise variance, each within a few standard errors of what the options
// say (tolerances from the sample sizes, 5 sigma).
TEST(GenerateSbm, StatisticsMatchTheModel) {
  const sbm_options o = sbm_case();
  const host_csr g = generate_sbm(o);
  ASSERT_EQ(g.num_nodes, o.num_nodes);
  ASSERT_EQ(g.num_edges(), 120000u);  // avg_degree x num_nodes, nothing dropped
  ASSERT_EQ(g.node_labels.size(), o.num_nodes);
  ASSERT_EQ(g.node_split.size(), o.num_nodes);
  EXPECT_EQ(g.num_classes, 5u);
  std::vector<std::uint64_t> per_class(5, 0);
  for (std::uint64_t v = 0; v < o.num_nodes; ++v) {
    ASSERT_EQ(g.node_labels[v], static_cast<std::int32_t>(v % 5));
    ++per_class[g.node_labels[v]];
  }
  for (auto c : per_class) EXPECT_EQ(c, 4000u);
  std::uint64_t inside = 0;
  for (std::uint64_t u = 0; u < g.num_nodes; ++u)
    for (std::int64_t e = g.row_offsets[u]; e < g.row_offsets[u + 1]; ++e)
      inside += g.node_labels[u] == g.node_labels[static_cast<std::size_t>(g.col_indices[e])];
  const double m = static_cast<double>(g.num_edges());
  const double share = static_cast<double>(inside) / m;
  EXPECT_NEAR(share, o.homophily, 5 * std::sqrt(o.homophily * (1 - o.homophily) / m));
  std::uint64_t counts[3] = {0, 0, 0};
  for (auto s : g.node_split) {
    ASSERT_LE(s, 2);
    ++counts[s];
  }
  const double n = static_cast<double>(o.num_nodes);
  const double expect[3] = {o.train_fraction, o.val_fraction,
                            1 - o.train_fraction - o.val_fraction};
  for (int s = 0; s < 3; ++s)
    EXPECT_NEAR(counts[s] / n, expect[s], 5 * std::sqrt(expect[s] * (1 - expect[s]) / n)) << s;
  // Per class and column: the mean is +-snr, the noise variance 1.
  const std::uint64_t dim = o.feature_dim;
  ASSERT_EQ(g.feature_dim, dim);
  double noise_sq = 0;
  for (std::uint64_t c = 0; c < 5; ++c) {
    for (std::uint64_t j = 0; j < dim; ++j) {
      double sum = 0;
      for (std::uint64_t v = c; v < o.num_nodes; v += 5) sum += g.node_features[v * dim + j];
      const double mean = sum / 4000;
      EXPECT_NEAR(std::fabs(mean), o.snr, 5 / std::sqrt(4000.0)) << c << " " << j;
      const double sign = mean > 0 ? o.snr : -o.snr;
      for (std::uint64_t v = c; v < o.num_nodes; v += 5) {
        const double z = g.node_features[v * dim + j] - sign;
        noise_sq += z * z;
      }
    }
  }
  const double samples = n * static_cast<double>(dim);
  EXPECT_NEAR(noise_sq / samples, 1.0, 5 * std::sqrt(2.0 / samples));
}

TEST(GenerateSbm, SameOptionsAnyThreadsSameGraphAndSeedsDiffer) {
  sbm_options o = sbm_case();
  o.num_nodes = 3000;
  o.symmetrize = true;
  o.drop_self_loops = true;
  const host_csr a = generate_sbm(o);
  o.threads = 1;
  const host_csr b = generate_sbm(o);
  EXPECT_EQ(a.row_offsets, b.row_offsets);
  EXPECT_EQ(a.col_indices, b.col_indices);
  EXPECT_EQ(a.node_features, b.node_features);
  EXPECT_EQ(a.node_split, b.node_split);
  EXPECT_FALSE(a.directed);
  for (std::uint64_t u = 0; u < a.num_nodes; ++u)
    for (std::int64_t e = a.row_offsets[u]; e < a.row_offsets[u + 1]; ++e)
      ASSERT_NE(a.col_indices[e], static_cast<std::int64_t>(u)) << "a self loop was kept";
  o.seed = 12;
  const host_csr c = generate_sbm(o);
  EXPECT_NE(a.col_indices, c.col_indices);
  EXPECT_NE(a.node_split, c.node_split);
}

TEST(GenerateSbm, ExtremeHomophilyAndBadOptions) {
  sbm_options o = sbm_case();
  o.num_nodes = 2000;
  o.feature_dim = 0;
  for (double h : {0.0, 1.0}) {
    o.homophily = h;
    const host_csr lg = generate_sbm(o);
    for (std::uint64_t u = 0; u < lg.num_nodes; ++u)
      for (std::int64_t e = lg.row_offsets[u]; e < lg.row_offsets[u + 1]; ++e)
        ASSERT_EQ(lg.node_labels[u] == lg.node_labels[static_cast<std::size_t>(lg.col_indices[e])],
                  h == 1.0);
    EXPECT_TRUE(lg.node_features.empty());
  }
  const auto refused = [](sbm_options bad, const std::string& named) {
    try {
      generate_sbm(bad);
      ADD_FAILURE() << "accepted; expected an error naming " << named;
    } catch (const wholememory::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  };
  sbm_options bad = sbm_case();
  bad.classes = 1;
  refused(bad, "classes");
  bad = sbm_case();
  bad.num_nodes = 3;
  refused(bad, "classes");
  bad = sbm_case();
  bad.homophily = 1.5;
  refused(bad, "homophily");
  bad.homophily = std::nan("");
  refused(bad, "homophily");
  bad = sbm_case();
  bad.snr = -1;
  refused(bad, "snr");
  bad = sbm_case();
  bad.avg_degree = -2;
  refused(bad, "avg_degree");
  bad = sbm_case();
  bad.train_fraction = 0.7;
  bad.val_fraction = 0.5;
  refused(bad, "train_fraction");
  bad = sbm_case();
  bad.num_nodes = 0;
  refused(bad, "num_nodes");
}

}  // namespace
}  // namespace wholestore::graph
