// csr_graph in WholeMemory: make_graph and load_graph give back every byte of the source graph
// for every memory type on 1 to 4 ranks, and load_graph rejects damaged datasets naming the
// file before it loads anything.
#include <graph/csr_graph.hpp>
#include <graph/dataset.hpp>
#include <graph/generate.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include "common/multiprocess.hpp"
#include "common/temp_dir.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace fs = std::filesystem;
using namespace wholestore::graph;
using wholememory::dtype;
using wholememory::memory_location;
using wholememory::memory_type;
using wholestore_test::thread_ranks;

using wholestore_test::temp_dir;
host_csr small_graph(bool weights, std::uint64_t feature_dim, std::uint64_t seed = 3) {
  generate_options o;
  o.num_nodes = 997;  // parts end mid-row for every rank count
  o.num_edges = 9001;
  o.seed = seed;
  o.with_weights = weights;
  o.feature_dim = feature_dim;
  o.threads = 1;
  return generate_graph(o);
}

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Compares every part this rank can see of `mem` with `expect` (the array's bytes); the
// allocation may be longer than the array (a minimum of one granule).  Returns bytes checked.
std::size_t check_parts(const wholememory::allocation& mem, const std::vector<char>& expect,
                        const char* what) {
  std::size_t checked = 0;
  for (int p = 0; p < mem.num_parts(); ++p) {
    wholememory::part_info part = mem.part(p);
    if (part.ptr == nullptr || part.bytes == 0 || part.offset >= expect.size()) continue;
    std::size_t n = std::min(part.bytes, expect.size() - part.offset);
    std::vector<char> got(n);
    wholememory::copy_bytes(got.data(), part.ptr, n);  // host or device memory
    EXPECT_EQ(std::memcmp(got.data(), expect.data() + part.offset, n), 0)
        << what << ": part " << p << " differs";
    checked += n;
  }
  if (mem.type() != memory_type::distributed) {
    EXPECT_EQ(checked, expect.size()) << what << ": not every byte is visible";
  }
  return checked;
}

// Checks a graph against the dataset files in `dir`; returns the bytes this rank checked.
std::size_t check_graph(const csr_graph& g, const std::string& dir, bool weights, bool features) {
  manifest m = read_manifest(dir);
  EXPECT_EQ(g.num_nodes, m.num_nodes);
  EXPECT_EQ(g.num_edges, m.num_edges);
  EXPECT_EQ(g.col_type, m.col_indices.type);
  std::size_t checked = 0;
  checked += check_parts(g.row_offsets, file_bytes(dir + "/row_offsets.bin"), "row_offsets");
  checked += check_parts(g.col_indices, file_bytes(dir + "/col_indices.bin"), "col_indices");
  EXPECT_EQ(g.has_weights(), weights);
  if (weights) {
    checked += check_parts(g.edge_weights, file_bytes(dir + "/edge_weights.bin"), "edge_weights");
  }
  EXPECT_EQ(g.has_features(), features);
  if (features) {
    EXPECT_EQ(g.feature_dim, m.feature_dim);
    EXPECT_EQ(g.feature_type, m.node_features->type);
    checked +=
        check_parts(g.node_features, file_bytes(dir + "/node_features.bin"), "node_features");
  }
  return checked;
}

std::uint64_t dataset_bytes(const manifest& m, bool weights, bool features) {
  std::uint64_t b = m.row_offsets.bytes + m.col_indices.bytes;
  if (weights && m.edge_weights) b += m.edge_weights->bytes;
  if (features && m.node_features) b += m.node_features->bytes;
  return b;
}

class CsrGraphHost : public ::testing::TestWithParam<std::tuple<int, memory_type>> {};

TEST_P(CsrGraphHost, MakeAndLoadRoundTrip) {
  auto [ranks, type] = GetParam();
  for (bool with_weights : {true, false}) {
    for (dtype ft : {dtype::float32, dtype::float16, dtype::bfloat16}) {
      const std::uint64_t dim = with_weights ? 5 : 0;  // no weights: no features either
      if (dim == 0 && ft != dtype::float32) continue;
      host_csr src = small_graph(with_weights, dim);
      temp_dir dir;
      manifest m = write_dataset(dir.str(), src, ft);
      std::atomic<int> progress_calls{0};
      std::mutex mu;
      std::vector<std::uint64_t> local(ranks);
      thread_ranks(ranks, [&, type = type](std::shared_ptr<wholememory::bootstrap> bs) {
        auto comm = wholememory::make_host_communicator(bs);
        SCOPED_TRACE(std::string(wholememory::memory_type_name(type)) + " rank " +
                     std::to_string(comm->rank()) + " features " + wholememory::dtype_name(ft));
        // make_graph from the host graph, converting features like write_dataset did.
        csr_graph made = make_graph(comm, src, type, memory_location::host, ft);
        check_graph(made, dir.str(), with_weights, dim > 0);
        made = csr_graph{};

        load_options opts;
        opts.type = type;
        opts.location = memory_location::host;
        opts.threads = 3;
        opts.chunk_bytes = 1000;  // many chunks, none aligned to elements
        opts.verify_checksums = true;
        opts.progress = [&](std::uint64_t done, std::uint64_t total) {
          EXPECT_LE(done, total);
          ++progress_calls;
        };
        load_stats stats;
        csr_graph loaded = load_graph(comm, dir.str(), opts, &stats);
        check_graph(loaded, dir.str(), with_weights, dim > 0);
        EXPECT_EQ(stats.total_bytes, dataset_bytes(m, true, true));
        EXPECT_GT(stats.seconds, 0.0);
        std::lock_guard<std::mutex> lock(mu);
        local[comm->rank()] = stats.local_bytes;
      });
      std::uint64_t sum = 0;
      for (auto b : local) sum += b;
      EXPECT_EQ(sum, dataset_bytes(m, true, true)) << "every byte is read by exactly one rank";
      EXPECT_GE(progress_calls.load(), ranks);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, CsrGraphHost,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(memory_type::continuous,
                                                              memory_type::chunked,
                                                              memory_type::distributed)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" +
                                  wholememory::memory_type_name(std::get<1>(info.param));
                         });

TEST(CsrGraph, LoadInForkedProcesses) {
  host_csr src = small_graph(true, 4);
  temp_dir dir;
  write_dataset(dir.str(), src);
  for (memory_type type :
       {memory_type::continuous, memory_type::chunked, memory_type::distributed}) {
    auto result = wholestore_test::fork_ranks(3, [&](std::shared_ptr<wholememory::bootstrap> bs) {
      auto comm = wholememory::make_host_communicator(bs);
      load_options opts;
      opts.type = type;
      csr_graph g = load_graph(comm, dir.str(), opts);
      check_graph(g, dir.str(), true, true);
    });
    EXPECT_TRUE(result.all_ok()) << wholememory::memory_type_name(type);
  }
}

TEST(CsrGraph, SkipsWeightsAndFeaturesWhenAsked) {
  host_csr src = small_graph(true, 4);
  temp_dir dir;
  manifest m = write_dataset(dir.str(), src);
  thread_ranks(2, [&](std::shared_ptr<wholememory::bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    load_options opts;
    opts.load_weights = false;
    opts.load_features = false;
    load_stats stats;
    csr_graph g = load_graph(comm, dir.str(), opts, &stats);
    check_graph(g, dir.str(), false, false);
    EXPECT_EQ(stats.total_bytes, dataset_bytes(m, false, false));
  });
}

TEST(CsrGraph, FeaturesPlacedApart) {
  host_csr src = small_graph(true, 6);
  temp_dir dir;
  write_dataset(dir.str(), src);
  thread_ranks(3, [&](std::shared_ptr<wholememory::bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    load_options opts;
    opts.type = memory_type::continuous;
    opts.features_type = memory_type::distributed;
    csr_graph g = load_graph(comm, dir.str(), opts);
    EXPECT_EQ(g.type(), memory_type::continuous);
    EXPECT_EQ(g.node_features.type(), memory_type::distributed);
    check_graph(g, dir.str(), true, true);
    csr_graph made = make_graph(comm, src, opts);
    EXPECT_EQ(made.node_features.type(), memory_type::distributed);
    check_graph(made, dir.str(), true, true);
  });
}

// Rewrites one `key: value` line of a manifest.
void set_manifest(const std::string& dir, const std::string& key, const std::string& value) {
  std::ifstream in(dir + "/manifest.yaml");
  std::stringstream out;
  std::string line;
  bool found = false;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) {
      line = key + ": " + value;
      found = true;
    }
    out << line << "\n";
  }
  in.close();
  ASSERT_TRUE(found) << key;
  std::ofstream(dir + "/manifest.yaml") << out.str();
}

// Removes the manifest lines of `keys`.
void remove_manifest_keys(const std::string& dir, const std::vector<std::string>& keys) {
  std::ifstream in(dir + "/manifest.yaml");
  std::ostringstream out;
  std::string line;
  while (std::getline(in, line)) {
    bool drop = false;
    for (const auto& k : keys) drop = drop || line.rfind(k + ":", 0) == 0;
    if (!drop) out << line << "\n";
  }
  in.close();
  std::ofstream(dir + "/manifest.yaml") << out.str();
}

// Loads on 2 ranks and returns the error each rank saw ("" when none).
std::vector<std::string> load_errors(const std::string& dir, bool verify_checksums = false) {
  std::vector<std::string> errors(2);
  thread_ranks(2, [&](std::shared_ptr<wholememory::bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    try {
      load_options options;
      options.verify_checksums = verify_checksums;
      load_graph(comm, dir, options);
    } catch (const wholememory::logic_error& e) {
      errors[comm->rank()] = e.what();
    }
  });
  return errors;
}

TEST(CsrGraph, TruncatedFileNamedOnEveryRank) {
  temp_dir dir;
  write_dataset(dir.str(), small_graph(true, 3));
  fs::resize_file(dir.path / "edge_weights.bin", fs::file_size(dir.path / "edge_weights.bin") - 4);
  for (const std::string& e : load_errors(dir.str())) {
    EXPECT_NE(e.find("edge_weights.bin"), std::string::npos) << e;
  }
}

TEST(CsrGraph, WrongSizeInManifestNamed) {
  temp_dir dir;
  write_dataset(dir.str(), small_graph(true, 3));
  set_manifest(dir.str(), "col_indices.bytes", "123");
  for (const std::string& e : load_errors(dir.str())) {
    EXPECT_NE(e.find("col_indices"), std::string::npos) << e;
  }
  temp_dir dir2;
  write_dataset(dir2.str(), small_graph(true, 3));
  set_manifest(dir2.str(), "node_features.count", "12");
  for (const std::string& e : load_errors(dir2.str())) {
    EXPECT_NE(e.find("node_features"), std::string::npos) << e;
  }
}

// node_ids.txt is not loaded, but a damaged one is refused on every rank: truncated (its size
// against the manifest, always), or one byte changed (the checksum, read by rank 0 when
// checksums are verified); an intact one loads, and so does a dataset written before the ids
// had a checksum.
TEST(CsrGraph, DamagedNodeIdsRefusedOnEveryRank) {
  auto with_ids = [] {
    host_csr g = small_graph(false, 0);
    for (std::uint64_t v = 0; v < g.num_nodes; ++v)
      g.node_ids.push_back("id" + std::to_string(v * 7));
    return g;
  };
  {
    temp_dir dir;
    write_dataset(dir.str(), with_ids());
    for (const std::string& e : load_errors(dir.str(), true)) EXPECT_EQ(e, "");
    fs::resize_file(dir.path / "node_ids.txt", fs::file_size(dir.path / "node_ids.txt") - 3);
    for (const std::string& e : load_errors(dir.str())) {
      EXPECT_NE(e.find("node_ids.txt"), std::string::npos) << e;
      EXPECT_NE(e.find("truncated or modified"), std::string::npos) << e;
    }
  }
  {
    temp_dir dir;
    write_dataset(dir.str(), with_ids());
    std::fstream f(dir.path / "node_ids.txt", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(2);
    f.put('9');  // "id0" -> "id9": same size
    f.close();
    for (const std::string& e : load_errors(dir.str())) EXPECT_EQ(e, "");  // sizes only
    for (const std::string& e : load_errors(dir.str(), /*verify_checksums=*/true)) {
      EXPECT_NE(e.find("node_ids.txt: checksum mismatch"), std::string::npos) << e;
    }
  }
  {
    temp_dir dir;
    write_dataset(dir.str(), with_ids());
    remove_manifest_keys(dir.str(), {"node_ids_bytes", "node_ids_checksum"});
    for (const std::string& e : load_errors(dir.str(), true)) EXPECT_EQ(e, "");
    remove_manifest_keys(dir.str(), {"node_ids_file"});
    for (const std::string& e : load_errors(dir.str())) EXPECT_EQ(e, "");
  }
}

TEST(CsrGraph, MissingFileNamed) {
  temp_dir dir;
  write_dataset(dir.str(), small_graph(false, 0));
  fs::remove(dir.path / "col_indices.bin");
  for (const std::string& e : load_errors(dir.str())) {
    EXPECT_NE(e.find("col_indices.bin"), std::string::npos) << e;
  }
}

TEST(CsrGraph, CorruptFileFailsTheChecksumOnEveryRank) {
  // Checksums are split among ranks: row_offsets is checked by rank 0, col_indices by rank 1.
  for (const char* name : {"row_offsets.bin", "col_indices.bin"}) {
    temp_dir dir;
    write_dataset(dir.str(), small_graph(false, 0));
    {
      std::fstream f(dir.path / name, std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(16);
      f.put('\x7f');
    }
    std::vector<std::string> errors(2);
    thread_ranks(2, [&](std::shared_ptr<wholememory::bootstrap> bs) {
      auto comm = wholememory::make_host_communicator(bs);
      load_options opts;
      opts.verify_checksums = true;
      try {
        load_graph(comm, dir.str(), opts);
      } catch (const wholememory::logic_error& e) {
        errors[comm->rank()] = e.what();
      }
    });
    for (const std::string& e : errors) {
      EXPECT_NE(e.find(name), std::string::npos) << e;
      EXPECT_NE(e.find("checksum"), std::string::npos) << e;
    }
  }
}

TEST(CsrGraph, Int64ColumnsKeptOnDisk) {
  // write_dataset narrows to int32 below 2^31 nodes; widen the file by hand and fix the
  // manifest so the int64 path runs on a small graph.
  host_csr src = small_graph(false, 0);
  temp_dir dir;
  write_dataset(dir.str(), src);
  const std::string path = dir.str() + "/col_indices.bin";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(src.col_indices.data()),
             static_cast<std::streamsize>(src.col_indices.size() * 8));
  std::vector<char> bytes = file_bytes(path);
  set_manifest(dir.str(), "col_indices.dtype", "int64");
  set_manifest(dir.str(), "col_indices.bytes", std::to_string(bytes.size()));
  std::ostringstream sum;
  sum << "0x" << std::hex << fnv1a64(bytes.data(), bytes.size());
  set_manifest(dir.str(), "col_indices.checksum", sum.str());
  thread_ranks(3, [&](std::shared_ptr<wholememory::bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    load_options opts;
    opts.type = memory_type::chunked;
    csr_graph g = load_graph(comm, dir.str(), opts);
    EXPECT_EQ(g.col_type, dtype::int64);
    check_graph(g, dir.str(), false, false);
  });
}

// Device location: needs a CUDA build and a GPU (skips otherwise).  Every rank uses its
// default device; parts are staged through the loader's page-locked buffers.
TEST(CsrGraphDevice, LoadAndMakeRoundTrip) {
  if (wholememory::device_count() == 0) GTEST_SKIP() << "no CUDA device in this build/machine";
  host_csr src = small_graph(true, 5);
  temp_dir dir;
  write_dataset(dir.str(), src, dtype::float16);
  for (int ranks : {1, 2}) {
    for (memory_type type :
         {memory_type::continuous, memory_type::chunked, memory_type::distributed}) {
      thread_ranks(ranks, [&](std::shared_ptr<wholememory::bootstrap> bs) {
        auto comm = wholememory::make_host_communicator(bs);
        wholememory::set_device(wholememory::default_device(*comm));
        SCOPED_TRACE(std::string(wholememory::memory_type_name(type)) + " ranks " +
                     std::to_string(ranks));
        load_options opts;
        opts.type = type;
        opts.location = memory_location::device;
        opts.chunk_bytes = 4096;
        load_stats stats;
        csr_graph g = load_graph(comm, dir.str(), opts, &stats);
        EXPECT_EQ(g.location(), memory_location::device);
        check_graph(g, dir.str(), true, true);
        opts.features_location = memory_location::host;
        csr_graph mixed = load_graph(comm, dir.str(), opts);
        EXPECT_EQ(mixed.node_features.location(), memory_location::host);
        check_graph(mixed, dir.str(), true, true);
        csr_graph made = make_graph(comm, src, opts, dtype::float16);
        check_graph(made, dir.str(), true, true);
      });
    }
  }
}

}  // namespace
