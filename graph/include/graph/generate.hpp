/*
 * Synthetic graphs: R-MAT and uniform random, deterministic from a seed on any machine (a
 * counter-based generator keyed by (seed, edge number), so the result does not depend on the
 * thread count or the platform's <random>).
 */
#pragma once

#include <graph/dataset.hpp>

#include <cstdint>
#include <functional>
#include <vector>

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

/// A labelled graph from a stochastic block model, for node classification: `classes` classes
/// of (almost) equal size, node v in class v mod classes.  Edge e (of num_nodes * avg_degree
/// drawn) leaves a uniform source u and, with probability `homophily`, goes to a uniform node
/// of u's class (u itself possible: a self loop unless dropped), otherwise to a uniform node of
/// a uniform other class: `homophily` is the expected share of drawn edges inside a class.
/// Features (feature_dim > 0): float32 class signal plus noise, x_v = mu_c(v) + N(0, I), where
/// class c's mean has entries snr * (+1 or -1) by a fair coin per (class, column): `snr` is the
/// per-column signal-to-noise ratio.  Split: node v is train (0) with probability
/// train_fraction, else validation (1) with probability val_fraction, else test (2), by its
/// own draw.  Everything is a function of (options, seed), whatever `threads` is.
struct sbm_options {
  std::uint64_t num_nodes = 0;
  std::uint32_t classes = 2;  ///< >= 2, <= num_nodes
  double avg_degree = 10;     ///< edges drawn per node (>= 0)
  double homophily = 0.8;     ///< in [0, 1]
  std::uint64_t feature_dim = 0;
  double snr = 1.0;                                 ///< >= 0
  double train_fraction = 0.6, val_fraction = 0.2;  ///< each in [0, 1], sum <= 1
  std::uint64_t seed = 0;
  bool symmetrize = true;
  bool drop_self_loops = true;
  int threads = 0;  ///< 0: hardware concurrency
};

/// Generates a stochastic-block-model graph with its labels and split in node_labels,
/// node_split and num_classes (see sbm_options; write_dataset stores them).  Throws
/// logic_error naming the option for classes < 2 or > num_nodes, homophily outside [0, 1],
/// a negative or non-finite snr or avg_degree, or split fractions outside [0, 1] or summing
/// above 1.
host_csr generate_sbm(const sbm_options& options);

}  // namespace wholestore::graph
