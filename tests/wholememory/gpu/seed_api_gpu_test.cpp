// The seed API on GPUs: WmspMalloc over every GPU of one process, WmmpMalloc and WcmmpMalloc
// with one process per GPU, kernels writing and reading through PtrGen (continuous pointer,
// and GetDeviceChunkedHandle for chunked memory).  Bodies run in forked children: this
// process never initializes CUDA.
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"
#include "wholememory/gpu/ptr_gen_kernels.hpp"

#include <wholememory/seed_api.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

using namespace whole_memory;
using wholestore_test::count_mismatches;
using wholestore_test::cuda_stream;
using wholestore_test::device_buffer;
using wholestore_test::write_pattern;

namespace {

#define ASSERT_WM_OK(call) ASSERT_EQ((call), WM_SUCCESS) << #call << ": " << WmLastErrorMessage()

// Mismatches of elements [0, n) read on the current device through `gen_base` or `view`.
template <typename Where>
unsigned long long mismatches_on_device(Where where, std::int64_t n, std::uint64_t salt,
                                        int device) {
  cuda_stream stream;
  device_buffer counter(sizeof(unsigned long long), device);
  WM_CUDA_TRY(cudaMemsetAsync(counter.get(), 0, sizeof(unsigned long long), stream.get()));
  count_mismatches(where, 0, n, 0, salt, counter.as<unsigned long long>(), stream.get());
  unsigned long long bad = 0;
  WM_CUDA_TRY(
      cudaMemcpyAsync(&bad, counter.get(), sizeof(bad), cudaMemcpyDeviceToHost, stream.get()));
  WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
  return bad;
}

}  // namespace

TEST(SeedApiGpu, WmspMallocOverEveryGpu) {
  WHOLESTORE_REQUIRE_GPUS(1);
  wholestore_test::fork_with_master_env(
      1,
      [](int) {
        int devices = 0;
        WM_CUDA_TRY(cudaGetDeviceCount(&devices));
        ASSERT_WM_OK(WholeMemoryInit());
        // An odd element count: the pieces per GPU are not multiples of the mapping granularity.
        const std::int64_t n = (std::int64_t{3} << 24) + 12345;
        void* ptr = nullptr;
        ASSERT_WM_OK(WmspMalloc(&ptr, n * sizeof(std::int64_t)));
        // Each GPU writes one slice, then every GPU checks everything.
        for (int d = 0; d < devices; ++d) {
          WM_CUDA_TRY(cudaSetDevice(d));
          cuda_stream stream;
          write_pattern(ptr, n * d / devices, n * (d + 1) / devices, 0, 77, stream.get());
          WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
        }
        for (int d = 0; d < devices; ++d) {
          WM_CUDA_TRY(cudaSetDevice(d));
          EXPECT_EQ(mismatches_on_device(static_cast<const void*>(ptr), n, 77, d), 0u)
              << "read from GPU " << d;
        }
        // An explicit device list, and host memory read by a kernel.
        const int first[1] = {0};
        void* one = nullptr;
        ASSERT_WM_OK(WmspMalloc(&one, 4096, first, 1));
        void* host = nullptr;
        ASSERT_WM_OK(WmspMallocHost(&host, n * sizeof(std::int64_t)));
        auto* h = static_cast<std::int64_t*>(host);
        for (std::int64_t i = 0; i < n; ++i) h[i] = wholestore_test::pattern_value(i, 5);
        WM_CUDA_TRY(cudaSetDevice(0));
        EXPECT_EQ(mismatches_on_device(static_cast<const void*>(host), n, 5, 0), 0u);
        ASSERT_WM_OK(WmspFree(ptr));
        ASSERT_WM_OK(WmspFree(host));
        ASSERT_WM_OK(WholeMemoryFinalize());  // frees `one`
      },
      60);
}

TEST(SeedApiGpu, WmmpAndWcmmpOnePerGpu) {
  WHOLESTORE_REQUIRE_GPUS(2);
  wholestore_test::fork_with_master_env(
      2,
      [](int rank) {
        WM_CUDA_TRY(cudaSetDevice(rank));
        ASSERT_WM_OK(WholeMemoryInit());
        ASSERT_WM_OK(WmmpInit(rank, 2));
        const std::int64_t n = (std::int64_t{1} << 25) + 999;

        void* ptr = nullptr;
        ASSERT_WM_OK(WmmpMalloc(&ptr, n * sizeof(std::int64_t)));
        EXPECT_TRUE(WmmpCanAccessFrom(ptr, rank));
        {
          cuda_stream stream;
          write_pattern(ptr, n * rank / 2, n * (rank + 1) / 2, 0, 3, stream.get());
          WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
        }
        ASSERT_WM_OK(WmmpBarrier());
        EXPECT_EQ(mismatches_on_device(static_cast<const void*>(ptr), n, 3, rank), 0u);

        WholeChunkedMemory_t chunked = nullptr;
        ASSERT_WM_OK(WcmmpMalloc(&chunked, n * sizeof(std::int64_t), 24));
        WholeChunkedMemoryHandle* handle = GetDeviceChunkedHandle(chunked, rank);
        ASSERT_NE(handle, nullptr) << WmLastErrorMessage();
        {
          cuda_stream stream;
          write_pattern(handle, n * rank / 2, n * (rank + 1) / 2, 0, 9, stream.get());
          WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
        }
        ASSERT_WM_OK(WmmpBarrier());
        EXPECT_EQ(
            mismatches_on_device(static_cast<const WholeChunkedMemoryHandle*>(handle), n, 9, rank),
            0u);
        ASSERT_WM_OK(WcmmpFree(chunked));
        ASSERT_WM_OK(WmmpFree(ptr));
        ASSERT_WM_OK(WmmpFinalize());
        ASSERT_WM_OK(WholeMemoryFinalize());
      },
      60);
}
