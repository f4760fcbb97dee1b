// `wholestore convert`: edge-list text, an on-disk description of NumPy arrays or OGB's raw
// layout to a dataset directory (graph::convert_edge_list, graph::import_ondisk or
// graph::import_ogb, then graph::write_dataset), with a summary of what was read and how fast.
#include "commands.hpp"
#include "config.hpp"
#include "progress.hpp"
#include "report.hpp"

#include <graph/convert.hpp>
#include <graph/dataset.hpp>
#include <graph/import.hpp>

#include <wholememory/dtype.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace wholestore::apps {

namespace {

const std::vector<config_key> convert_schema = {
    {"input", value_kind::string, "",
     "edge-list file, or `-` for the standard input (a pipe: `zcat g.txt.gz | wholestore "
     "convert --set input=- ...`), an on-disk description (`.yaml`) or an OGB dataset directory "
     "(see `input_format`); required, an empty value is an error"},
    {"input_format", value_kind::string, "auto",
     "`edgelist`, `ondisk` (a `format: wholestore-ondisk 1` YAML naming `.npy`/csv files: "
     "edges, weights, features, labels, splits), `ogb` (OGB's raw node-property layout: "
     "`raw/edge.csv.gz`, `split/<name>/train.csv.gz`, ...) or `auto`: a `.yaml`/`.yml` file is "
     "`ondisk`, a directory `ogb`, anything else `edgelist`"},
    {"split", value_kind::string, "",
     "`ogb` input: the directory under `split/` to read; empty: the only one there"},
    {"output", value_kind::string, "datasets/converted",
     "dataset directory (created if missing); an existing dataset is replaced whole, once the "
     "new one is complete; a directory holding other files is refused (see `overwrite`)"},
    {"overwrite", value_kind::boolean, "false",
     "replace `output` even when it holds files that are not a dataset's"},
    {"symmetrize", value_kind::boolean, "false",
     "add the reverse of every edge (manifest says `directed: false`)"},
    {"reverse", value_kind::boolean, "false",
     "store each edge `u -> v` in row `v` (rows by destination, the CSC of the input) so that "
     "samplers draw in-neighbors, as PyG and DGL aggregate; manifest says `direction: in`"},
    {"drop_self_loops", value_kind::boolean, "false", "leave out edges `u -> u`"},
    {"drop_duplicates", value_kind::boolean, "false",
     "keep one copy of each `(src, dst)`, after symmetrizing; rows sorted by destination"},
    {"weights", value_kind::boolean, "false",
     "edge lists: read the third column as a float32 edge weight"},
    {"numeric_ids_as_is", value_kind::boolean, "false",
     "edge lists: keep integer ids (`N = max id + 1`) instead of remapping to `0..N-1`"},
    {"features_dim", value_kind::integer, "0",
     "attach random node features (uniform in [-1, 1)) of this width to an input without "
     "features; 0: none"},
    {"features_dtype", value_kind::string, "float32", "`float32`, `float16` or `bfloat16` on disk"},
    {"seed", value_kind::integer, "1234", "seed of the random node features"},
};

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// ---- the on-disk description (docs/dataset-format.md, "On-disk dataset description") ----

constexpr const char* ondisk_format = "wholestore-ondisk 1";

// Its keys, checked by load_config like a config's: an unknown key or a value of the wrong type
// names the file and the line.  Absent keys keep these defaults ("default" origin).
const std::vector<config_key> ondisk_schema = {
    {"format", value_kind::string, "", "`wholestore-ondisk 1` (required)"},
    {"edges", value_kind::string, "", ".npy [2, E] or [E, 2], or csv (required)"},
    {"edge_weights", value_kind::string, "", ".npy float [E]"},
    {"node_features", value_kind::string, "", ".npy float [N, F]"},
    {"labels", value_kind::string, "", ".npy integer [N], -1 unlabelled"},
    {"num_classes", value_kind::integer, "0", "default: largest label + 1"},
    {"split.train", value_kind::string, "", ".npy node ids or bool mask [N]"},
    {"split.valid", value_kind::string, "", ".npy node ids or bool mask [N]"},
    {"split.test", value_kind::string, "", ".npy node ids or bool mask [N]"},
    {"num_nodes", value_kind::integer, "0", "default: rows of features or labels, else max id + 1"},
    {"directed", value_kind::boolean, "true", "false: each edge both ways"},
    {"symmetrize", value_kind::boolean, "false", "add the reverse of every edge"},
    {"reverse", value_kind::boolean, "false", "rows by destination (direction: in)"},
};

// Reads the description at `path`; file names in it are relative to its directory.
graph::ondisk_source read_ondisk_description(const std::string& path) {
  const config d = load_config(ondisk_schema, path, {});
  const auto given = [&](const char* key) { return d.origin.at(key) != "default"; };
  if (!given("format")) {
    throw config_error(path +
                       ": no `format` key; an on-disk dataset description starts with "
                       "`format: " +
                       ondisk_format + "` (docs/dataset-format.md)");
  }
  if (d.get_string("format") != ondisk_format) {
    throw config_error(d.origin.at("format") + ": format '" + d.get_string("format") +
                       "' is not read by this build, which reads '" + ondisk_format + "'");
  }
  if (d.get_string("edges").empty()) {
    throw config_error(path + ": no `edges` key naming the edge file (.npy or csv)");
  }
  const std::filesystem::path base = std::filesystem::path(path).parent_path();
  const auto file = [&](const char* key) -> std::string {
    const std::string& name = d.get_string(key);
    if (name.empty()) return "";
    const std::filesystem::path p(name);
    return (p.is_relative() ? base / p : p).string();
  };
  graph::ondisk_source s;
  s.edges = file("edges");
  s.edge_weights = file("edge_weights");
  s.node_features = file("node_features");
  s.labels = file("labels");
  s.train = file("split.train");
  s.valid = file("split.valid");
  s.test = file("split.test");
  if (given("num_nodes")) {
    s.num_nodes = static_cast<std::uint64_t>(d.get_int_at_least("num_nodes", 0));
  }
  if (given("num_classes")) {
    const std::int64_t classes = d.get_int_at_least("num_classes", 1);
    if (classes >= (std::int64_t{1} << 31)) {
      throw config_error(d.origin.at("num_classes") + ": num_classes " + std::to_string(classes) +
                         " must be below 2^31");
    }
    s.num_classes = static_cast<std::uint32_t>(classes);
  }
  s.directed = d.get_bool("directed");
  s.symmetrize = d.get_bool("symmetrize");
  s.reverse = d.get_bool("reverse");
  return s;
}

// `input_format`, with `auto` decided by the input's name and kind.
std::string input_format(const config& cfg, const std::string& input) {
  const std::string& format = cfg.get_string("input_format");
  if (format == "edgelist" || format == "ondisk" || format == "ogb") return format;
  if (format != "auto") {
    throw config_error("input_format '" + format + "' (" + cfg.origin.at("input_format") +
                       ") is not edgelist, ondisk, ogb or auto");
  }
  std::error_code ec;
  if (input != "-" && std::filesystem::is_directory(input, ec)) return "ogb";
  const std::string ext = std::filesystem::path(input).extension().string();
  if (ext == ".yaml" || ext == ".yml") return "ondisk";
  return "edgelist";
}

// Bytes the inputs of `format` hold, for the progress bar; 0 when unknown (a pipe).
std::uint64_t input_bytes_on_disk(const std::string& format, const std::string& input,
                                  const graph::ondisk_source* ondisk) {
  std::error_code ec;
  std::uint64_t total = 0;
  const auto add = [&](const std::string& path) {
    if (path.empty() || path == "-" || !std::filesystem::is_regular_file(path, ec)) return;
    const std::uint64_t size = std::filesystem::file_size(path, ec);
    if (!ec) total += size;
  };
  if (format == "edgelist") {
    add(input);
  } else if (ondisk) {
    for (const std::string* f : {&ondisk->edges, &ondisk->edge_weights, &ondisk->node_features,
                                 &ondisk->labels, &ondisk->train, &ondisk->valid, &ondisk->test}) {
      add(*f);
    }
  } else {
    // OGB: what import_ogb may read, raw/ and split/, less the edge features it skips (and
    // processed/, which OGB's loaders fill with a copy as large).
    for (const char* sub : {"raw", "split"}) {
      std::error_code walk;
      for (auto it = std::filesystem::recursive_directory_iterator(
               std::filesystem::path(input) / sub, walk);
           !walk && it != std::filesystem::recursive_directory_iterator(); it.increment(walk)) {
        if (it->path().filename().string().rfind("edge-feat", 0) != 0) add(it->path().string());
      }
    }
  }
  return total;
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
  const std::string format = input_format(cfg, input);
  if (format != "edgelist") {
    if (input == "-") throw config_error("input '-' (the standard input) is an edge list only");
    for (const char* key : {"weights", "numeric_ids_as_is"}) {
      if (cfg.get_bool(key)) {
        throw config_error(std::string(key) + " (" + cfg.origin.at(key) +
                           ") is for edge-list input; this input is " + format);
      }
    }
  }
  if (!cfg.get_string("split").empty() && format != "ogb") {
    throw config_error("split (" + cfg.origin.at("split") + ") names an OGB split; this input is " +
                       format);
  }
  const std::int64_t features_dim = cfg.get_int("features_dim");
  if (features_dim < 0) throw config_error("features_dim must be >= 0");
  const wholememory::dtype features_type =
      wholememory::parse_dtype(cfg.get_string("features_dtype"));

  graph::convert_options options;
  options.symmetrize = cfg.get_bool("symmetrize");
  options.reverse = cfg.get_bool("reverse");
  options.drop_self_loops = cfg.get_bool("drop_self_loops");
  options.drop_duplicates = cfg.get_bool("drop_duplicates");
  options.has_weights = cfg.get_bool("weights");
  options.numeric_ids_as_is = cfg.get_bool("numeric_ids_as_is");

  // Everything that can be checked before a long parse: the destination, the dtype and the
  // description.  The input is opened by the parse itself ("-": the standard input, any file
  // or pipe).
  graph::check_dataset_destination(output, features_type, cfg.get_bool("overwrite"));
  std::optional<graph::ondisk_source> ondisk;
  if (format == "ondisk") ondisk = read_ondisk_description(input);

  // Progress by bytes when the input's size is known (regular files; not a pipe).
  const std::uint64_t input_size = input_bytes_on_disk(format, input, ondisk ? &*ondisk : nullptr);
  progress_display bar(true, "read");
  options.progress = [&](std::uint64_t bytes) { bar.update(bytes, input_size); };
  auto t0 = std::chrono::steady_clock::now();
  graph::convert_stats read;
  graph::host_csr g = format == "ondisk" ? graph::import_ondisk(*ondisk, options, &read)
                      : format == "ogb"
                          ? graph::import_ogb(input, options, cfg.get_string("split"), &read)
                          : graph::convert_edge_list(input, options, &read);
  const double parse_s = seconds_since(t0);
  const std::uint64_t input_bytes = read.bytes;
  if (features_dim > 0 && g.feature_dim > 0) {
    throw config_error("features_dim " + std::to_string(features_dim) + " (" +
                       cfg.origin.at("features_dim") + "): the input has its own features (" +
                       std::to_string(g.feature_dim) + " per node); set features_dim to 0");
  }
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
  if (m.direction == graph::edge_direction::in) {
    std::printf("  direction  in: row v holds the nodes with an edge into v (reverse)\n");
  }
  if (m.node_features && features_dim == 0) {
    std::printf("  features   %llu per node, from the input\n",
                static_cast<unsigned long long>(m.feature_dim));
  }
  if (m.node_labels) {
    std::uint64_t labelled = 0, split[4] = {0, 0, 0, 0};
    for (std::uint64_t v = 0; v < g.num_nodes; ++v) {
      labelled += g.node_labels[v] != graph::unlabelled;
      ++split[std::min<std::uint8_t>(g.node_split[v], graph::split_none)];
    }
    std::printf("  labels     %u classes, %llu of %llu nodes labelled\n", m.num_classes,
                static_cast<unsigned long long>(labelled),
                static_cast<unsigned long long>(m.num_nodes));
    std::printf(
        "  split      %llu train, %llu validation, %llu test, %llu in none\n",
        static_cast<unsigned long long>(split[0]), static_cast<unsigned long long>(split[1]),
        static_cast<unsigned long long>(split[2]), static_cast<unsigned long long>(split[3]));
  }
  if (read.byte_order_mark) std::printf("  bom        a UTF-8 byte order mark on line 1 ignored\n");
  if (read.header_line != 0) {
    std::printf("  header     line %llu skipped as a header: '%s'\n",
                static_cast<unsigned long long>(read.header_line), read.header_text.c_str());
  }
  if (read.edges == 0 && format != "edgelist") {
    std::fprintf(stderr, "wholestore convert: warning: %s holds no edges; %s has %llu nodes\n",
                 input.c_str(), output.c_str(), static_cast<unsigned long long>(m.num_nodes));
  } else if (read.edges == 0) {
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
    report_body report("convert");
    report.add("input", input)
        .add("output", output)
        .add("num_nodes", m.num_nodes)
        .add("num_edges", m.num_edges)
        .add("input_bytes", input_bytes)
        .add("edge_lines", read.edges)
        .add("header_line", read.header_line)
        .add("parse_s", parse_s)
        .add("write_s", write_s);
    write_report(args.report_file, report, &cfg);
  }
  return 0;
}

const command_info& convert_command() {
  static const command_info info{
      "convert",
      "edge lists, .npy arrays or OGB's raw layout to a dataset directory",
      "",
      "Edge-list text, an on-disk description of `.npy` arrays (edges, weights, features, "
      "labels, splits) or OGB's raw node-property layout to a dataset directory "
      "([docs/dataset-format.md](dataset-format.md) describes the inputs it accepts and the "
      "output). Prints nodes, edges, features, labels and splits, parse time and MB/s read.",
      {{"", "configs/convert.yaml", "", &convert_schema, ""}},
      {"wholestore convert configs/convert.yaml --set input=../shared/data/cora.cites "
       "--set output=datasets/cora",
       "wholestore convert configs/convert.yaml --set input=../shared/data/facebook_combined.txt "
       "--set symmetrize=true --set drop_duplicates=true --set output=datasets/facebook",
       "wholestore convert configs/convert.yaml --set input=data/mygraph/dataset.yaml "
       "--set output=datasets/mygraph",
       "wholestore convert configs/convert.yaml --set input=dataset/ogbn_arxiv --set reverse=true "
       "--set output=datasets/arxiv"},
      run_convert};
  return info;
}

}  // namespace wholestore::apps
