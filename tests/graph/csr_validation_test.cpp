// Hostile graphs: every loader (load_graph, make_graph) refuses a CSR that breaks rule 6 of
// docs/dataset-format.md even when its checksums are valid, on every rank, naming the source,
// the array, the first bad position and value and the rule; the CPU sampler never reads or
// writes out of bounds whatever the graph's memory holds (a graph changed after loading); and
// ranks that were handed different graphs (another generator seed, another dataset, a missing
// one) all fail, naming the difference, before anything shared is built from them.
#include "common/multiprocess.hpp"
#include "common/temp_dir.hpp"
#include "graph/hostile_csr.hpp"

#include <graph/csr_graph.hpp>
#include <graph/dataset.hpp>
#include <graph/generate.hpp>
#include <graph/sampling.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

namespace fs = std::filesystem;
namespace wm = wholememory;
using namespace wholestore::graph;
using wholestore_test::csr_corruption;
using wholestore_test::csr_corruptions;
using wholestore_test::fork_ranks;
using wholestore_test::thread_ranks;
using wm::memory_location;
using wm::memory_type;

using wholestore_test::temp_dir;
// 997 nodes, 9001 edges: parts end mid-row for every rank count.
host_csr small_graph() {
  generate_options o;
  o.num_nodes = 997;
  o.num_edges = 9001;
  o.seed = 5;
  o.with_weights = true;
  o.threads = 1;
  return generate_graph(o);
}

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

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

// Overwrites element `pos` of array file `array`.bin (elements of T) with `value` and fixes
// the manifest's checksum, so that only the structural check can find it.
template <typename T>
void poke(const std::string& dir, const std::string& array, std::uint64_t pos, T value) {
  const std::string path = dir + "/" + array + ".bin";
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(pos * sizeof(T)));
    f.write(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  std::vector<char> bytes = file_bytes(path);
  std::ostringstream sum;
  sum << "0x" << std::hex << fnv1a64(bytes.data(), bytes.size());
  set_manifest(dir, array + ".checksum", sum.str());
}

// A broken rule: which array, where, the value written and what the message must say.
struct hostile_case {
  const char* name;
  const char* array;  // row_offsets (int64) or col_indices (int32)
  std::uint64_t position;
  std::int64_t value;  // the value to write; minus_one_below: row_offsets[position - 1] - 1
  const char* expect;  // in the message besides the array and position
};
constexpr std::int64_t minus_one_below = std::numeric_limits<std::int64_t>::min();

const hostile_case hostile_cases[] = {
    {"DecreasingOffset", "row_offsets", 700, minus_one_below, "never decrease"},
    {"HugeOffset", "row_offsets", 300, std::int64_t{1} << 40, "outside [0, num_edges = 9001]"},
    {"NegativeOffset", "row_offsets", 300, -7, "outside [0, num_edges = 9001]"},
    {"FirstOffsetNotZero", "row_offsets", 0, 1, "must be 0"},
    {"LastOffsetNotEdgeCount", "row_offsets", 997, 9000, "9000"},
    {"ColumnIntMax", "col_indices", 8000, std::numeric_limits<std::int32_t>::max(),
     "outside [0, num_nodes = 997)"},
    {"ColumnMinusOne", "col_indices", 5, -1, "outside [0, num_nodes = 997)"},
};

// Writes the dataset and breaks it as `c` says; returns the value written.
std::int64_t write_hostile(const std::string& dir, const hostile_case& c) {
  const host_csr g = small_graph();
  write_dataset(dir, g);
  std::int64_t value = c.value;
  if (std::string(c.array) == "row_offsets") {
    if (value == minus_one_below) value = g.row_offsets[c.position - 1] - 1;
    poke<std::int64_t>(dir, c.array, c.position, value);
  } else {
    poke<std::int32_t>(dir, c.array, c.position, static_cast<std::int32_t>(value));
  }
  return value;
}

void expect_names_fault(const std::string& message, const std::string& source,
                        const hostile_case& c, std::int64_t value) {
  EXPECT_NE(message.find(source), std::string::npos) << message;
  EXPECT_NE(message.find(std::string(c.array) + "["), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(c.position) + "]"), std::string::npos) << message;
  EXPECT_NE(message.find(std::to_string(value)), std::string::npos) << message;
  EXPECT_NE(message.find(c.expect), std::string::npos) << message;
  EXPECT_NE(message.find("rule 6"), std::string::npos) << message;
}

class HostileDataset : public ::testing::TestWithParam<std::tuple<hostile_case, int, memory_type>> {
};

// Loads with valid checksums (also verified) still fail on every rank, whichever rank's part
// holds the fault.
TEST_P(HostileDataset, LoadGraphRefusesOnEveryRank) {
  const auto& [c, ranks, type] = GetParam();
  temp_dir dir;
  const std::int64_t value = write_hostile(dir.str(), c);
  std::vector<std::string> errors(static_cast<std::size_t>(ranks));
  thread_ranks(ranks, [&, type = type](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    load_options opts;
    opts.type = type;
    opts.verify_checksums = true;
    opts.chunk_bytes = 1000;  // many pieces: faults between two pieces are found too
    opts.threads = 3;
    try {
      csr_graph g = load_graph(comm, dir.str(), opts);
      errors[static_cast<std::size_t>(comm->rank())] = "(loaded)";
    } catch (const wm::logic_error& e) {
      errors[static_cast<std::size_t>(comm->rank())] = e.what();
    }
  });
  for (const std::string& e : errors) expect_names_fault(e, dir.str(), c, value);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, HostileDataset,
    ::testing::Combine(::testing::ValuesIn(hostile_cases), ::testing::Values(1, 3),
                       ::testing::Values(memory_type::continuous, memory_type::distributed)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param).name) + "_" +
             std::to_string(std::get<1>(info.param)) + "ranks_" +
             wm::memory_type_name(std::get<2>(info.param));
    });

// The same in processes: a fault in the last rank's part reaches rank 0.
TEST(HostileDatasetProcesses, EveryRankThrows) {
  const hostile_case& c = hostile_cases[5];  // col_indices[8000]: the last of 3 ranks' part
  temp_dir dir;
  const std::int64_t value = write_hostile(dir.str(), c);
  auto result = fork_ranks(
      3,
      [&](std::shared_ptr<wm::bootstrap> bs) {
        auto comm = wm::make_host_communicator(bs);
        load_options opts;
        opts.type = memory_type::chunked;
        try {
          load_graph(comm, dir.str(), opts);
          ADD_FAILURE() << "rank " << bs->rank() << " loaded a broken graph";
        } catch (const wm::logic_error& e) {
          expect_names_fault(e.what(), dir.str(), c, value);
        }
      },
      std::chrono::seconds(20));
  EXPECT_TRUE(result.all_ok());
}

// read_dataset (`wholestore info`) names the same fault.
TEST(HostileDatasetRead, ReadDatasetNamesTheFault) {
  for (const hostile_case& c : hostile_cases) {
    SCOPED_TRACE(c.name);
    temp_dir dir;
    const std::int64_t value = write_hostile(dir.str(), c);
    try {
      read_dataset(dir.str());
      ADD_FAILURE() << "read a broken graph";
    } catch (const wm::logic_error& e) {
      expect_names_fault(e.what(), dir.str(), c, value);
    }
  }
}

// make_graph checks the host graph it is given, on every rank.
TEST(HostileHostGraph, MakeGraphRefusesOnEveryRank) {
  for (const hostile_case& c : hostile_cases) {
    SCOPED_TRACE(c.name);
    host_csr g = small_graph();
    std::int64_t value = c.value;
    if (std::string(c.array) == "row_offsets") {
      if (value == minus_one_below) value = g.row_offsets[c.position - 1] - 1;
      g.row_offsets[c.position] = value;
    } else {
      g.col_indices[c.position] = value;
    }
    for (memory_type type : {memory_type::continuous, memory_type::distributed}) {
      std::vector<std::string> errors(3);
      thread_ranks(3, [&](std::shared_ptr<wm::bootstrap> bs) {
        auto comm = wm::make_host_communicator(bs);
        try {
          csr_graph made = make_graph(comm, g, type, memory_location::host);
          errors[static_cast<std::size_t>(comm->rank())] = "(made)";
        } catch (const wm::logic_error& e) {
          errors[static_cast<std::size_t>(comm->rank())] = e.what();
        }
      });
      for (const std::string& e : errors) expect_names_fault(e, "make_graph", c, value);
    }
  }
}

// A column index above int32 in a graph of fewer than 2^31 nodes would be narrowed to a
// valid-looking id: make_graph checks before narrowing.
TEST(HostileHostGraph, MakeGraphChecksBeforeNarrowing) {
  host_csr g = small_graph();
  g.col_indices[17] = (std::int64_t{1} << 32) + 3;  // narrows to 3
  auto comm = wm::make_host_communicator(
      std::shared_ptr<wm::bootstrap>(std::move(wm::make_thread_bootstraps(1)[0])));
  try {
    make_graph(comm, g, memory_type::continuous, memory_location::host);
    ADD_FAILURE() << "made a broken graph";
  } catch (const wm::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("col_indices[17] is 4294967299"), std::string::npos)
        << e.what();
  }
}

// NaN, infinite or negative edge weights would be sampled as weight zero: every reader
// refuses them (with valid checksums), naming the position and the value.
TEST(HostileWeights, EveryLoaderRefuses) {
  const float bad_weights[] = {std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::infinity(), -1.5f};
  for (float w : bad_weights) {
    SCOPED_TRACE(std::to_string(w));
    temp_dir dir;
    write_dataset(dir.str(), small_graph());
    poke<float>(dir.str(), "edge_weights", 6000, w);
    auto expect_named = [&](const std::string& what, const std::string& source) {
      EXPECT_NE(what.find(source), std::string::npos) << what;
      EXPECT_NE(what.find("edge_weights[6000]"), std::string::npos) << what;
      EXPECT_NE(what.find("finite and >= 0"), std::string::npos) << what;
      EXPECT_NE(what.find("rule 6"), std::string::npos) << what;
    };
    try {
      read_dataset(dir.str());
      ADD_FAILURE() << "read_dataset accepted the weight";
    } catch (const wm::logic_error& e) {
      expect_named(e.what(), dir.str());
    }
    host_csr g = small_graph();
    g.edge_weights[6000] = w;
    const auto errors = wholestore_test::distributed_load_and_make_errors(3, dir.str(), g);
    for (std::size_t r = 0; r < 3; ++r) {
      expect_named(errors.load[r], dir.str());
      expect_named(errors.make[r], "make_graph");
    }
    temp_dir out;
    try {
      write_dataset(out.str() + "/ds", g);
      ADD_FAILURE() << "write_dataset accepted the weight";
    } catch (const wm::logic_error& e) {
      expect_named(e.what(), "write_dataset");
    }
  }
}

// The sampler meets a graph whose memory was changed after a valid load: it throws naming the
// array, never reads or writes out of bounds (a crash fails the whole test binary).
class HostileMemory : public ::testing::TestWithParam<memory_type> {};

// Writes `value` at element `pos` of `mem` (int64 or int32 elements), through whichever part
// of this rank holds it.
template <typename T>
void overwrite(const wm::allocation& mem, std::uint64_t pos, T value) {
  for (int p = 0; p < mem.num_parts(); ++p) {
    const wm::part_info part = mem.part(p);
    const std::uint64_t at = pos * sizeof(T);
    if (part.ptr != nullptr && at >= part.offset && at < part.offset + part.bytes) {
      std::memcpy(static_cast<char*>(part.ptr) + (at - part.offset), &value, sizeof(T));
      return;
    }
  }
}

TEST_P(HostileMemory, SamplerStaysInBounds) {
  const memory_type type = GetParam();
  const host_csr g = small_graph();
  for (const csr_corruption& k : csr_corruptions(997)) {
    for (sample_method method : {sample_method::uniform, sample_method::uniform_with_replacement,
                                 sample_method::weighted}) {
      SCOPED_TRACE(std::string(k.array) + "[" + std::to_string(k.position) +
                   "] = " + std::to_string(k.value) + ", " + sample_method_name(method));
      std::vector<std::string> errors(2);
      thread_ranks(2, [&](std::shared_ptr<wm::bootstrap> bs) {
        auto comm = wm::make_host_communicator(bs);
        csr_graph wg = make_graph(comm, g, type, memory_location::host);
        if (comm->rank() == 0 || type == memory_type::distributed) {
          // Distributed: only the owner of the element can write it; the others skip.
          if (std::string(k.array) == "row_offsets") {
            overwrite<std::int64_t>(wg.row_offsets, k.position, k.value);
          } else {
            overwrite<std::int32_t>(wg.col_indices, k.position, static_cast<std::int32_t>(k.value));
          }
        }
        comm->barrier(nullptr);
        std::vector<std::int64_t> seeds(g.num_nodes);
        std::iota(seeds.begin(), seeds.end(), 0);
        sample_options so;
        so.fanouts = {-1, 10, 5};
        so.method = method;
        try {
          sample_host(wg, seeds.data(), seeds.size(), so, 2);
          errors[static_cast<std::size_t>(comm->rank())] = "(sampled)";
        } catch (const wm::logic_error& e) {
          errors[static_cast<std::size_t>(comm->rank())] = e.what();
        }
      });
      for (const std::string& e : errors) {
        EXPECT_NE(e.find(k.array), std::string::npos) << e;
        EXPECT_NE(e.find("corrupt"), std::string::npos) << e;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, HostileMemory,
                         ::testing::Values(memory_type::continuous, memory_type::chunked,
                                           memory_type::distributed),
                         [](const auto& info) { return wm::memory_type_name(info.param); });

// ---- ranks that disagree ----

host_csr graph_with_seed(std::uint64_t seed) {
  generate_options o;
  o.num_nodes = 997;
  o.num_edges = 9001;
  o.seed = seed;
  o.with_weights = true;
  o.threads = 1;
  return generate_graph(o);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Each rank generated its graph with its own seed (same sizes): make_graph must not build one
// shared CSR out of slices of different graphs.
TEST(RanksDisagree, MakeGraphFromDifferentGraphs) {
  for (memory_type type : {memory_type::continuous, memory_type::distributed}) {
    auto result = fork_ranks(
        2,
        [&](std::shared_ptr<wm::bootstrap> bs) {
          auto comm = wm::make_host_communicator(bs);
          const host_csr g = graph_with_seed(100 + static_cast<std::uint64_t>(bs->rank()));
          try {
            make_graph(comm, g, type, memory_location::host);
            ADD_FAILURE() << "rank " << bs->rank() << " built a graph from different inputs";
          } catch (const wm::mismatch_error& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find("make_graph"), std::string::npos) << what;
            EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
          }
        },
        std::chrono::seconds(10));
    EXPECT_TRUE(result.all_ok()) << wm::memory_type_name(type);
  }
}

// The same graph everywhere but another feature dtype on one rank: the bytes differ.
TEST(RanksDisagree, MakeGraphWithDifferentFeatureTypes) {
  generate_options o;
  o.num_nodes = 300;
  o.num_edges = 2000;
  o.feature_dim = 4;
  o.threads = 1;
  const host_csr g = generate_graph(o);
  std::vector<std::string> errors(2);
  thread_ranks(2, [&](std::shared_ptr<wm::bootstrap> bs) {
    auto comm = wm::make_host_communicator(bs);
    const wm::dtype ft = bs->rank() == 0 ? wm::dtype::float16 : wm::dtype::bfloat16;
    try {
      make_graph(comm, g, memory_type::chunked, memory_location::host, ft);
    } catch (const wm::mismatch_error& e) {
      errors[static_cast<std::size_t>(bs->rank())] = e.what();
    }
  });
  for (const std::string& e : errors) EXPECT_NE(e.find("feature"), std::string::npos) << e;
}

// Ranks pointed at two different datasets: the manifests differ, every rank says so.
TEST(RanksDisagree, LoadGraphOfDifferentDatasets) {
  temp_dir a, b;
  write_dataset(a.str(), graph_with_seed(1));
  write_dataset(b.str(), graph_with_seed(2));
  auto result = fork_ranks(
      2,
      [&](std::shared_ptr<wm::bootstrap> bs) {
        auto comm = wm::make_host_communicator(bs);
        const std::string dir = bs->rank() == 0 ? a.str() : b.str();
        try {
          load_graph(comm, dir, load_options{});
          ADD_FAILURE() << "rank " << bs->rank() << " loaded half of two datasets";
        } catch (const wm::mismatch_error& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("rank 1"), std::string::npos) << what;
          EXPECT_NE(what.find("checksum"), std::string::npos) << what;
        }
      },
      std::chrono::seconds(10));
  EXPECT_TRUE(result.all_ok());
}

// One rank cannot read its manifest: every rank throws at once (not after the timeout of the
// next collective), naming the rank and the file.
TEST(RanksDisagree, LoadGraphWithAMissingDatasetOnOneRank) {
  temp_dir a;
  write_dataset(a.str(), graph_with_seed(1));
  const auto start = std::chrono::steady_clock::now();
  auto result = fork_ranks(
      3,
      [&](std::shared_ptr<wm::bootstrap> bs) {
        auto comm = wm::make_host_communicator(bs);
        const std::string dir = bs->rank() == 2 ? a.str() + "/missing" : a.str();
        try {
          load_graph(comm, dir, load_options{});
          ADD_FAILURE() << "rank " << bs->rank() << " loaded";
        } catch (const wm::logic_error& e) {
          const std::string what = e.what();
          EXPECT_NE(what.find("rank 2"), std::string::npos) << what;
          EXPECT_NE(what.find("manifest"), std::string::npos) << what;
        }
      },
      std::chrono::seconds(20));
  EXPECT_TRUE(result.all_ok());
  EXPECT_LT(seconds_since(start), 10.0) << "the ranks waited for a timeout";
}

}  // namespace
