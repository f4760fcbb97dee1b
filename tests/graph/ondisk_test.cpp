// Labelled datasets in (graph/import.hpp): the on-disk description's .npy and csv inputs and
// OGB's raw layout, written here as fixtures of 50 nodes, imported, written as a dataset, read
// back and compared exactly with the fixture; rows by destination (reverse) against a CSC
// computed by hand; and every hostile input named by file, row and value.
#include <graph/convert.hpp>
#include <graph/dataset.hpp>
#include <graph/import.hpp>

#include <wholememory/error.hpp>

#include "common/temp_dir.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace graph = wholestore::graph;
using graph::host_csr;
using edge_list = std::vector<std::pair<std::int64_t, std::int64_t>>;

// ---- fixture writers ----

void write_bytes(const std::string& path, const std::string& bytes) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// A .npy file as NumPy writes it: version 1.0, the dict padded with spaces to a multiple of 64
// bytes and ended by '\n', then the elements.
std::string npy_bytes(const std::string& descr, const std::vector<std::uint64_t>& shape,
                      const void* data, std::size_t bytes, bool fortran = false) {
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                     ", 'shape': (" + dims + "), }";
  const std::size_t total = 10 + dict.size() + 1;
  dict.append((total + 63) / 64 * 64 - total, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  out += dict;
  out.append(static_cast<const char*>(data), bytes);
  return out;
}

template <typename T>
void write_npy(const std::string& path, const std::string& descr,
               const std::vector<std::uint64_t>& shape, const std::vector<T>& values) {
  write_bytes(path, npy_bytes(descr, shape, values.data(), values.size() * sizeof(T)));
}

std::uint32_t crc32(const std::string& bytes) {
  std::uint32_t crc = 0xffffffffu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return crc ^ 0xffffffffu;
}

// A gzip member of stored (uncompressed) deflate blocks: a real .gz any gunzip reads, written
// without zlib so that the test does not depend on it.
std::string gzip_stored(const std::string& text) {
  std::string out("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10);
  std::size_t pos = 0;
  do {
    const std::size_t n = std::min<std::size_t>(65535, text.size() - pos);
    const bool last = pos + n == text.size();
    out += static_cast<char>(last ? 1 : 0);
    const std::uint16_t len = static_cast<std::uint16_t>(n), nlen = static_cast<std::uint16_t>(~n);
    for (std::uint16_t v : {len, nlen}) {
      out += static_cast<char>(v & 0xff);
      out += static_cast<char>(v >> 8);
    }
    out.append(text, pos, n);
    pos += n;
  } while (pos < text.size());
  for (std::uint32_t v : {crc32(text), static_cast<std::uint32_t>(text.size())}) {
    for (int k = 0; k < 4; ++k) out += static_cast<char>((v >> (8 * k)) & 0xff);
  }
  return out;
}

template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const wholememory::logic_error& e) {
    const std::string what = e.what();
    for (const std::string& p : parts) {
      EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
    }
  }
}

// ---- the reference: a labelled graph of 50 nodes ----

struct fixture {
  static constexpr std::uint64_t n = 50, dim = 4, classes = 5;
  edge_list edges;
  std::vector<float> weights;   // one per edge
  std::vector<float> features;  // n x dim, exact in float16 too
  std::vector<std::int64_t> labels;
  std::vector<std::int64_t> train, valid, test;

  fixture() {
    std::mt19937_64 rng(43);
    for (int e = 0; e < 200; ++e) {
      edges.emplace_back(static_cast<std::int64_t>(rng() % n),
                         static_cast<std::int64_t>(rng() % n));
      weights.push_back(static_cast<float>(rng() % 16) * 0.5f);
    }
    edges.emplace_back(0, static_cast<std::int64_t>(n - 1));  // ids at both ends
    weights.push_back(1.0f);
    for (std::uint64_t i = 0; i < n * dim; ++i) {
      features.push_back(static_cast<float>(static_cast<int>(rng() % 64) - 32) * 0.125f);
    }
    for (std::uint64_t v = 0; v < n; ++v) {
      labels.push_back(v % 7 == 3 ? -1 : static_cast<std::int64_t>(v % classes));
    }
    // Shuffled id lists of labelled nodes; the last few labelled nodes are in no split.
    std::vector<std::int64_t> labelled;
    for (std::uint64_t v = 0; v < n; ++v) {
      if (labels[v] >= 0) labelled.push_back(static_cast<std::int64_t>(v));
    }
    std::shuffle(labelled.begin(), labelled.end(), rng);
    train.assign(labelled.begin(), labelled.begin() + 20);
    valid.assign(labelled.begin() + 20, labelled.begin() + 28);
    test.assign(labelled.begin() + 28, labelled.begin() + 36);
  }

  std::vector<std::int64_t> sources() const {
    std::vector<std::int64_t> s;
    for (auto [u, v] : edges) s.push_back(u);
    return s;
  }
  std::vector<std::int64_t> destinations() const {
    std::vector<std::int64_t> d;
    for (auto [u, v] : edges) d.push_back(v);
    return d;
  }
  std::vector<std::uint8_t> split() const {
    std::vector<std::uint8_t> s(n, graph::split_none);
    for (auto v : train) s[static_cast<std::size_t>(v)] = graph::split_train;
    for (auto v : valid) s[static_cast<std::size_t>(v)] = graph::split_valid;
    for (auto v : test) s[static_cast<std::size_t>(v)] = graph::split_test;
    return s;
  }
  std::vector<std::int32_t> labels32() const { return {labels.begin(), labels.end()}; }
};

// The rows a CSR must hold: by source (or destination), in input order.
struct reference_rows {
  std::vector<std::int64_t> row_offsets, col_indices;
  std::vector<float> weights;
};
reference_rows rows_of(const edge_list& edges, const std::vector<float>& weights, std::uint64_t n,
                       bool reverse) {
  reference_rows r;
  r.row_offsets.push_back(0);
  for (std::uint64_t v = 0; v < n; ++v) {
    for (std::size_t e = 0; e < edges.size(); ++e) {
      const auto [u, w] = edges[e];
      if (static_cast<std::uint64_t>(reverse ? w : u) != v) continue;
      r.col_indices.push_back(reverse ? u : w);
      if (!weights.empty()) r.weights.push_back(weights[e]);
    }
    r.row_offsets.push_back(static_cast<std::int64_t>(r.col_indices.size()));
  }
  return r;
}

// Writes `g` as a dataset and reads it back: what a user of the dataset gets.
host_csr round_trip(const host_csr& g, const std::string& dir,
                    wholememory::dtype features = wholememory::dtype::float32) {
  graph::write_dataset(dir, g, features);
  return graph::read_dataset(dir);
}

void expect_graph(const host_csr& g, const fixture& f, bool reverse, bool weighted) {
  const reference_rows r =
      rows_of(f.edges, weighted ? f.weights : std::vector<float>{}, f.n, reverse);
  EXPECT_EQ(g.num_nodes, f.n);
  EXPECT_EQ(g.row_offsets, r.row_offsets);
  EXPECT_EQ(g.col_indices, r.col_indices);
  EXPECT_EQ(g.edge_weights, r.weights);
  EXPECT_EQ(g.direction, reverse ? graph::edge_direction::in : graph::edge_direction::out);
  EXPECT_TRUE(g.directed);
  EXPECT_EQ(g.feature_dim, f.dim);
  EXPECT_EQ(g.node_features, f.features);
  EXPECT_EQ(g.node_labels, f.labels32());
  EXPECT_EQ(g.node_split, f.split());
  EXPECT_EQ(g.num_classes, f.classes);
  EXPECT_TRUE(g.node_ids.empty());
}

class Ondisk : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return (dir.path / name).string(); }
  wholestore_test::temp_dir dir{"wholestore_ondisk"};
  fixture f;
};

// ---- on-disk description ----

TEST_F(Ondisk, NpyArraysByRows) {
  std::vector<std::int64_t> edge_index = f.sources();  // [2, E]: sources, then destinations
  const auto dst = f.destinations();
  edge_index.insert(edge_index.end(), dst.begin(), dst.end());
  write_npy(file("edges.npy"), "<i8", {2, f.edges.size()}, edge_index);
  write_npy(file("feat.npy"), "<f4", {f.n, f.dim}, f.features);
  write_npy(file("labels.npy"), "<i8", {f.n}, f.labels);
  write_npy(file("train.npy"), "<i8", {f.train.size()}, f.train);
  write_npy(file("valid.npy"), "<i8", {f.valid.size()}, f.valid);
  write_npy(file("test.npy"), "<i8", {f.test.size()}, f.test);
  graph::ondisk_source s;
  s.edges = file("edges.npy");
  s.node_features = file("feat.npy");
  s.labels = file("labels.npy");
  s.train = file("train.npy");
  s.valid = file("valid.npy");
  s.test = file("test.npy");
  graph::convert_stats stats;
  const host_csr g = graph::import_ondisk(s, {}, &stats);
  EXPECT_EQ(stats.edges, f.edges.size());
  EXPECT_GT(stats.bytes, f.edges.size() * 16);
  const host_csr back = round_trip(g, file("out"));
  expect_graph(back, f, false, false);
  const graph::manifest m = graph::read_manifest(file("out"));
  EXPECT_EQ(m.direction, graph::edge_direction::out);
  ASSERT_TRUE(m.node_labels && m.node_split);
}

// [E, 2] int32 pairs, float16 features and weights, int32 labels, bool masks, and rows by
// destination asked for in the description.
TEST_F(Ondisk, NpyPairsMasksFloat16Reversed) {
  std::vector<std::int32_t> pairs;
  for (auto [u, v] : f.edges) {
    pairs.push_back(static_cast<std::int32_t>(u));
    pairs.push_back(static_cast<std::int32_t>(v));
  }
  write_npy(file("edges.npy"), "<i4", {f.edges.size(), 2}, pairs);
  // float16 patterns of the fixture's values (multiples of 1/8 below 8: exact).
  auto to_half = [](float x) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    if (x == 0.0f) return static_cast<std::uint16_t>(bits >> 16);
    const std::uint32_t sign = (bits >> 16) & 0x8000u;
    const int exp = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
    return static_cast<std::uint16_t>(sign | (static_cast<std::uint32_t>(exp) << 10) |
                                      ((bits >> 13) & 0x3ffu));
  };
  std::vector<std::uint16_t> half_features, half_weights;
  for (float x : f.features) half_features.push_back(to_half(x));
  for (float x : f.weights) half_weights.push_back(to_half(x));
  write_npy(file("feat.npy"), "<f2", {f.n, f.dim}, half_features);
  write_npy(file("w.npy"), "<f2", {f.edges.size()}, half_weights);
  write_npy(file("labels.npy"), "<i4", {f.n, 1}, std::vector<std::int32_t>(f.labels32()));
  const auto split = f.split();
  for (std::uint8_t k = 0; k < 3; ++k) {
    std::vector<std::uint8_t> mask(f.n);
    for (std::uint64_t v = 0; v < f.n; ++v) mask[v] = split[v] == k;
    write_npy(file("mask" + std::to_string(k) + ".npy"), "|b1", {f.n}, mask);
  }
  graph::ondisk_source s;
  s.edges = file("edges.npy");
  s.edge_weights = file("w.npy");
  s.node_features = file("feat.npy");
  s.labels = file("labels.npy");
  s.train = file("mask0.npy");
  s.valid = file("mask1.npy");
  s.test = file("mask2.npy");
  s.reverse = true;
  const host_csr g = graph::import_ondisk(s, {});
  expect_graph(round_trip(g, file("out"), wholememory::dtype::float16), f, true, true);
  EXPECT_EQ(graph::read_manifest(file("out")).direction, graph::edge_direction::in);
}

// csv edges with a header, comments and CRLF; num_nodes beyond the largest id (isolated nodes
// at the end); no labels; the node count from features when not given.
TEST_F(Ondisk, CsvEdges) {
  std::string csv = "src,dst\r\n# a comment\r\n";
  for (auto [u, v] : f.edges) csv += std::to_string(u) + ", " + std::to_string(v) + "\r\n";
  write_bytes(file("edges.csv"), csv);
  graph::ondisk_source s;
  s.edges = file("edges.csv");
  s.num_nodes = 60;
  graph::convert_stats stats;
  host_csr g = graph::import_ondisk(s, {}, &stats);
  EXPECT_EQ(stats.header_line, 1u);
  EXPECT_EQ(stats.edges, f.edges.size());
  reference_rows r = rows_of(f.edges, {}, 60, false);
  EXPECT_EQ(g.num_nodes, 60u);
  EXPECT_EQ(g.row_offsets, r.row_offsets);
  EXPECT_EQ(g.col_indices, r.col_indices);
  EXPECT_TRUE(g.node_labels.empty());

  s.num_nodes.reset();
  write_npy(file("feat.npy"), "<f4", {f.n, f.dim}, f.features);
  s.node_features = file("feat.npy");
  g = graph::import_ondisk(s, {});
  EXPECT_EQ(g.num_nodes, f.n);
  EXPECT_EQ(g.node_features, f.features);

  // Without any per-node array: largest id + 1.
  write_bytes(file("small.csv"), "3 1\n1 2\n");
  s = {};
  s.edges = file("small.csv");
  EXPECT_EQ(graph::import_ondisk(s, {}).num_nodes, 4u);
}

// Symmetrize (undirected input) and drop duplicates and self loops, as convert does.
TEST_F(Ondisk, UndirectedInputIsSymmetrized) {
  write_bytes(file("e.csv"), "0,1\n1,2\n2,2\n1,0\n");
  graph::ondisk_source s;
  s.edges = file("e.csv");
  s.directed = false;
  graph::convert_options o;
  o.drop_duplicates = true;
  o.drop_self_loops = true;
  const host_csr g = graph::import_ondisk(s, o);
  EXPECT_FALSE(g.directed);
  EXPECT_EQ(g.row_offsets, (std::vector<std::int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(g.col_indices, (std::vector<std::int64_t>{1, 0, 2, 1}));
}

// ---- in-edges: rows by destination ----

TEST_F(Ondisk, ReverseIsTheCscComputedByHand) {
  // 0 -> 1, 0 -> 2, 1 -> 2, 3 -> 0, 2 -> 2: row v lists the sources of v's in-edges in input
  // order: 0: {3}, 1: {0}, 2: {0, 1, 2}, 3: {}.
  const std::vector<std::int64_t> offsets = {0, 1, 2, 5, 5}, cols = {3, 0, 0, 1, 2};
  write_bytes(file("e.txt"), "0 1\n0 2\n1 2\n3 0\n2 2\n");
  graph::convert_options o;
  o.reverse = true;
  o.numeric_ids_as_is = true;
  const host_csr from_text = graph::convert_edge_list(file("e.txt"), o);
  EXPECT_EQ(from_text.row_offsets, offsets);
  EXPECT_EQ(from_text.col_indices, cols);
  EXPECT_EQ(from_text.direction, graph::edge_direction::in);

  write_npy(file("e.npy"), "<i8", {5, 2}, std::vector<std::int64_t>{0, 1, 0, 2, 1, 2, 3, 0, 2, 2});
  graph::ondisk_source s;
  s.edges = file("e.npy");
  o.numeric_ids_as_is = false;
  const host_csr back = round_trip(graph::import_ondisk(s, o), file("out"));
  EXPECT_EQ(back.row_offsets, offsets);
  EXPECT_EQ(back.col_indices, cols);
  EXPECT_EQ(back.direction, graph::edge_direction::in);
  std::ifstream in(file("out/manifest.yaml"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("\ndirection: in\n"), std::string::npos) << text;

  // Without reverse the same file is stored by source (and says so).
  const host_csr out = graph::import_ondisk(s, {});
  EXPECT_EQ(out.row_offsets, (std::vector<std::int64_t>{0, 2, 3, 4, 5}));
  EXPECT_EQ(out.col_indices, (std::vector<std::int64_t>{1, 2, 2, 2, 0}));
  EXPECT_EQ(out.direction, graph::edge_direction::out);
}

// Datasets written before `direction` existed read as out; a bad value is named.
TEST_F(Ondisk, ManifestDirectionKey) {
  write_bytes(file("e.csv"), "0,1\n1,2\n");
  graph::ondisk_source s;
  s.edges = file("e.csv");
  graph::write_dataset(file("out"), graph::import_ondisk(s, {}));
  const std::string path = file("out/manifest.yaml");
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t at = text.find("direction: out\n");
  ASSERT_NE(at, std::string::npos) << text;
  std::string old = text;
  old.erase(at, std::strlen("direction: out\n"));
  write_bytes(path, old);
  EXPECT_EQ(graph::read_dataset(file("out")).direction, graph::edge_direction::out);
  std::string bad = text;
  bad.replace(at, std::strlen("direction: out"), "direction: sideways");
  write_bytes(path, bad);
  expect_error([&] { graph::read_manifest(file("out")); }, {path + ":6", "sideways"});
}

// ---- OGB raw layout ----

class Ogb : public Ondisk {
 protected:
  // The fixture in OGB's layout under `root`; every file gzip-compressed when `gz`.
  void write_layout(const std::string& root, bool gz) {
    auto put = [&](const std::string& name, const std::string& text) {
      const std::string path = (fs::path(root) / name).string();
      if (gz) {
        write_bytes(path + ".gz", gzip_stored(text));
      } else {
        write_bytes(path, text);
      }
    };
    std::string edges, feat, labels;
    for (auto [u, v] : f.edges) edges += std::to_string(u) + "," + std::to_string(v) + "\n";
    for (std::uint64_t v = 0; v < f.n; ++v) {
      for (std::uint64_t k = 0; k < f.dim; ++k) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%s%.3f", k ? "," : "", f.features[v * f.dim + k]);
        feat += buf;
      }
      feat += "\n";
      // Unlabelled as OGB's pandas writes them (empty) or as nan, alternately.
      labels += f.labels[v] >= 0 ? std::to_string(f.labels[v]) : (v % 2 ? "nan" : "");
      labels += "\n";
    }
    put("raw/edge.csv", edges);
    put("raw/num-node-list.csv", std::to_string(f.n) + "\n");
    put("raw/num-edge-list.csv", std::to_string(f.edges.size()) + "\n");
    put("raw/node-feat.csv", feat);
    put("raw/node-label.csv", labels);
    const std::vector<std::int64_t>* lists[3] = {&f.train, &f.valid, &f.test};
    const char* names[3] = {"train", "valid", "test"};
    for (int k = 0; k < 3; ++k) {
      std::string text;
      for (auto v : *lists[k]) text += std::to_string(v) + "\n";
      put(std::string("split/time/") + names[k] + ".csv", text);
    }
  }
};

TEST_F(Ogb, PlainCsv) {
  write_layout(file("ogbn_tiny"), false);
  graph::convert_stats stats;
  const host_csr g = graph::import_ogb(file("ogbn_tiny"), {}, "", &stats);
  EXPECT_EQ(stats.edges, f.edges.size());
  expect_graph(round_trip(g, file("out")), f, false, false);
}

TEST_F(Ogb, GzipAndReverse) {
  write_layout(file("ogbn_tiny"), true);
  graph::convert_options o;
  o.reverse = true;
  if (!graph::gzip_supported()) {
    expect_error([&] { graph::import_ogb(file("ogbn_tiny"), o); },
                 {"num-node-list.csv.gz", "gzip", "zlib"});
    return;
  }
  expect_graph(round_trip(graph::import_ogb(file("ogbn_tiny"), o), file("out")), f, true, false);
  // A truncated member is an error, not a shorter file.
  const std::string path = file("ogbn_tiny/raw/edge.csv.gz");
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  write_bytes(path, bytes.substr(0, bytes.size() / 2));
  expect_error([&] { graph::import_ogb(file("ogbn_tiny"), o); }, {path, "truncated"});
}

TEST_F(Ogb, SplitChoiceAndMissingParts) {
  write_layout(file("d"), false);
  fs::create_directories(file("d/split/random"));
  for (const char* name : {"train", "valid", "test"}) {
    write_bytes(file(std::string("d/split/random/") + name + ".csv"), "");
  }
  expect_error([&] { graph::import_ogb(file("d"), {}); }, {"2 splits", "random, time", "`split`"});
  const host_csr g = graph::import_ogb(file("d"), {}, "random");
  EXPECT_EQ(g.node_split, std::vector<std::uint8_t>(f.n, graph::split_none));
  EXPECT_EQ(graph::import_ogb(file("d"), {}, "time").node_split, f.split());
  expect_error([&] { graph::import_ogb(file("d"), {}, "nope"); }, {"split/nope"});
  fs::remove(file("d/split/random/valid.csv"));
  expect_error([&] { graph::import_ogb(file("d"), {}, "random"); },
               {"random/valid.csv", "missing"});
  fs::remove_all(file("d/split"));
  EXPECT_EQ(graph::import_ogb(file("d"), {}).node_split,
            std::vector<std::uint8_t>(f.n, graph::split_none));
  fs::remove(file("d/raw/edge.csv"));
  expect_error([&] { graph::import_ogb(file("d"), {}); }, {"raw/edge.csv", "missing"});
  expect_error([&] { graph::import_ogb(file("nothing"), {}); }, {"nothing", "not a directory"});
}

TEST_F(Ogb, HostileFiles) {
  write_layout(file("d"), false);
  const std::string raw = file("d/raw/");
  auto with = [&](const std::string& name, const std::string& text, auto&& check) {
    std::ifstream in(raw + name, std::ios::binary);
    const std::string saved((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    in.close();
    write_bytes(raw + name, text);
    check();
    write_bytes(raw + name, saved);
  };
  const auto import = [&] { graph::import_ogb(file("d"), {}); };
  with("edge.csv", "0,1\n1,50\n", [&] {
    expect_error(import, {raw + "edge.csv:2", "destination id 50", "[0, num_nodes = 50)"});
  });
  with("edge.csv", "0,1\n-3,4\n", [&] { expect_error(import, {"edge.csv:2", "source id -3"}); });
  with("edge.csv", "0,1\n2 3 4\n", [&] { expect_error(import, {"edge.csv:2", "'2 3 4'"}); });
  with("num-node-list.csv", "50\n50\n", [&] {
    expect_error(import, {"num-node-list.csv:2", "single-graph"});
  });
  with("num-node-list.csv", "2000000000000\n", [&] {
    expect_error(import, {"num-node-list.csv", "2000000000000", "2^40"});
  });
  with("node-label.csv", "1\n2\nabc\n", [&] {
    expect_error(import, {"node-label.csv:3", "label 'abc'"});
  });
  with("node-label.csv", "1\n2\n", [&] { expect_error(import, {"node-label.csv", "2 labels"}); });
  with("node-label.csv", std::string(f.n, '\n'), [&] { expect_error(import, {"unlabelled"}); });
  with("node-feat.csv", "1,2,3,4\n1,2,3\n", [&] {
    expect_error(import, {"node-feat.csv:2", "3 values, expected 4"});
  });
  with("node-feat.csv", "1,2,3,4\n1,x,3,4\n", [&] {
    expect_error(import, {"node-feat.csv:2", "'x'", "node 1"});
  });
  with("num-edge-list.csv", "7\n", [&] { expect_error(import, {"201 edges", "says 7"}); });

  const std::string split = file("d/split/time/");
  const std::int64_t unlabelled_node = 3, in_train = f.train[0];
  with("../split/time/valid.csv", "99\n", [&] {
    expect_error(import, {"valid.csv:1", "node id 99", "[0, num_nodes = 50)"});
  });
  with("../split/time/valid.csv", std::to_string(f.valid[0]) + "\n" + std::to_string(f.valid[0]),
       [&] {
         expect_error(import, {"valid.csv:2", "listed twice in valid"});
       });
  with("../split/time/test.csv", std::to_string(in_train) + "\n", [&] {
    expect_error(import, {"test.csv:1", "already in train", "train.csv"});
  });
  with("../split/time/test.csv", std::to_string(unlabelled_node) + "\n", [&] {
    expect_error(import, {"test.csv:1", "node 3", "unlabelled"});
  });
  fs::remove(raw + "node-label.csv");
  expect_error(import, {"splits without labels"});
}

// ---- hostile on-disk inputs: one message naming the file, the row and the value ----

class OndiskHostile : public Ondisk {
 protected:
  void SetUp() override {
    write_npy(file("edges.npy"), "<i8", {4, 2}, std::vector<std::int64_t>{0, 1, 1, 2, 2, 3, 3, 0});
    write_npy(file("labels.npy"), "<i8", {4}, std::vector<std::int64_t>{0, 1, -1, 2});
    s.edges = file("edges.npy");
    s.labels = file("labels.npy");
  }
  void expect(std::initializer_list<std::string> parts) {
    expect_error([&] { graph::import_ondisk(s, {}); }, parts);
  }
  graph::ondisk_source s;
};

TEST_F(OndiskHostile, Edges) {
  write_npy(file("e.npy"), "<i8", {2, 3}, std::vector<std::int64_t>{0, 1, 2, 1, 9, 0});
  s.edges = file("e.npy");
  expect({file("e.npy") + ", column 1", "destination id 9", "[0, num_nodes = 4)"});
  write_npy(file("e.npy"), "<i4", {3, 2}, std::vector<std::int32_t>{0, 1, -1, 2, 0, 0});
  expect({file("e.npy") + ", row 1", "source id -1"});
  write_npy(file("e.npy"), "<i8", {3, 3}, std::vector<std::int64_t>(9, 0));
  expect({file("e.npy"), "(3, 3)", "neither [2, E]"});
  write_npy(file("e.npy"), "<f4", {2, 2}, std::vector<float>(4, 0.0f));
  expect({file("e.npy"), "float32", "int32 or int64"});
  write_bytes(file("e.csv"), "0,1\n1,7\n");
  s.edges = file("e.csv");
  expect({file("e.csv") + ":2", "destination id 7"});
  write_bytes(file("e.csv"), "0,1\n1,2,0.5\n");
  expect({file("e.csv") + ":2", "3 field(s)", "edge_weights"});
  write_bytes(file("e.csv"), "0,1\n1,b\n");
  expect({file("e.csv") + ":2", "'1,b'"});
  s.edges = file("missing.npy");
  expect({file("missing.npy"), "missing"});
  s.edges = file("e.csv");
  s.num_nodes = std::uint64_t{1} << 41;
  expect({"num_nodes 2199023255552", "2^40"});
}

TEST_F(OndiskHostile, NpyFiles) {
  const std::string path = file("e.npy");
  s.edges = path;
  const std::vector<std::int64_t> ids = {0, 1, 1, 2};
  std::string good = npy_bytes("<i8", {2, 2}, ids.data(), 32);
  write_bytes(path, "PK\x03\x04" + good.substr(4));
  expect({path, "magic"});
  write_bytes(path, good.substr(0, good.size() - 5));
  expect({path, "truncated", "32 bytes of data", "27"});
  write_bytes(path, good.substr(0, 9));
  expect({path, "truncated inside the .npy header"});
  write_bytes(path, good + "xx");
  expect({path, "longer than its header says"});
  write_bytes(path, npy_bytes("<i8", {2, 2}, ids.data(), 32, true));
  expect({path, "Fortran"});
  write_bytes(path, npy_bytes(">i8", {2, 2}, ids.data(), 32));
  expect({path, "'>i8'", "big-endian"});
  write_bytes(path, npy_bytes("<f8", {2, 2}, ids.data(), 32));
  expect({path, "'<f8'", "float32"});
  std::string garbled = good;
  garbled.replace(garbled.find("'shape'"), 7, "'shope'");
  write_bytes(path, garbled);
  expect({path, "not a .npy header", "shope"});
}

TEST_F(OndiskHostile, LabelsFeaturesWeights) {
  write_npy(file("l.npy"), "<i8", {3}, std::vector<std::int64_t>{0, 1, 2});
  s.labels = file("l.npy");
  s.num_nodes = 4;
  expect({file("l.npy"), "3 labels", "num_nodes = 4"});
  write_npy(file("l.npy"), "<i8", {4}, std::vector<std::int64_t>{0, 1, -2, 2});
  expect({file("l.npy") + ", row 2", "label -2"});
  write_npy(file("l.npy"), "<i8", {4}, std::vector<std::int64_t>{0, 1, 5, 2});
  s.num_classes = 3;
  expect({file("l.npy") + ", row 2", "label 5", "num_classes = 3"});
  write_npy(file("l.npy"), "<f4", {4}, std::vector<float>(4, 0.0f));
  expect({file("l.npy"), "float32", "integers"});
  s.labels.clear();
  s.num_classes.reset();

  write_npy(file("f.npy"), "<f4", {5, 2}, std::vector<float>(10, 0.0f));
  s.node_features = file("f.npy");
  expect({file("f.npy"), "(5, 2)", "5 rows", "num_nodes = 4"});
  write_npy(file("f.npy"), "<f4", {4}, std::vector<float>(4, 0.0f));
  expect({file("f.npy"), "(4,)", "[num_nodes, feature_dim"});
  s.node_features.clear();

  write_npy(file("w.npy"), "<f4", {3}, std::vector<float>(3, 1.0f));
  s.edge_weights = file("w.npy");
  expect({file("w.npy"), "3 weights, expected 4"});
  write_npy(file("w.npy"), "<f4", {4}, std::vector<float>{1.0f, -0.5f, 1.0f, 1.0f});
  expect({file("w.npy") + ", row 1", "weight -0.5", ">= 0"});
}

TEST_F(OndiskHostile, Splits) {
  s.train = file("t.npy");
  write_npy(file("t.npy"), "<i8", {2}, std::vector<std::int64_t>{0, 4});
  expect({file("t.npy") + ", row 1", "node id 4", "[0, num_nodes = 4)"});
  write_npy(file("t.npy"), "<i8", {3}, std::vector<std::int64_t>{0, 1, 0});
  expect({file("t.npy") + ", row 2", "node 0", "listed twice in train"});
  write_npy(file("t.npy"), "|u1", {4}, std::vector<std::uint8_t>{1, 1, 0, 0});
  expect({file("t.npy") + ", row 1", "listed twice", "'|b1'"});
  write_npy(file("t.npy"), "<i8", {1}, std::vector<std::int64_t>{2});
  expect({file("t.npy") + ", row 0", "node 2", "unlabelled"});
  write_npy(file("t.npy"), "<i8", {1}, std::vector<std::int64_t>{1});
  write_npy(file("v.npy"), "|b1", {4}, std::vector<std::uint8_t>{0, 1, 0, 0});
  s.valid = file("v.npy");
  expect({file("v.npy") + ", row 1", "in valid and already in train", file("t.npy")});
  write_npy(file("v.npy"), "|b1", {5}, std::vector<std::uint8_t>(5, 0));
  expect({file("v.npy"), "mask of 5", "num_nodes = 4"});
  s.valid.clear();
  s.labels.clear();
  expect({file("t.npy"), "needs labels"});
}

// The dataset format itself: unlabelled nodes and nodes in no split are stored; a node in a
// split without a label is refused before anything is written.
TEST_F(Ondisk, UnlabelledAndUnsplitNodesInTheFormat) {
  write_bytes(file("e.csv"), "0,1\n1,2\n");
  graph::ondisk_source s;
  s.edges = file("e.csv");
  host_csr g = graph::import_ondisk(s, {});
  g.num_classes = 2;
  g.node_labels = {1, graph::unlabelled, 0};
  g.node_split = {graph::split_train, graph::split_none, graph::split_none};
  const host_csr back = round_trip(g, file("out"));
  EXPECT_EQ(back.node_labels, g.node_labels);
  EXPECT_EQ(back.node_split, g.node_split);
  g.node_split[1] = graph::split_test;
  expect_error([&] { graph::write_dataset(file("out2"), g); }, {"node 1", "unlabelled"});
  EXPECT_FALSE(fs::exists(file("out2")));
}

}  // namespace
