// `wholestore gen`: generates an R-MAT or uniform random graph on the host (all cores, the
// same graph for the same config on any machine) and writes it as a dataset.
#include "commands.hpp"
#include "config.hpp"

#include <graph/dataset.hpp>
#include <graph/generate.hpp>
#include <wholememory/dtype.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace wholestore::apps {

namespace {

const std::vector<config_key> gen_schema = {
    {"output", value_kind::string, "datasets/rmat-products", "dataset directory to write"},
    {"overwrite", value_kind::boolean, "false",
     "replace `output` even when it holds files that are not a dataset's"},
    {"kind", value_kind::string, "rmat", "rmat or uniform"},
    {"num_nodes", value_kind::integer, "2449029", "nodes (ogbn-products has 2449029)"},
    {"num_edges", value_kind::integer, "61859140", "edges drawn (ogbn-products has 61859140)"},
    {"a", value_kind::number, "0.57", "R-MAT probability of the top-left quadrant"},
    {"b", value_kind::number, "0.19", "R-MAT probability of the top-right quadrant"},
    {"c", value_kind::number, "0.19", "R-MAT probability of the bottom-left quadrant"},
    {"d", value_kind::number, "0.05", "R-MAT probability of the bottom-right quadrant"},
    {"scramble_ids", value_kind::boolean, "true", "R-MAT: permute ids so degree is not id order"},
    {"seed", value_kind::integer, "0", "random seed (>= 0)"},
    {"weights", value_kind::boolean, "false", "write float32 edge weights in (0, 1]"},
    {"feature_dim", value_kind::integer, "0", "random node features in [-1, 1) when > 0"},
    {"features_dtype", value_kind::string, "float32", "float32, float16 or bfloat16 on disk"},
    {"symmetrize", value_kind::boolean, "false", "add the reverse of every non-loop edge"},
    {"drop_self_loops", value_kind::boolean, "false", "remove edges (u, u)"},
    {"threads", value_kind::integer, "0", "generator threads (0: all cores)"},
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
  if (kind != "rmat" && kind != "uniform") {
    throw config_error("kind must be rmat or uniform, got '" + kind + "'");
  }
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

  std::printf("wholestore gen: %s, %llu nodes, %llu edges drawn, seed %llu -> %s\n", kind.c_str(),
              static_cast<unsigned long long>(opts.num_nodes),
              static_cast<unsigned long long>(opts.num_edges),
              static_cast<unsigned long long>(opts.seed), output.c_str());
  std::fflush(stdout);

  auto t0 = std::chrono::steady_clock::now();
  graph::host_csr g = graph::generate_graph(opts);
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
    std::ofstream report(args.report_file);
    report << "command: gen\noutput: " << output << "\nnum_nodes: " << m.num_nodes
           << "\nnum_edges: " << m.num_edges << "\ndirected: " << (m.directed ? "true" : "false")
           << "\ngenerate_s: " << gen_s << "\nwrite_s: " << write_s << "\nbytes_written: " << bytes
           << "\nconfig:\n";
    std::string cfg_yaml = cfg.to_yaml(), line;
    std::istringstream lines(cfg_yaml);
    while (std::getline(lines, line)) report << "  " << line << "\n";
    if (!report) throw config_error(args.report_file + ": cannot write the report");
  }
  return 0;
}

}  // namespace wholestore::apps
