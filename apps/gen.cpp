// `wholestore gen`: generates an R-MAT or uniform random graph on the host (all cores, the
// same graph for the same config on any machine) and writes it as a dataset.
#include "commands.hpp"
#include "config.hpp"
#include "progress.hpp"
#include "report.hpp"

#include <graph/dataset.hpp>
#include <graph/generate.hpp>
#include <wholememory/dtype.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace wholestore::apps {

namespace {

const std::vector<config_key> gen_schema = {
    {"output", value_kind::string, "datasets/rmat-products",
     "dataset directory (created if missing); an existing dataset is replaced whole, once the "
     "new one is complete; a directory holding other files is refused (see `overwrite`)"},
    {"overwrite", value_kind::boolean, "false",
     "replace `output` even when it holds files that are not a dataset's"},
    {"kind", value_kind::string, "rmat",
     "`rmat`, `uniform` (endpoints uniform in [0, num_nodes)) or `sbm` (a labelled stochastic "
     "block model for node classification: labels, a train/validation/test split and, with "
     "`feature_dim`, class-signal features; the `sbm.*` keys)"},
    {"num_nodes", value_kind::integer, "2449029",
     "nodes, < 2^40; at least 1 when `num_edges` > 0 (ogbn-products has 2449029)"},
    {"num_edges", value_kind::integer, "61859140",
     "edges drawn, < 2^48, before `symmetrize` and `drop_self_loops` (ogbn-products has "
     "61859140)"},
    {"a", value_kind::number, "0.57",
     "R-MAT: probability of the quadrant (source bit 0, destination bit 0) at each level"},
    {"b", value_kind::number, "0.19", "R-MAT: (0, 1)"},
    {"c", value_kind::number, "0.19", "R-MAT: (1, 0)"},
    {"d", value_kind::number, "0.05",
     "R-MAT: (1, 1); `a`..`d` must each be >= 0 and sum to 1 within 1e-9 (checked for `rmat` "
     "only)"},
    {"scramble_ids", value_kind::boolean, "true",
     "R-MAT: relabel nodes by a seeded permutation so the high-degree nodes are not the low "
     "ids"},
    {"seed", value_kind::integer, "0", "random seed, >= 0"},
    {"weights", value_kind::boolean, "false",
     "float32 edge weights, uniform in (0, 1]; an edge and its reverse share a weight"},
    {"feature_dim", value_kind::integer, "0", "random node features in [-1, 1) when > 0"},
    {"features_dtype", value_kind::string, "float32",
     "on-disk feature type: `float32`, `float16` or `bfloat16`"},
    {"symmetrize", value_kind::boolean, "false",
     "add the reverse of every drawn edge that is not a self-loop; the dataset is marked "
     "undirected"},
    {"drop_self_loops", value_kind::boolean, "false", "remove the edges (u, u)"},
    {"threads", value_kind::integer, "0",
     "generator threads; 0: all cores. Does not change the output"},
    {"sbm.classes", value_kind::integer, "47",
     "`sbm`: classes, >= 2; node v is in class v mod classes (ogbn-products has 47)"},
    {"sbm.homophily", value_kind::number, "0.8",
     "`sbm`: expected share of edges inside a class, in [0, 1]"},
    {"sbm.snr", value_kind::number, "1.0",
     "`sbm`: features are the class mean (entries +-snr) plus standard normal noise"},
    {"sbm.train_fraction", value_kind::number, "0.6", "`sbm`: share of nodes for training"},
    {"sbm.val_fraction", value_kind::number, "0.2",
     "`sbm`: share for validation; the rest is the test set"},
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

std::uint64_t non_negative(const config& cfg, const std::string& key) {
  std::int64_t v = cfg.get_int(key);
  if (v < 0) throw config_error(key + " must be >= 0, got " + std::to_string(v));
  return static_cast<std::uint64_t>(v);
}

}  // namespace

int run_gen(int argc, char** argv) {
  command_args args = parse_command_args(argc, argv);
  config cfg = load_config(gen_schema, args.config_file, args.overrides);

  graph::generate_options opts;
  const std::string& kind = cfg.get_string("kind");
  if (kind != "rmat" && kind != "uniform" && kind != "sbm") {
    throw config_error("kind must be rmat, uniform or sbm, got '" + kind + "'");
  }
  const bool sbm = kind == "sbm";
  if (sbm && cfg.get_bool("weights")) throw config_error("weights: not available for kind sbm");
  opts.rmat = kind == "rmat";
  opts.num_nodes = non_negative(cfg, "num_nodes");
  opts.num_edges = non_negative(cfg, "num_edges");
  opts.a = cfg.get_number("a");
  opts.b = cfg.get_number("b");
  opts.c = cfg.get_number("c");
  opts.d = cfg.get_number("d");
  opts.scramble_ids = cfg.get_bool("scramble_ids");
  opts.seed = non_negative(cfg, "seed");
  opts.with_weights = cfg.get_bool("weights");
  opts.feature_dim = non_negative(cfg, "feature_dim");
  opts.symmetrize = cfg.get_bool("symmetrize");
  opts.drop_self_loops = cfg.get_bool("drop_self_loops");
  opts.threads = static_cast<int>(non_negative(cfg, "threads"));
  const wholememory::dtype features_type =
      wholememory::parse_dtype(cfg.get_string("features_dtype"));
  const std::string& output = cfg.get_string("output");
  // Checked before generating (minutes for a large graph), not only when writing.
  graph::check_dataset_destination(output, features_type, cfg.get_bool("overwrite"));

  std::printf("wholestore gen: %s, %llu nodes, %llu edges drawn, seed %llu -> %s\n", kind.c_str(),
              static_cast<unsigned long long>(opts.num_nodes),
              static_cast<unsigned long long>(opts.num_edges),
              static_cast<unsigned long long>(opts.seed), output.c_str());
  std::fflush(stdout);

  // A line per phase as it goes (a bar on a terminal): drawing edges, counting degrees,
  // filling the CSR, then the features.
  std::map<std::string, progress_display> bars;
  opts.progress = [&](const char* phase, double done) {
    const std::uint64_t total =
        std::string(phase) == "features" ? opts.num_nodes * opts.feature_dim : opts.num_edges;
    auto it = bars.try_emplace(phase, true, phase).first;
    it->second.update(static_cast<std::uint64_t>(std::llround(done * static_cast<double>(total))),
                      total);
  };
  graph::sbm_options so;
  if (sbm) {
    so.num_nodes = opts.num_nodes;
    const std::int64_t classes = cfg.get_int("sbm.classes");
    if (classes < 2 || classes > (std::int64_t{1} << 30))
      throw config_error("sbm.classes must be in [2, 2^30], got " + std::to_string(classes));
    so.classes = static_cast<std::uint32_t>(classes);
    so.avg_degree = opts.num_nodes
                        ? static_cast<double>(opts.num_edges) / static_cast<double>(opts.num_nodes)
                        : 0.0;
    so.homophily = cfg.get_number("sbm.homophily");
    so.snr = cfg.get_number("sbm.snr");
    so.train_fraction = cfg.get_number("sbm.train_fraction");
    so.val_fraction = cfg.get_number("sbm.val_fraction");
    so.feature_dim = opts.feature_dim;
    so.seed = opts.seed;
    so.symmetrize = opts.symmetrize;
    so.drop_self_loops = opts.drop_self_loops;
    so.threads = opts.threads;
  }
  auto t0 = std::chrono::steady_clock::now();
  graph::host_csr g;
  try {
    g = sbm ? graph::generate_sbm(so) : graph::generate_graph(opts);
  } catch (const std::bad_alloc&) {
    // Issue 36: a bare "std::bad_alloc".  The generator holds the edge list and the CSR in
    // host memory (about 25 bytes an edge, more with symmetrize, features and weights).
    const double edges = static_cast<double>(opts.num_edges) * (opts.symmetrize ? 2.0 : 1.0);
    std::ostringstream m;
    m << "out of host memory generating " << opts.num_nodes << " nodes and " << opts.num_edges
      << " edges (about "
      << (25.0 * edges +
          4.0 * static_cast<double>(opts.num_nodes) * static_cast<double>(opts.feature_dim)) /
             1e9
      << " GB are held at once); lower num_edges or feature_dim, or run on a machine with more "
         "memory";
    throw std::runtime_error(m.str());
  }
  const double gen_s = seconds_since(t0);
  std::printf("  generate %8.3f s  (%.1f M edges/s)\n", gen_s,
              gen_s > 0 ? opts.num_edges / gen_s / 1e6 : 0.0);
  std::fflush(stdout);

  t0 = std::chrono::steady_clock::now();
  graph::manifest m = graph::write_dataset(output, g, features_type, cfg.get_bool("overwrite"));
  const double write_s = seconds_since(t0);
  std::uint64_t bytes = m.row_offsets.bytes + m.col_indices.bytes;
  if (m.edge_weights) bytes += m.edge_weights->bytes;
  if (m.node_features) bytes += m.node_features->bytes;
  if (m.node_labels) bytes += m.node_labels->bytes + m.node_split->bytes;
  std::printf("  write    %8.3f s  (%.2f GB/s, %.2f GB)\n", write_s,
              write_s > 0 ? bytes / write_s / 1e9 : 0.0, bytes / 1e9);
  if (m.num_nodes == 0 || m.num_edges == 0) {
    std::fprintf(stderr, "wholestore gen: warning: %s has %llu nodes and %llu edges\n",
                 output.c_str(), static_cast<unsigned long long>(m.num_nodes),
                 static_cast<unsigned long long>(m.num_edges));
  }
  std::printf("summary: %s: %llu nodes, %llu edges (%s)%s%s\n", output.c_str(),
              static_cast<unsigned long long>(m.num_nodes),
              static_cast<unsigned long long>(m.num_edges), m.directed ? "directed" : "symmetrized",
              m.edge_weights ? ", weights" : "",
              m.node_features ? (", " + std::to_string(m.feature_dim) + " features").c_str() : "");

  if (!args.report_file.empty()) {
    report_body report("gen");
    report.add("output", output)
        .add("num_nodes", m.num_nodes)
        .add("num_edges", m.num_edges)
        .add("directed", m.directed)
        .add("generate_s", gen_s)
        .add("write_s", write_s)
        .add("bytes_written", bytes);
    write_report(args.report_file, report, &cfg);
  }
  return 0;
}

const command_info& gen_command() {
  static const command_info info{
      "gen",
      "generate an R-MAT or uniform random graph as a dataset",
      "",
      "Generates an R-MAT or uniform random graph on the host (multi-threaded) and writes it as "
      "a dataset ([docs/dataset-format.md](dataset-format.md)). The same config gives the same "
      "dataset, byte for byte, on any machine and with any `threads`. The default has the shape "
      "of ogbn-products (about 15 s on 2 cores, including the CSR build; the write of 0.27 GB "
      "comes on top).",
      {{"", "configs/gen.yaml", "", &gen_schema,
        "Edge count written: with L the drawn self-loops, `num_edges` (neither option), "
        "`num_edges - L` (`drop_self_loops`), `2 num_edges - L` (`symmetrize`), "
        "`2 (num_edges - L)` (both). Duplicate edges are kept. Within a row, neighbors are in "
        "the order of the drawn edge numbers.\n\n"
        "R-MAT with `num_nodes` not a power of two draws in the next power of two and redraws "
        "an edge whose source or destination is >= `num_nodes` (rejection: the distribution "
        "restricted to the node range); after 64 redraws, reachable only with extreme "
        "`a`..`d`, the last draw is taken modulo `num_nodes`. The random streams "
        "(SplitMix64-based, keyed by seed and edge or node number) are documented in "
        "`graph/src/generate.cpp` and pinned by `tests/graph/generate_test.cpp`."}},
      {"wholestore gen configs/gen.yaml",
       "wholestore gen configs/gen.yaml --set num_nodes=100000 --set num_edges=2000000 "
       "--set output=datasets/rmat-small",
       "wholestore gen configs/gen.yaml --set kind=uniform --set seed=7 --set weights=true "
       "--set feature_dim=64"},
      run_gen};
  return info;
}

}  // namespace wholestore::apps
