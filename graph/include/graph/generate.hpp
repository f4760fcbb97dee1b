/*
 * Synthetic graphs: R-MAT and uniform random, deterministic from a seed on any machine (a
 * counter-based generator keyed by (seed, edge number), so the result does not depend on the
 * thread count or the platform's <random>).
 */
#pragma once

#include <graph/dataset.hpp>

#include <cstdint>
#include <functional>

namespace wholestore::graph {

struct generate_options {
  std::uint64_t num_nodes = 0;
  std::uint64_t num_edges = 0;                    ///< edges drawn (before dropping, if any)
  bool rmat = true;                               ///< false: uniform random endpoints
  double a = 0.57, b = 0.19, c = 0.19, d = 0.05;  ///< R-MAT quadrant probabilities (sum 1)
  bool scramble_ids = true;  ///< R-MAT: permute node ids so degree is not id order
  std::uint64_t seed = 0;
  bool with_weights = false;      ///< uniform (0, 1] float32 weights
  std::uint64_t feature_dim = 0;  ///< random float32 features in [-1, 1) when > 0
  bool symmetrize = false;
  bool drop_self_loops = false;
  int threads = 0;  ///< 0: hardware concurrency
  /// Called on the calling thread as the work goes: `phase` ("draw", "count", "fill",
  /// "features") and the share of it done, in [0, 1] (1 once each phase ends).  Optional.
  std::function<void(const char* phase, double done)> progress;
};

/// Generates a graph; identical output for identical options, whatever `threads` is.
host_csr generate_graph(const generate_options& options);

}  // namespace wholestore::graph
