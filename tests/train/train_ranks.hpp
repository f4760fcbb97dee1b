// Shared by the trainer's tests: small graphs, settings and a run on thread ranks.
#pragma once

#include "common/multiprocess.hpp"

#include <graph/edge_split.hpp>
#include <graph/generate.hpp>
#include <train/trainer.hpp>
#include <wholememory/bootstrap.hpp>

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace wholestore_test {

// A symmetrized R-MAT graph with nodes that have no edges (R-MAT leaves many), split 10%.
inline const wholestore::graph::edge_split& small_train_split() {
  static const wholestore::graph::edge_split split = [] {
    wholestore::graph::generate_options go;
    go.num_nodes = 400;
    go.num_edges = 2500;
    go.seed = 3;
    go.symmetrize = true;
    go.drop_self_loops = true;
    return wholestore::graph::split_edges(wholestore::graph::generate_graph(go), 0.1, 5);
  }();
  return split;
}

// Two cliques of n / 2 nodes joined by one edge, split 10%: held-out edges sit inside cliques
// and every non-edge across them, so a working trainer separates them.
inline wholestore::graph::edge_split two_cliques_split(int n) {
  wholestore::graph::host_csr g;
  g.num_nodes = static_cast<std::uint64_t>(n);
  g.directed = false;
  g.row_offsets.push_back(0);
  for (int u = 0; u < n; ++u) {
    for (int v = 0; v < n; ++v) {
      const bool same = (u < n / 2) == (v < n / 2);
      if (u != v && (same || (u == 0 && v == n - 1) || (u == n - 1 && v == 0)))
        g.col_indices.push_back(v);
    }
    g.row_offsets.push_back(static_cast<std::int64_t>(g.col_indices.size()));
  }
  return wholestore::graph::split_edges(g, 0.1, 1);
}

// Runs train_embeddings on `ranks` thread ranks; returns rank 0's result.
inline wholestore::train::train_result train_on_ranks(
    int ranks, const wholestore::train::train_settings& s,
    const wholestore::graph::edge_split& split = small_train_split()) {
  wholestore::train::train_result out;
  std::mutex m;
  thread_ranks(ranks, [&](std::shared_ptr<wholememory::bootstrap> bs) {
    const bool lead = bs->rank() == 0;
    wholestore::train::train_result r = train_embeddings(std::move(bs), split, s);
    if (lead) {
      std::lock_guard<std::mutex> lock(m);
      out = std::move(r);
    }
  });
  return out;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace wholestore_test
