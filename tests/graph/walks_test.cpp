// Random walks on the CPU path: node2vec's transition frequencies against its exact
// probabilities (chi-square, p and q far from 1 included), DeepWalk's uniform steps and dead
// ends, the same walks for any thread count, memory type, split of the starts and rank count,
// and bad arguments named with the output untouched.
#include "common/multiprocess.hpp"

#include <graph/csr_graph.hpp>
#include <graph/dataset.hpp>
#include <graph/detail/walk_step.hpp>
#include <graph/generate.hpp>
#include <graph/walks.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>
#include <wholememory/ptr_gen.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace wholestore_test {
namespace {

namespace wm = wholememory;
using wholestore::graph::csr_graph;
using wholestore::graph::host_csr;
using wholestore::graph::make_graph;
using wholestore::graph::random_walks_host;
using wholestore::graph::walk_options;

std::shared_ptr<wm::communicator> solo_comm() {
  auto bs = wm::make_thread_bootstraps(1);
  return wm::make_host_communicator(std::shared_ptr<wm::bootstrap>(std::move(bs[0])));
}

/// A host CSR from an edge list (both directions when `undirected`), neighbors in list order.
host_csr csr_of(std::uint64_t nodes, const std::vector<std::pair<int, int>>& edges,
                bool undirected) {
  std::vector<std::vector<std::int64_t>> adj(nodes);
  for (auto [a, b] : edges) {
    adj[a].push_back(b);
    if (undirected) adj[b].push_back(a);
  }
  host_csr g;
  g.num_nodes = nodes;
  g.directed = !undirected;
  g.row_offsets.push_back(0);
  for (auto& list : adj) {
    g.col_indices.insert(g.col_indices.end(), list.begin(), list.end());
    g.row_offsets.push_back(static_cast<std::int64_t>(g.col_indices.size()));
  }
  return g;
}

/// Chi-square critical values at significance 0.001, by degrees of freedom 1..10.
double chi2_critical(std::size_t dof) {
  static const double table[] = {10.83, 13.82, 16.27, 18.47, 20.52,
                                 22.46, 24.32, 26.12, 27.88, 29.59};
  return table[std::min<std::size_t>(dof, 10) - 1];
}

double chi_square(const std::vector<double>& observed, const std::vector<double>& weights) {
  double n = 0, wsum = 0;
  for (double o : observed) n += o;
  for (double w : weights) wsum += w;
  double x = 0;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    const double e = n * weights[i] / wsum;
    x += (observed[i] - e) * (observed[i] - e) / e;
  }
  return x;
}

TEST(RandomWalks, Node2vecTransitionsMatchTheExactProbabilities) {
  // Undirected: 0-1 0-2 0-3 1-2 1-4 2-5 3-4 3-5 4-5.  From start 0 every second step has
  // candidates of all three kinds (back to 0, a neighbor of 0, farther away).
  const host_csr g =
      csr_of(6, {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 4}, {2, 5}, {3, 4}, {3, 5}, {4, 5}}, true);
  auto comm = solo_comm();
  csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
  const std::size_t walks = 120000;
  const std::vector<std::int64_t> starts(walks, 0);
  const std::set<std::int64_t> near0 = {1, 2, 3};
  for (auto [p, q] :
       {std::pair{1.0, 1.0}, std::pair{0.25, 4.0}, std::pair{4.0, 0.25}, std::pair{0.05, 20.0}}) {
    walk_options o;
    o.length = 2;
    o.p = p;
    o.q = q;
    o.seed = 17;
    std::vector<std::int64_t> out(walks * 3);
    random_walks_host(wg, starts.data(), walks, o, out.data(), 2);
    std::map<std::int64_t, std::map<std::int64_t, double>> counts;  // step 1 -> step 2 -> n
    std::map<std::int64_t, double> first;
    for (std::size_t w = 0; w < walks; ++w) {
      ASSERT_EQ(out[3 * w], 0);
      first[out[3 * w + 1]] += 1;
      counts[out[3 * w + 1]][out[3 * w + 2]] += 1;
    }
    // Step 1: uniform over 0's neighbors.
    std::vector<double> obs, wts;
    for (std::int64_t v : {1, 2, 3}) {
      obs.push_back(first[v]);
      wts.push_back(1.0);
    }
    EXPECT_LT(chi_square(obs, wts), chi2_critical(2)) << "first step, p " << p << " q " << q;
    // Step 2 from v with previous node 0: weights 1/p (back), 1 (neighbor of 0), 1/q.
    for (std::int64_t v : {1, 2, 3}) {
      obs.clear();
      wts.clear();
      for (std::int64_t e = g.row_offsets[v]; e < g.row_offsets[v + 1]; ++e) {
        const std::int64_t x = g.col_indices[e];
        obs.push_back(counts[v][x]);
        wts.push_back(x == 0 ? 1.0 / p : (near0.count(x) ? 1.0 : 1.0 / q));
      }
      double seen = 0;
      for (auto& [x, n] : counts[v]) seen += n;
      double listed = 0;
      for (double o2 : obs) listed += o2;
      EXPECT_EQ(seen, listed) << "a step from " << v << " left its neighbor list";
      EXPECT_LT(chi_square(obs, wts), chi2_critical(obs.size() - 1))
          << "second step from " << v << ", p " << p << " q " << q;
    }
  }
}

TEST(RandomWalks, DeepWalkStepsAlongEdgesAndStopsAtDeadEnds) {
  // Directed: 0 -> 1, 2; 1 -> 3; 2 -> 0, 3; 3 has no out-neighbors.
  const host_csr g = csr_of(4, {{0, 1}, {0, 2}, {1, 3}, {2, 0}, {2, 3}}, false);
  auto comm = solo_comm();
  csr_graph wg = make_graph(comm, g, wm::memory_type::chunked, wm::memory_location::host);
  const std::size_t walks = 4000;
  std::vector<std::int64_t> starts(walks);
  for (std::size_t i = 0; i < walks; ++i) starts[i] = static_cast<std::int64_t>(i % 3);
  walk_options o;
  o.length = 6;
  o.seed = 5;
  std::vector<std::int64_t> out(walks * 7);
  random_walks_host(wg, starts.data(), walks, o, out.data(), 3);
  std::set<std::pair<std::int64_t, std::int64_t>> edges;
  for (std::int64_t v = 0; v < 4; ++v)
    for (std::int64_t e = g.row_offsets[v]; e < g.row_offsets[v + 1]; ++e)
      edges.insert({v, g.col_indices[e]});
  std::map<std::int64_t, double> from0;
  for (std::size_t w = 0; w < walks; ++w) {
    const std::int64_t* row = &out[7 * w];
    EXPECT_EQ(row[0], starts[w]);
    bool ended = false;
    for (int s = 1; s < 7; ++s) {
      if (ended) {
        EXPECT_EQ(row[s], -1) << "walk " << w << " continues after its end";
        continue;
      }
      if (row[s] == -1) {
        EXPECT_EQ(row[s - 1], 3) << "walk " << w << " ended at a node with out-neighbors";
        ended = true;
        continue;
      }
      EXPECT_TRUE(edges.count({row[s - 1], row[s]})) << row[s - 1] << " -> " << row[s];
    }
    if (row[0] == 0) from0[row[1]] += 1;
  }
  EXPECT_LT(chi_square({from0[1], from0[2]}, {1.0, 1.0}), chi2_critical(1));
}

/// The walks every variant must reproduce: one thread, continuous memory, one call.
std::vector<std::int64_t> baseline(const host_csr& g, const std::vector<std::int64_t>& starts,
                                   const walk_options& o) {
  auto comm = solo_comm();
  csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
  std::vector<std::int64_t> out(starts.size() * (o.length + 1));
  random_walks_host(wg, starts.data(), starts.size(), o, out.data(), 1);
  return out;
}

host_csr test_graph() {
  wholestore::graph::generate_options go;
  go.num_nodes = 3000;
  go.num_edges = 24000;
  go.seed = 11;
  go.symmetrize = true;
  return wholestore::graph::generate_graph(go);
}

TEST(RandomWalks, TheSameWalksForAnyThreadsMemoryTypeSplitAndRanks) {
  const host_csr g = test_graph();
  std::vector<std::int64_t> starts(1500);
  for (std::size_t i = 0; i < starts.size(); ++i)
    starts[i] = static_cast<std::int64_t>((i * 7919) % g.num_nodes);
  for (auto [p, q] : {std::pair{1.0, 1.0}, std::pair{0.5, 2.0}}) {
    walk_options o;
    o.length = 15;
    o.p = p;
    o.q = q;
    o.seed = 99;
    const std::vector<std::int64_t> want = baseline(g, starts, o);
    const std::size_t width = static_cast<std::size_t>(o.length) + 1;
    {  // three threads, chunked memory, the starts in two calls
      auto comm = solo_comm();
      csr_graph wg = make_graph(comm, g, wm::memory_type::chunked, wm::memory_location::host);
      std::vector<std::int64_t> out(want.size());
      const std::size_t cut = 613;
      walk_options second = o;
      second.first_walk = cut;
      random_walks_host(wg, starts.data(), cut, o, out.data(), 3);
      random_walks_host(wg, starts.data() + cut, starts.size() - cut, second,
                        out.data() + cut * width, 3);
      EXPECT_EQ(out, want) << "p " << p << " q " << q;
    }
    // Three forked ranks, each walking its slice of the starts on a shared continuous graph.
    thread_ranks(3, [&](std::shared_ptr<wm::bootstrap> bs) {
      auto comm = wm::make_host_communicator(bs);
      csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
      const std::size_t n = starts.size(), me = static_cast<std::size_t>(comm->rank());
      const std::size_t begin = n * me / 3, end = n * (me + 1) / 3;
      walk_options mine = o;
      mine.first_walk = begin;
      std::vector<std::int64_t> out((end - begin) * width);
      random_walks_host(wg, starts.data() + begin, end - begin, mine, out.data(), 2);
      EXPECT_TRUE(std::equal(out.begin(), out.end(), want.begin() + begin * width))
          << "rank " << me << " walks differ from one rank's";
    });
  }
}

// The CPU walker interleaves first-order walks on a thread (prefetching each one's next read);
// its output must be what stepping each walk alone with detail::walk_step gives: every walk
// length (0 included), dead ends, any thread count, DeepWalk and node2vec.
TEST(RandomWalks, EqualToStepFunctionWalkedOneAtATime) {
  host_csr g = test_graph();
  // Dead ends: the last 40 nodes lose their out-edges (rows emptied, offsets kept monotone).
  {
    host_csr d;
    d.num_nodes = g.num_nodes;
    d.directed = true;
    d.row_offsets.push_back(0);
    for (std::uint64_t v = 0; v < g.num_nodes; ++v) {
      if (v + 40 < g.num_nodes)
        for (std::int64_t e = g.row_offsets[v]; e < g.row_offsets[v + 1]; ++e)
          d.col_indices.push_back(g.col_indices[e]);
      d.row_offsets.push_back(static_cast<std::int64_t>(d.col_indices.size()));
    }
    g = d;
  }
  auto comm = solo_comm();
  csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
  std::vector<std::int64_t> starts(2100);
  for (std::size_t i = 0; i < starts.size(); ++i)
    starts[i] = static_cast<std::int64_t>((i * 104729 + 17) % g.num_nodes);
  starts[5] = static_cast<std::int64_t>(g.num_nodes) - 1;  // starts at a dead end
  wm::PtrGen<const std::int64_t, const std::int64_t> row(g.row_offsets.data());
  wm::PtrGen<const std::int64_t, const std::int64_t> col(g.col_indices.data());
  for (auto [p, q] : {std::pair{1.0, 1.0}, std::pair{0.5, 2.0}}) {
    for (int length : {0, 1, 9, 40}) {
      walk_options o;
      o.length = length;
      o.p = p;
      o.q = q;
      o.seed = 31;
      o.first_walk = 1000;
      const std::size_t width = static_cast<std::size_t>(length) + 1;
      const auto rule = wholestore::graph::detail::make_walk_rule(p, q);
      std::vector<std::int64_t> want(starts.size() * width, -1);
      for (std::size_t i = 0; i < starts.size(); ++i) {
        const std::uint64_t key =
            wholestore::graph::detail::walk_key(o.seed, o.first_walk + i, starts[i]);
        std::int64_t prev = -1, cur = starts[i];
        want[i * width] = cur;
        for (std::size_t s = 1; s < width; ++s) {
          const std::int64_t next = wholestore::graph::detail::walk_step(
              rule, key, static_cast<std::uint32_t>(s - 1), prev, cur, row, col, g.num_nodes,
              g.col_indices.size());
          if (next < 0) break;
          want[i * width + s] = next;
          prev = cur;
          cur = next;
        }
      }
      for (unsigned threads : {1u, 2u, 3u}) {
        std::vector<std::int64_t> got(want.size(), 7);
        random_walks_host(wg, starts.data(), starts.size(), o, got.data(), threads);
        EXPECT_EQ(got, want) << "p " << p << " q " << q << ", length " << length << ", " << threads
                             << " threads";
      }
    }
  }
  // Every trial rejected: on the directed cycle 0 -> 1 -> 2 -> 0 with p = 1e-7 the only
  // candidate is never the previous node nor its neighbor, so each step after the first takes
  // the last of max_walk_trials candidates.
  const host_csr cycle = csr_of(3, {{0, 1}, {1, 2}, {2, 0}}, false);
  csr_graph cg = make_graph(comm, cycle, wm::memory_type::chunked, wm::memory_location::host);
  walk_options o;
  o.length = 4;
  o.p = 1e-7;
  o.seed = 8;
  const std::vector<std::int64_t> three = {0, 1, 2};
  std::vector<std::int64_t> got(3 * 5, 7);
  random_walks_host(cg, three.data(), 3, o, got.data(), 2);
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t s = 0; s < 5; ++s)
      EXPECT_EQ(got[i * 5 + s], static_cast<std::int64_t>((i + s) % 3)) << "walk " << i;
}

TEST(RandomWalks, BadArgumentsAreNamedAndTheOutputUntouched) {
  const host_csr g = csr_of(4, {{0, 1}, {1, 2}, {2, 3}}, true);
  auto comm = solo_comm();
  csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
  const std::vector<std::int64_t> starts = {0, 1, 99, 2};
  walk_options o;
  o.length = 3;
  std::vector<std::int64_t> out(4 * 4, 12345);
  try {
    random_walks_host(wg, starts.data(), starts.size(), o, out.data());
    ADD_FAILURE() << "a start outside the graph was accepted";
  } catch (const wm::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("start node 99 at position 2"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(out, std::vector<std::int64_t>(16, 12345));
  auto message = [&](walk_options bad) {
    try {
      random_walks_host(wg, starts.data(), 2, bad, out.data());
    } catch (const wm::logic_error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  walk_options bad = o;
  bad.p = 0;
  EXPECT_NE(message(bad).find("p and q must be finite and > 0"), std::string::npos);
  bad = o;
  bad.length = -1;
  EXPECT_NE(message(bad).find("walk length -1"), std::string::npos);
}

/// On `ranks` thread ranks, each walks its slice [slice(rank)) of `starts` on g in distributed
/// host memory with `threads` threads (first_walk the slice's offset); every slice must equal
/// the reference's rows.
void expect_distributed_walks(
    const host_csr& g, const std::vector<std::int64_t>& starts, const walk_options& o, int ranks,
    unsigned threads, const std::vector<std::int64_t>& want,
    const std::function<std::pair<std::size_t, std::size_t>(std::size_t)>& slice,
    const std::string& what) {
  const std::size_t width = static_cast<std::size_t>(o.length) + 1;
  thread_ranks(ranks, [&](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    csr_graph wg = make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::host);
    const auto me = static_cast<std::size_t>(comm->rank());
    const auto [begin, end] = slice(me);
    walk_options mine = o;
    mine.first_walk = begin;
    std::vector<std::int64_t> out((end - begin) * width, 777);
    random_walks_host(wg, starts.data() + begin, end - begin, mine, out.data(), threads);
    EXPECT_TRUE(std::equal(out.begin(), out.end(), want.begin() + begin * width))
        << what << ", ranks " << ranks << " rank " << me << " threads " << threads;
  });
}

// DeepWalk and node2vec on distributed graphs (every step served by the owner of the walk's
// node, node2vec's questions about the previous node answered by its owner): on 1-3 ranks,
// each walking its slice of the starts (one rank none), the walks of one rank on continuous
// memory bit for bit, dead ends (a directed graph) and length 0 included.
TEST(RandomWalks, DeepWalkAndNode2vecOnDistributedGraphsEqualContinuous) {
  wholestore::graph::generate_options go;
  go.num_nodes = 2000;
  go.num_edges = 9000;
  go.seed = 12;  // directed: many nodes without out-neighbors
  for (const host_csr& g : {test_graph(), wholestore::graph::generate_graph(go)}) {
    std::vector<std::int64_t> starts(900);
    for (std::size_t i = 0; i < starts.size(); ++i)
      starts[i] = static_cast<std::int64_t>((i * 7919 + 5) % g.num_nodes);
    // DeepWalk, and node2vec with p and q near and far from 1 (the owners ask the previous
    // nodes' owners about many candidates at p = 0.05, q = 20).
    for (auto [length, p, q] :
         {std::tuple{0, 1.0, 1.0}, std::tuple{1, 1.0, 1.0}, std::tuple{17, 1.0, 1.0},
          std::tuple{17, 0.5, 2.0}, std::tuple{9, 0.05, 20.0}, std::tuple{9, 4.0, 0.25}}) {
      walk_options o;
      o.length = length;
      o.p = p;
      o.q = q;
      o.seed = 5 + static_cast<std::uint64_t>(length);
      const std::vector<std::int64_t> want = baseline(g, starts, o);
      for (int ranks = 1; ranks <= 3; ++ranks) {
        const std::size_t n = starts.size(), R = static_cast<std::size_t>(ranks);
        expect_distributed_walks(
            g, starts, o, ranks, 2, want,
            [&](std::size_t me) {
              // Rank 1 of three walks nothing.
              std::size_t begin = n * me / R, end = n * (me + 1) / R;
              if (R == 3 && me == 1) end = begin;
              if (R == 3 && me == 2) begin = n * 1 / 3;
              return std::pair{begin, end};
            },
            "length " + std::to_string(length) + " p " + std::to_string(p) + " q " +
                std::to_string(q));
      }
    }
  }
}

// Owners with enough requests split their step over threads (from 4096 requests): 24,000
// starts over 1 and 2 ranks, 2 and 3 threads, DeepWalk and node2vec, the continuous walks.
TEST(RandomWalks, DistributedOwnerStepOverThreadsEqualsContinuous) {
  const host_csr g = test_graph();
  std::vector<std::int64_t> starts(24000);
  for (std::size_t i = 0; i < starts.size(); ++i)
    starts[i] = static_cast<std::int64_t>((i * 104729 + 3) % g.num_nodes);
  for (auto [p, q] : {std::pair{1.0, 1.0}, std::pair{0.5, 2.0}}) {
    walk_options o;
    o.length = 8;
    o.p = p;
    o.q = q;
    o.seed = 31;
    const std::vector<std::int64_t> want = baseline(g, starts, o);
    for (int ranks : {1, 2}) {
      const std::size_t n = starts.size(), R = static_cast<std::size_t>(ranks);
      for (unsigned threads : {2u, 3u}) {
        expect_distributed_walks(
            g, starts, o, ranks, threads, want,
            [&](std::size_t me) {
              return std::pair{n * me / R, n * (me + 1) / R};
            },
            "p " + std::to_string(p));
      }
    }
  }
}

// A corrupt part met while an owner serves another rank's walks (every column of rank 1's part
// outside the graph, or its first row ending past the edges): the call fails on every rank, the
// others naming rank 1, for DeepWalk and for node2vec (whose questions about previous nodes
// rank 1 also answers); the repaired graph walks the continuous walks again.
TEST(RandomWalks, DistributedCorruptPartFailsOnEveryRank) {
  const host_csr g = test_graph();
  thread_ranks(2, [&](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    csr_graph wg = make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::host);
    const int me = comm->rank();
    // Rank 0 starts walks at every node of rank 1's part, rank 1 at none.
    const auto first1 = static_cast<std::int64_t>(wg.row_offsets.part(1).offset / 8);
    std::vector<std::int64_t> starts;
    if (me == 0) {
      for (std::int64_t v = first1; v < static_cast<std::int64_t>(g.num_nodes); ++v)
        starts.push_back(v);
    }
    for (auto [p, q] : {std::pair{1.0, 1.0}, std::pair{0.5, 2.0}}) {
      walk_options o;
      o.length = 6;
      o.p = p;
      o.q = q;
      o.seed = 77;
      std::vector<std::int64_t> out(starts.size() * 7);
      for (int fault : {0, 1}) {
        const std::string what = "p " + std::to_string(p) + ", fault " + std::to_string(fault) +
                                 ", rank " + std::to_string(me);
        auto* col = static_cast<std::int32_t*>(wg.col_indices.local_part().ptr);
        auto* ro = static_cast<std::int64_t*>(wg.row_offsets.local_part().ptr);
        const std::size_t cols = wg.col_indices.local_part().bytes / 4;
        std::vector<std::int32_t> saved_cols;
        std::int64_t saved_row = 0;
        if (me == 1) {
          if (fault == 0) {
            saved_cols.assign(col, col + cols);
            std::fill(col, col + cols, static_cast<std::int32_t>(g.num_nodes) + 5);
          } else {
            saved_row = ro[1];
            ro[1] = static_cast<std::int64_t>(g.num_edges()) + 9;
          }
        }
        comm->barrier(nullptr);
        try {
          random_walks_host(wg, starts.data(), starts.size(), o, out.data(), 2);
          ADD_FAILURE() << "no error for the corrupt part, " << what;
        } catch (const wm::logic_error& e) {
          const std::string msg = e.what();
          EXPECT_NE(msg.find("the graph is corrupt"), std::string::npos) << what << ": " << msg;
          if (me == 0) {
            EXPECT_NE(msg.find("met by rank 1"), std::string::npos) << what << ": " << msg;
          }
        }
        if (me == 1) {
          if (fault == 0) {
            std::copy(saved_cols.begin(), saved_cols.end(), col);
          } else {
            ro[1] = saved_row;
          }
        }
        comm->barrier(nullptr);
        random_walks_host(wg, starts.data(), starts.size(), o, out.data(), 2);
        const std::vector<std::int64_t> want = baseline(g, starts, o);
        EXPECT_EQ(out, want) << "after the repair, " << what;
      }
    }
  });
}

// A distributed walk the ranks cannot take together fails on every rank, naming why (never
// one rank left in a collective), and the next good call works.
TEST(RandomWalks, DistributedRefusalsOnEveryRank) {
  const host_csr g = test_graph();
  thread_ranks(2, [&](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    csr_graph wg = make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::host);
    const int me = comm->rank();
    const std::vector<std::int64_t> starts = {3, 400 + me, 5};
    walk_options o;
    o.length = 6;
    std::vector<std::int64_t> out(3 * 7);
    auto error_of = [&](const walk_options& w, const std::vector<std::int64_t>& s) {
      try {
        random_walks_host(wg, s.data(), s.size(), w, out.data());
      } catch (const wm::logic_error& e) {
        return std::string(e.what());
      }
      return std::string("(no error)");
    };
    walk_options other = o;
    if (me == 1) other.length = 7;
    EXPECT_NE(error_of(other, starts).find("same length, p and q"), std::string::npos);
    std::vector<std::int64_t> bad = starts;
    if (me == 1) bad[2] = static_cast<std::int64_t>(g.num_nodes) + 4;
    const std::string msg = error_of(o, bad);
    EXPECT_NE(msg.find(me == 1 ? "at position 2" : "rank 1 passed start node"), std::string::npos)
        << msg;
    // Edges split evenly, not with their nodes.
    csr_graph even = make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::host);
    wm::allocation_options ao;
    ao.granularity = 4;
    even.col_indices = wm::allocation::create(comm, g.num_edges() * 4, wm::memory_type::distributed,
                                              wm::memory_location::host, ao);
    even.col_type = wm::dtype::int32;
    try {
      random_walks_host(even, starts.data(), starts.size(), o, out.data());
      ADD_FAILURE() << "evenly split edges were walked";
    } catch (const wm::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("do not follow its nodes"), std::string::npos)
          << e.what();
    }
    walk_options good = o;
    good.first_walk = static_cast<std::uint64_t>(me) * 3;
    random_walks_host(wg, starts.data(), starts.size(), good, out.data());
    EXPECT_EQ(out[0], starts[0]);
  });
}

}  // namespace
}  // namespace wholestore_test
