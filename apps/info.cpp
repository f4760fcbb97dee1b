// `wholestore info <dataset-dir>`: what a dataset holds, checked (sizes and checksums) before
// anything is reported, with degree statistics and a log2 histogram of the row degrees.
#include "commands.hpp"
#include "config.hpp"

#include <graph/dataset.hpp>

#include <wholememory/dtype.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace wholestore::apps {

namespace {

constexpr int histogram_columns = 50;

void print_array(const char* what, const graph::array_file& a) {
  std::printf("  %-14s %-18s %-9s %12llu elements %14llu bytes  fnv1a64 0x%016llx\n", what,
              a.name.c_str(), wholememory::dtype_name(a.type),
              static_cast<unsigned long long>(a.count), static_cast<unsigned long long>(a.bytes),
              static_cast<unsigned long long>(a.checksum));
}

// "[lo, hi)" label of log2 bucket k (k = 0 holds degree 0).
std::string bucket_label(std::size_t k) {
  if (k == 0) return "0";
  const unsigned long long lo = 1ull << (k - 1), hi = (1ull << k) - 1;
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
}

}  // namespace

int run_info(int argc, char** argv) {
  if (argc != 2 || argv[1][0] == '-') {
    throw usage_error(argc < 2   ? "no dataset directory given"
                      : argc > 2 ? "one dataset directory expected, got " +
                                       std::to_string(argc - 1) + " arguments"
                                 : "unknown option '" + std::string(argv[1]) + "'");
  }
  const std::string dir = argv[1];
  // read_dataset checks the manifest, every size and every checksum before we print anything.
  const graph::manifest m = graph::read_manifest(dir);
  const graph::host_csr g = graph::read_dataset(dir);

  std::printf("dataset %s (format version %d, checksums OK)\n", dir.c_str(), m.format_version);
  const bool in_edges = m.direction == graph::edge_direction::in;
  std::printf("  nodes %llu, edges %llu, %s\n", static_cast<unsigned long long>(m.num_nodes),
              static_cast<unsigned long long>(m.num_edges),
              m.directed ? "directed" : "undirected (symmetrized)");
  std::printf("  direction %s: row v holds %s\n", graph::edge_direction_name(m.direction),
              in_edges ? "the nodes with an edge into v (rows by destination)"
                       : "v's out-neighbors (rows by source)");
  print_array("row_offsets", m.row_offsets);
  print_array("col_indices", m.col_indices);
  if (m.edge_weights) print_array("edge_weights", *m.edge_weights);
  if (m.node_features) {
    print_array("node_features", *m.node_features);
    std::printf("  feature_dim %llu\n", static_cast<unsigned long long>(m.feature_dim));
  }
  if (m.node_labels) {
    print_array("node_labels", *m.node_labels);
    print_array("node_split", *m.node_split);
    // read_dataset checked every value: labels in [0, num_classes) or unlabelled, splits 0-3.
    std::uint64_t split[4] = {0, 0, 0, 0}, labelled = 0;
    for (std::uint8_t v : g.node_split) ++split[v];
    for (std::int32_t c : g.node_labels) labelled += c != graph::unlabelled;
    std::printf("  num_classes %u; split: %llu train, %llu validation, %llu test", m.num_classes,
                static_cast<unsigned long long>(split[0]),
                static_cast<unsigned long long>(split[1]),
                static_cast<unsigned long long>(split[2]));
    if (split[3] != 0) std::printf(", %llu in none", static_cast<unsigned long long>(split[3]));
    std::printf("\n");
    if (labelled != m.num_nodes) {
      std::printf("  labelled %llu of %llu nodes (the others have label %d)\n",
                  static_cast<unsigned long long>(labelled),
                  static_cast<unsigned long long>(m.num_nodes), graph::unlabelled);
    }
  }
  if (!m.node_ids_file.empty()) std::printf("  original ids in %s\n", m.node_ids_file.c_str());

  const graph::degree_stats s = graph::compute_degree_stats(g.row_offsets);
  const char* degree = in_edges ? "in-degree" : "out-degree";
  std::printf("%s: min %llu, max %llu, mean %.3f, median %.1f, isolated %llu\n", degree,
              static_cast<unsigned long long>(s.min), static_cast<unsigned long long>(s.max),
              s.mean, s.median, static_cast<unsigned long long>(s.isolated));
  if (!s.log2_histogram.empty()) {
    const std::uint64_t peak = *std::max_element(s.log2_histogram.begin(), s.log2_histogram.end());
    std::printf("degree histogram (log2 buckets; # = %.3g nodes)\n",
                static_cast<double>(peak) / histogram_columns);
    for (std::size_t k = 0; k < s.log2_histogram.size(); ++k) {
      const std::uint64_t c = s.log2_histogram[k];
      // A non-empty bucket always shows at least one '#', so small buckets stay visible.
      int bar = static_cast<int>(static_cast<double>(c) * histogram_columns / peak + 0.5);
      if (c > 0 && bar == 0) bar = 1;
      std::printf("  %21s %12llu |%s\n", bucket_label(k).c_str(),
                  static_cast<unsigned long long>(c), std::string(bar, '#').c_str());
    }
  }
  return 0;
}

const command_info& info_command() {
  static const command_info info{
      "info",
      "counts, degree statistics and a degree histogram of a dataset",
      "DATASET_DIR",
      "No config: one positional argument, the dataset directory. Checks the manifest, file "
      "sizes, checksums and the CSR, then prints the counts, the direction of the rows (`out`: "
      "by source; `in`: by destination, from `convert` with `reverse`), each file's dtype, size "
      "and checksum, the classes and the train/validation/test split of a labelled dataset, "
      "degree statistics of the rows (out-degrees, or in-degrees for `direction: in`: min, max, "
      "mean, median, isolated nodes) and a histogram of the degrees in log2 buckets (`0`, `1`, "
      "`2..3`, `4..7`, ...), bars of `#` scaled so the largest bucket is 50 columns (a non-empty "
      "bucket shows at least one `#`).",
      {},
      {"wholestore info datasets/rmat-small"},
      run_info};
  return info;
}

}  // namespace wholestore::apps
