// sample_host: exact equality with the naive reference of sampling_reference.hpp on generated
// and hand-made graphs; structural properties on the real graphs of ../shared/data; every
// memory type on 1 to 4 ranks (threads and forked processes) against the single-rank
// continuous result; determinism over threads and batch composition; chi-square checks of the
// three methods' distributions; the spec's randomness primitives; bad input.
#include "common/multiprocess.hpp"
#include "graph/sampling_reference.hpp"

#include <graph/convert.hpp>
#include <graph/csr_graph.hpp>
#include <graph/dataset.hpp>
#include <graph/generate.hpp>
#include <graph/sampling.hpp>

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace wm = wholememory;
using wholestore::graph::block;
using wholestore::graph::convert_edge_list;
using wholestore::graph::convert_options;
using wholestore::graph::csr_graph;
using wholestore::graph::generate_graph;
using wholestore::graph::generate_options;
using wholestore::graph::host_csr;
using wholestore::graph::make_graph;
using wholestore::graph::parse_sample_method;
using wholestore::graph::sample_host;
using wholestore::graph::sample_method;
using wholestore::graph::sample_method_name;
using wholestore::graph::sample_options;
using wholestore::graph::sample_result;
namespace detail = wholestore::graph::detail;

const std::string shared_data = WHOLESTORE_SHARED_DATA;
const sample_method all_methods[] = {
    sample_method::uniform, sample_method::uniform_with_replacement, sample_method::weighted};

std::shared_ptr<wm::communicator> solo_comm() {
  auto bs = wm::make_thread_bootstraps(1);
  return wm::make_host_communicator(std::shared_ptr<wm::bootstrap>(std::move(bs[0])));
}

sample_result run(const csr_graph& g, const std::vector<std::int64_t>& seeds,
                  const sample_options& o, unsigned threads = 2) {
  return sample_host(g, seeds.data(), seeds.size(), o, threads);
}

sample_options opts(std::vector<int> fanouts, sample_method m, std::uint64_t seed = 7,
                    bool edge_ids = true) {
  sample_options o;
  o.fanouts = std::move(fanouts);
  o.method = m;
  o.random_seed = seed;
  o.edge_ids = edge_ids;
  return o;
}

std::string describe(const sample_options& o) {
  std::string s = std::string(sample_method_name(o.method)) + " fanouts [";
  for (int f : o.fanouts) s += std::to_string(f) + " ";
  return s + "] seed " + std::to_string(o.random_seed) + (o.edge_ids ? " edge_ids" : "");
}

/// A CSR from adjacency lists; weights (per node, same shape) optional.
host_csr from_adjacency(const std::vector<std::vector<std::int64_t>>& adj,
                        const std::vector<std::vector<float>>& weights = {}) {
  host_csr g;
  g.num_nodes = adj.size();
  g.row_offsets.push_back(0);
  for (std::size_t v = 0; v < adj.size(); ++v) {
    g.col_indices.insert(g.col_indices.end(), adj[v].begin(), adj[v].end());
    if (!weights.empty()) {
      g.edge_weights.insert(g.edge_weights.end(), weights[v].begin(), weights[v].end());
    }
    g.row_offsets.push_back(static_cast<std::int64_t>(g.col_indices.size()));
  }
  return g;
}

host_csr generated(std::uint64_t nodes, std::uint64_t edges, std::uint64_t seed) {
  generate_options go;
  go.num_nodes = nodes;
  go.num_edges = edges;
  go.seed = seed;
  go.with_weights = true;
  go.threads = 1;
  return generate_graph(go);
}

/// Hand-made: isolated nodes, a hub of degree 300 with repeated neighbors, zero and negative
/// weights, a node whose weights are all zero, a self loop.
host_csr hand_made() {
  const std::int64_t n = 40;
  std::vector<std::vector<std::int64_t>> adj(n);
  std::vector<std::vector<float>> w(n);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 300; ++i) {
    adj[0].push_back(static_cast<std::int64_t>(rng() % n));
    w[0].push_back(i % 7 == 0 ? 0.0f : static_cast<float>(1 + rng() % 100) / 10.0f);
  }
  // 1, 2, 3 isolated.
  for (std::int64_t v = 4; v < n; ++v) {
    std::int64_t d = static_cast<std::int64_t>(rng() % 20);
    for (std::int64_t i = 0; i < d; ++i) {
      adj[v].push_back(static_cast<std::int64_t>(rng() % n));
      // 0 (two draws in five), 1, 2, 3: datasets hold no negative weights (rule 6).
      w[v].push_back(std::max(0.0f, static_cast<float>(rng() % 5) - 1.0f));
    }
  }
  adj[5] = {5, 6, 7};
  w[5] = {0.0f, 0.0f, 0.0f};
  adj[6] = {0, 1, 2, 3};
  w[6] = {1.0f, 1.0f, 1.0f, 1.0f};
  return from_adjacency(adj, w);
}

std::vector<std::int64_t> random_nodes(std::size_t count, std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::int64_t> out(count);
  for (auto& v : out) v = static_cast<std::int64_t>(rng() % n);
  return out;
}

void expect_same(const sample_result& want, const sample_result& got, const std::string& what) {
  ASSERT_EQ(want.blocks.size(), got.blocks.size()) << what;
  for (std::size_t h = 0; h < want.blocks.size(); ++h) {
    const block& a = want.blocks[h];
    const block& b = got.blocks[h];
    EXPECT_EQ(a.num_dst, b.num_dst) << what << " hop " << h;
    EXPECT_EQ(a.src_nodes, b.src_nodes) << what << " hop " << h;
    EXPECT_EQ(a.offsets, b.offsets) << what << " hop " << h;
    EXPECT_EQ(a.src_index, b.src_index) << what << " hop " << h;
    EXPECT_EQ(a.edge_ids, b.edge_ids) << what << " hop " << h;
    EXPECT_TRUE(a == b) << what << " hop " << h;
  }
}

std::int64_t positive_weights(const host_csr& g, std::int64_t v) {
  std::int64_t n = 0;
  for (std::int64_t e = g.row_offsets[v]; e < g.row_offsets[v + 1]; ++e) n += g.edge_weights[e] > 0;
  return n;
}

/// Structural properties every sample has, whatever the randomness.
void check_properties(const host_csr& g, const std::vector<std::int64_t>& seeds,
                      const sample_options& o, const sample_result& r) {
  const std::string what = describe(o);
  ASSERT_EQ(r.blocks.size(), o.fanouts.size()) << what;
  std::vector<std::int64_t> unique;
  for (std::int64_t s : seeds) {
    if (std::find(unique.begin(), unique.end(), s) == unique.end()) unique.push_back(s);
  }
  ASSERT_EQ(r.blocks[0].num_dst, static_cast<std::int64_t>(unique.size())) << what;
  EXPECT_TRUE(std::equal(unique.begin(), unique.end(), r.blocks[0].src_nodes.begin())) << what;
  std::int64_t total = 0;
  for (std::size_t h = 0; h < r.blocks.size(); ++h) {
    const block& b = r.blocks[h];
    const int k = o.fanouts[h];
    total += b.num_edges();
    ASSERT_EQ(b.offsets.size(), static_cast<std::size_t>(b.num_dst) + 1) << what;
    ASSERT_EQ(b.offsets.front(), 0) << what;
    ASSERT_EQ(b.offsets.back(), b.num_edges()) << what;
    ASSERT_LE(b.num_dst, b.num_src()) << what;
    EXPECT_EQ(std::set<std::int64_t>(b.src_nodes.begin(), b.src_nodes.end()).size(),
              b.src_nodes.size())
        << what << ": src_nodes repeat a node";
    if (o.edge_ids) {
      ASSERT_EQ(b.edge_ids.size(), b.src_index.size()) << what;
    } else {
      EXPECT_TRUE(b.edge_ids.empty()) << what;
    }
    std::vector<std::int32_t> coo = b.coo_dst();
    ASSERT_EQ(coo.size(), b.src_index.size());
    for (std::int64_t i = 0; i < b.num_dst; ++i) {
      const std::int64_t v = b.src_nodes[i];
      const std::int64_t first = g.row_offsets[v], d = g.row_offsets[v + 1] - first;
      const std::int64_t n = b.offsets[i + 1] - b.offsets[i];
      ASSERT_GE(n, 0) << what;
      std::set<std::int64_t> seen;
      for (std::int64_t e = b.offsets[i]; e < b.offsets[i + 1]; ++e) {
        ASSERT_EQ(coo[e], i);
        ASSERT_GE(b.src_index[e], 0);
        ASSERT_LT(b.src_index[e], b.num_src());
        const std::int64_t nb = b.src_nodes[b.src_index[e]];
        if (o.edge_ids) {
          const std::int64_t id = b.edge_ids[e];
          ASSERT_GE(id, first) << what << " node " << v;
          ASSERT_LT(id, first + d) << what << " node " << v;
          EXPECT_EQ(g.col_indices[id], nb)
              << what << ": edge " << id << " is not " << v << "->" << nb;
          seen.insert(id);
        } else {
          EXPECT_NE(std::find(g.col_indices.begin() + first, g.col_indices.begin() + first + d, nb),
                    g.col_indices.begin() + first + d)
              << what << ": " << v << "->" << nb << " is not an edge";
        }
      }
      if (d == 0) {
        EXPECT_EQ(n, 0) << what << ": isolated node " << v;
      }
      if (k == -1) {
        EXPECT_EQ(n, d) << what << ": fanout -1 takes all of node " << v;
      } else if (o.method == sample_method::uniform_with_replacement) {
        EXPECT_EQ(n, d > 0 ? k : 0) << what << " node " << v;
      } else if (o.method == sample_method::uniform) {
        EXPECT_EQ(n, std::min<std::int64_t>(d, k)) << what << " node " << v;
      } else {
        EXPECT_EQ(n, std::min<std::int64_t>(positive_weights(g, v), k)) << what << " node " << v;
      }
      if (o.edge_ids && o.method != sample_method::uniform_with_replacement) {
        EXPECT_EQ(static_cast<std::int64_t>(seen.size()), n) << what << ": repeated edge of " << v;
        if (o.method == sample_method::uniform && (k < 0 || d <= k)) {
          EXPECT_EQ(static_cast<std::int64_t>(seen.size()), d) << what << ": degree <= fanout";
        }
      }
    }
    if (h + 1 < r.blocks.size()) {
      const block& next = r.blocks[h + 1];
      EXPECT_EQ(next.num_dst, b.num_src()) << what;
      EXPECT_TRUE(std::equal(b.src_nodes.begin(), b.src_nodes.end(), next.src_nodes.begin()))
          << what << ": next hop's dst are not this hop's src";
    }
  }
  EXPECT_EQ(r.num_sampled_edges(), total);
  EXPECT_EQ(&r.input_nodes(), &r.blocks.back().src_nodes);
}

// ----------------------------------------------------------------------------------------------
// The spec's primitives

TEST(SamplingSpec, Mix64IsSplitMix64) {
  // SplitMix64 seeded with 0: the first output is mix64(0).
  EXPECT_EQ(detail::mix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(sampling_ref::mix(0), 0xE220A8397B1DCDAFull);
  // And the second: state advanced by gamma once more.
  EXPECT_EQ(detail::mix64(detail::golden_gamma), 0x6E789E6AA1B965F4ull);
  for (std::uint64_t x : {1ull, 42ull, 0xFFFFFFFFFFFFFFFFull}) {
    EXPECT_EQ(detail::mix64(x), sampling_ref::mix(x));
    EXPECT_EQ(detail::node_key(x, 3, 17), sampling_ref::key_of(x, 3, 17));
    EXPECT_EQ(detail::draw(x, 5), sampling_ref::draw(x, 5));
  }
  EXPECT_EQ(detail::rand_below(~0ull, 10), 9u);
  EXPECT_EQ(detail::rand_below(0, 10), 0u);
}

TEST(SamplingSpec, DetLogMatchesStdLog) {
  std::mt19937_64 rng(11);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    // The sampler's own u values, plus the full range of exponents.
    double u = (static_cast<double>(rng() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    if (i % 2) u = std::ldexp(1.0 + static_cast<double>(rng() >> 12) * 0x1p-52, -(i % 1000)) / 2;
    if (u > 1.0) u = 1.0;
    const double want = std::log(u);
    const double got = detail::det_log(u);
    const double rel = want == 0 ? std::fabs(got) : std::fabs(got - want) / std::fabs(want);
    worst = std::max(worst, rel);
  }
  EXPECT_LE(worst, 1e-14);
  EXPECT_EQ(detail::det_log(1.0), 0.0);
  EXPECT_NEAR(detail::det_log(0x1p-54), -54 * std::log(2.0), 1e-12);
}

// The weighted samplers skip the exact race time of an edge when race_may_beat says it
// cannot beat the bar: that must never drop an edge whose exact time is at or below the bar.
TEST(SamplingSpec, RaceMayBeatIsConservative) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  int rejected = 0;
  for (int i = 0; i < 400000; ++i) {
    std::uint64_t x = rng();
    if (i % 7 == 0) x >>= 40 + i % 24;            // tiny u: the top 24 bits are zero or few
    if (i % 11 == 0) x |= 0xFFFFFF0000000000ull;  // u next to 1
    float w = unit(rng) * (i % 3 == 0 ? 1e-3f : i % 3 == 1 ? 1.0f : 1e3f);
    if (!(w > 0.0f)) w = 1e-30f;
    const double t = detail::race_time_of_draw(x, w);
    // Bars at, just below and just above the exact time, and far from it.
    for (double bar : {t, std::nextafter(t, 0.0), std::nextafter(t, 1e300), t * 0.5, t * 2.0,
                       t * (1 - 1e-7), 0.0}) {
      const bool may = detail::race_may_beat(x, w, bar);
      if (!may) {
        ++rejected;
        ASSERT_GT(t, bar) << "x " << x << " w " << w << " bar " << bar;
      }
    }
  }
  EXPECT_GT(rejected, 100000);  // and it does reject: bars far below the time
}

TEST(SamplingSpec, MethodNames) {
  for (sample_method m : all_methods) EXPECT_EQ(parse_sample_method(sample_method_name(m)), m);
  EXPECT_EQ(parse_sample_method("replacement"), sample_method::uniform_with_replacement);
  try {
    parse_sample_method("importance");
    FAIL() << "no throw";
  } catch (const wm::logic_error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("importance"), std::string::npos) << msg;
    EXPECT_NE(msg.find("uniform_with_replacement"), std::string::npos) << msg;
    EXPECT_NE(msg.find("weighted"), std::string::npos) << msg;
  }
}

TEST(SamplingSpec, BlockHelpers) {
  block b;
  b.num_dst = 3;
  b.src_nodes = {9, 8, 7, 6};
  b.offsets = {0, 2, 2, 5};
  b.src_index = {3, 0, 1, 2, 3};
  EXPECT_EQ(b.coo_dst(), (std::vector<std::int32_t>{0, 0, 2, 2, 2}));
  block c = b;
  EXPECT_TRUE(b == c);
  c.edge_ids = {1, 2, 3, 4, 5};
  EXPECT_FALSE(b == c);
  sample_result r;
  r.blocks = {b, b};
  EXPECT_EQ(r.num_sampled_edges(), 10);
}

// ----------------------------------------------------------------------------------------------
// Exact equality with the reference

void compare_with_reference(const host_csr& g,
                            const std::vector<std::vector<std::int64_t>>& batches,
                            const std::vector<std::vector<int>>& fanout_sets) {
  auto comm = solo_comm();
  csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
  for (sample_method m : all_methods) {
    for (const auto& fanouts : fanout_sets) {
      for (bool ids : {false, true}) {
        for (std::uint64_t seed : {0ull, 99ull}) {
          sample_options o = opts(fanouts, m, seed, ids);
          for (const auto& batch : batches) {
            sample_result want = sampling_ref::sample(g, batch, o);
            sample_result got = run(wg, batch, o);
            expect_same(want, got, describe(o) + " batch of " + std::to_string(batch.size()));
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
  }
}

TEST(SamplingReference, GeneratedGraph) {
  host_csr g = generated(500, 4000, 3);
  std::vector<std::int64_t> repeated = random_nodes(64, g.num_nodes, 1);
  repeated.push_back(repeated[3]);
  repeated.insert(repeated.begin(), repeated[10]);
  compare_with_reference(g, {{}, {7}, repeated, random_nodes(200, g.num_nodes, 2)},
                         {{3}, {5, 3}, {10, 0, 4}, {-1, 2}, {2, -1}, {40, 40}});
}

TEST(SamplingReference, HandMadeGraph) {
  host_csr g = hand_made();
  std::vector<std::int64_t> all;
  for (std::int64_t v = 0; v < static_cast<std::int64_t>(g.num_nodes); ++v) all.push_back(v);
  // Fanouts around the hub's degree (300) and above the linear Floyd range.
  compare_with_reference(g, {{}, {0}, {1, 2, 3}, {5, 5, 6, 0, 5}, all},
                         {{1}, {0}, {-1}, {4, 4}, {100, 2}, {299}, {300}, {301}, {1000, 3}});
}

// ----------------------------------------------------------------------------------------------
// Properties on real and generated graphs

void check_graph_properties(const host_csr& g, std::uint64_t seed) {
  auto comm = solo_comm();
  csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
  std::vector<std::int64_t> seeds = random_nodes(300, g.num_nodes, seed);
  seeds.push_back(seeds.front());
  for (sample_method m : all_methods) {
    if (m == sample_method::weighted && g.edge_weights.empty()) continue;
    for (const std::vector<int>& f :
         {std::vector<int>{10, 5}, std::vector<int>{-1, 3}, std::vector<int>{25, 0, 2}}) {
      for (bool ids : {true, false}) {
        sample_options o = opts(f, m, seed, ids);
        check_properties(g, seeds, o, run(wg, seeds, o));
      }
    }
  }
}

TEST(SamplingProperties, Cora) {
  convert_options co;
  co.symmetrize = true;
  host_csr g = convert_edge_list(shared_data + "/cora.cites", co);
  ASSERT_EQ(g.num_nodes, 2708u);
  check_graph_properties(g, 1);
}

TEST(SamplingProperties, Facebook) {
  convert_options co;
  co.has_weights = true;
  host_csr g = convert_edge_list(shared_data + "/facebook_combined.txt", co);
  ASSERT_EQ(g.num_nodes, 4039u);
  check_graph_properties(g, 2);
}

TEST(SamplingProperties, GeneratedWithIsolatedNodes) {
  host_csr g = generated(5000, 20000, 4);
  ASSERT_GT(wholestore::graph::compute_degree_stats(g.row_offsets).isolated, 0u);
  check_graph_properties(g, 3);
}

// ----------------------------------------------------------------------------------------------
// Memory types, ranks, threads, batches

/// A copy of `g` whose col_indices are int64 (make_graph narrows to int32 when it can).
void widen_columns(const std::shared_ptr<wm::communicator>& comm, const host_csr& h, csr_graph& g) {
  wm::allocation_options ao;
  ao.granularity = 8;
  auto mem = wm::allocation::create(comm, std::max<std::size_t>(h.col_indices.size() * 8, 8),
                                    g.type(), wm::memory_location::host, ao);
  wm::part_info mine = mem.local_part();
  const std::size_t have = h.col_indices.size() * 8;
  if (mine.offset < have && mine.bytes > 0) {
    std::memcpy(mine.ptr, reinterpret_cast<const char*>(h.col_indices.data()) + mine.offset,
                std::min(mine.bytes, have - mine.offset));
  }
  comm->barrier(nullptr);
  g.col_indices.free();
  g.col_indices = std::move(mem);
  g.col_type = wm::dtype::int64;
}

/// Rank r's batch (rank 1 of 3 or more gets an empty one).
std::vector<std::int64_t> batch_of(int rank, int ranks, std::uint64_t n) {
  if (rank == 1 && ranks >= 3) return {};
  return random_nodes(50 + 10 * static_cast<std::size_t>(rank), n, 100 + rank);
}

TEST(SamplingMemory, EveryTypeOnOneToFourRanks) {
  const host_csr g = generated(3000, 30000, 5);
  const std::vector<sample_options> cases = {
      opts({6, 4}, sample_method::uniform, 1), opts({3, -1}, sample_method::weighted, 2),
      opts({5, 0, 3}, sample_method::uniform_with_replacement, 3, false)};
  // Expected: the single-rank continuous result of every rank's batch.
  std::map<std::pair<int, int>, std::vector<sample_result>> want;  // (ranks, rank) -> per case
  {
    auto comm = solo_comm();
    csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
    for (int ranks = 1; ranks <= 4; ++ranks) {
      for (int r = 0; r < ranks; ++r) {
        for (const auto& o : cases)
          want[{ranks, r}].push_back(run(wg, batch_of(r, ranks, g.num_nodes), o));
      }
    }
  }
  for (wm::memory_type type :
       {wm::memory_type::continuous, wm::memory_type::chunked, wm::memory_type::distributed}) {
    for (int ranks = 1; ranks <= 4; ++ranks) {
      for (bool wide : {false, true}) {
        if (wide && ranks == 2) continue;  // keep the run short: 1, 3 and 4 ranks cover it
        wholestore_test::thread_ranks(ranks, [&](std::shared_ptr<wm::bootstrap> bs) {
          auto comm = wm::make_host_communicator(bs);
          csr_graph wg = make_graph(comm, g, type, wm::memory_location::host);
          if (wide) widen_columns(comm, g, wg);
          const int r = comm->rank();
          const auto seeds = batch_of(r, ranks, g.num_nodes);
          for (std::size_t c = 0; c < cases.size(); ++c) {
            expect_same(want.at({ranks, r})[c], run(wg, seeds, cases[c], 1 + r % 2),
                        std::string(wm::memory_type_name(type)) + (wide ? " int64" : " int32") +
                            " ranks " + std::to_string(ranks) + " rank " + std::to_string(r) + " " +
                            describe(cases[c]));
          }
        });
      }
    }
  }
}

TEST(SamplingMemory, ForkedProcesses) {
  const host_csr g = generated(2000, 16000, 6);
  const std::vector<sample_options> cases = {opts({5, 5}, sample_method::weighted, 4),
                                             opts({-1, 4}, sample_method::uniform, 5)};
  // The expected blocks come from the naive reference: the parent must not touch WholeMemory
  // (on a machine with a GPU, host memory is registered with CUDA, and CUDA does not survive
  // a fork).
  std::vector<std::vector<sample_result>> want(3);
  for (int r = 0; r < 3; ++r) {
    for (const auto& o : cases)
      want[r].push_back(sampling_ref::sample(g, batch_of(r, 3, g.num_nodes), o));
  }
  for (wm::memory_type type :
       {wm::memory_type::continuous, wm::memory_type::chunked, wm::memory_type::distributed}) {
    auto result = wholestore_test::fork_ranks(3, [&](std::shared_ptr<wm::bootstrap> bs) {
      auto comm = wm::make_host_communicator(bs);
      csr_graph wg = make_graph(comm, g, type, wm::memory_location::host);
      const int r = comm->rank();
      for (std::size_t c = 0; c < cases.size(); ++c) {
        expect_same(want[r][c], run(wg, batch_of(r, 3, g.num_nodes), cases[c]),
                    std::string(wm::memory_type_name(type)) + " forked rank " + std::to_string(r) +
                        " " + describe(cases[c]));
      }
    });
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(result.status[r], 0) << wm::memory_type_name(type) << " rank " << r << " failed";
    }
  }
}

/// g's col_indices and edge_weights replaced by copies split evenly by element (not cut at
/// the owners' nodes): a distributed graph the sampler must read through gathers.
void split_edges_evenly(const std::shared_ptr<wm::communicator>& comm, const host_csr& h,
                        csr_graph& g) {
  auto even = [&](const void* data, std::size_t count, std::size_t elem) {
    wm::allocation_options ao;
    ao.granularity = elem;
    wm::allocation a =
        wm::allocation::create(comm, std::max<std::size_t>(count, 1) * elem,
                               wm::memory_type::distributed, wm::memory_location::host, ao);
    const wm::part_info p = a.local_part();
    const std::size_t have = count * elem;
    if (p.bytes > 0 && p.offset < have) {
      std::memcpy(p.ptr, static_cast<const char*>(data) + p.offset,
                  std::min(p.bytes, have - p.offset));
    }
    comm->barrier(nullptr);
    return a;
  };
  std::vector<std::int32_t> cols(h.col_indices.begin(), h.col_indices.end());
  g.col_indices = even(cols.data(), cols.size(), 4);
  g.col_type = wm::dtype::int32;
  if (!h.edge_weights.empty()) {
    g.edge_weights = even(h.edge_weights.data(), h.edge_weights.size(), 4);
  }
}

// Distributed graphs on 1-3 ranks, every rank with its own random seed: hops served by the
// owners (make_graph's layout, the default), through the gathers (WHOLESTORE_SAMPLE_BY_OWNER=0),
// and a graph whose edges are split evenly (gathers whatever the setting, on more than one rank)
// give the reference's blocks; served_hops tells which path each hop took (fanout -1 hops always
// gather).
TEST(SamplingServed, OwnersGathersAndEvenSplitsMatchTheReference) {
  const host_csr g = generated(3000, 30000, 5);
  const std::vector<sample_options> cases = {
      opts({6, 4}, sample_method::uniform, 1), opts({3, -1}, sample_method::weighted, 2),
      opts({5, 0, 3}, sample_method::uniform_with_replacement, 3, false),
      opts({12, 12}, sample_method::weighted, 4), opts({-1, 2}, sample_method::uniform, 5)};
  auto positive = [](const sample_options& o) {
    return static_cast<int>(
        std::count_if(o.fanouts.begin(), o.fanouts.end(), [](int f) { return f >= 0; }));
  };
  enum class mode { owners, gathers_by_setting, even_split };
  for (mode md : {mode::owners, mode::gathers_by_setting, mode::even_split}) {
    if (md == mode::gathers_by_setting) {
      ::setenv("WHOLESTORE_SAMPLE_BY_OWNER", "0", 1);
    } else {
      ::unsetenv("WHOLESTORE_SAMPLE_BY_OWNER");
    }
    for (int ranks = 1; ranks <= 3; ++ranks) {
      wholestore_test::thread_ranks(ranks, [&](std::shared_ptr<wm::bootstrap> bs) {
        auto comm = wm::make_host_communicator(bs);
        csr_graph wg = make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::host);
        if (md == mode::even_split) split_edges_evenly(comm, g, wg);
        const int r = comm->rank();
        const auto seeds = batch_of(r, ranks, g.num_nodes);
        for (sample_options o : cases) {
          // Every rank its own random seed: an owner draws with the seed of the rank that asked.
          o.random_seed += 7919 * static_cast<std::uint64_t>(r);
          const std::string what = "mode " + std::to_string(static_cast<int>(md)) + " ranks " +
                                   std::to_string(ranks) + " rank " + std::to_string(r) + " " +
                                   describe(o);
          const sample_result got = run(wg, seeds, o, 1 + r % 2);
          expect_same(sampling_ref::sample(g, seeds, o), got, what);
          // On one rank an even split is the whole graph: its edges follow its nodes.
          const bool served = md == mode::owners || (md == mode::even_split && ranks == 1);
          EXPECT_EQ(got.served_hops, served ? positive(o) : 0) << what;
        }
      });
    }
  }
  ::unsetenv("WHOLESTORE_SAMPLE_BY_OWNER");
}

// A WHOLESTORE_SAMPLE_BY_OWNER other than 0 or 1 on one rank fails the call on every rank,
// naming the variable and the rank (never one rank left in a collective); corrected, the next
// call samples.
TEST(SamplingServed, BadOwnerSettingFailsOnEveryRank) {
  const host_csr g = generated(500, 4000, 6);
  const auto result = wholestore_test::fork_ranks(2, [&](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    csr_graph wg = make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::host);
    const int r = comm->rank();
    ::setenv("WHOLESTORE_SAMPLE_BY_OWNER", r == 1 ? "yes" : "1", 1);
    const std::vector<std::int64_t> seeds = {3 + r, 200 + r};
    const sample_options o = opts({4, 3}, sample_method::uniform);
    try {
      run(wg, seeds, o);
      ADD_FAILURE() << "no error for WHOLESTORE_SAMPLE_BY_OWNER=yes on rank 1";
    } catch (const wm::logic_error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("WHOLESTORE_SAMPLE_BY_OWNER"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
      if (r == 1) {
        EXPECT_NE(msg.find("'yes'"), std::string::npos) << msg;
      }
    }
    ::setenv("WHOLESTORE_SAMPLE_BY_OWNER", "1", 1);
    const sample_result got = run(wg, seeds, o);
    expect_same(sampling_ref::sample(g, seeds, o), got, "after the setting was corrected");
    EXPECT_EQ(got.served_hops, 2);
  });
  EXPECT_TRUE(result.all_ok());
}

// A corrupt column or row in an owner's part, met while it serves another rank's request: the
// call fails on every rank naming the bad value, and the next call on a repaired graph works.
TEST(SamplingServed, CorruptPartFailsOnEveryRank) {
  const host_csr g = generated(400, 4000, 8);
  wholestore_test::thread_ranks(2, [&](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    csr_graph wg = make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::host);
    const int r = comm->rank();
    // Every node of rank 1's part asked for by rank 0 only, every edge sampled (fanout -2
    // is refused: take a fanout above every degree).
    const wm::part_info rows = wg.row_offsets.part(1);
    const auto first1 = static_cast<std::int64_t>(rows.offset / 8);
    std::vector<std::int64_t> seeds;
    if (r == 0) {
      for (std::int64_t v = first1; v < static_cast<std::int64_t>(g.num_nodes); ++v)
        seeds.push_back(v);
    }
    const sample_options o = opts({1000}, sample_method::uniform);
    ASSERT_EQ(run(wg, seeds, o).served_hops, 1);
    for (int fault : {0, 1}) {
      // Rank 1 corrupts its first edge's column (fault 0) or its first row's end (fault 1).
      std::int64_t saved = 0;
      if (r == 1) {
        if (fault == 0) {
          auto* col = static_cast<std::int32_t*>(wg.col_indices.local_part().ptr);
          saved = col[0];
          col[0] = static_cast<std::int32_t>(g.num_nodes) + 5;
        } else {
          auto* ro = static_cast<std::int64_t*>(wg.row_offsets.local_part().ptr);
          saved = ro[1];
          ro[1] = static_cast<std::int64_t>(g.num_edges()) + 9;
        }
      }
      comm->barrier(nullptr);
      try {
        run(wg, seeds, o);
        ADD_FAILURE() << "no error for the corrupt part, fault " << fault << ", rank " << r;
      } catch (const wm::logic_error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("corrupt"), std::string::npos) << msg;
        EXPECT_NE(msg.find(fault == 0 ? "col_indices" : "row_offsets"), std::string::npos) << msg;
      }
      if (r == 1) {
        if (fault == 0) {
          static_cast<std::int32_t*>(wg.col_indices.local_part().ptr)[0] =
              static_cast<std::int32_t>(saved);
        } else {
          static_cast<std::int64_t*>(wg.row_offsets.local_part().ptr)[1] = saved;
        }
      }
      comm->barrier(nullptr);
      expect_same(sampling_ref::sample(g, seeds, o), run(wg, seeds, o), "after the repair");
    }
  });
}

TEST(SamplingDeterminism, ThreadCounts) {
  const host_csr g = generated(20000, 200000, 7);
  auto comm = solo_comm();
  csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
  const auto seeds = random_nodes(600, g.num_nodes, 8);
  for (sample_method m : all_methods) {
    sample_options o = opts({10, 5, 3}, m, 5);
    sample_result one = run(wg, seeds, o, 1);
    expect_same(one, run(wg, seeds, o, 4), describe(o) + " threads 4");
    expect_same(one, run(wg, seeds, o, 3), describe(o) + " threads 3");
  }
}

/// Node v's sampled edges at hop h as (neighbor, edge id) pairs.
std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> edges_by_node(
    const block& b) {
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> out;
  for (std::int64_t i = 0; i < b.num_dst; ++i) {
    auto& list = out[b.src_nodes[i]];
    for (std::int64_t e = b.offsets[i]; e < b.offsets[i + 1]; ++e) {
      list.emplace_back(b.src_nodes[b.src_index[e]], b.edge_ids[e]);
    }
  }
  return out;
}

TEST(SamplingDeterminism, BatchComposition) {
  const host_csr g = generated(4000, 40000, 9);
  auto comm = solo_comm();
  csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
  auto a = random_nodes(200, g.num_nodes, 10);
  auto b = random_nodes(200, g.num_nodes, 11);
  b.insert(b.begin() + 50, a.begin(), a.begin() + 100);  // half of a, elsewhere in the batch
  for (sample_method m : all_methods) {
    sample_options o = opts({8, 4}, m, 3);
    sample_result ra = run(wg, a, o), rb = run(wg, b, o);
    for (std::size_t h = 0; h < o.fanouts.size(); ++h) {
      auto ea = edges_by_node(ra.blocks[h]), eb = edges_by_node(rb.blocks[h]);
      std::size_t common = 0;
      for (const auto& [v, list] : ea) {
        auto it = eb.find(v);
        if (it == eb.end()) continue;
        ++common;
        EXPECT_EQ(list, it->second) << describe(o) << " hop " << h << " node " << v;
      }
      EXPECT_GE(common, 90u) << describe(o) << " hop " << h;
    }
  }
}

// ----------------------------------------------------------------------------------------------
// Statistics.  Fixed random seeds, so the outcomes are fixed; thresholds at p = 1e-4.

/// Upper 1e-4 quantile of chi-square with df degrees of freedom, by the Wilson-Hilferty cube
/// approximation (within about 1% of the exact value for df >= 5); z = 3.7190 is the standard
/// normal's upper 1e-4 quantile.
double chi2_critical(int df) {
  const double z = 3.7190, k = df;
  const double t = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
  return k * t * t * t;
}

double chi2(const std::vector<double>& observed, const std::vector<double>& expected) {
  double s = 0;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    s += (observed[i] - expected[i]) * (observed[i] - expected[i]) / expected[i];
  }
  return s;
}

/// `nodes` nodes of degree `d` (neighbor i of every node is node i), sampled in one batch per
/// random seed; calls visit(positions of one node) for every node and seed.
template <typename Visit>
void sample_many(std::int64_t d, int fanout, sample_method m, const std::vector<float>& weights,
                 int nodes, int seeds, const Visit& visit) {
  std::vector<std::vector<std::int64_t>> adj(nodes);
  std::vector<std::vector<float>> w;
  for (auto& a : adj) {
    for (std::int64_t i = 0; i < d; ++i) a.push_back(i);
  }
  if (!weights.empty()) w.assign(nodes, weights);
  host_csr g = from_adjacency(adj, w);
  auto comm = solo_comm();
  csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
  std::vector<std::int64_t> batch(nodes);
  for (int v = 0; v < nodes; ++v) batch[v] = v;
  for (int s = 0; s < seeds; ++s) {
    sample_result r = run(wg, batch, opts({fanout}, m, 1000 + s));
    const block& b = r.blocks[0];
    for (std::int64_t i = 0; i < b.num_dst; ++i) {
      std::vector<std::int64_t> pos;
      for (std::int64_t e = b.offsets[i]; e < b.offsets[i + 1]; ++e) {
        pos.push_back(b.edge_ids[e] - g.row_offsets[b.src_nodes[i]]);
      }
      visit(pos);
    }
  }
}

TEST(SamplingStatistics, UniformInclusionAndSubsets) {
  const int d = 12, k = 4, nodes = 2000, seeds = 10;
  std::vector<double> inclusion(d, 0);
  std::map<std::vector<std::int64_t>, double> subsets;
  sample_many(d, k, sample_method::uniform, {}, nodes, seeds, [&](const auto& pos) {
    ASSERT_EQ(pos.size(), static_cast<std::size_t>(k));
    for (auto p : pos) inclusion[p] += 1;
    subsets[pos] += 1;
  });
  const double n = static_cast<double>(nodes) * seeds;
  // Inclusion counts: each position is taken with probability k/d.  The counts are negatively
  // correlated (they sum to k n), which only makes the statistic smaller: df = d - 1 is safe.
  EXPECT_LT(chi2(inclusion, std::vector<double>(d, n * k / d)), chi2_critical(d - 1));
  // Every one of the C(12, 4) = 495 subsets equally likely: df = 494.
  ASSERT_LE(subsets.size(), 495u);
  std::vector<double> obs(495, 0);
  std::size_t i = 0;
  for (const auto& [s, c] : subsets) obs[i++] = c;
  EXPECT_LT(chi2(obs, std::vector<double>(495, n / 495)), chi2_critical(494));
}

TEST(SamplingStatistics, WithReplacementDraws) {
  const int d = 12, k = 4;
  std::vector<double> single(d, 0), pairs(d * d, 0);
  double draws = 0, pair_count = 0;
  sample_many(d, k, sample_method::uniform_with_replacement, {}, 2000, 10, [&](const auto& pos) {
    ASSERT_EQ(pos.size(), static_cast<std::size_t>(k));
    for (auto p : pos) single[p] += 1, draws += 1;
    pairs[pos[0] * d + pos[1]] += 1;  // successive draws independent
    pair_count += 1;
  });
  EXPECT_LT(chi2(single, std::vector<double>(d, draws / d)), chi2_critical(d - 1));
  EXPECT_LT(chi2(pairs, std::vector<double>(d * d, pair_count / (d * d))),
            chi2_critical(d * d - 1));
}

TEST(SamplingStatistics, WeightedFanoutOneFollowsWeights) {
  const std::vector<float> w = {1, 2, 3, 4, 0, 5, 0.5f, 8, 2, 0};
  double sum = 0;
  for (float x : w) sum += x > 0 ? x : 0;
  std::vector<double> counts(w.size(), 0);
  double n = 0;
  sample_many(static_cast<std::int64_t>(w.size()), 1, sample_method::weighted, w, 2000, 10,
              [&](const auto& pos) {
                ASSERT_EQ(pos.size(), 1u);
                counts[pos[0]] += 1;
                n += 1;
              });
  EXPECT_EQ(counts[4], 0) << "weight 0 taken";
  EXPECT_EQ(counts[9], 0) << "weight 0 taken";
  std::vector<double> obs, expected;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0) continue;
    obs.push_back(counts[i]);
    expected.push_back(n * w[i] / sum);
  }
  EXPECT_LT(chi2(obs, expected), chi2_critical(static_cast<int>(obs.size()) - 1));
}

// ----------------------------------------------------------------------------------------------
// Bad input

std::string error_of(const csr_graph& g, const std::vector<std::int64_t>& seeds,
                     const sample_options& o) {
  try {
    run(g, seeds, o);
  } catch (const wm::logic_error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplingErrors, BadArguments) {
  host_csr h = generated(100, 500, 1);
  host_csr unweighted = h;
  unweighted.edge_weights.clear();
  auto comm = solo_comm();
  csr_graph g = make_graph(comm, h, wm::memory_type::continuous, wm::memory_location::host);
  csr_graph gu = make_graph(comm, unweighted, wm::memory_type::chunked, wm::memory_location::host);
  const sample_options ok = opts({3}, sample_method::uniform);

  std::string msg = error_of(g, {1, 2, -5}, ok);
  EXPECT_NE(msg.find("seed -5"), std::string::npos) << msg;
  EXPECT_NE(msg.find("position 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("100"), std::string::npos) << msg;
  msg = error_of(gu, {100}, ok);
  EXPECT_NE(msg.find("seed 100 "), std::string::npos) << msg;
  EXPECT_NE(msg.find("position 0"), std::string::npos) << msg;

  msg = error_of(gu, {1}, opts({3}, sample_method::weighted));
  EXPECT_NE(msg.find("weight"), std::string::npos) << msg;
  EXPECT_NE(error_of(g, {1}, opts({}, sample_method::uniform)).find("fanout"), std::string::npos);
  EXPECT_NE(error_of(g, {1}, opts({3, -2}, sample_method::uniform)).find("-2"), std::string::npos);
  EXPECT_EQ(error_of(g, {1}, opts({0, -1}, sample_method::uniform)), "");
}

TEST(SamplingErrors, DistributedBadSeedThrowsOnEveryRank) {
  const host_csr h = generated(100, 500, 1);
  wholestore_test::thread_ranks(2, [&](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    csr_graph g = make_graph(comm, h, wm::memory_type::distributed, wm::memory_location::host);
    const int r = comm->rank();
    std::string msg =
        error_of(g, r == 0 ? std::vector<std::int64_t>{3, 1000} : std::vector<std::int64_t>{4},
                 opts({2}, sample_method::uniform));
    if (r == 0) {
      EXPECT_NE(msg.find("seed 1000"), std::string::npos) << msg;
    } else {
      EXPECT_NE(msg.find("rank 0"), std::string::npos) << msg;
    }
    // The ranks still agree afterwards.
    expect_same(sampling_ref::sample(h, {5}, opts({2}, sample_method::uniform)),
                run(g, {5}, opts({2}, sample_method::uniform)), "after the error");
  });
}

TEST(SamplingErrors, DeviceGraphRejected) {
  const host_csr h = generated(100, 500, 1);
  auto comm = solo_comm();
  csr_graph g;
  try {
    g = make_graph(comm, h, wm::memory_type::continuous, wm::memory_location::device);
  } catch (const std::exception& e) {
    // Only the absence of device memory may skip: a build without CUDA, no driver, no device.
    // Any other failure to make the graph is a failure of this test.
    const std::string what = e.what();
    const bool no_device = what.find("without CUDA") != std::string::npos ||
                           what.find("needs a build with CUDA") != std::string::npos ||
                           what.find("cudaErrorNoDevice") != std::string::npos ||
                           what.find("cudaErrorInsufficientDriver") != std::string::npos ||
                           what.find("no CUDA-capable device") != std::string::npos ||
                           what.find("no CUDA device is visible") != std::string::npos;
    if (no_device) GTEST_SKIP() << "no device memory here: " << what;
    FAIL() << "making a device graph failed for another reason than no device: " << what;
  }
  std::string msg = error_of(g, {1}, opts({3}, sample_method::uniform));
  EXPECT_NE(msg.find("gpu_sampler"), std::string::npos) << msg;
}

}  // namespace
