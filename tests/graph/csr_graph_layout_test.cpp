// The layout of a csr_graph's parts (csr_graph.hpp): in a distributed graph made by make_graph
// or loaded by load_graph, every rank's part of col_indices and edge_weights holds exactly the
// edges of the nodes whose row offsets its part of row_offsets holds, checked on 1 to 4 ranks
// (threads and forked processes) against the host CSR the graph came from, on random degrees
// with zero-degree nodes, graphs whose edges all belong to one node, graphs without edges and
// graphs with fewer nodes than ranks; continuous and chunked graphs keep the even split.
// load_graph refuses row offsets that cannot split the edges, naming the file, before it
// allocates; the CPU sampler returns on the new layout what it returns on continuous memory.
#include "common/multiprocess.hpp"
#include "common/temp_dir.hpp"
#include "graph/hostile_csr.hpp"

#include <graph/csr_graph.hpp>
#include <graph/dataset.hpp>
#include <graph/sampling.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/partition.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace wm = wholememory;
using namespace wholestore::graph;
using wholestore_test::thread_ranks;
using wm::memory_location;
using wm::memory_type;

using wholestore_test::distributed_load_and_make_errors;
using wholestore_test::load_and_make_errors;
using wholestore_test::temp_dir;
// A CSR with the given degrees, random neighbors and (when asked) random weights in [0, 10).
host_csr with_degrees(const std::vector<std::uint64_t>& degrees, bool weights, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  host_csr g;
  g.num_nodes = degrees.size();
  g.row_offsets.push_back(0);
  for (std::uint64_t degree : degrees) {
    for (std::uint64_t k = 0; k < degree; ++k) {
      g.col_indices.push_back(static_cast<std::int64_t>(rng() % g.num_nodes));
      if (weights) g.edge_weights.push_back(static_cast<float>(rng() % 1000) / 100.0f);
    }
    g.row_offsets.push_back(static_cast<std::int64_t>(g.col_indices.size()));
  }
  return g;
}

// Degrees in [0, 12], a quarter of the nodes without edges.
std::vector<std::uint64_t> random_degrees(std::uint64_t nodes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> d(nodes);
  for (auto& x : d) x = rng() % 4 == 0 ? 0 : rng() % 13;
  return d;
}

// Every edge on node `hub` of `nodes`.
std::vector<std::uint64_t> one_hub(std::uint64_t nodes, std::uint64_t hub, std::uint64_t edges) {
  std::vector<std::uint64_t> d(nodes, 0);
  d[hub] = edges;
  return d;
}

struct graph_case {
  const char* name;
  std::function<host_csr()> make;
};
void PrintTo(const graph_case& c, std::ostream* os) { *os << c.name; }

const graph_case graph_cases[] = {
    {"Random997Weighted", [] { return with_degrees(random_degrees(997, 1), true, 2); }},
    {"Random50", [] { return with_degrees(random_degrees(50, 3), false, 4); }},
    {"AllEdgesOnFirstNode", [] { return with_degrees(one_hub(60, 0, 500), true, 5); }},
    {"AllEdgesOnLastNode", [] { return with_degrees(one_hub(60, 59, 500), true, 6); }},
    {"NoEdges", [] { return with_degrees(std::vector<std::uint64_t>(10, 0), false, 7); }},
    {"OneNode", [] { return with_degrees({5}, true, 8); }},
    {"TwoNodes",
     [] {
       return with_degrees({0, 3}, true, 9);
     }},
    {"NoNodes", [] { return with_degrees({}, false, 10); }},
};

// The bytes of ref's edges [first, last) as the graph stores them (elem bytes per index).
std::vector<char> col_bytes(const host_csr& ref, std::uint64_t first, std::uint64_t last,
                            std::size_t elem) {
  std::vector<char> out((last - first) * elem);
  for (std::uint64_t e = first; e < last; ++e) {
    char* dst = out.data() + (e - first) * elem;
    if (elem == 4) {
      const auto v = static_cast<std::int32_t>(ref.col_indices[e]);
      std::memcpy(dst, &v, 4);
    } else {
      std::memcpy(dst, &ref.col_indices[e], 8);
    }
  }
  return out;
}

std::vector<char> part_bytes_of(const wm::part_info& part) {
  std::vector<char> got(part.bytes);
  if (part.bytes > 0) wm::copy_bytes(got.data(), part.ptr, part.bytes);
  return got;
}

// This rank's parts of a distributed graph against the host CSR it came from.
void expect_edges_on_node_owner(const csr_graph& g, const host_csr& ref, int ranks) {
  ASSERT_EQ(g.type(), memory_type::distributed);
  const std::uint64_t n = ref.num_nodes, m = ref.num_edges();
  // row_offsets keeps the even split by element.
  EXPECT_EQ(g.row_offsets.get_partition().offsets,
            wm::partition::even((n + 1) * 8, ranks, 8).offsets);
  const wm::part_info rows = g.row_offsets.local_part();
  ASSERT_EQ(rows.offset % 8, 0u);
  ASSERT_EQ(rows.bytes % 8, 0u);
  const std::uint64_t a = rows.offset / 8, b = (rows.offset + rows.bytes) / 8;
  const auto first = static_cast<std::uint64_t>(ref.row_offsets[std::min(a, n)]);
  const auto last = static_cast<std::uint64_t>(ref.row_offsets[std::min(b, n)]);
  SCOPED_TRACE("row offsets [" + std::to_string(a) + ", " + std::to_string(b) + "), edges [" +
               std::to_string(first) + ", " + std::to_string(last) + ")");

  const std::size_t elem = wm::dtype_size(g.col_type);
  EXPECT_EQ(g.col_indices.size(), m * elem);
  const wm::part_info cols = g.col_indices.local_part();
  EXPECT_EQ(cols.offset, first * elem);
  ASSERT_EQ(cols.bytes, (last - first) * elem);
  EXPECT_EQ(part_bytes_of(cols), col_bytes(ref, first, last, elem)) << "col_indices differ";

  ASSERT_EQ(g.has_weights(), !ref.edge_weights.empty());
  if (g.has_weights()) {
    EXPECT_EQ(g.edge_weights.size(), m * 4);
    const wm::part_info weights = g.edge_weights.local_part();
    EXPECT_EQ(weights.offset, first * 4);
    ASSERT_EQ(weights.bytes, (last - first) * 4);
    std::vector<char> want((last - first) * 4);
    if (last > first) std::memcpy(want.data(), ref.edge_weights.data() + first, want.size());
    EXPECT_EQ(part_bytes_of(weights), want) << "edge_weights differ";
  }
  EXPECT_TRUE(edges_follow_nodes(g));
}

// Continuous and chunked graphs: every array split evenly by element, at least one element.
void expect_even_split(const csr_graph& g, const host_csr& ref, int ranks) {
  const std::uint64_t m = ref.num_edges();
  const std::size_t elem = wm::dtype_size(g.col_type);
  EXPECT_EQ(g.row_offsets.get_partition().offsets,
            wm::partition::even((ref.num_nodes + 1) * 8, ranks, 8).offsets);
  EXPECT_EQ(g.col_indices.get_partition().offsets,
            wm::partition::even(std::max<std::size_t>(m * elem, elem), ranks, elem).offsets);
  if (g.has_weights()) {
    EXPECT_EQ(g.edge_weights.get_partition().offsets,
              wm::partition::even(std::max<std::size_t>(m * 4, 4), ranks, 4).offsets);
  }
  EXPECT_FALSE(edges_follow_nodes(g));
}

void expect_layout(const csr_graph& g, const host_csr& ref, int ranks) {
  if (g.type() == memory_type::distributed) {
    expect_edges_on_node_owner(g, ref, ranks);
  } else {
    expect_even_split(g, ref, ranks);
  }
}

class EdgeLayout : public ::testing::TestWithParam<std::tuple<graph_case, int>> {};

TEST_P(EdgeLayout, MakeAndLoad) {
  const auto& [c, ranks] = GetParam();
  const host_csr ref = c.make();
  temp_dir dir;
  write_dataset(dir.str(), ref);
  thread_ranks(ranks, [&, ranks = ranks](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    for (memory_type type :
         {memory_type::continuous, memory_type::chunked, memory_type::distributed}) {
      SCOPED_TRACE(std::string(wm::memory_type_name(type)) + " rank " +
                   std::to_string(comm->rank()));
      {
        SCOPED_TRACE("make_graph");
        csr_graph made = make_graph(comm, ref, type, memory_location::host);
        expect_layout(made, ref, ranks);
      }
      {
        SCOPED_TRACE("load_graph");
        load_options opts;
        opts.type = type;
        opts.chunk_bytes = 40;  // several chunks per part, ending inside rows
        opts.threads = 2;
        csr_graph loaded = load_graph(comm, dir.str(), opts);
        expect_layout(loaded, ref, ranks);
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Graphs, EdgeLayout,
                         ::testing::Combine(::testing::ValuesIn(graph_cases),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "ranks";
                         });

// Device location: needs a CUDA build and a GPU (skips otherwise).  Ranks share the GPUs there
// are; the edge parts of distributed device memory may be empty.
TEST(EdgeLayoutDevice, MakeAndLoad) {
  if (wm::device_count() == 0) GTEST_SKIP() << "no CUDA device in this build/machine";
  for (const graph_case& c : graph_cases) {
    SCOPED_TRACE(c.name);
    const host_csr ref = c.make();
    temp_dir dir;
    write_dataset(dir.str(), ref);
    for (int ranks : {1, 2, 3}) {
      thread_ranks(ranks, [&](std::shared_ptr<wm::bootstrap> bs) {
        auto comm = wm::make_host_communicator(bs);
        wm::set_device(wm::default_device(*comm));
        SCOPED_TRACE("rank " + std::to_string(comm->rank()) + " of " + std::to_string(ranks));
        load_options opts;
        opts.type = memory_type::distributed;
        opts.location = memory_location::device;
        opts.chunk_bytes = 64;
        csr_graph loaded = load_graph(comm, dir.str(), opts);
        EXPECT_EQ(loaded.location(), memory_location::device);
        expect_edges_on_node_owner(loaded, ref, ranks);
        csr_graph made = make_graph(comm, ref, opts);
        expect_edges_on_node_owner(made, ref, ranks);
      });
    }
  }
}

// Overwrites element `pos` (of T) of `path`; the manifest's checksum is left stale (loads here
// do not verify checksums, so only the structure can betray the change).
template <typename T>
void poke(const std::string& path, std::uint64_t pos, T value) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(pos * sizeof(T)));
  f.write(reinterpret_cast<const char*>(&value), sizeof(T));
}

// int64 column indices on disk (write_dataset narrows below 2^31 nodes: widened by hand).
TEST(EdgeLayoutInt64, LoadKeepsEdgesWithTheirNodes) {
  const host_csr ref = with_degrees(random_degrees(301, 11), true, 12);
  temp_dir dir;
  write_dataset(dir.str(), ref);
  const std::string path = dir.str() + "/col_indices.bin";
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(ref.col_indices.data()),
             static_cast<std::streamsize>(ref.col_indices.size() * 8));
  std::string manifest_text;
  {
    std::ifstream in(dir.str() + "/manifest.yaml");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("col_indices.dtype:", 0) == 0) line = "col_indices.dtype: int64";
      if (line.rfind("col_indices.bytes:", 0) == 0) {
        line = "col_indices.bytes: " + std::to_string(ref.col_indices.size() * 8);
      }
      manifest_text += line + "\n";
    }
  }
  std::ofstream(dir.str() + "/manifest.yaml", std::ios::trunc) << manifest_text;
  for (int ranks : {1, 2, 3, 4}) {
    thread_ranks(ranks, [&](std::shared_ptr<wm::bootstrap> bs) {
      auto comm = wm::make_host_communicator(bs);
      load_options opts;
      opts.type = memory_type::distributed;
      csr_graph g = load_graph(comm, dir.str(), opts);
      EXPECT_EQ(g.col_type, wm::dtype::int64);
      expect_edges_on_node_owner(g, ref, ranks);
    });
  }
}

TEST(EdgeLayoutProcesses, LoadAndMakeInForkedProcesses) {
  const host_csr ref = with_degrees(one_hub(40, 1, 300), true, 13);
  temp_dir dir;
  write_dataset(dir.str(), ref);
  auto result = wholestore_test::fork_ranks(3, [&](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    load_options opts;
    opts.type = memory_type::distributed;
    csr_graph loaded = load_graph(comm, dir.str(), opts);
    expect_edges_on_node_owner(loaded, ref, 3);
    csr_graph made = make_graph(comm, ref, opts);
    expect_edges_on_node_owner(made, ref, 3);
  });
  EXPECT_TRUE(result.all_ok());
}

// A distributed graph whose edges were split evenly (not by make_graph or load_graph) is told
// apart, on every rank.
TEST(EdgeLayout, EvenSplitDoesNotFollowNodes) {
  const host_csr ref = with_degrees(one_hub(60, 0, 500), false, 14);
  thread_ranks(3, [&](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    csr_graph g = make_graph(comm, ref, memory_type::distributed, memory_location::host);
    EXPECT_TRUE(edges_follow_nodes(g));
    wm::allocation_options even;
    even.granularity = 4;
    g.col_indices = wm::allocation::create(comm, ref.num_edges() * 4, memory_type::distributed,
                                           memory_location::host, even);
    EXPECT_FALSE(edges_follow_nodes(g));
  });
}

// The CPU sampler reads the new layout as it reads continuous memory: the same blocks.
TEST(EdgeLayout, SamplesAsOnContinuousMemory) {
  for (const graph_case& c : graph_cases) {
    const host_csr ref = c.make();
    if (ref.num_nodes == 0) continue;
    SCOPED_TRACE(c.name);
    for (int ranks : {1, 2, 3}) {
      thread_ranks(ranks, [&](std::shared_ptr<wm::bootstrap> bs) {
        auto comm = wm::make_host_communicator(bs);
        csr_graph dist = make_graph(comm, ref, memory_type::distributed, memory_location::host);
        csr_graph cont = make_graph(comm, ref, memory_type::continuous, memory_location::host);
        std::mt19937_64 rng(static_cast<std::uint64_t>(comm->rank()) + 100);
        std::vector<std::int64_t> seeds(static_cast<std::size_t>(5 + 7 * comm->rank()));
        for (auto& s : seeds) s = static_cast<std::int64_t>(rng() % ref.num_nodes);
        std::vector<sample_method> methods = {sample_method::uniform,
                                              sample_method::uniform_with_replacement};
        if (!ref.edge_weights.empty()) methods.push_back(sample_method::weighted);
        for (sample_method method : methods) {
          sample_options o;
          o.fanouts = {4, -1, 3};
          o.method = method;
          o.random_seed = 21;
          o.edge_ids = true;
          const sample_result a = sample_host(dist, seeds.data(), seeds.size(), o, 2);
          const sample_result b = sample_host(cont, seeds.data(), seeds.size(), o, 2);
          EXPECT_TRUE(a.blocks == b.blocks) << sample_method_name(method);
        }
      });
    }
  }
}

// Row offsets that cannot split the edges: load_graph names the file, the position and the
// value while it reads them, before it allocates anything; make_graph names the first fault of
// its host graph's row offsets, as its part checks would.
struct bad_cut {
  const char* name;
  int boundary;  // which rank's first row offset (ranks = last: row_offsets[num_nodes])
  std::function<std::int64_t(const host_csr&, const std::vector<std::uint64_t>&)> value;
  std::string expect;
};

TEST(EdgeLayout, BrokenCutsRefusedOnEveryRank) {
  std::vector<std::uint64_t> degrees = random_degrees(997, 15);
  degrees.back() = 3;  // row_offsets[num_nodes] = num_edges - 1 breaks only the last rule
  const host_csr good = with_degrees(degrees, true, 16);
  const int ranks = 3;
  const wm::partition rows = wm::partition::even((good.num_nodes + 1) * 8, ranks, 8);
  std::vector<std::uint64_t> cut_nodes;  // the first node of every rank's part, then num_nodes
  for (int r = 0; r < ranks; ++r) cut_nodes.push_back(rows.offsets[r] / 8);
  cut_nodes.push_back(good.num_nodes);
  const auto edges = static_cast<std::int64_t>(good.num_edges());
  const bad_cut cases[] = {
      {"Decreasing", 2,
       [](const host_csr& g, const std::vector<std::uint64_t>& at) {
         return g.row_offsets[at[1]] - 1;
       },
       "never decrease"},
      {"PastTheEdges", 1, [&](const host_csr&, const auto&) { return edges + 1; },
       "outside [0, num_edges = " + std::to_string(edges) + "]"},
      {"Negative", 2, [](const host_csr&, const auto&) { return std::int64_t{-5}; }, "outside [0"},
      {"FirstNotZero", 0, [](const host_csr&, const auto&) { return std::int64_t{1}; },
       "must be 0"},
      {"LastNotEdgeCount", ranks, [&](const host_csr&, const auto&) { return edges - 1; },
       "must equal num_edges"},
  };
  for (const bad_cut& c : cases) {
    SCOPED_TRACE(c.name);
    const std::uint64_t position = cut_nodes[static_cast<std::size_t>(c.boundary)];
    const std::int64_t value = c.value(good, cut_nodes);
    ASSERT_GT(good.row_offsets[cut_nodes[1]], 0);  // "Decreasing" stays >= 0
    temp_dir dir;
    write_dataset(dir.str(), good);
    const std::string path = dir.str() + "/row_offsets.bin";
    poke<std::int64_t>(path, position, value);
    host_csr bad = good;
    bad.row_offsets[position] = value;

    const load_and_make_errors errors = distributed_load_and_make_errors(ranks, dir.str(), bad);
    for (const std::string& e : errors.load) {
      EXPECT_NE(e.find(path + ": row_offsets["), std::string::npos) << e;
      EXPECT_NE(e.find(std::to_string(position) + "]"), std::string::npos) << e;
      EXPECT_NE(e.find(std::to_string(value)), std::string::npos) << e;
      EXPECT_NE(e.find(c.expect), std::string::npos) << e;
      EXPECT_NE(e.find("split the edges"), std::string::npos)
          << "not found before allocating: " << e;
    }
    for (const std::string& e : errors.make) {
      EXPECT_NE(e.find("the host graph of make_graph: row_offsets["), std::string::npos) << e;
      EXPECT_NE(e.find(std::to_string(position) + "]"), std::string::npos) << e;
      EXPECT_NE(e.find(c.expect), std::string::npos) << e;
      EXPECT_NE(e.find("rule 6"), std::string::npos) << e;
    }
  }
}

// A row_offsets file cut short is named before any offset is read from it.
TEST(EdgeLayout, TruncatedRowOffsetsNamed) {
  const host_csr good = with_degrees(random_degrees(100, 17), false, 18);
  temp_dir dir;
  write_dataset(dir.str(), good);
  fs::resize_file(dir.path / "row_offsets.bin", fs::file_size(dir.path / "row_offsets.bin") - 8);
  std::vector<std::string> errors(2);
  thread_ranks(2, [&](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    load_options opts;
    opts.type = memory_type::distributed;
    try {
      load_graph(comm, dir.str(), opts);
    } catch (const wm::logic_error& e) {
      errors[static_cast<std::size_t>(comm->rank())] = e.what();
    }
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("row_offsets.bin"), std::string::npos) << e;
    EXPECT_NE(e.find("truncated"), std::string::npos) << e;
  }
}

}  // namespace
