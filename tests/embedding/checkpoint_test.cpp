// Embedding checkpoints: training resumed from a checkpoint gives the same weights and state,
// bit for bit, as training that never stopped, whatever rank counts and memory types the
// stored and the resumed table use; a checkpoint of another shape, dtype or optimizer, or a
// damaged one, is refused with the table left as it was.
#include "common/multiprocess.hpp"

#include <embedding/checkpoint.hpp>
#include <embedding/table.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace wholestore_test {
namespace {

namespace wm = wholememory;
namespace emb = wholestore::embedding;
namespace fs = std::filesystem;

constexpr std::size_t table_rows = 300;
constexpr std::size_t table_dim = 33;
constexpr std::size_t global_batch =
    240;  // global batch; indices drawn from 60 rows: many duplicates

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// A fresh directory under the test temp dir, removed with the object.
struct temp_dir {
  fs::path path;
  temp_dir() {
    path = fs::temp_directory_path() /
           ("ws-ckpt-" + std::to_string(::getpid()) + "-" + std::to_string(mix(std::rand())));
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

emb::table make_table(std::shared_ptr<wm::bootstrap> bs, emb::optimizer_kind opt, wm::dtype dt,
                      wm::memory_type type, std::uint64_t init_seed, std::size_t dim = table_dim) {
  auto comm = wm::make_host_communicator(std::move(bs));
  emb::table_options o;
  o.rows = table_rows;
  o.dim = dim;
  o.dtype = dt;
  o.type = type;
  o.location = wm::memory_location::host;
  o.init.method = emb::init_options::uniform;
  o.init.seed = init_seed;
  o.optimizer.kind = opt;
  o.optimizer.weight_decay = 0.01f;
  return emb::table::create(comm, o);
}

/// Step `step` of the global batch: this rank's contiguous slice of it.
void train_step(emb::table& t, std::uint64_t step) {
  const int rank = t.comm().rank(), ranks = t.comm().size();
  const std::size_t first = global_batch * rank / ranks, last = global_batch * (rank + 1) / ranks;
  std::vector<std::int64_t> idx;
  std::vector<float> grads;
  for (std::size_t i = first; i < last; ++i) {
    idx.push_back(static_cast<std::int64_t>(mix(step * 1000 + i) % 60 * 5));
    for (std::size_t c = 0; c < t.dim(); ++c)
      grads.push_back(static_cast<float>(
          static_cast<double>(mix(step ^ (i << 20) ^ c) >> 11) * 0x1.0p-53 - 0.5));
  }
  t.apply_gradients_host(
      wm::index_array{idx.data(), wm::dtype::int64, idx.size()},
      wm::dense_matrix{grads.data(), wm::dtype::float32, idx.size(), t.dim(), t.dim()}, 0.05f, 2);
}

/// Every byte of the weights and of each state array, on rank 0 (empty elsewhere).  Collective.
std::vector<unsigned char> dump(emb::table& t) {
  const bool lead = t.comm().rank() == 0;
  std::vector<std::int64_t> all;
  if (lead)
    for (std::size_t r = 0; r < t.rows(); ++r) all.push_back(static_cast<std::int64_t>(r));
  std::vector<unsigned char> out;
  auto take = [&](const wm::wm_tensor& tensor) {
    const std::size_t bytes = all.size() * tensor.cols * wm::dtype_size(tensor.type);
    std::vector<unsigned char> buf(bytes);
    wm::gather_host(tensor, wm::index_array{all.data(), wm::dtype::int64, all.size()},
                    wm::dense_matrix{buf.data(), tensor.type, all.size(), tensor.cols, tensor.cols},
                    2);
    out.insert(out.end(), buf.begin(), buf.end());
  };
  take(t.weights());
  for (std::size_t i = 0; i < t.state().size(); ++i) take(t.state_tensor(i));
  return out;
}

void write_file(const fs::path& p, const std::vector<unsigned char>& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<unsigned char> read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void expect_ranks_ok(const fork_result& r, const char* what) {
  for (std::size_t p = 0; p < r.status.size(); ++p)
    EXPECT_EQ(r.status[p], 0) << what << ": rank " << p << " failed";
}

struct resume_case {
  emb::optimizer_kind opt;
  wm::dtype dt;
};

class CheckpointResume : public ::testing::TestWithParam<resume_case> {};

// One rank trains 5 steps.  Three ranks (chunked) train 2 steps and store; two ranks
// (distributed) start from other weights, load, check the step and train the last 3: the
// final weights and state are the one-rank run's, bit for bit.
TEST_P(CheckpointResume, ResumedTrainingMatchesUninterruptedOnOtherRanksAndTypes) {
  const auto [opt, dt] = GetParam();
  temp_dir tmp;
  const fs::path ckpt = tmp.path / "ckpt", straight = tmp.path / "straight",
                 resumed = tmp.path / "resumed";
  expect_ranks_ok(fork_ranks(1,
                             [&](std::shared_ptr<wm::bootstrap> bs) {
                               auto t = make_table(bs, opt, dt, wm::memory_type::continuous, 7);
                               for (std::uint64_t s = 0; s < 5; ++s) train_step(t, s);
                               write_file(straight, dump(t));
                             }),
                  "uninterrupted");
  expect_ranks_ok(fork_ranks(3,
                             [&](std::shared_ptr<wm::bootstrap> bs) {
                               auto t = make_table(bs, opt, dt, wm::memory_type::chunked, 7);
                               for (std::uint64_t s = 0; s < 2; ++s) train_step(t, s);
                               emb::store_checkpoint(t, ckpt.string());
                             }),
                  "store on 3 ranks");
  expect_ranks_ok(fork_ranks(2,
                             [&](std::shared_ptr<wm::bootstrap> bs) {
                               auto t = make_table(bs, opt, dt, wm::memory_type::distributed, 99);
                               emb::load_checkpoint(t, ckpt.string());
                               EXPECT_EQ(t.step(), 2u);
                               for (std::uint64_t s = 2; s < 5; ++s) train_step(t, s);
                               auto bytes = dump(t);
                               if (t.comm().rank() == 0) write_file(resumed, bytes);
                             }),
                  "load on 2 ranks");
  const auto a = read_file(straight), b = read_file(resumed);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.size(), b.size());
  EXPECT_TRUE(a == b) << "resumed training differs from uninterrupted training";
}

std::string case_name(const ::testing::TestParamInfo<resume_case>& info) {
  return std::string(emb::optimizer_name(info.param.opt)) + "_" + wm::dtype_name(info.param.dt);
}

INSTANTIATE_TEST_SUITE_P(
    Optimizers, CheckpointResume,
    ::testing::Values(resume_case{emb::optimizer_kind::sgd, wm::dtype::float32},
                      resume_case{emb::optimizer_kind::adam, wm::dtype::float32},
                      resume_case{emb::optimizer_kind::adam, wm::dtype::bfloat16},
                      resume_case{emb::optimizer_kind::adagrad, wm::dtype::float16},
                      resume_case{emb::optimizer_kind::rowwise_adagrad, wm::dtype::float32},
                      resume_case{emb::optimizer_kind::rmsprop, wm::dtype::bfloat16}),
    case_name);

/// Stores a trained 2-rank Adam table of `dim` columns into `dir`.
void store_adam(const fs::path& dir, std::size_t dim) {
  expect_ranks_ok(fork_ranks(2,
                             [&](std::shared_ptr<wm::bootstrap> bs) {
                               auto t =
                                   make_table(bs, emb::optimizer_kind::adam, wm::dtype::float32,
                                              wm::memory_type::continuous, 3, dim);
                               train_step(t, 0);
                               emb::store_checkpoint(t, dir.string());
                             }),
                  "store");
}

/// Two ranks load `dir` into a fresh table built by `make`; expects logic_error containing
/// `needle` on both, and the table's bytes and step unchanged.
template <typename Make>
void expect_refused(const fs::path& dir, const std::string& needle, Make make) {
  expect_ranks_ok(fork_ranks(2,
                             [&](std::shared_ptr<wm::bootstrap> bs) {
                               emb::table t = make(bs);
                               const auto before = dump(t);
                               try {
                                 emb::load_checkpoint(t, dir.string());
                                 ADD_FAILURE() << "the checkpoint was accepted";
                               } catch (const wm::logic_error& e) {
                                 EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
                                     << e.what();
                               }
                               EXPECT_EQ(t.step(), 0u);
                               EXPECT_TRUE(dump(t) == before) << "the table changed";
                             }),
                  needle.c_str());
}

TEST(CheckpointErrors, OtherShapeDtypeOrOptimizerIsRefusedAndNothingChanges) {
  temp_dir tmp;
  const fs::path dir = tmp.path / "ckpt";
  store_adam(dir, 8);
  expect_refused(dir, "dim is 8, the table's 9", [](std::shared_ptr<wm::bootstrap> bs) {
    return make_table(bs, emb::optimizer_kind::adam, wm::dtype::float32,
                      wm::memory_type::continuous, 5, 9);
  });
  expect_refused(dir, "optimizer is adam, the table's adagrad",
                 [](std::shared_ptr<wm::bootstrap> bs) {
                   return make_table(bs, emb::optimizer_kind::adagrad, wm::dtype::float32,
                                     wm::memory_type::continuous, 5, 8);
                 });
  expect_refused(dir, "dtype is float32, the table's bfloat16",
                 [](std::shared_ptr<wm::bootstrap> bs) {
                   return make_table(bs, emb::optimizer_kind::adam, wm::dtype::bfloat16,
                                     wm::memory_type::continuous, 5, 8);
                 });
}

TEST(CheckpointErrors, DamagedOrForeignCheckpointIsRefusedAndNothingChanges) {
  temp_dir tmp;
  const fs::path dir = tmp.path / "ckpt";
  store_adam(dir, 8);
  auto fresh = [](std::shared_ptr<wm::bootstrap> bs) {
    return make_table(bs, emb::optimizer_kind::adam, wm::dtype::float32,
                      wm::memory_type::distributed, 5, 8);
  };
  {
    // One flipped byte in the middle of the second moment.
    std::fstream f(dir / "v.bin", std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good());
    f.seekg(table_rows * 8 * 4 / 2);
    char c = 0;
    f.read(&c, 1);
    f.seekp(table_rows * 8 * 4 / 2);
    c = static_cast<char>(c ^ 0x40);
    f.write(&c, 1);
  }
  expect_refused(dir, "checksum", fresh);
  // Truncated weights.
  store_adam(dir, 8);
  fs::resize_file(dir / "weights.bin", fs::file_size(dir / "weights.bin") - 3);
  expect_refused(dir, "weights.bin", fresh);
  // A directory without a manifest, and a plain store that is not a checkpoint.
  const fs::path empty = tmp.path / "empty";
  fs::create_directories(empty);
  expect_refused(empty, "manifest", fresh);
  const fs::path plain = tmp.path / "plain";
  expect_ranks_ok(fork_ranks(2,
                             [&](std::shared_ptr<wm::bootstrap> bs) {
                               auto comm = wm::make_host_communicator(bs);
                               auto mem =
                                   wm::allocation::create(comm, 64, wm::memory_type::continuous,
                                                          wm::memory_location::host);
                               wm::store(mem, plain.string());
                             }),
                  "plain store");
  expect_refused(plain, "not an embedding checkpoint", fresh);
}

}  // namespace
}  // namespace wholestore_test
