// sgns_gradients on the GPU: the same bits as sgns_gradients_host (itself checked against
// float64 and finite differences in sgns_test.cpp) for dims 1, 33, 128, 300, K = 0, 1, 5 and
// 10, batches of one pair up to many warps per SM, scores outside the clamp.  Bodies run in a
// forked child, so the test process never initializes CUDA.
#include "common/multiprocess.hpp"

#include <embedding/sgns.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace {

using namespace wholestore::embedding;

int gpu_count() {
  static const int count = [] {
    std::fflush(stdout);
    pid_t pid = ::fork();
    if (pid < 0) return 0;
    if (pid == 0) ::_exit(std::min(wholememory::device_count(), 100));
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  }();
  return count;
}

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
