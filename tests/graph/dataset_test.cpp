// Dataset files: round trips of random CSR graphs, the validation errors (each must name the
// file at fault), and degree statistics against a plain reference.
#include <graph/dataset.hpp>

#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using wholememory::dtype;
using wholestore::graph::host_csr;

// A fresh directory under the system temp dir, removed at the end of the test.
class temp_dir {
 public:
  temp_dir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("wholestore_ds_") + info->test_suite_name() + "_" +
                       info->name() + "_" + std::to_string(std::random_device{}());
    std::replace(name.begin(), name.end(), '/', '_');
    path_ = fs::temp_directory_path() / name;
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

host_csr random_csr(std::uint64_t nodes, std::uint64_t max_degree, bool weights,
                    std::uint64_t feature_dim, std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  host_csr g;
  g.num_nodes = nodes;
  g.row_offsets.push_back(0);
  for (std::uint64_t v = 0; v < nodes; ++v) {
    std::uint64_t d = max_degree ? rng() % (max_degree + 1) : 0;
    for (std::uint64_t k = 0; k < d; ++k) {
      g.col_indices.push_back(static_cast<std::int64_t>(rng() % nodes));
      if (weights) g.edge_weights.push_back(static_cast<float>(rng() % 1000) / 7.0f);
    }
    g.row_offsets.push_back(static_cast<std::int64_t>(g.col_indices.size()));
  }
  g.feature_dim = feature_dim;
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (std::uint64_t i = 0; i < nodes * feature_dim; ++i) g.node_features.push_back(u(rng));
  return g;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Runs `f`, expects a wholememory::logic_error whose message contains every one of `parts`.
template <typename F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    FAIL() << "no exception; expected one mentioning " << *parts.begin();
  } catch (const wholememory::logic_error& e) {
    const std::string what = e.what();
    for (const std::string& p : parts) {
      EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
    }
  }
}

// ---- round trips ----

struct round_trip_case {
  std::uint64_t nodes;
  bool weights;
  std::uint64_t feature_dim;
  dtype features_type;
};

class DatasetRoundTrip : public ::testing::TestWithParam<round_trip_case> {};

TEST_P(DatasetRoundTrip, WriteThenReadGivesTheSameGraph) {
  const round_trip_case c = GetParam();
  temp_dir dir;
  host_csr g = random_csr(c.nodes, 9, c.weights, c.feature_dim, 42);
  g.directed = c.nodes % 2 == 0;
  wholestore::graph::manifest m = wholestore::graph::write_dataset(dir.str(), g, c.features_type);
  EXPECT_EQ(m.num_nodes, c.nodes);
  EXPECT_EQ(m.num_edges, g.num_edges());
  EXPECT_EQ(m.col_indices.type, dtype::int32);  // every node count here fits int32
  EXPECT_EQ(m.col_indices.bytes, g.num_edges() * 4);
  EXPECT_EQ(m.edge_weights.has_value(), c.weights);
  EXPECT_EQ(m.node_features.has_value(), c.feature_dim > 0);
  EXPECT_FALSE(fs::exists(dir.file("row_offsets.bin.tmp")));

  wholestore::graph::manifest back = wholestore::graph::read_manifest(dir.str());
  EXPECT_EQ(back.row_offsets.checksum, m.row_offsets.checksum);
  EXPECT_EQ(back.col_indices.checksum, m.col_indices.checksum);
  EXPECT_EQ(back.directed, g.directed);
  host_csr r = wholestore::graph::read_dataset(dir.str());
  EXPECT_EQ(r.num_nodes, g.num_nodes);
  EXPECT_EQ(r.row_offsets, g.row_offsets);
  EXPECT_EQ(r.col_indices, g.col_indices);
  EXPECT_EQ(r.edge_weights, g.edge_weights);
  EXPECT_EQ(r.directed, g.directed);
  EXPECT_EQ(r.feature_dim, g.feature_dim);
  ASSERT_EQ(r.node_features.size(), g.node_features.size());
  // float16 keeps 11 significant bits, bfloat16 8: relative error at most 2^-11 and 2^-8.
  const float tol = c.features_type == dtype::float32   ? 0.0f
                    : c.features_type == dtype::float16 ? 4.0f / 2048.0f
                                                        : 4.0f / 256.0f;
  for (std::size_t i = 0; i < g.node_features.size(); ++i) {
    ASSERT_NEAR(r.node_features[i], g.node_features[i], tol) << "feature " << i;
  }
  if (c.features_type == dtype::float32) {
    EXPECT_EQ(r.node_features, g.node_features);
  }
}

INSTANTIATE_TEST_SUITE_P(Graphs, DatasetRoundTrip,
                         ::testing::Values(round_trip_case{0, false, 0, dtype::float32},
                                           round_trip_case{1, false, 0, dtype::float32},
                                           round_trip_case{1, true, 3, dtype::float16},
                                           round_trip_case{257, false, 0, dtype::float32},
                                           round_trip_case{257, true, 0, dtype::float32},
                                           round_trip_case{100, true, 7, dtype::float32},
                                           round_trip_case{100, false, 7, dtype::float16},
                                           round_trip_case{100, true, 5, dtype::bfloat16},
                                           round_trip_case{1000, true, 16, dtype::bfloat16}));

TEST(Dataset, NodeIdsRoundTrip) {
  temp_dir dir;
  host_csr g = random_csr(5, 3, false, 0, 1);
  g.node_ids = {"a", "1155073", "x y", "35", "-"};
  auto m = wholestore::graph::write_dataset(dir.str(), g);
  EXPECT_EQ(m.node_ids_file, "node_ids.txt");
  EXPECT_EQ(wholestore::graph::read_dataset(dir.str()).node_ids, g.node_ids);
}

// The ids file is covered like the arrays: read_dataset refuses one byte changed (checksum),
// a truncated file (size, at read_manifest), and a manifest with only one of the two keys.
TEST(Dataset, DamagedNodeIdsRefused) {
  host_csr g = random_csr(5, 3, false, 0, 1);
  g.node_ids = {"a", "1155073", "x y", "35", "-"};
  {
    temp_dir dir;
    auto m = wholestore::graph::write_dataset(dir.str(), g);
    ASSERT_TRUE(m.node_ids_bytes && m.node_ids_checksum);
    EXPECT_EQ(*m.node_ids_bytes, fs::file_size(dir.file("node_ids.txt")));
    write_text(dir.file("node_ids.txt"), "a\n1155074\nx y\n35\n-\n");
    expect_error([&] { wholestore::graph::read_dataset(dir.str()); },
                 {"node_ids.txt: checksum mismatch"});
    write_text(dir.file("node_ids.txt"), "a\n1155073\n");
    expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
                 {"node_ids.txt", "the manifest says", "truncated or modified"});
  }
  {
    temp_dir dir;
    wholestore::graph::write_dataset(dir.str(), g);
    std::string text = read_text(dir.file("manifest.yaml"));
    text.erase(text.find("node_ids_checksum:"));
    write_text(dir.file("manifest.yaml"), text);
    expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
                 {"node_ids_bytes and node_ids_checksum go together"});
  }
  {
    // A manifest without the ids' size and checksum (both are optional): the line count is
    // still checked (issue 36: sample loaded 7 ids for 5 nodes).
    temp_dir dir;
    wholestore::graph::write_dataset(dir.str(), g);
    std::string text = read_text(dir.file("manifest.yaml")), kept;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("node_ids_bytes:", 0) != 0 && line.rfind("node_ids_checksum:", 0) != 0)
        kept += line + "\n";
    write_text(dir.file("manifest.yaml"), kept);
    EXPECT_EQ(wholestore::graph::read_dataset(dir.str()).node_ids, g.node_ids);
    write_text(dir.file("node_ids.txt"), "a\n1155073\nx y\n35\n-\nsix\nseven\n");
    expect_error([&] { wholestore::graph::read_dataset(dir.str()); },
                 {"node_ids.txt: has 7 lines, expected num_nodes = 5"});
  }
}

// Labels and split (node classification): round trip with their checksums and num_classes; a
// labels file changed on disk (checksum), truncated (size), a manifest with one of the pair or
// num_classes alone, and a graph with a label out of range or a bad split value are refused
// by name, before or without writing.
TEST(Dataset, LabelsAndSplitRoundTripAndDamageRefused) {
  host_csr g = random_csr(60, 3, false, 2, 4);
  g.num_classes = 3;
  for (std::uint64_t v = 0; v < 60; ++v) {
    g.node_labels.push_back(static_cast<std::int32_t>((v * 7) % 3));
    g.node_split.push_back(static_cast<std::uint8_t>(v % 3));
  }
  {
    temp_dir dir;
    auto m = wholestore::graph::write_dataset(dir.str(), g);
    ASSERT_TRUE(m.node_labels && m.node_split);
    EXPECT_EQ(m.num_classes, 3u);
    EXPECT_EQ(m.node_labels->type, dtype::int32);
    EXPECT_EQ(m.node_split->type, dtype::uint8);
    const host_csr r = wholestore::graph::read_dataset(dir.str());
    EXPECT_EQ(r.node_labels, g.node_labels);
    EXPECT_EQ(r.node_split, g.node_split);
    EXPECT_EQ(r.num_classes, 3u);
    std::string bytes = read_text(dir.file("node_labels.bin"));
    bytes[4] ^= 1;
    write_text(dir.file("node_labels.bin"), bytes);
    expect_error([&] { wholestore::graph::read_dataset(dir.str()); },
                 {"node_labels.bin", "checksum"});
    write_text(dir.file("node_labels.bin"), bytes.substr(0, 100));
    expect_error([&] { wholestore::graph::read_manifest(dir.str()); }, {"node_labels.bin"});
  }
  for (const char* drop : {"node_split.", "num_classes:"}) {
    temp_dir dir;
    wholestore::graph::write_dataset(dir.str(), g);
    std::istringstream in(read_text(dir.file("manifest.yaml")));
    std::string line, kept;
    while (std::getline(in, line))
      if (line.rfind(drop, 0) != 0) kept += line + "\n";
    write_text(dir.file("manifest.yaml"), kept);
    expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
                 {std::string(drop) == "num_classes:" ? "num_classes" : "go together"});
  }
  {
    temp_dir dir;
    host_csr plain = random_csr(60, 3, false, 0, 5);
    wholestore::graph::write_dataset(dir.str(), plain);
    write_text(dir.file("manifest.yaml"),
               read_text(dir.file("manifest.yaml")) + "num_classes: 3\n");
    expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
                 {"num_classes given without node_labels"});
  }
  host_csr bad = g;
  bad.node_labels[17] = 3;
  temp_dir dir;
  expect_error([&] { wholestore::graph::write_dataset(dir.str(), bad); },
               {"node 17", "label 3", "num_classes = 3"});
  bad = g;
  bad.node_split[5] = 7;
  expect_error([&] { wholestore::graph::write_dataset(dir.str(), bad); }, {"node 5", "split 7"});
  bad = g;
  bad.node_split.clear();
  expect_error([&] { wholestore::graph::write_dataset(dir.str(), bad); }, {"go together"});
  EXPECT_FALSE(fs::exists(dir.file("manifest.yaml")));  // nothing written
}

// A directory (or a FIFO) named manifest.yaml is named as such (issue 36: it read as an empty
// manifest, "missing required key 'format_version'").
TEST(Dataset, ManifestThatIsNotAFileIsNamedAsSuch) {
  temp_dir dir;
  fs::create_directories(dir.file("manifest.yaml"));
  expect_error(
      [&] { wholestore::graph::read_manifest(dir.str()); },
      {dir.file("manifest.yaml"), "the manifest is not a regular file (it is a directory)"});
  temp_dir missing;
  expect_error([&] { wholestore::graph::read_manifest(missing.str()); },
               {missing.file("manifest.yaml"), "cannot open the manifest (missing or unreadable)"});
}

TEST(Dataset, RewriteWithoutOptionalArraysRemovesThem) {
  temp_dir dir;
  wholestore::graph::write_dataset(dir.str(), random_csr(50, 4, true, 3, 2));
  ASSERT_TRUE(fs::exists(dir.file("edge_weights.bin")));
  host_csr plain = random_csr(50, 4, false, 0, 3);
  wholestore::graph::write_dataset(dir.str(), plain);
  EXPECT_FALSE(fs::exists(dir.file("edge_weights.bin")));
  EXPECT_FALSE(fs::exists(dir.file("node_features.bin")));
  host_csr r = wholestore::graph::read_dataset(dir.str());
  EXPECT_EQ(r.col_indices, plain.col_indices);
  EXPECT_TRUE(r.edge_weights.empty());
}

// ---- overwriting: the previous dataset survives a failed or killed write ----

// The names in `dir`, sorted.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Entries of dir's parent whose name mentions dir's own name, other than dir itself: the
// writer's temporary directories.
std::vector<std::string> leftovers_beside(const std::string& dir) {
  const fs::path p(dir);
  const std::string base = p.filename().string();
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(p.parent_path())) {
    const std::string name = e.path().filename().string();
    if (name != base && name.find(base) != std::string::npos) out.push_back(name);
  }
  return out;
}

void expect_same_graph(const host_csr& got, const host_csr& want) {
  EXPECT_EQ(got.num_nodes, want.num_nodes);
  EXPECT_EQ(got.row_offsets, want.row_offsets);
  EXPECT_EQ(got.col_indices, want.col_indices);
  EXPECT_EQ(got.edge_weights, want.edge_weights);
  EXPECT_EQ(got.node_ids, want.node_ids);
}

TEST(DatasetOverwrite, FailedWriteKeepsThePreviousDataset) {
  temp_dir dir;
  host_csr old_graph = random_csr(60, 5, true, 3, 11);
  old_graph.node_ids.clear();
  for (int i = 0; i < 60; ++i) old_graph.node_ids.push_back("n" + std::to_string(i));
  wholestore::graph::write_dataset(dir.str(), old_graph);
  const std::vector<std::string> before = names_in(dir.str());
  // The new graph fails late: its last node id has a line break (found while writing ids,
  // after its arrays).
  host_csr next = random_csr(80, 6, false, 0, 12);
  for (int i = 0; i < 80; ++i) next.node_ids.push_back("m" + std::to_string(i));
  next.node_ids.back() = "bad\nid";
  EXPECT_THROW(wholestore::graph::write_dataset(dir.str(), next), wholememory::logic_error);
  EXPECT_EQ(names_in(dir.str()), before) << "files of the previous dataset changed";
  expect_same_graph(wholestore::graph::read_dataset(dir.str()), old_graph);
  EXPECT_EQ(leftovers_beside(dir.str()), std::vector<std::string>{});
}

// A writer killed at any moment leaves the old dataset or the new one, complete; the next
// write removes what the killed one left behind.
TEST(DatasetOverwrite, KilledWriterLeavesTheOldOrTheNewDataset) {
  temp_dir dir;
  const host_csr old_graph = random_csr(1000, 8, true, 0, 21);
  const host_csr next = random_csr(300000, 8, true, 0, 22);  // tens of MB: takes a while
  wholestore::graph::write_dataset(dir.str(), old_graph);
  int saw_old = 0, saw_new = 0;
  for (int delay_us : {0, 1000, 3000, 8000, 20000, 50000, 200000}) {
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      try {
        wholestore::graph::write_dataset(dir.str(), next);
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    ::usleep(static_cast<useconds_t>(delay_us));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    SCOPED_TRACE("killed after " + std::to_string(delay_us) + " us");
    host_csr got;
    ASSERT_NO_THROW(got = wholestore::graph::read_dataset(dir.str()));
    if (got.num_nodes == old_graph.num_nodes) {
      expect_same_graph(got, old_graph);
      ++saw_old;
    } else {
      expect_same_graph(got, next);
      ++saw_new;
      wholestore::graph::write_dataset(dir.str(), old_graph);  // back to the old one
    }
  }
  EXPECT_GT(saw_old, 0) << "no write was killed midway: the test proves nothing";
  wholestore::graph::write_dataset(dir.str(), old_graph);
  EXPECT_EQ(leftovers_beside(dir.str()), std::vector<std::string>{});
  for (const std::string& name : names_in(dir.str())) {
    EXPECT_EQ(name.find(".tmp"), std::string::npos) << name;
  }
}

TEST(DatasetOverwrite, RefusesADirectoryThatIsNotADataset) {
  temp_dir dir;
  write_text(dir.file("notes.txt"), "mine");
  write_text(dir.file("row_offsets.bin"), "not an array");
  const host_csr g = random_csr(10, 3, false, 0, 31);
  try {
    wholestore::graph::write_dataset(dir.str(), g);
    ADD_FAILURE() << "wrote into a directory that is not a dataset";
  } catch (const wholememory::logic_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(dir.str()), std::string::npos) << what;
    EXPECT_NE(what.find("notes.txt"), std::string::npos) << what;
    EXPECT_NE(what.find("overwrite"), std::string::npos) << what;
  }
  EXPECT_EQ(names_in(dir.str()), (std::vector<std::string>{"notes.txt", "row_offsets.bin"}));
  EXPECT_EQ(read_text(dir.file("row_offsets.bin")), "not an array");
  // Asked to: the directory is replaced by the dataset.
  wholestore::graph::write_dataset(dir.str(), g, dtype::float32, /*overwrite=*/true);
  EXPECT_FALSE(fs::exists(dir.file("notes.txt")));
  expect_same_graph(wholestore::graph::read_dataset(dir.str()), g);
  // A file where the directory should be is never replaced.
  write_text(dir.file("plain"), "x");
  EXPECT_THROW(wholestore::graph::write_dataset(dir.file("plain"), g, dtype::float32, true),
               wholememory::logic_error);
  EXPECT_EQ(read_text(dir.file("plain")), "x");
}

// check_dataset_destination: what write_dataset would refuse, refused up front, naming the
// path, without creating anything.
TEST(DatasetDestination, RefusedUpFrontAsWriteDatasetWould) {
  temp_dir dir;
  using wholestore::graph::check_dataset_destination;
  EXPECT_NO_THROW(check_dataset_destination(dir.file("new/deeper/ds")));  // parents created later
  EXPECT_FALSE(fs::exists(dir.file("new")));
  fs::create_directories(dir.file("foreign"));
  write_text(dir.file("foreign/notes.txt"), "mine");
  auto refused = [&](const std::string& path, dtype t, const std::string& why) {
    try {
      check_dataset_destination(path, t);
      ADD_FAILURE() << path << ": not refused";
    } catch (const std::exception& e) {  // logic_error, or system_error from stat
      const std::string what = e.what();
      EXPECT_NE(what.find(why), std::string::npos) << what;
      EXPECT_EQ(what.find(path), 0u) << "the message does not lead with the path: " << what;
    }
  };
  refused(dir.file("foreign"), dtype::float32, "notes.txt");
  EXPECT_NO_THROW(check_dataset_destination(dir.file("foreign"), dtype::float32, true));
  write_text(dir.file("plain"), "x");
  refused(dir.file("plain"), dtype::float32, "not a directory");
  refused(dir.file("plain/sub"), dtype::float32, "Not a directory");
  try {
    check_dataset_destination(dir.file("ok"), dtype::int32);
    ADD_FAILURE() << "int32 features not refused";
  } catch (const wholememory::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("int32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(check_dataset_destination(""), wholememory::logic_error);
  EXPECT_EQ(read_text(dir.file("plain")), "x");
  EXPECT_EQ(names_in(dir.file("foreign")), (std::vector<std::string>{"notes.txt"}));
}

// Replacing a dataset keeps its directory's permissions.
TEST(DatasetOverwrite, ReplacementKeepsTheDirectoryPermissions) {
  temp_dir dir;
  const std::string ds = dir.file("ds");
  const host_csr g = random_csr(10, 3, false, 0, 31);
  wholestore::graph::write_dataset(ds, g);
  for (auto mode : {fs::perms(0750), fs::perms(0705), fs::perms(0755)}) {
    fs::permissions(ds, mode);
    wholestore::graph::write_dataset(ds, random_csr(12, 2, false, 0, 32));
    EXPECT_EQ(fs::status(ds).permissions(), mode);
    expect_same_graph(wholestore::graph::read_dataset(ds), random_csr(12, 2, false, 0, 32));
  }
}

// A directory that holds only dataset files (a previous dataset, also one whose write was
// interrupted before its manifest) is replaced without asking; so is an empty one.
TEST(DatasetOverwrite, ReplacesDatasetFilesWithoutAsking) {
  temp_dir dir;
  write_text(dir.file("row_offsets.bin"), "old");
  write_text(dir.file("col_indices.bin.tmp"), "old");
  const host_csr g = random_csr(10, 3, false, 0, 32);
  wholestore::graph::write_dataset(dir.str(), g);
  EXPECT_EQ(names_in(dir.str()),
            (std::vector<std::string>{"col_indices.bin", "manifest.yaml", "row_offsets.bin"}));
  expect_same_graph(wholestore::graph::read_dataset(dir.str()), g);
}

TEST(Dataset, Fnv1a64KnownValuesAndStreaming) {
  EXPECT_EQ(wholestore::graph::fnv1a64("", 0), 0xcbf29ce484222325ull);
  EXPECT_EQ(wholestore::graph::fnv1a64("a", 1), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(wholestore::graph::fnv1a64("foobar", 6), 0x85944171f73967e8ull);
  std::uint64_t h = wholestore::graph::fnv1a64("foo", 3);
  EXPECT_EQ(wholestore::graph::fnv1a64("bar", 3, h), 0x85944171f73967e8ull);
}

// ---- invalid CSR rejected by write_dataset ----

TEST(Dataset, WriteRejectsInvalidCsr) {
  temp_dir dir;
  host_csr good = random_csr(10, 3, true, 2, 4);
  ASSERT_GT(good.num_edges(), 0u);
  {
    host_csr g = good;
    g.col_indices[0] = 10;
    expect_error([&] { wholestore::graph::write_dataset(dir.str(), g); },
                 {"col_indices[0] is 10", "[0, num_nodes = 10)", "rule 6"});
  }
  {
    host_csr g = good;
    g.row_offsets[0] = 1;
    expect_error([&] { wholestore::graph::write_dataset(dir.str(), g); }, {"row_offsets[0]"});
  }
  {
    host_csr g = good;
    std::swap(g.row_offsets[3], g.row_offsets[4]);
    if (g.row_offsets[3] == g.row_offsets[4]) g.row_offsets[3] += 1;
    expect_error([&] { wholestore::graph::write_dataset(dir.str(), g); },
                 {"row_offsets[4]", "never decrease"});
  }
  {
    host_csr g = good;
    g.row_offsets.pop_back();
    expect_error([&] { wholestore::graph::write_dataset(dir.str(), g); }, {"num_nodes + 1"});
  }
  {
    host_csr g = good;
    g.edge_weights.pop_back();
    expect_error([&] { wholestore::graph::write_dataset(dir.str(), g); }, {"edge_weights"});
  }
  {
    host_csr g = good;
    g.node_features.push_back(1.0f);
    expect_error([&] { wholestore::graph::write_dataset(dir.str(), g); }, {"node_features"});
  }
  expect_error([&] { wholestore::graph::write_dataset(dir.str(), good, dtype::int32); },
               {"features_type"});
  EXPECT_FALSE(fs::exists(dir.file("manifest.yaml")));
}

// ---- validation of what is on disk ----

class DatasetValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    wholestore::graph::write_dataset(dir.str(), random_csr(300, 6, true, 4, 5));
    manifest_text = read_text(dir.file("manifest.yaml"));
  }
  // Replaces the line starting with `key:` by `line` (or removes it when empty).
  void edit_manifest(const std::string& key, const std::string& line) {
    std::istringstream in(manifest_text);
    std::string out, l;
    bool found = false;
    while (std::getline(in, l)) {
      if (l.rfind(key + ":", 0) == 0) {
        found = true;
        if (!line.empty()) out += line + "\n";
      } else {
        out += l + "\n";
      }
    }
    ASSERT_TRUE(found) << key;
    manifest_text = out;  // edits accumulate
    write_text(dir.file("manifest.yaml"), out);
  }
  temp_dir dir;
  std::string manifest_text;
};

TEST_F(DatasetValidation, TruncatedColIndices) {
  const std::string path = dir.file("col_indices.bin");
  const auto size = fs::file_size(path);
  fs::resize_file(path, size - 4);
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {path, "truncated", std::to_string(size), std::to_string(size - 4)});
  expect_error([&] { wholestore::graph::read_dataset(dir.str()); }, {path, "truncated"});
}

TEST_F(DatasetValidation, FlippedByteFailsTheChecksum) {
  const std::string path = dir.file("edge_weights.bin");
  std::string bytes = read_text(path);
  bytes[bytes.size() / 2] ^= 0x10;
  write_text(path, bytes);
  auto m = wholestore::graph::read_manifest(dir.str());  // sizes still match
  expect_error([&] { wholestore::graph::verify_checksums(dir.str(), m); }, {path, "checksum"});
  expect_error([&] { wholestore::graph::read_dataset(dir.str()); }, {path, "checksum"});
}

TEST_F(DatasetValidation, MissingManifest) {
  fs::remove(dir.file("manifest.yaml"));
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); }, {dir.file("manifest.yaml")});
}

TEST_F(DatasetValidation, WrongVersion) {
  edit_manifest("format_version", "format_version: 2");
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {dir.file("manifest.yaml") + ":2", "format_version 2"});
}

TEST_F(DatasetValidation, MissingKey) {
  edit_manifest("num_edges", "");
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {dir.file("manifest.yaml"), "missing", "num_edges"});
}

TEST_F(DatasetValidation, MissingKeyOfAnOptionalArray) {
  edit_manifest("edge_weights.checksum", "");
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {dir.file("manifest.yaml"), "edge_weights.checksum"});
}

TEST_F(DatasetValidation, UnknownKey) {
  write_text(dir.file("manifest.yaml"), manifest_text + "num_nodez: 3\n");
  const int line = static_cast<int>(std::count(manifest_text.begin(), manifest_text.end(), '\n'));
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {dir.file("manifest.yaml") + ":" + std::to_string(line + 1), "num_nodez"});
}

TEST_F(DatasetValidation, BadNumber) {
  edit_manifest("num_nodes", "num_nodes: 30x");
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {dir.file("manifest.yaml") + ":3", "30x"});
}

TEST_F(DatasetValidation, InconsistentCounts) {
  edit_manifest("num_nodes", "num_nodes: 301");
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {dir.file("manifest.yaml"), "row_offsets.count", "302"});
}

TEST_F(DatasetValidation, InconsistentEdgeCount) {
  edit_manifest("num_edges", "num_edges: 1");
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {dir.file("manifest.yaml"), "col_indices.count"});
}

TEST_F(DatasetValidation, BytesDisagreeWithCount) {
  edit_manifest("col_indices.dtype", "col_indices.dtype: int64");
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {dir.file("manifest.yaml"), "col_indices.bytes"});
}

TEST_F(DatasetValidation, FileNameOutsideTheDirectory) {
  edit_manifest("col_indices.file", "col_indices.file: ../col_indices.bin");
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {dir.file("manifest.yaml"), "col_indices.file"});
}

TEST_F(DatasetValidation, ConsistentChecksumButBrokenCsrIsCaught) {
  // A column index beyond num_nodes, with the checksum recomputed as a careless tool would.
  const std::string path = dir.file("col_indices.bin");
  std::string bytes = read_text(path);
  std::int32_t bad = 300;
  std::memcpy(&bytes[0], &bad, 4);
  write_text(path, bytes);
  std::ostringstream sum;
  sum << "col_indices.checksum: 0x" << std::hex << std::setw(16) << std::setfill('0')
      << wholestore::graph::fnv1a64(bytes.data(), bytes.size());
  edit_manifest("col_indices.checksum", sum.str());
  expect_error([&] { wholestore::graph::read_dataset(dir.str()); },
               {"dataset " + dir.str(), "col_indices[0] is 300", "rule 6"});
}

TEST_F(DatasetValidation, FeatureDimWithoutFeatures) {
  edit_manifest("node_features.file", "");
  edit_manifest("node_features.dtype", "");
  edit_manifest("node_features.count", "");
  edit_manifest("node_features.bytes", "");
  edit_manifest("node_features.checksum", "");
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {dir.file("manifest.yaml"), "feature_dim"});
}

TEST_F(DatasetValidation, RepeatedKey) {
  write_text(dir.file("manifest.yaml"), manifest_text + "num_nodes: 300\n");
  expect_error([&] { wholestore::graph::read_manifest(dir.str()); },
               {dir.file("manifest.yaml"), "num_nodes", "repeats line 3"});
}

// Graphs of 2^31 nodes and more store int64 column indices; too big to write in a test, so the
// int64 read path is checked on a small graph whose col_indices.bin is rewritten as int64.
TEST(Dataset, ReadsInt64ColumnIndices) {
  temp_dir dir;
  host_csr g = random_csr(200, 5, true, 0, 9);
  wholestore::graph::write_dataset(dir.str(), g);
  std::string bytes(g.col_indices.size() * 8, '\0');
  std::memcpy(&bytes[0], g.col_indices.data(), bytes.size());
  write_text(dir.file("col_indices.bin"), bytes);
  std::string text = read_text(dir.file("manifest.yaml")), out, line;
  std::istringstream in(text);
  while (std::getline(in, line)) {
    if (line.rfind("col_indices.dtype:", 0) == 0) {
      line = "col_indices.dtype: int64";
    } else if (line.rfind("col_indices.bytes:", 0) == 0) {
      line = "col_indices.bytes: " + std::to_string(bytes.size());
    } else if (line.rfind("col_indices.checksum:", 0) == 0) {
      std::ostringstream sum;
      sum << "col_indices.checksum: 0x" << std::hex << std::setw(16) << std::setfill('0')
          << wholestore::graph::fnv1a64(bytes.data(), bytes.size());
      line = sum.str();
    }
    out += line + "\n";
  }
  write_text(dir.file("manifest.yaml"), out);
  EXPECT_EQ(wholestore::graph::read_manifest(dir.str()).col_indices.type, dtype::int64);
  host_csr r = wholestore::graph::read_dataset(dir.str());
  EXPECT_EQ(r.col_indices, g.col_indices);
  EXPECT_EQ(r.edge_weights, g.edge_weights);
}

// ---- degree statistics ----

TEST(DegreeStats, MatchesAPlainReference) {
  for (std::uint64_t nodes : {1u, 2u, 7u, 1000u}) {
    host_csr g = random_csr(nodes, 40, false, 0, static_cast<std::uint32_t>(nodes));
    auto s = wholestore::graph::compute_degree_stats(g.row_offsets);
    std::vector<std::uint64_t> deg;
    for (std::uint64_t v = 0; v < nodes; ++v)
      deg.push_back(static_cast<std::uint64_t>(g.row_offsets[v + 1] - g.row_offsets[v]));
    std::vector<std::uint64_t> sorted = deg;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(s.min, sorted.front());
    EXPECT_EQ(s.max, sorted.back());
    double sum = 0;
    for (auto d : deg) sum += static_cast<double>(d);
    EXPECT_DOUBLE_EQ(s.mean, sum / static_cast<double>(nodes));
    double median = nodes % 2 ? static_cast<double>(sorted[nodes / 2])
                              : (static_cast<double>(sorted[nodes / 2 - 1]) +
                                 static_cast<double>(sorted[nodes / 2])) /
                                    2;
    EXPECT_DOUBLE_EQ(s.median, median);
    EXPECT_EQ(s.isolated, static_cast<std::uint64_t>(std::count(deg.begin(), deg.end(), 0u)));
    std::vector<std::uint64_t> hist;
    for (auto d : deg) {
      std::size_t k = d == 0 ? 0 : static_cast<std::size_t>(std::floor(std::log2(d))) + 1;
      if (hist.size() <= k) hist.resize(k + 1);
      ++hist[k];
    }
    EXPECT_EQ(s.log2_histogram, hist);
  }
}

TEST(DegreeStats, HandPickedDegrees) {
  // degrees 0, 1, 2, 3, 4, 8
  auto s = wholestore::graph::compute_degree_stats({0, 0, 1, 3, 6, 10, 18});
  EXPECT_EQ(s.min, 0u);
  EXPECT_EQ(s.max, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 3.0);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_EQ(s.isolated, 1u);
  EXPECT_EQ(s.log2_histogram, (std::vector<std::uint64_t>{1, 1, 2, 1, 1}));
}

TEST(DegreeStats, NoNodes) {
  auto s = wholestore::graph::compute_degree_stats({0});
  EXPECT_EQ(s.max, 0u);
  EXPECT_TRUE(s.log2_histogram.empty());
}

}  // namespace
