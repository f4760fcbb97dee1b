// `wholestore convert`: edge-list text to a dataset directory (graph::convert_edge_list, then
// graph::write_dataset), with a summary of what was read and how fast.
#include "commands.hpp"
#include "config.hpp"
#include "progress.hpp"
#include "report.hpp"

#include <graph/convert.hpp>
#include <graph/dataset.hpp>

#include <wholememory/dtype.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace wholestore::apps {

namespace {

const std::vector<config_key> convert_schema = {
    {"input", value_kind::string, "",
     "edge-list file, or `-` for the standard input (a pipe: `zcat g.txt.gz | wholestore "
     "convert --set input=- ...`); required, an empty value is an error"},
    {"output", value_kind::string, "datasets/converted",
     "dataset directory (created if missing); an existing dataset is replaced whole, once the "
     "new one is complete; a directory holding other files is refused (see `overwrite`)"},
    {"overwrite", value_kind::boolean, "false",
     "replace `output` even when it holds files that are not a dataset's"},
    {"symmetrize", value_kind::boolean, "false",
     "add the reverse of every edge (manifest says `directed: false`)"},
    {"drop_self_loops", value_kind::boolean, "false", "leave out edges `u -> u`"},
    {"drop_duplicates", value_kind::boolean, "false",
     "keep one copy of each `(src, dst)`, after symmetrizing; rows sorted by destination"},
    {"weights", value_kind::boolean, "false", "read the third column as a float32 edge weight"},
    {"numeric_ids_as_is", value_kind::boolean, "false",
     "keep integer ids (`N = max id + 1`) instead of remapping to `0..N-1`"},
    {"features_dim", value_kind::integer, "0",
     "attach random node features (uniform in [-1, 1)) of this width; 0: none"},
    {"features_dtype", value_kind::string, "float32", "`float32`, `float16` or `bfloat16` on disk"},
    {"seed", value_kind::integer, "1234", "seed of the random node features"},
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int run_convert(int argc, char** argv) {
  command_args args = parse_command_args(argc, argv);
  config cfg = load_config(convert_schema, args.config_file, args.overrides);
  const std::string input = cfg.get_string("input");
  const std::string output = cfg.get_string("output");
  if (input.empty()) {
    throw config_error("input is empty: set it in the config or with --set input=<edge list>");
  }
  if (output.empty()) throw config_error("output is empty: name the dataset directory");
  const std::int64_t features_dim = cfg.get_int("features_dim");
  if (features_dim < 0) throw config_error("features_dim must be >= 0");
  const wholememory::dtype features_type =
      wholememory::parse_dtype(cfg.get_string("features_dtype"));

  graph::convert_options options;
  options.symmetrize = cfg.get_bool("symmetrize");
  options.drop_self_loops = cfg.get_bool("drop_self_loops");
  options.drop_duplicates = cfg.get_bool("drop_duplicates");
  options.has_weights = cfg.get_bool("weights");
  options.numeric_ids_as_is = cfg.get_bool("numeric_ids_as_is");

  // Everything that can be checked before a long parse: the destination and the dtype.  The
  // input is opened by the parse itself ("-": the standard input, any file or pipe).
  graph::check_dataset_destination(output, features_type, cfg.get_bool("overwrite"));

  // Progress by bytes when the input's size is known (a regular file; not a pipe).
  std::uint64_t input_size = 0;
  {
    std::error_code ec;
    if (input != "-" && std::filesystem::is_regular_file(input, ec)) {
      input_size = std::filesystem::file_size(input, ec);
      if (ec) input_size = 0;
    }
  }
  progress_display bar(true, "read");
  options.progress = [&](std::uint64_t bytes) { bar.update(bytes, input_size); };
  auto t0 = std::chrono::steady_clock::now();
  graph::convert_stats read;
  graph::host_csr g = graph::convert_edge_list(input, options, &read);
  const double parse_s = seconds_since(t0);
  const std::uint64_t input_bytes = read.bytes;
  if (features_dim > 0) {
    g.feature_dim = static_cast<std::uint64_t>(features_dim);
    g.node_features.resize(g.num_nodes * g.feature_dim);
    std::mt19937_64 rng(static_cast<std::uint64_t>(cfg.get_int("seed")));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (float& x : g.node_features) x = u(rng);
  }
  t0 = std::chrono::steady_clock::now();
  graph::manifest m = graph::write_dataset(output, g, features_type, cfg.get_bool("overwrite"));
  const double write_s = seconds_since(t0);

  std::printf("wholestore convert: %s -> %s\n", input == "-" ? "standard input" : input.c_str(),
              output.c_str());
  std::printf("  nodes      %llu%s\n", static_cast<unsigned long long>(m.num_nodes),
              g.node_ids.empty() ? "" : " (ids remapped, originals in node_ids.txt)");
  std::printf("  edges      %llu (%s)\n", static_cast<unsigned long long>(m.num_edges),
              m.directed ? "directed" : "symmetrized");
  if (read.byte_order_mark) std::printf("  bom        a UTF-8 byte order mark on line 1 ignored\n");
  if (read.header_line != 0) {
    std::printf("  header     line %llu skipped as a header: '%s'\n",
                static_cast<unsigned long long>(read.header_line), read.header_text.c_str());
  }
  if (read.edges == 0) {
    std::fprintf(stderr,
                 "wholestore convert: warning: %s holds no edges (%llu line(s): comments, blank "
                 "lines%s); %s has 0 nodes\n",
                 input.c_str(), static_cast<unsigned long long>(read.lines),
                 read.header_line != 0 ? ", a header" : "", output.c_str());
  }
  std::printf("  read+parse %8.3f s  %8.1f MB/s (%.1f MB)\n", parse_s,
              parse_s > 0 ? input_bytes / parse_s / 1e6 : 0.0, input_bytes / 1e6);
  std::printf("  write      %8.3f s\n", write_s);
  if (!args.report_file.empty()) {
    std::ostringstream report;
    report << "command: convert\ninput: " << input << "\noutput: " << output
           << "\nnum_nodes: " << m.num_nodes << "\nnum_edges: " << m.num_edges
           << "\ninput_bytes: " << input_bytes << "\nedge_lines: " << read.edges
           << "\nheader_line: " << read.header_line << "\nparse_s: " << parse_s
           << "\nwrite_s: " << write_s << "\n";
    write_report(args.report_file, report.str(), &cfg);
  }
  return 0;
}

const command_info& convert_command() {
  static const command_info info{
      "convert",
      "edge-list text to a dataset directory",
      "",
      "Edge-list text to a dataset directory ([docs/dataset-format.md](dataset-format.md) "
      "describes both the input it accepts and the output). Prints nodes, edges, parse time and "
      "MB/s read.",
      {{"", "configs/convert.yaml", "", &convert_schema, ""}},
      {"wholestore convert configs/convert.yaml --set input=../shared/data/cora.cites "
       "--set output=datasets/cora",
       "wholestore convert configs/convert.yaml --set input=../shared/data/facebook_combined.txt "
       "--set symmetrize=true --set drop_duplicates=true --set output=datasets/facebook"},
      run_convert};
  return info;
}

}  // namespace wholestore::apps
