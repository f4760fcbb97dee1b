// The GPU walker and negative sampler: walks equal to the CPU path's bit for bit, DeepWalk and
// node2vec (p, q far from 1 too), continuous and chunked memory in device and host locations, a
// split of the starts over two calls; the out-of-range start error with the output untouched;
// negative draws equal to the CPU path's for continuous and chunked tables, device and host. Bodies
// run in a forked child (the test process never calls CUDA, gpu_test_util.hpp).
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <graph/csr_graph.hpp>
#include <graph/generate.hpp>
#include <graph/negatives.hpp>
#include <graph/walks.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace wholestore_test {
namespace {

using namespace wholestore::graph;
namespace wm = ::wholememory;

void in_child(const std::function<void(std::shared_ptr<wm::communicator>)>& body) {
  fork_result r = fork_ranks(1, [&](std::shared_ptr<wm::bootstrap> bs) {
    wm::set_device(0);
    body(wm::make_host_communicator(bs));
  });
  EXPECT_EQ(r.status[0], 0) << "the child failed";
}

host_csr walk_graph() {
  generate_options go;
  go.num_nodes = 5000;
  go.num_edges = 60000;
  go.seed = 3;
  go.symmetrize = true;
  return generate_graph(go);
}

TEST(GpuWalks, EqualToTheCpuPathBitForBit) {
  WHOLESTORE_REQUIRE_GPUS(1);
  in_child([](std::shared_ptr<wm::communicator> comm) {
    const host_csr g = walk_graph();
    std::vector<std::int64_t> starts(20000);
    for (std::size_t i = 0; i < starts.size(); ++i)
      starts[i] = static_cast<std::int64_t>((i * 104729) % g.num_nodes);
    cuda_stream stream;
    device_buffer d_starts(starts.size() * 8, 0);
    WM_CUDA_TRY(
        copy_and_wait(d_starts.get(), starts.data(), starts.size() * 8, cudaMemcpyHostToDevice));
    csr_graph host_graph =
        make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::host);
    for (auto [p, q] : {std::pair{1.0, 1.0}, std::pair{0.5, 2.0}, std::pair{0.05, 20.0}}) {
      walk_options o;
      o.length = 12;
      o.p = p;
      o.q = q;
      o.seed = 2024;
      const std::size_t width = 13, n = starts.size();
      std::vector<std::int64_t> want(n * width);
      random_walks_host(host_graph, starts.data(), n, o, want.data(), 4);
      for (auto type : {wm::memory_type::continuous, wm::memory_type::chunked}) {
        for (auto loc : {wm::memory_location::device, wm::memory_location::host}) {
          csr_graph wg = make_graph(comm, g, type, loc);
          gpu_walker walker(wg);
          device_buffer d_out(n * width * 8, 0);
          // Two calls: the second half continues the walk indices of the first.
          const std::size_t cut = 7001;
          walk_options second = o;
          second.first_walk = cut;
          walker.walk(d_starts.as<std::int64_t>(), cut, o, d_out.as<std::int64_t>(), stream.get());
          walker.walk(d_starts.as<std::int64_t>() + cut, n - cut, second,
                      d_out.as<std::int64_t>() + cut * width, stream.get());
          std::vector<std::int64_t> got(n * width);
          WM_CUDA_TRY(
              copy_and_wait(got.data(), d_out.get(), got.size() * 8, cudaMemcpyDeviceToHost));
          std::size_t first_diff = got.size();
          for (std::size_t i = 0; i < got.size(); ++i) {
            if (got[i] != want[i]) {
              first_diff = i;
              break;
            }
          }
          EXPECT_EQ(first_diff, got.size())
              << wm::memory_type_name(type) << " " << wm::memory_location_name(loc) << " p " << p
              << " q " << q << ": walk " << first_diff / width << " step " << first_diff % width
              << " is " << got[first_diff] << ", the CPU path has " << want[first_diff];
        }
      }
    }
  });
}

TEST(GpuWalks, AStartOutsideTheGraphIsNamedAndNothingIsWritten) {
  WHOLESTORE_REQUIRE_GPUS(1);
  in_child([](std::shared_ptr<wm::communicator> comm) {
    const host_csr g = walk_graph();
    csr_graph wg = make_graph(comm, g, wm::memory_type::continuous, wm::memory_location::device);
    gpu_walker walker(wg);
    cuda_stream stream;
    const std::vector<std::int64_t> starts = {1, 2, 3, -4, 5};
    device_buffer d_starts(starts.size() * 8, 0);
    WM_CUDA_TRY(
        copy_and_wait(d_starts.get(), starts.data(), starts.size() * 8, cudaMemcpyHostToDevice));
    const std::vector<std::int64_t> sentinel(5 * 5, 777);
    device_buffer d_out(sentinel.size() * 8, 0);
    WM_CUDA_TRY(
        copy_and_wait(d_out.get(), sentinel.data(), sentinel.size() * 8, cudaMemcpyHostToDevice));
    walk_options o;
    o.length = 4;
    try {
      walker.walk(d_starts.as<std::int64_t>(), starts.size(), o, d_out.as<std::int64_t>(),
                  stream.get());
      ADD_FAILURE() << "a negative start was accepted";
    } catch (const wm::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("start node -4 at position 3"), std::string::npos)
          << e.what();
    }
    std::vector<std::int64_t> got(sentinel.size());
    WM_CUDA_TRY(copy_and_wait(got.data(), d_out.get(), got.size() * 8, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, sentinel);
  });
}

TEST(GpuNegatives, EqualToTheCpuPathForEveryTablePlacement) {
  WHOLESTORE_REQUIRE_GPUS(1);
  in_child([](std::shared_ptr<wm::communicator> comm) {
    const host_csr g = walk_graph();
    const std::size_t n = 300000;
    std::vector<std::int64_t> want(n);
    negative_sampler cpu(comm, g.row_offsets, negative_options{});
    cpu.sample_host(5, 1000, n, want.data(), 4);
    cuda_stream stream;
    for (auto type : {wm::memory_type::continuous, wm::memory_type::chunked}) {
      for (auto loc : {wm::memory_location::device, wm::memory_location::host}) {
        negative_options o;
        o.type = type;
        o.location = loc;
        negative_sampler ns(comm, g.row_offsets, o);
        device_buffer d_out(n * 8, 0);
        ns.sample(5, 1000, n, d_out.as<std::int64_t>(), stream.get());
        WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
        std::vector<std::int64_t> got(n);
        WM_CUDA_TRY(copy_and_wait(got.data(), d_out.get(), n * 8, cudaMemcpyDeviceToHost));
        EXPECT_EQ(got, want) << wm::memory_type_name(type) << " " << wm::memory_location_name(loc);
      }
    }
  });
}

}  // namespace
}  // namespace wholestore_test
