/*
 * Two simulated hosts on one GPU (WHOLESTORE_HOST_ID and NCCL_HOSTID per rank, as
 * `wholestore launch --hosts 2` sets them): NCCL treats the two processes as separate machines
 * and connects them through its network transport, so the multi-host paths run here.
 * Distributed device memory over the job's NCCL communicator gathers every row right (each rank
 * reads the other host's rows through the exchange); continuous and chunked memory over it is
 * refused on both ranks, naming the hosts; continuous device memory over each host's own
 * communicator is a per-host copy.
 */
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace wholestore_test {
namespace {

namespace wm = ::wholememory;

TEST(SimulatedHostsGpu, TwoHostsOnOneGpu) {
  WHOLESTORE_REQUIRE_GPUS(1);
  fork_result r = fork_ranks(2, [](std::shared_ptr<wm::bootstrap> bs) {
    const int me = bs->rank();
    const std::string host = "simhost" + std::to_string(me);
    ::setenv("WHOLESTORE_HOST_ID", host.c_str(), 1);
    ::setenv("NCCL_HOSTID", host.c_str(), 1);
    ::setenv("NCCL_SOCKET_IFNAME", "lo", 0);  // loopback, unless the caller chose
    wm::set_device(0);
    ASSERT_FALSE(wm::describe_gpu_sharing(*bs, 0).shared()) << "two hosts cannot share a GPU";
    auto nccl = wm::make_nccl_communicator(bs, 0);
    EXPECT_EQ(nccl->topology().num_hosts, 2);

    // Distributed rows over both hosts: row i holds i * 3 + column in every column.
    constexpr std::size_t rows = 4099, cols = 5;
    wm::allocation_options ao;
    ao.granularity = cols * sizeof(std::int32_t);
    wm::allocation table = wm::allocation::create(
        nccl, rows * cols * 4, wm::memory_type::distributed, wm::memory_location::device, ao);
    const wm::part_info mine = table.local_part();
    std::vector<std::int32_t> fill(mine.bytes / 4);
    for (std::size_t k = 0; k < fill.size(); ++k) {
      const std::size_t element = mine.offset / 4 + k;
      fill[k] = static_cast<std::int32_t>((element / cols) * 3 + element % cols);
    }
    if (!fill.empty())
      WM_CUDA_TRY(copy_and_wait(mine.ptr, fill.data(), mine.bytes, cudaMemcpyHostToDevice));
    nccl->barrier(nullptr);
    std::vector<std::int64_t> idx;
    for (std::size_t i = 0; i < rows; i += 3)
      idx.push_back(static_cast<std::int64_t>(rows - 1 - i));
    device_buffer d_idx(idx.size() * 8, 0), d_out(idx.size() * cols * 4, 0);
    WM_CUDA_TRY(copy_and_wait(d_idx.get(), idx.data(), idx.size() * 8, cudaMemcpyHostToDevice));
    cuda_stream stream;
    wm::gather(wm::wm_tensor{&table, wm::dtype::int32, rows, cols, cols, 0},
               wm::index_array{d_idx.get(), wm::dtype::int64, idx.size()},
               wm::dense_matrix{d_out.get(), wm::dtype::int32, idx.size(), cols, cols},
               stream.get());
    WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
    std::vector<std::int32_t> got(idx.size() * cols);
    WM_CUDA_TRY(copy_and_wait(got.data(), d_out.get(), got.size() * 4, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < idx.size(); ++i) {
      for (std::size_t c = 0; c < cols; ++c) {
        ASSERT_EQ(got[i * cols + c], static_cast<std::int32_t>(idx[i] * 3 + c))
            << "row " << idx[i] << " column " << c;
      }
    }

    // Continuous and chunked memory cannot span hosts: refused on both ranks, naming them.
    for (wm::memory_type type : {wm::memory_type::continuous, wm::memory_type::chunked}) {
      try {
        wm::allocation::create(nccl, 4096, type, wm::memory_location::device);
        ADD_FAILURE() << wm::memory_type_name(type) << " memory spanned two hosts";
      } catch (const wm::logic_error& e) {
        EXPECT_NE(std::string(e.what()).find("2 hosts"), std::string::npos) << e.what();
      }
    }

    // Per host: continuous device memory over this host's own communicator.
    auto local = wm::make_local_host_communicator(bs);
    ASSERT_EQ(local->size(), 1);
    wm::allocation copy = wm::allocation::create(local, 4096, wm::memory_type::continuous,
                                                 wm::memory_location::device);
    EXPECT_EQ(copy.num_parts(), 1);
    nccl->barrier(nullptr);
  });
  EXPECT_EQ(r.status[0], 0);
  EXPECT_EQ(r.status[1], 0);
}

}  // namespace
}  // namespace wholestore_test
