// sgns_gradients on the GPU: the same bits as sgns_gradients_host (itself checked against
// float64 and finite differences in sgns_test.cpp) for dims 1, 33, 128, 300, K = 0, 1, 5 and
// 10, batches of one pair up to many warps per SM, scores outside the clamp.  The fused path
// (sgns_gradients_from_tables) against host lookups + sgns_gradients_host, with the integer
// loss sum and a bad row.  Bodies run in a forked child, so the test process never initializes
// CUDA.
#include "common/gpu_count.hpp"
#include "common/multiprocess.hpp"

#include <embedding/sgns.hpp>
#include <embedding/table.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using wholestore_test::gpu_count;

using namespace wholestore::embedding;

float value(std::uint64_t seed, std::uint64_t i, float scale) {
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull + 1;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  return scale * (static_cast<float>(x >> 40) / static_cast<float>(1ull << 24) * 2.0f - 1.0f);
}

wholememory::device_buffer upload(const std::vector<float>& v, int device) {
  wholememory::device_buffer b(std::max<std::size_t>(v.size(), 1) * sizeof(float), device);
  if (!v.empty())
    WM_CUDA_TRY(cudaMemcpy(b.data(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
  return b;
}

std::vector<float> download(const wholememory::device_buffer& b, std::size_t n) {
  std::vector<float> v(n);
  if (n) WM_CUDA_TRY(cudaMemcpy(v.data(), b.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
  return v;
}

// Compares GPU and CPU outputs bit for bit for one shape; runs in the forked child.
void compare(std::size_t pairs, int k, std::size_t dim, float scale) {
  const std::size_t per = static_cast<std::size_t>(k) + 1;
  std::vector<float> centers(pairs * dim), targets(pairs * per * dim);
  for (std::size_t i = 0; i < centers.size(); ++i) centers[i] = value(dim + k, i, scale);
  for (std::size_t i = 0; i < targets.size(); ++i) targets[i] = value(dim + k + 1, i, scale);
  std::vector<float> gu(centers.size()), gt(targets.size()), loss(pairs);
  sgns_gradients_host(
      {centers.data(), targets.data(), pairs, k, dim, gu.data(), gt.data(), loss.data()}, 2);
  const int device = 0;
  wholememory::set_device(device);
  auto d_centers = upload(centers, device), d_targets = upload(targets, device);
  wholememory::device_buffer d_gu(std::max<std::size_t>(gu.size(), 1) * sizeof(float), device);
  wholememory::device_buffer d_gt(std::max<std::size_t>(gt.size(), 1) * sizeof(float), device);
  wholememory::device_buffer d_loss(std::max<std::size_t>(pairs, 1) * sizeof(float), device);
  cudaStream_t stream = nullptr;
  WM_CUDA_TRY(cudaStreamCreate(&stream));
  sgns_gradients(
      {static_cast<const float*>(d_centers.data()), static_cast<const float*>(d_targets.data()),
       pairs, k, dim, static_cast<float*>(d_gu.data()), static_cast<float*>(d_gt.data()),
       static_cast<float*>(d_loss.data())},
      stream);
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  WM_CUDA_TRY(cudaStreamDestroy(stream));
  const auto g_gu = download(d_gu, gu.size()), g_gt = download(d_gt, gt.size()),
             g_loss = download(d_loss, pairs);
  EXPECT_EQ(std::memcmp(g_gu.data(), gu.data(), gu.size() * sizeof(float)), 0)
      << "center gradients, pairs " << pairs << " K " << k << " dim " << dim;
  EXPECT_EQ(std::memcmp(g_gt.data(), gt.data(), gt.size() * sizeof(float)), 0)
      << "target gradients, pairs " << pairs << " K " << k << " dim " << dim;
  EXPECT_EQ(std::memcmp(g_loss.data(), loss.data(), pairs * sizeof(float)), 0)
      << "losses, pairs " << pairs << " K " << k << " dim " << dim;
}

std::vector<std::int64_t> random_rows(std::size_t n, std::size_t rows, std::uint64_t seed) {
  std::vector<std::int64_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    // Half the entries from the first 8 rows: duplicates inside and across pairs.
    const float x = value(seed, i, 1.0f) * 0.5f + 0.5f;
    const std::size_t span = i % 2 == 0 ? std::min<std::size_t>(rows, 8) : rows;
    v[i] = static_cast<std::int64_t>(
        std::min<std::size_t>(static_cast<std::size_t>(x * static_cast<float>(span)), span - 1));
  }
  return v;
}

wholestore::embedding::table make_table(std::shared_ptr<wholememory::communicator> comm,
                                        std::size_t rows, std::size_t dim,
                                        wholememory::memory_type type, std::uint64_t seed) {
  table_options o;
  o.rows = rows;
  o.dim = dim;
  o.type = type;
  o.location = wholememory::memory_location::device;
  o.init.method = init_options::uniform;
  o.init.a = -0.7;
  o.init.b = 0.7;
  o.init.seed = seed;
  return table::create(std::move(comm), o);
}

wholememory::device_buffer upload_indices(const std::vector<std::int64_t>& v, int device) {
  wholememory::device_buffer b(std::max<std::size_t>(v.size(), 1) * 8, device);
  if (!v.empty()) wholememory::copy_bytes(b.data(), v.data(), v.size() * 8);
  return b;
}

// The fused path for one shape: gradients and losses equal the CPU path's on looked-up rows
// bit for bit, the loss units equal the sum of llround(loss * 2^24), and (with `bad` >= 0) the
// target at that position pointing past the table is reported as the first bad position.
void compare_fused(std::shared_ptr<wholememory::communicator> comm, wholememory::memory_type type,
                   std::size_t pairs, int k, std::size_t dim, std::ptrdiff_t bad = -1) {
  const std::size_t rows = 1000, per = static_cast<std::size_t>(k) + 1;
  table input = make_table(comm, rows, dim, type, dim + 1);
  table output = make_table(comm, rows, dim, type, dim + 2);
  std::vector<std::int64_t> ci = random_rows(pairs, rows, dim + k);
  std::vector<std::int64_t> ti = random_rows(pairs * per, rows, dim + k + 7);
  const int device = wholememory::current_device();
  wholememory::device_buffer d_ci = upload_indices(ci, device), d_ti = upload_indices(ti, device);
  // CPU reference on the rows the tables hold (looked up on the GPU, then brought back).
  wholememory::device_buffer d_centers(std::max<std::size_t>(pairs * dim, 1) * 4, device);
  wholememory::device_buffer d_targets(std::max<std::size_t>(ti.size() * dim, 1) * 4, device);
  input.lookup({d_ci.data(), wholememory::dtype::int64, pairs},
               {d_centers.data(), wholememory::dtype::float32, pairs, dim, dim}, nullptr);
  output.lookup({d_ti.data(), wholememory::dtype::int64, ti.size()},
                {d_targets.data(), wholememory::dtype::float32, ti.size(), dim, dim}, nullptr);
  WM_CUDA_TRY(cudaDeviceSynchronize());
  const std::vector<float> centers = download(d_centers, pairs * dim);
  const std::vector<float> targets = download(d_targets, ti.size() * dim);
  std::vector<float> gu(centers.size()), gt(targets.size()), loss(pairs), coefs(ti.size());
  sgns_batch host_batch{centers.data(), targets.data(), pairs,      k, dim,
                        gu.data(),      gt.data(),      loss.data()};
  host_batch.target_coefs = coefs.data();
  sgns_gradients_host(host_batch, 2);
  long long expected_units = 0;
  for (float l : loss) expected_units += std::llround(static_cast<double>(l) * 16777216.0);
  if (bad >= 0) {
    ti[static_cast<std::size_t>(bad)] = static_cast<std::int64_t>(rows);
    d_ti = upload_indices(ti, device);
  }
  wholememory::device_buffer d_gu(std::max<std::size_t>(gu.size(), 1) * 4, device);
  wholememory::device_buffer d_gt(std::max<std::size_t>(gt.size(), 1) * 4, device);
  wholememory::device_buffer d_loss(std::max<std::size_t>(pairs, 1) * 4, device);
  wholememory::device_buffer d_totals(16, device);
  const long long init[2] = {5, -1};  // the units add to what is there
  wholememory::copy_bytes(d_totals.data(), init, sizeof(init));
  sgns_table_batch tb;
  tb.input = input.view(device);
  tb.output = output.view(device);
  tb.center_rows = static_cast<const std::int64_t*>(d_ci.data());
  tb.target_rows = static_cast<const std::int64_t*>(d_ti.data());
  tb.out = sgns_batch{nullptr,
                      nullptr,
                      pairs,
                      k,
                      dim,
                      static_cast<float*>(d_gu.data()),
                      static_cast<float*>(d_gt.data()),
                      static_cast<float*>(d_loss.data())};
  tb.out.loss_units = static_cast<long long*>(d_totals.data());
  tb.first_bad = static_cast<unsigned long long*>(d_totals.data()) + 1;
  sgns_gradients_from_tables(tb, nullptr);
  WM_CUDA_TRY(cudaDeviceSynchronize());
  long long totals[2];
  wholememory::copy_bytes(totals, d_totals.data(), sizeof(totals));
  const std::string shape =
      "pairs " + std::to_string(pairs) + " K " + std::to_string(k) + " dim " + std::to_string(dim);
  if (bad >= 0) {
    EXPECT_EQ(totals[1], static_cast<long long>(pairs) + bad) << shape;
    return;
  }
  EXPECT_EQ(totals[1], -1) << shape;
  EXPECT_EQ(totals[0], 5 + expected_units) << shape;
  const auto g_gu = download(d_gu, gu.size()), g_gt = download(d_gt, gt.size()),
             g_loss = download(d_loss, pairs);
  EXPECT_EQ(std::memcmp(g_gu.data(), gu.data(), gu.size() * sizeof(float)), 0)
      << "center gradients, " << shape;
  EXPECT_EQ(std::memcmp(g_gt.data(), gt.data(), gt.size() * sizeof(float)), 0)
      << "target gradients, " << shape;
  EXPECT_EQ(std::memcmp(g_loss.data(), loss.data(), pairs * sizeof(float)), 0)
      << "losses, " << shape;
  // Coefficients instead of target rows (what train passes to apply_scaled_gradients): the
  // same center gradients, the CPU path's coefficients, no target row written.
  wholememory::device_buffer d_tc(std::max<std::size_t>(coefs.size(), 1) * 4, device);
  wholememory::device_buffer d_gu2(std::max<std::size_t>(gu.size(), 1) * 4, device);
  tb.out.center_grads = static_cast<float*>(d_gu2.data());
  tb.out.target_grads = nullptr;
  tb.out.target_coefs = static_cast<float*>(d_tc.data());
  tb.out.losses = nullptr;
  tb.out.loss_units = nullptr;
  sgns_gradients_from_tables(tb, nullptr);
  WM_CUDA_TRY(cudaDeviceSynchronize());
  const auto g_gu2 = download(d_gu2, gu.size()), g_tc = download(d_tc, coefs.size());
  EXPECT_EQ(std::memcmp(g_gu2.data(), gu.data(), gu.size() * sizeof(float)), 0)
      << "center gradients with coefficients, " << shape;
  EXPECT_EQ(std::memcmp(g_tc.data(), coefs.data(), coefs.size() * sizeof(float)), 0)
      << "target coefficients, " << shape;
}

TEST(SgnsGpu, FromTablesSameBitsAsLookupsThenCpu) {
  if (gpu_count() < 1) GTEST_SKIP() << "needs 1 CUDA device, 0 visible";
  const auto result = wholestore_test::fork_ranks(1, [](std::shared_ptr<wholememory::bootstrap>
                                                            bs) {
    wholememory::set_device(0);
    auto comm = wholememory::make_host_communicator(std::move(bs));
    for (auto type : {wholememory::memory_type::continuous, wholememory::memory_type::chunked}) {
      compare_fused(comm, type, 0, 5, 128);
      for (std::size_t dim : {1, 33, 128, 300})
        for (int k : {0, 5}) compare_fused(comm, type, 700, k, dim);
      compare_fused(comm, type, 50000, 5, 128);
      compare_fused(comm, type, 300, 5, 128, 3 * 6 + 4);  // a negative past the table
    }
    // A view of the wrong dim is refused before anything runs.
    table a = make_table(comm, 10, 16, wholememory::memory_type::continuous, 1);
    table c = make_table(comm, 10, 32, wholememory::memory_type::continuous, 2);
    sgns_table_batch tb;
    tb.input = a.view(0);
    tb.output = c.view(0);
    tb.out.dim = 16;
    EXPECT_THROW(sgns_gradients_from_tables(tb, nullptr), wholememory::logic_error);
  });
  EXPECT_TRUE(result.all_ok()) << "the GPU child failed";
}

TEST(SgnsGpu, SameBitsAsCpu) {
  if (gpu_count() < 1) GTEST_SKIP() << "needs 1 CUDA device, 0 visible";
  const auto result = wholestore_test::fork_ranks(1, [](std::shared_ptr<wholememory::bootstrap>) {
    compare(0, 5, 128, 0.5f);
    compare(1, 0, 1, 0.5f);
    for (std::size_t dim : {1, 33, 128, 300})
      for (int k : {0, 1, 5, 10}) compare(1000, k, dim, 0.5f);
    compare(200000, 5, 128, 0.2f);
    compare(500, 5, 64, 30.0f);  // scores far outside the clamp
  });
  EXPECT_TRUE(result.all_ok()) << "the GPU child failed";
}

}  // namespace
