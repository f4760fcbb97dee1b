/*
 * File IO of WholeMemory on host memory, with real ranks (forked processes, and threads for the
 * round trip).  Every array is filled with a pattern that is a function of the global byte
 * offset and a seed, and compared byte for byte: in memory after a load, and in the .bin
 * files themselves; the manifest's block checksums are recomputed by an independent
 * implementation of the documented definition.  Errors are checked on every rank, with the
 * same message everywhere and the destination's bytes unchanged.
 */
#include "common/multiprocess.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>
#include <wholememory/file_io.hpp>

#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace wholestore_test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using wholememory::allocation_options;
using wholememory::bootstrap;
using wholememory::communicator;
using wholememory::file_io_options;
using wholememory::loaded_array;
using wholememory::memory_location;
using wholememory::memory_type;
using wholememory::stored_array;
using wholememory::stored_manifest;
using wm_handle = wholememory::allocation;

const memory_type all_types[] = {memory_type::continuous, memory_type::chunked,
                                 memory_type::distributed};

// ---- the reference: pattern bytes and the documented block checksum ----

std::uint8_t pattern_byte(std::uint64_t offset, std::uint64_t seed) {
  std::uint64_t x = (offset / 8 + 1) * 0x9e3779b97f4a7c15ull ^ (seed * 0xd1b54a32d192ed03ull);
  x ^= x >> 31;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 29;
  return static_cast<std::uint8_t>(x >> (8 * (offset % 8)));
}

std::uint64_t reference_fmix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

// Block checksum of bytes [begin, end) of `data` (docs/architecture.md, "File IO"), one byte at
// a time, written apart from the library's word loop.
std::uint64_t reference_checksum(const std::string& data, std::uint64_t begin, std::uint64_t end) {
  std::uint64_t sum = 0;
  for (std::uint64_t word = begin / 8; word * 8 < end; ++word) {
    std::uint64_t value = 0;
    for (std::uint64_t b = 0; b < 8 && word * 8 + b < end; ++b) {
      value |= std::uint64_t{static_cast<unsigned char>(data[word * 8 + b])} << (8 * b);
    }
    sum += reference_fmix64(value ^ (word * 0x9e3779b97f4a7c15ull + 0x5851f42d4c957f2dull));
  }
  return reference_fmix64(sum ^ (end - begin));
}

std::string hex(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// ---- files and directories ----

class temp_dir {
 public:
  temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "wholestore-file-io-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }
  std::set<std::string> entries() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.insert(e.path().filename().string());
    return names;
  }

 private:
  std::string path_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// ---- memory ----

wm_handle make(std::shared_ptr<communicator> comm, std::size_t bytes, memory_type type,
               std::vector<std::size_t> part_bytes = {}) {
  allocation_options options;
  options.part_bytes = std::move(part_bytes);
  return wm_handle::create(std::move(comm), bytes, type, memory_location::host, options);
}

// Fills the parts this rank owns with the pattern, waiting for every rank before (one may
// still be checking the previous pattern of this rank's parts) and after.
void fill(const wm_handle& wm, std::uint64_t seed) {
  wm.comm().barrier(nullptr);
  for (int i = 0; i < wm.num_parts(); ++i) {
    const wholememory::part_info p = wm.part(i);
    if (p.rank != wm.comm().rank()) continue;
    auto* bytes = static_cast<std::uint8_t*>(p.ptr);
    for (std::size_t k = 0; k < p.bytes; ++k) bytes[k] = pattern_byte(p.offset + k, seed);
  }
  wm.comm().barrier(nullptr);
}

// Bytes this rank can see (every part, or its own for distributed memory) that differ from
// the pattern; reports the first.
std::uint64_t mismatches(const wm_handle& wm, std::uint64_t seed, const std::string& what) {
  std::uint64_t bad = 0;
  for (int i = 0; i < wm.num_parts(); ++i) {
    const wholememory::part_info p = wm.part(i);
    if (p.ptr == nullptr) continue;
    const auto* bytes = static_cast<const std::uint8_t*>(p.ptr);
    for (std::size_t k = 0; k < p.bytes; ++k) {
      if (bytes[k] != pattern_byte(p.offset + k, seed) && bad++ == 0) {
        ADD_FAILURE() << what << ": byte " << p.offset + k << " of " << wm.size() << " is "
                      << int(bytes[k]) << ", expected " << int(pattern_byte(p.offset + k, seed));
      }
    }
  }
  return bad;
}

// ---- ranks ----

void run_forked(int ranks, const rank_body& body, std::chrono::milliseconds timeout = 60s) {
  const fork_result result = fork_ranks(ranks, body, timeout);
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(result.status[r], 0) << "rank " << r << " failed";
}

// Calls `f`, expects Error with every one of `parts` in its message, and checks that every rank
// got the same message.  Returns it.
template <typename Error>
std::string expect_error_everywhere(bootstrap& bs, const std::function<void()>& f,
                                    const std::vector<std::string>& parts) {
  std::string message;
  try {
    f();
    ADD_FAILURE() << "rank " << bs.rank() << ": no exception";
  } catch (const Error& e) {
    message = e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "rank " << bs.rank() << ": an exception of another type: " << e.what();
  }
  for (const std::string& p : parts) {
    EXPECT_NE(message.find(p), std::string::npos)
        << "rank " << bs.rank() << ": '" << message << "' does not mention '" << p << "'";
  }
  const std::vector<std::string> all = bs.allgatherv(message);
  for (std::size_t r = 0; r < all.size(); ++r) {
    EXPECT_EQ(all[r], all[0]) << "rank " << r << " and rank 0 report different errors";
  }
  return message;
}

// ---- shapes ----

// One array of a test store: its size and, optionally, caller-given part sizes.
struct array_shape {
  std::string name;
  std::size_t bytes;
  std::vector<std::size_t> part_bytes;  // per rank, or empty for the even split
};

// Sizes that catch the edges: empty, one byte, fewer bytes than ranks, not a multiple of 8,
// uneven parts with an empty one, and a few random sizes (the same on every rank).
std::vector<array_shape> edge_shapes(int ranks, std::uint64_t seed) {
  std::vector<array_shape> shapes = {
      {"empty", 0, {}}, {"one_byte", 1, {}}, {"thirteen", 13, {}}, {"odd.size", 8 * 37 + 5, {}}};
  std::vector<std::size_t> uneven(ranks);
  std::size_t total = 0;
  for (int r = 0; r < ranks; ++r) {
    uneven[r] = r == 1 ? 0 : 101 + 173 * r;  // part 1 empty; boundaries off word boundaries
    total += uneven[r];
  }
  shapes.push_back({"uneven-parts", total, uneven});
  std::mt19937_64 random(seed);
  for (int i = 0; i < 3; ++i) {
    shapes.push_back({"random" + std::to_string(i), static_cast<std::size_t>(random() % 5000), {}});
  }
  return shapes;
}

// Allocates the shapes on `comm`, fills them with seed + index and returns them.
std::vector<wm_handle> make_filled(const std::shared_ptr<communicator>& comm,
                                   const std::vector<array_shape>& shapes, memory_type type,
                                   std::uint64_t seed) {
  std::vector<wm_handle> arrays;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const bool given = static_cast<int>(shapes[i].part_bytes.size()) == comm->size();
    arrays.push_back(make(comm, shapes[i].bytes, type,
                          given ? shapes[i].part_bytes : std::vector<std::size_t>{}));
    fill(arrays.back(), seed + i);
  }
  return arrays;
}

std::vector<stored_array> to_store(const std::vector<array_shape>& shapes,
                                   const std::vector<wm_handle>& arrays) {
  std::vector<stored_array> list;
  for (std::size_t i = 0; i < shapes.size(); ++i) list.push_back({shapes[i].name, &arrays[i]});
  return list;
}

std::vector<loaded_array> to_load(const std::vector<array_shape>& shapes,
                                  std::vector<wm_handle>& arrays) {
  std::vector<loaded_array> list;
  for (std::size_t i = 0; i < shapes.size(); ++i) list.push_back({shapes[i].name, &arrays[i]});
  return list;
}

// Checks, in the calling process, the store in `dir` against the shapes: the manifest's
// fields, every .bin file byte for byte, and every block checksum by the reference.
void check_store_on_disk(const std::string& dir, const std::vector<array_shape>& shapes,
                         std::uint64_t seed, std::uint64_t block_bytes) {
  const stored_manifest m = wholememory::read_stored_manifest(dir);
  EXPECT_EQ(m.version, wholememory::stored_format_version);
  ASSERT_EQ(m.arrays.size(), shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const stored_manifest::array& a = m.arrays[i];
    SCOPED_TRACE("array " + a.name);
    EXPECT_EQ(a.name, shapes[i].name);
    EXPECT_EQ(a.file, shapes[i].name + ".bin");
    EXPECT_EQ(a.bytes, shapes[i].bytes);
    EXPECT_EQ(a.block_bytes, block_bytes);
    const std::string data = read_file(dir + "/" + a.file);
    ASSERT_EQ(data.size(), shapes[i].bytes);
    for (std::size_t k = 0; k < data.size(); ++k) {
      ASSERT_EQ(static_cast<std::uint8_t>(data[k]), pattern_byte(k, seed + i)) << "byte " << k;
    }
    ASSERT_EQ(a.block_checksums.size(), (a.bytes + block_bytes - 1) / block_bytes);
    for (std::size_t b = 0; b < a.block_checksums.size(); ++b) {
      const std::uint64_t end = std::min<std::uint64_t>((b + 1) * block_bytes, a.bytes);
      EXPECT_EQ(hex(a.block_checksums[b]), hex(reference_checksum(data, b * block_bytes, end)))
          << "block " << b;
    }
  }
}

}  // namespace

// ---- round trips ----

class FileIoRoundTrip : public ::testing::TestWithParam<std::tuple<memory_type, int>> {};

// Every type, 1 to 4 ranks, forked and as threads: edge sizes in one store with 24-byte blocks
// (so blocks straddle every part boundary), loaded back into the same shapes; and a 9 MiB
// array over several chunks and threads with the default block size.
TEST_P(FileIoRoundTrip, StoreThenLoadGivesTheSameBytes) {
  const auto [type, ranks] = GetParam();
  const temp_dir tmp;
  const std::string dir = tmp / "store";
  const std::vector<array_shape> shapes = edge_shapes(ranks, 42 + ranks);
  const std::uint64_t seed = 1000 * ranks + static_cast<int>(type);
  all_modes(ranks, [&, type = type](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    std::vector<wm_handle> source = make_filled(comm, shapes, type, seed);
    file_io_options options;
    options.block_bytes = 24;
    wholememory::store(to_store(shapes, source), dir, options);
    if (comm->rank() == 0) check_store_on_disk(dir, shapes, seed, 24);

    std::vector<wm_handle> loaded = make_filled(comm, shapes, type, 7);
    wholememory::load(to_load(shapes, loaded), dir);
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      EXPECT_EQ(mismatches(loaded[i], seed + i, shapes[i].name), 0u);
    }

    // Several chunks per rank and three threads; parts not multiples of 8.
    const std::size_t big = (std::size_t{9} << 20) + 3;
    wm_handle large = make(comm, big, type);
    fill(large, seed + 99);
    file_io_options threaded;
    threaded.threads = 3;
    wholememory::store(large, dir, threaded);
    wm_handle back = make(comm, big, type);
    wholememory::load(back, dir, threaded);
    EXPECT_EQ(mismatches(back, seed + 99, "large"), 0u);
  });
  check_store_on_disk(dir, {{"data", (std::size_t{9} << 20) + 3, {}}}, seed + 99,
                      wholememory::default_block_bytes);
  EXPECT_EQ(tmp.entries(), std::set<std::string>{"store"}) << "a temporary directory was left";
}

INSTANTIATE_TEST_SUITE_P(HostTypes, FileIoRoundTrip,
                         ::testing::Combine(::testing::ValuesIn(all_types),
                                            ::testing::Values(1, 2, 3, 4)),
                         [](const auto& info) {
                           return std::string(
                                      wholememory::memory_type_name(std::get<0>(info.param))) +
                                  "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

class FileIoReshard : public ::testing::TestWithParam<memory_type> {};

// Stored from 3 ranks with uneven parts and 56-byte blocks, loaded on 2 ranks and on 1 rank
// into every type with other partitions.
TEST_P(FileIoReshard, LoadsOnOtherRankCountsAndTypes) {
  const memory_type source_type = GetParam();
  const temp_dir tmp;
  const std::string dir = tmp / "store";
  const std::vector<array_shape> stored = {{"a", 1003, {500, 3, 500}}, {"b", 64 * 1024 + 5, {}}};
  const std::uint64_t seed = 77;
  run_forked(3, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    std::vector<wm_handle> source = make_filled(comm, stored, source_type, seed);
    file_io_options options;
    options.block_bytes = 56;
    wholememory::store(to_store(stored, source), dir, options);
  });
  check_store_on_disk(dir, stored, seed, 56);

  for (int ranks : {2, 1}) {
    for (memory_type type : all_types) {
      SCOPED_TRACE(std::to_string(ranks) + " ranks, " + wholememory::memory_type_name(type));
      run_forked(ranks, [&](std::shared_ptr<bootstrap> bs) {
        auto comm = wholememory::make_host_communicator(bs);
        // Other partitions: a's parts end off word and block boundaries.
        std::vector<array_shape> shapes = stored;
        shapes[0].part_bytes =
            ranks == 2 ? std::vector<std::size_t>{9, 994} : std::vector<std::size_t>{1003};
        std::vector<wm_handle> loaded = make_filled(comm, shapes, type, 5);
        // Loaded in the other order: the manifest's order does not matter.
        wholememory::load({{"b", &loaded[1]}, {"a", &loaded[0]}}, dir);
        EXPECT_EQ(mismatches(loaded[0], seed, "a"), 0u);
        EXPECT_EQ(mismatches(loaded[1], seed + 1, "b"), 0u);
      });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(HostTypes, FileIoReshard, ::testing::ValuesIn(all_types),
                         [](const auto& info) {
                           return std::string(wholememory::memory_type_name(info.param));
                         });

TEST(FileIo, MetadataAndManifestRoundTrip) {
  const temp_dir tmp;
  const std::string dir = tmp / "nested/dirs/store/";  // parents made, trailing slash dropped
  const std::map<std::string, std::string> metadata = {
      {"step", "1200"}, {"model.name", "gnn: v2  with spaces "}, {"empty", ""}};
  run_forked(2, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    wm_handle first = make(comm, 100, memory_type::chunked);
    wm_handle second = make(comm, 0, memory_type::continuous);
    fill(first, 3);
    file_io_options options;
    options.metadata = metadata;
    wholememory::store({{"weights", &first}, {"empty", &second}}, dir, options);
  });
  const stored_manifest m = wholememory::read_stored_manifest(dir);
  EXPECT_EQ(m.version, 1);
  EXPECT_EQ(m.metadata, metadata);
  ASSERT_EQ(m.arrays.size(), 2u);
  EXPECT_EQ(m.arrays[0].name, "weights");
  EXPECT_EQ(m.arrays[0].bytes, 100u);
  EXPECT_EQ(m.arrays[0].block_bytes, wholememory::default_block_bytes);
  EXPECT_EQ(m.arrays[0].block_checksums.size(), 1u);
  EXPECT_EQ(m.arrays[1].name, "empty");
  EXPECT_EQ(m.arrays[1].bytes, 0u);
  EXPECT_TRUE(m.arrays[1].block_checksums.empty());
  EXPECT_EQ(fs::file_size(dir + "/empty.bin"), 0u);
}

TEST(FileIo, ProgressAndStatsCountThisRanksBytes) {
  const temp_dir tmp;
  const std::string dir = tmp / "store";
  run_forked(3, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    const std::size_t bytes = (std::size_t{10} << 20) + 11;
    wm_handle wm = make(comm, bytes, memory_type::distributed);
    fill(wm, 9);
    const std::uint64_t own = wm.local_part().bytes;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> calls;
    file_io_options options;
    options.threads = 2;
    options.block_bytes = 1 << 20;
    options.progress = [&](std::uint64_t done, std::uint64_t total) {
      calls.emplace_back(done, total);
    };
    wholememory::file_io_stats stats;
    wholememory::store(wm, dir, options, &stats);
    EXPECT_EQ(stats.bytes, own);
    EXPECT_GT(stats.seconds, 0.0);
    ASSERT_FALSE(calls.empty());
    for (std::size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].second, own);
      if (i > 0) {
        EXPECT_GE(calls[i].first, calls[i - 1].first);
      }
    }
    EXPECT_EQ(calls.back().first, own);

    // Load verifies the 1 MiB blocks overlapping the own part, then copies the part.
    calls.clear();
    wm_handle back = make(comm, bytes, memory_type::distributed);
    wholememory::load(back, dir, options, &stats);
    EXPECT_EQ(stats.bytes, own);
    const std::uint64_t first = wm.local_part().offset >> 20;
    const std::uint64_t last = (wm.local_part().offset + own - 1) >> 20;
    const std::uint64_t verified = std::min<std::uint64_t>((last + 1) << 20, bytes) - (first << 20);
    ASSERT_FALSE(calls.empty());
    EXPECT_EQ(calls.back(), std::make_pair(own + verified, own + verified));
    EXPECT_EQ(mismatches(back, 9, "loaded"), 0u);
  });
}

// ---- errors on load: every rank fails alike, the destination keeps its bytes ----

class FileIoLoadErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    run_forked(3, [&](std::shared_ptr<bootstrap> bs) {
      auto comm = wholememory::make_host_communicator(bs);
      wm_handle a = make(comm, bytes, memory_type::chunked, {300, 1, 699});
      wm_handle b = make(comm, 64, memory_type::distributed);
      fill(a, seed);
      fill(b, seed + 1);
      file_io_options options;
      options.block_bytes = block_bytes;
      wholememory::store({{"a", &a}, {"b", &b}}, dir, options);
    });
  }

  // Loads on 2 ranks into chunked memory filled with a sentinel, expects Error mentioning
  // `parts` on every rank, and checks that the destination is unchanged.
  template <typename Error>
  void expect_load_fails(const std::vector<std::string>& parts, std::size_t dest_bytes = bytes,
                         const std::string& name = "a") {
    run_forked(2, [&](std::shared_ptr<bootstrap> bs) {
      auto comm = wholememory::make_host_communicator(bs);
      wm_handle dest = make(comm, dest_bytes, memory_type::chunked);
      fill(dest, sentinel);
      expect_error_everywhere<Error>(
          *bs,
          [&] {
            wholememory::load({{name, &dest}}, dir);
          },
          parts);
      EXPECT_EQ(mismatches(dest, sentinel, "destination after a failed load"), 0u);
    });
  }

  static constexpr std::size_t bytes = 1000;
  static constexpr std::uint64_t block_bytes = 64;
  static constexpr std::uint64_t seed = 11, sentinel = 4242;
  temp_dir tmp;
  std::string dir = tmp / "store";
};

TEST_F(FileIoLoadErrors, WrongSizeNamesTheArrayAndBothSizes) {
  expect_load_fails<wholememory::logic_error>({"array 'a'", "1000 bytes", "1008 bytes"}, 1008);
}

TEST_F(FileIoLoadErrors, CorruptByteNamesFileAndBlock) {
  std::string data = read_file(dir + "/a.bin");
  data[700] ^= 0x10;  // block 10 (bytes 640 to 704)
  write_file(dir + "/a.bin", data);
  expect_load_fails<wholememory::logic_error>(
      {"a.bin", "block 10 (bytes 640 to 704)", "corrupt", "failed verifying"});

  // Without verification the damaged byte arrives, and only it differs.
  run_forked(2, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    wm_handle dest = make(comm, bytes, memory_type::continuous);
    file_io_options options;
    options.verify = false;
    wholememory::load({{"a", &dest}}, dir, options);
    const auto* p = static_cast<const std::uint8_t*>(dest.data());
    for (std::size_t k = 0; k < bytes; ++k) {
      const std::uint8_t expected = pattern_byte(k, seed) ^ (k == 700 ? 0x10 : 0);
      ASSERT_EQ(p[k], expected) << "byte " << k;
    }
  });
}

// Every array is verified before any is copied: a corrupt second array leaves the first
// array's destination untouched too.
TEST_F(FileIoLoadErrors, NoArrayIsWrittenWhenAnotherIsCorrupt) {
  std::string data = read_file(dir + "/b.bin");
  data[63] ^= 0x01;
  write_file(dir + "/b.bin", data);
  run_forked(3, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    wm_handle a = make(comm, bytes, memory_type::continuous);
    wm_handle b = make(comm, 64, memory_type::chunked);
    fill(a, sentinel);
    fill(b, sentinel + 1);
    expect_error_everywhere<wholememory::logic_error>(
        *bs,
        [&] {
          wholememory::load({{"a", &a}, {"b", &b}}, dir);
        },
        {"b.bin", "block 0 (bytes 0 to 64)"});
    EXPECT_EQ(mismatches(a, sentinel, "a"), 0u);
    EXPECT_EQ(mismatches(b, sentinel + 1, "b"), 0u);
  });
}

TEST_F(FileIoLoadErrors, TruncatedFileNamesExpectedAndActualSize) {
  fs::resize_file(dir + "/a.bin", 995);
  expect_load_fails<wholememory::logic_error>(
      {"a.bin", "truncated", "expected 1000 bytes, found 995"});
}

TEST_F(FileIoLoadErrors, EditedManifestIsCaughtByItsChecksum) {
  std::string text = read_file(dir + "/manifest");
  const std::size_t at = text.find("array.0.bytes: 1000");
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, 19, "array.0.bytes: 1001");
  write_file(dir + "/manifest", text);
  expect_load_fails<wholememory::logic_error>({"manifest", "manifest_checksum", "edited"});
}

TEST_F(FileIoLoadErrors, TruncatedManifest) {
  const std::string text = read_file(dir + "/manifest");
  write_file(dir + "/manifest", text.substr(0, text.rfind("manifest_checksum")));
  expect_load_fails<wholememory::logic_error>({"manifest:", "truncated"});
  write_file(dir + "/manifest", text.substr(0, text.size() - 3));
  expect_load_fails<wholememory::logic_error>({"manifest", "no line end"});
}

TEST_F(FileIoLoadErrors, MissingManifest) {
  fs::remove(dir + "/manifest");
  expect_load_fails<wholememory::logic_error>({"manifest", "cannot open"});
}

TEST_F(FileIoLoadErrors, MissingArrayListsWhatTheStoreHolds) {
  expect_load_fails<wholememory::logic_error>({"no array 'c'", "it holds a, b"}, bytes, "c");
}

TEST_F(FileIoLoadErrors, SubsetLoadsAndDuplicateNamesFail) {
  run_forked(2, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    wm_handle b = make(comm, 64, memory_type::chunked);
    wholememory::load({{"b", &b}}, dir);  // the store holds more: fine
    EXPECT_EQ(mismatches(b, seed + 1, "b"), 0u);
    expect_error_everywhere<wholememory::logic_error>(
        *bs,
        [&] {
          wholememory::load({{"b", &b}, {"b", &b}}, dir);
        },
        {"'b' is given twice"});
  });
}

TEST_F(FileIoLoadErrors, MismatchedListsFailOnEveryRankWithoutHanging) {
  const auto start = std::chrono::steady_clock::now();
  run_forked(
      3,
      [&](std::shared_ptr<bootstrap> bs) {
        auto comm = wholememory::make_host_communicator(bs);
        wm_handle a = make(comm, bytes, memory_type::chunked);
        wm_handle b = make(comm, 64, memory_type::chunked);
        fill(a, sentinel);
        const std::string name = bs->rank() == 2 ? "b" : "a";
        expect_error_everywhere<wholememory::mismatch_error>(
            *bs,
            [&] {
              wholememory::load({{name, &a}}, dir);
            },
            {"array 0 is 'a' on rank 0 and 'b' on rank 2"});
        std::vector<loaded_array> list = {{"a", &a}};
        if (bs->rank() == 1) list.push_back({"b", &b});
        expect_error_everywhere<wholememory::mismatch_error>(
            *bs, [&] { wholememory::load(list, dir); },
            {"rank 0 passes 1 arrays, rank 1 passes 2"});
        const std::string where = bs->rank() == 0 ? dir : dir + "-other";
        expect_error_everywhere<wholememory::mismatch_error>(
            *bs,
            [&] {
              wholememory::load({{"a", &a}}, where);
            },
            {"directory"});
        EXPECT_EQ(mismatches(a, sentinel, "a after mismatched loads"), 0u);
      },
      20s);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 15s);
}

// ---- the manifest parser ----

// A manifest with a correct manifest_checksum line for `body` (the lines after the first).
std::string signed_manifest(const std::string& body) {
  const std::string text = "# wholememory store\n" + body;
  return text + "manifest_checksum: " + hex(reference_checksum(text, 0, text.size())) + "\n";
}

TEST(FileIoManifest, StrictParsingNamesTheLine) {
  const temp_dir tmp;
  const std::string good_array =
      "array.0.name: a\narray.0.file: a.bin\narray.0.bytes: 16\narray.0.block_bytes: 8\n"
      "array.0.block_checksums: 0x0000000000000001 0x0000000000000002\n";
  write_file(tmp / "manifest",
             signed_manifest("format_version: 1\narrays: 1\n" + good_array + "metadata.k: v\n"));
  const stored_manifest m = wholememory::read_stored_manifest(tmp.path());
  ASSERT_EQ(m.arrays.size(), 1u);
  EXPECT_EQ(m.arrays[0].block_checksums, (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(m.metadata.at("k"), "v");

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"format_version: 2\narrays: 1\n" + good_array, "manifest:2: format_version 2"},
      {"arrays: 1\n" + good_array, "manifest:2: expected format_version"},
      {"format_version: 1\narrays: 1\n" + good_array + "colour: red\n",
       "manifest:9: unknown key 'colour'"},
      {"format_version: 1\narrays: 1\n" + good_array + "array.0.bytes: 16\n",
       "manifest:9: key 'array.0.bytes' repeats line 6"},
      {"format_version: 1\narrays: 2\n" + good_array, "missing the key 'array.1.name'"},
      {"format_version: 1\narrays: 1\n" + good_array + "array.1.name: b\n",
       "manifest:9: array.1.name is beyond the 1 arrays"},
      {"format_version: 1\narrays: 1\narray.0.name: a\narray.0.file: a.bin\narray.0.bytes: 24\n"
       "array.0.block_bytes: 8\narray.0.block_checksums: 0x0000000000000001\n",
       "manifest:8: array.0.block_checksums has 1 checksums, expected 3"},
      {"format_version: 1\narrays: 1\narray.0.name: a\narray.0.file: ../a.bin\n"
       "array.0.bytes: 0\narray.0.block_bytes: 8\narray.0.block_checksums:\n",
       "manifest:5: file '../a.bin'"},
      {"format_version: 1\narrays: 1\narray.0.name: a\narray.0.file: a.bin\narray.0.bytes: 0\n"
       "array.0.block_bytes: 12\narray.0.block_checksums:\n",
       "manifest:7: array.0.block_bytes 12 is not a positive multiple of 8"},
      {"format_version: 1\narrays: 1\narray.0.name: a\narray.0.file: a.bin\narray.0.bytes: 8\n"
       "array.0.block_bytes: 8\narray.0.block_checksums: 0x1\n",
       "manifest:8: array.0.block_checksums: '0x1'"},
      {"format_version: 1\narrays: 1\narray.0.name: a\narray.0.file: a.bin\narray.0.bytes: -8\n"
       "array.0.block_bytes: 8\narray.0.block_checksums:\n",
       "manifest:6: array.0.bytes '-8'"},
      {"format_version: 1\narrays: 1\n" + good_array + "no colon here\n",
       "manifest:9: expected 'key: value'"},
  };
  for (const auto& [body, expected] : cases) {
    write_file(tmp / "manifest", signed_manifest(body));
    try {
      wholememory::read_stored_manifest(tmp.path());
      ADD_FAILURE() << "accepted:\n" << body;
    } catch (const wholememory::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
          << "'" << e.what() << "' lacks '" << expected << "'";
    }
  }
  write_file(tmp / "manifest", "# some other file\n");
  EXPECT_THROW(wholememory::read_stored_manifest(tmp.path()), wholememory::logic_error);
}

// ---- store: argument checks and atomic replacement ----

TEST(FileIoStore, InvalidArgumentsFailOnEveryRank) {
  const temp_dir tmp;
  run_forked(2, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    wm_handle a = make(comm, 10, memory_type::chunked);
    // Only rank 1's name is bad: every rank reports rank 1's reason.
    const std::string name = bs->rank() == 1 ? "a/b" : "a";
    expect_error_everywhere<wholememory::logic_error>(
        *bs,
        [&] {
          wholememory::store({{name, &a}}, tmp / "s");
        },
        {"rank 1 failed checking its arguments", "'a/b' is not [A-Za-z0-9_.-]+"});
    file_io_options bad_metadata;
    bad_metadata.metadata["key"] = "two\nlines";
    expect_error_everywhere<wholememory::logic_error>(
        *bs,
        [&] {
          wholememory::store({{"a", &a}}, tmp / "s", bad_metadata);
        },
        {"not one line"});
    file_io_options metadata;
    metadata.metadata["rank"] = std::to_string(bs->rank());
    expect_error_everywhere<wholememory::mismatch_error>(
        *bs,
        [&] {
          wholememory::store({{"a", &a}}, tmp / "s", metadata);
        },
        {"different metadata"});
  });
  EXPECT_TRUE(tmp.entries().empty());
  EXPECT_THROW(wholememory::store(std::vector<stored_array>{}, tmp / "s"),
               wholememory::logic_error);
}

TEST(FileIoStore, ReplacesAnExistingStoreAtomically) {
  const temp_dir tmp;
  const std::string dir = tmp / "store";
  for (std::uint64_t seed : {1, 2}) {
    run_forked(2, [&](std::shared_ptr<bootstrap> bs) {
      auto comm = wholememory::make_host_communicator(bs);
      // The second store has another array and size: nothing of the first may remain.
      wm_handle wm = make(comm, 500 + 100 * seed, memory_type::continuous);
      fill(wm, seed);
      wholememory::store({{"v" + std::to_string(seed), &wm}}, dir);
    });
    EXPECT_EQ(tmp.entries(), std::set<std::string>{"store"});
  }
  EXPECT_EQ(fs::exists(dir + "/v1.bin"), false);
  check_store_on_disk(dir, {{"v2", 700, {}}}, 2, wholememory::default_block_bytes);
}

TEST(FileIoStore, RefusesToReplaceWhatIsNotAStore) {
  const temp_dir tmp;
  fs::create_directory(tmp / "notes");
  write_file(tmp / "notes/todo.txt", "keep me");
  write_file(tmp / "plain-file", "keep me too");
  run_forked(2, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    wm_handle wm = make(comm, 10, memory_type::chunked);
    expect_error_everywhere<wholememory::logic_error>(
        *bs, [&] { wholememory::store(wm, tmp / "notes"); },
        {"neither empty nor a wholememory store", "refusing to replace it"});
    expect_error_everywhere<wholememory::logic_error>(
        *bs, [&] { wholememory::store(wm, tmp / "plain-file"); }, {"is not a directory"});
  });
  EXPECT_EQ(read_file(tmp / "notes/todo.txt"), "keep me");
  EXPECT_EQ(read_file(tmp / "plain-file"), "keep me too");
  EXPECT_EQ(tmp.entries(), (std::set<std::string>{"notes", "plain-file"}));
}

// A store that fails on one rank half-way leaves the old store as it was and no temporary
// directory: by an exception (every rank reports it), and by a rank that dies.
TEST(FileIoStore, FailedStoreLeavesTheOldStoreIntact) {
  const temp_dir tmp;
  const std::string dir = tmp / "store";
  const std::size_t bytes = (std::size_t{6} << 20) + 1;
  run_forked(3, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    wm_handle wm = make(comm, bytes, memory_type::chunked);
    fill(wm, 1);
    wholememory::store(wm, dir);
  });
  const std::string old_manifest = read_file(dir + "/manifest");

  run_forked(3, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    wm_handle wm = make(comm, bytes, memory_type::chunked);
    fill(wm, 2);
    file_io_options options;
    options.threads = 1;
    options.progress = [rank = bs->rank()](std::uint64_t done, std::uint64_t) {
      if (rank == 1 && done > 0) throw std::runtime_error("injected failure");
    };
    expect_error_everywhere<std::runtime_error>(
        *bs, [&] { wholememory::store(wm, dir, options); },
        {"rank 1 failed writing its parts", "injected failure"});
  });
  EXPECT_EQ(read_file(dir + "/manifest"), old_manifest);
  EXPECT_EQ(tmp.entries(), std::set<std::string>{"store"});

  // A rank dies while writing (rank 2; rank 0, which made the temporary directory and hosts
  // the bootstrap's store); the others fail and remove the temporary directory.
  for (int dying : {2, 0}) {
    SCOPED_TRACE("rank " + std::to_string(dying) + " dies");
    const fork_result result = fork_ranks(
        3,
        [&](std::shared_ptr<bootstrap> bs) {
          auto comm = wholememory::make_host_communicator(bs);
          wm_handle wm = make(comm, bytes, memory_type::chunked);
          fill(wm, 3);
          file_io_options options;
          options.threads = 1;
          options.progress = [&, rank = bs->rank()](std::uint64_t done, std::uint64_t) {
            // Killed like the suite's other dying peers: a dead process runs nothing on its
            // way out (with _exit, TSan's exit check reported the worker that run_chunks had
            // not joined yet as a leaked thread).
            if (rank == dying && done > 0) ::raise(SIGKILL);
          };
          EXPECT_THROW(wholememory::store(wm, dir, options), std::runtime_error);
          ::_exit(child_failed() ? 1 : 0);  // no collective free: a peer is gone
        },
        3s);
    std::vector<int> expected(3, 0);
    expected[dying] = 128 + SIGKILL;
    EXPECT_EQ(result.status, expected);
    EXPECT_EQ(read_file(dir + "/manifest"), old_manifest);
    EXPECT_EQ(tmp.entries(), std::set<std::string>{"store"});
  }
  run_forked(2, [&](std::shared_ptr<bootstrap> bs) {
    auto comm = wholememory::make_host_communicator(bs);
    wm_handle wm = make(comm, bytes, memory_type::distributed);
    wholememory::load(wm, dir);
    EXPECT_EQ(mismatches(wm, 1, "the old store"), 0u);
  });
}

}  // namespace wholestore_test
