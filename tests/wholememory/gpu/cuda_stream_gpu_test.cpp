/*
 * cuda_stream and cuda_event with a GPU: the flags reach CUDA, moves hand the one handle over
 * and leave the source empty, an event orders two streams, timing events time, and making and
 * dropping many objects leaves nothing behind.  Bodies run in a forked rank (gpu_test_util.hpp).
 */
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <wholememory/cuda_stream.hpp>
#include <wholememory/device.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace wholestore_test {
namespace {

using wholememory::cuda_event;
using wholememory::event_flags;
using wholememory::stream_flags;

void run_forked(const rank_body& body) {
  const fork_result result = fork_ranks(1, body);
  EXPECT_TRUE(result.all_ok()) << "the forked test body failed (status " << result.status[0] << ")";
}

TEST(CudaStreamGpu, FlagsReachCudaAndMovesHandOver) {
  WHOLESTORE_REQUIRE_GPUS(1);
  run_forked([](std::shared_ptr<wholememory::bootstrap>) {
    wholememory::set_device(0);
    wholememory::cuda_stream s;
    ASSERT_NE(s.value(), nullptr);
    unsigned flags = 99;
    WM_CUDA_TRY(cudaStreamGetFlags(s, &flags));
    EXPECT_EQ(flags, static_cast<unsigned>(cudaStreamNonBlocking));
    wholememory::cuda_stream blocking(stream_flags::blocking);
    WM_CUDA_TRY(cudaStreamGetFlags(blocking, &flags));
    EXPECT_EQ(flags, static_cast<unsigned>(cudaStreamDefault));

    const cudaStream_t handle = s.value();
    wholememory::cuda_stream moved(std::move(s));
    EXPECT_EQ(s.value(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
    EXPECT_EQ(moved.value(), handle);
    blocking = std::move(moved);        // destroys the blocking stream, takes the other
    EXPECT_EQ(moved.value(), nullptr);  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(blocking.value(), handle);
    blocking.synchronize();
    blocking.reset();
    EXPECT_EQ(blocking.value(), nullptr);
  });
}

TEST(CudaEventGpu, OrdersTwoStreamsAndTimes) {
  WHOLESTORE_REQUIRE_GPUS(1);
  run_forked([](std::shared_ptr<wholememory::bootstrap>) {
    wholememory::set_device(0);
    const std::size_t n = std::size_t(16) << 20;
    wholememory::device_buffer a(n, 0), b(n, 0);
    wholememory::cuda_stream first, second;
    cuda_event filled;  // without timing
    cuda_event start(event_flags::timing), stop(event_flags::timing);
    start.record(first);
    WM_CUDA_TRY(cudaMemsetAsync(a.data(), 0x5a, n, first));
    filled.record(first);
    stop.record(first);
    // The copy on the second stream reads what the first stream wrote only after the event.
    filled.wait(second);
    WM_CUDA_TRY(cudaMemcpyAsync(b.data(), a.data(), n, cudaMemcpyDeviceToDevice, second));
    std::vector<unsigned char> back(n);
    WM_CUDA_TRY(cudaMemcpyAsync(back.data(), b.data(), n, cudaMemcpyDeviceToHost, second));
    second.synchronize();
    std::size_t wrong = 0;
    for (unsigned char c : back) wrong += c != 0x5a;
    EXPECT_EQ(wrong, 0u);

    stop.synchronize();
    EXPECT_GE(wholememory::elapsed_ms(start, stop), 0.0f);
    // Events without timing have no time to give.
    EXPECT_THROW(wholememory::elapsed_ms(filled, filled), wholememory::cuda_error);

    const cudaEvent_t handle = filled.value();
    cuda_event moved(std::move(filled));
    EXPECT_EQ(filled.value(), nullptr);  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(moved.value(), handle);
  });
}

TEST(CudaStreamGpu, ManyObjectsLeaveNothingBehind) {
  WHOLESTORE_REQUIRE_GPUS(1);
  run_forked([](std::shared_ptr<wholememory::bootstrap>) {
    wholememory::set_device(0);
    // Each iteration's stream and event go at its end; the device's free memory after many
    // iterations is where it was (within what the runtime itself may cache).
    std::size_t free_before = 0, free_after = 0, total = 0;
    {
      wholememory::cuda_stream warm;  // the context and its first allocations
      cuda_event warm_event;
    }
    WM_CUDA_TRY(cudaMemGetInfo(&free_before, &total));
    for (int i = 0; i < 20000; ++i) {
      wholememory::cuda_stream s;
      cuda_event e;
      e.record(s);
      e.wait(s);
    }
    WM_CUDA_TRY(cudaDeviceSynchronize());
    WM_CUDA_TRY(cudaMemGetInfo(&free_after, &total));
    EXPECT_LE(free_before - std::min(free_before, free_after), std::size_t(64) << 20);
  });
}

}  // namespace
}  // namespace wholestore_test
