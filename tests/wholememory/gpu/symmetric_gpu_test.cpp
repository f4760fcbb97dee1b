// Symmetric memory on GPUs: kernels of every rank write into another rank's block and check
// every block through the accessor; two ranks sharing GPU 0 (host communicator, CUDA IPC on one
// device) and, with two GPUs, one rank per GPU over NCCL (peer mappings across NVLink);
// device memory returned over allocate/free rounds (cudaMemGetInfo).
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"
#include "wholememory/gpu/symmetric_kernels.hpp"

#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/symmetric.hpp>

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>

namespace wholestore_test {
namespace {

using wholememory::memory_location;
using wholememory::symmetric_memory;

enum class setup { shared_gpu0_host, own_gpu_nccl };

void peer_writes_and_reads(setup how, memory_location loc) {
  fork_result r = fork_ranks(2, [how, loc](std::shared_ptr<wholememory::bootstrap> bs) {
    const int device = how == setup::own_gpu_nccl ? bs->rank() : 0;
    wholememory::set_device(device);
    auto comm = how == setup::own_gpu_nccl ? wholememory::make_nccl_communicator(bs, device)
                                           : wholememory::make_host_communicator(bs);
    const wholememory::symmetric_env env = wholememory::symmetric_init(device, comm);
    ASSERT_EQ(env.device, device);
    const int me = comm->rank(), other = 1 - me;
    const std::size_t n = (std::size_t{3} << 20) / 8 + 5;  // 3 MiB and change per block
    symmetric_memory heap = symmetric_memory::allocate(env.comm, n * 8, loc);
    const auto at = heap.accessor<std::uint64_t>(device);
    cuda_stream stream;
    // Each rank writes the other's block, then every rank checks both blocks.
    write_symmetric(at, other, n, 1000 + static_cast<std::uint64_t>(me), stream.get());
    WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
    bs->barrier();
    device_buffer wrong(2 * sizeof(unsigned long long), device);
    WM_CUDA_TRY(cudaMemsetAsync(wrong.get(), 0, 2 * sizeof(unsigned long long), stream.get()));
    for (int b = 0; b < 2; ++b) {
      // Block b was written by rank 1 - b.
      count_symmetric_mismatches(at, b, n, 1000 + static_cast<std::uint64_t>(1 - b),
                                 wrong.as<unsigned long long>() + b, stream.get());
    }
    unsigned long long host[2] = {9, 9};
    WM_CUDA_TRY(
        cudaMemcpyAsync(host, wrong.get(), sizeof(host), cudaMemcpyDeviceToHost, stream.get()));
    WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
    EXPECT_EQ(host[0], 0u) << "rank " << me << " saw wrong elements in block 0";
    EXPECT_EQ(host[1], 0u) << "rank " << me << " saw wrong elements in block 1";
    bs->barrier();
    heap.free();
  });
  for (std::size_t i = 0; i < r.status.size(); ++i)
    EXPECT_EQ(r.status[i], 0) << "rank " << i << " failed";
}

TEST(SymmetricMemoryGpu, TwoRanksSharingGpu0WriteAndReadEachOthersDeviceBlocks) {
  WHOLESTORE_REQUIRE_GPUS(1);
  peer_writes_and_reads(setup::shared_gpu0_host, memory_location::device);
}

TEST(SymmetricMemoryGpu, KernelsReachHostBlocksOfEveryRank) {
  WHOLESTORE_REQUIRE_GPUS(1);
  peer_writes_and_reads(setup::shared_gpu0_host, memory_location::host);
}

TEST(SymmetricMemoryGpu, OneRankPerGpuOverNcclReachesThePeerGpusBlock) {
  WHOLESTORE_REQUIRE_GPUS(2);
  peer_writes_and_reads(setup::own_gpu_nccl, memory_location::device);
}

TEST(SymmetricMemoryGpu, AllocateAndFreeRoundsReturnDeviceMemory) {
  WHOLESTORE_REQUIRE_GPUS(1);
  fork_result r = fork_ranks(2, [](std::shared_ptr<wholememory::bootstrap> bs) {
    wholememory::set_device(0);
    auto comm = wholememory::make_host_communicator(bs);
    {
      symmetric_memory warm = symmetric_memory::allocate(comm, 64 << 20, memory_location::device);
      warm.free();
    }
    bs->barrier();
    std::size_t free_before = 0, free_after = 0, total = 0;
    WM_CUDA_TRY(cudaMemGetInfo(&free_before, &total));
    for (int i = 0; i < 20; ++i) {
      symmetric_memory heap = symmetric_memory::allocate(comm, 64 << 20, memory_location::device);
      heap.free();
    }
    bs->barrier();
    WM_CUDA_TRY(cudaMemGetInfo(&free_after, &total));
    // 20 rounds of 2 x 64 MiB: a leak would show as at least 128 MiB.
    EXPECT_GE(free_after + (32u << 20), free_before)
        << "device memory fell from " << free_before << " to " << free_after << " bytes";
  });
  for (std::size_t i = 0; i < r.status.size(); ++i)
    EXPECT_EQ(r.status[i], 0) << "rank " << i << " failed";
}

}  // namespace
}  // namespace wholestore_test
