// read_dataset against a manifest whose arrays cannot fit in host memory (issue 36): refused
// with out_of_memory naming both sizes, at once, before any file is hashed or read.  The
// claimed array is a sparse file of 1 TiB, so it costs no disk.
#include "common/temp_dir.hpp"

#include <graph/dataset.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

namespace {

namespace wg = wholestore::graph;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void replace_line(std::string& text, const std::string& key, const std::string& value) {
  const std::size_t at = text.find(key + ": ");
  ASSERT_NE(at, std::string::npos) << key;
  const std::size_t end = text.find('\n', at);
  text.replace(at, end - at, key + ": " + value);
}

TEST(DatasetMemory, ClaimedArraysPastHostMemoryAreRefusedBeforeHashing) {
  if (wholememory::available_host_bytes() == 0) GTEST_SKIP() << "host memory not readable here";
  wholestore_test::temp_dir dir("wholestore_ds_memory");
  wg::host_csr g;
  g.num_nodes = 3;
  g.directed = true;
  g.row_offsets = {0, 1, 2, 2};
  g.col_indices = {1, 2};
  wg::write_dataset(dir.str(), g);
  // col_indices now claims 2^38 int32 entries (1 TiB on disk, 2 TiB as int64 in memory).
  const std::uint64_t count = std::uint64_t{1} << 38, bytes = count * 4;
  std::string manifest = read_file(dir.str() + "/manifest.yaml");
  replace_line(manifest, "num_edges", std::to_string(count));
  replace_line(manifest, "col_indices.dtype", "int32");
  replace_line(manifest, "col_indices.count", std::to_string(count));
  replace_line(manifest, "col_indices.bytes", std::to_string(bytes));
  std::ofstream(dir.str() + "/manifest.yaml", std::ios::trunc) << manifest;
  if (::truncate((dir.str() + "/col_indices.bin").c_str(), static_cast<off_t>(bytes)) != 0)
    GTEST_SKIP() << "this file system refuses a sparse file of 1 TiB";
  const auto t0 = std::chrono::steady_clock::now();
  std::string message;
  try {
    wg::read_dataset(dir.str());
  } catch (const wholememory::out_of_memory& e) {
    message = e.what();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(message.find("needs 2097152 MiB of host memory to be read whole"), std::string::npos)
      << message;
  EXPECT_NE(message.find("MiB available"), std::string::npos) << message;
  EXPECT_LT(seconds, 5.0) << "hashed the claimed terabyte first";
}

}  // namespace
