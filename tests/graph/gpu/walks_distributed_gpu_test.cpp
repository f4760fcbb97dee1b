// The GPU walker on distributed graphs (walks_distributed.cu): DeepWalk and node2vec over an
// NCCL communicator equal bit for bit to the walks' definition (walk_step on the host CSR), on
// one GPU (one rank) and two (each rank its own slice of the starts, one rank without any, a
// call in two rounds), device and host locations, lengths 0, 1 and 17, a directed graph with
// dead ends; the refusals, each on every rank: a bad start on one rank, ranks that disagree on
// the length, a host communicator; and a corrupt part met while serving another rank.  Bodies run
// in forked children.
#include "common/multiprocess.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <graph/csr_graph.hpp>
#include <graph/detail/walk_step.hpp>
#include <graph/generate.hpp>
#include <graph/walks.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/ptr_gen.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace wholestore_test {
namespace {

using namespace wholestore::graph;
namespace wm = ::wholememory;

void on_gpus(int ranks, const rank_body& body) {
  fork_result r = fork_ranks(ranks, body, std::chrono::seconds(120));
  for (int k = 0; k < ranks; ++k) EXPECT_EQ(r.status[k], 0) << "rank " << k << " failed";
}

host_csr graph_of(bool directed) {
  generate_options go;
  go.num_nodes = directed ? 3000 : 5000;
  go.num_edges = directed ? 14000 : 60000;
  go.seed = directed ? 12 : 3;
  go.symmetrize = !directed;  // directed R-MAT: many nodes without out-neighbors
  return generate_graph(go);
}

/// The walks by their definition: walk i steps with walk_step (detail/walk_step.hpp, checked
/// against node2vec's exact probabilities in the CPU tests) on the host CSR from key
/// walk_key(seed, i, start).  Plain host code: the test process makes no CUDA call.
std::vector<std::int64_t> reference(const host_csr& g, const std::vector<std::int64_t>& starts,
                                    const walk_options& o) {
  const std::size_t width = static_cast<std::size_t>(o.length) + 1;
  const detail::walk_rule rule = detail::make_walk_rule(o.p, o.q);
  const wm::PtrGen<const std::int64_t, const std::int64_t> row(g.row_offsets.data());
  const wm::PtrGen<const std::int64_t, const std::int64_t> col(g.col_indices.data());
  std::vector<std::int64_t> want(starts.size() * width, -1);
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const std::uint64_t key = detail::walk_key(o.seed, i, starts[i]);
    std::int64_t prev = -1, cur = starts[i];
    want[i * width] = cur;
    for (std::size_t s = 1; s < width; ++s) {
      const std::int64_t next = detail::walk_step(rule, key, static_cast<std::uint32_t>(s - 1),
                                                  prev, cur, row, col, g.num_nodes, g.num_edges());
      if (next < 0) break;
      want[i * width + s] = next;
      prev = cur;
      cur = next;
    }
  }
  return want;
}

/// Rank `rank` of `ranks` walks starts [begin, end) of the call on `wg` and compares them with
/// the reference's rows.
void walk_and_compare(gpu_walker& walker, const std::vector<std::int64_t>& starts,
                      std::size_t begin, std::size_t end, const walk_options& o,
                      const std::vector<std::int64_t>& want, cudaStream_t stream,
                      const std::string& what) {
  const std::size_t width = static_cast<std::size_t>(o.length) + 1, n = end - begin;
  device_buffer d_starts(n * 8 + 8, wm::current_device());
  device_buffer d_out(n * width * 8 + 8, wm::current_device());
  if (n > 0) {
    WM_CUDA_TRY(
        copy_and_wait(d_starts.get(), starts.data() + begin, n * 8, cudaMemcpyHostToDevice));
    WM_CUDA_TRY(cudaMemset(d_out.get(), 0x77, n * width * 8));
  }
  walk_options mine = o;
  mine.first_walk = begin;
  walker.walk(d_starts.as<std::int64_t>(), n, mine, d_out.as<std::int64_t>(), stream);
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  std::vector<std::int64_t> got(n * width);
  if (n > 0)
    WM_CUDA_TRY(copy_and_wait(got.data(), d_out.get(), got.size() * 8, cudaMemcpyDeviceToHost));
  std::size_t diff = got.size();
  for (std::size_t i = 0; i < got.size() && diff == got.size(); ++i)
    if (got[i] != want[begin * width + i]) diff = i;
  EXPECT_EQ(diff, got.size()) << what << ": walk " << begin + diff / width << " step "
                              << diff % width << " is " << got[diff] << ", the CPU walker has "
                              << want[begin * width + diff];
}

void equal_to_continuous(int ranks) {
  for (bool directed : {false, true}) {
    const host_csr g = graph_of(directed);
    std::vector<std::int64_t> starts(9000);
    for (std::size_t i = 0; i < starts.size(); ++i)
      starts[i] = static_cast<std::int64_t>((i * 7919 + 5) % g.num_nodes);
    // DeepWalk; node2vec near and far from p = q = 1 (at p = 0.05, q = 20 most trials are
    // rejected and many ask the previous node's owner).
    for (auto [length, p, q] :
         {std::tuple{0, 1.0, 1.0}, std::tuple{1, 1.0, 1.0}, std::tuple{17, 1.0, 1.0},
          std::tuple{17, 0.5, 2.0}, std::tuple{9, 0.05, 20.0}}) {
      walk_options o;
      o.length = length;
      o.p = p;
      o.q = q;
      o.seed = 40 + static_cast<std::uint64_t>(length);
      const std::vector<std::int64_t> want = reference(g, starts, o);
      on_gpus(ranks, [&](std::shared_ptr<wm::bootstrap> bs) {
        const int me = bs->rank();
        wm::set_device(me);
        auto comm = wm::make_nccl_communicator(bs, me);
        cuda_stream stream;
        for (auto loc : {wm::memory_location::device, wm::memory_location::host}) {
          csr_graph wg = make_graph(comm, g, wm::memory_type::distributed, loc);
          gpu_walker walker(wg);
          const std::string what = std::string(directed ? "directed" : "symmetric") + " " +
                                   wm::memory_location_name(loc) + " length " +
                                   std::to_string(length) + " p " + std::to_string(p) + " q " +
                                   std::to_string(q) + " rank " + std::to_string(me);
          // Halves of the starts, then everything on rank 0 and nothing on the others.
          const std::size_t n = starts.size(), R = static_cast<std::size_t>(ranks);
          const auto r = static_cast<std::size_t>(me);
          walk_and_compare(walker, starts, n * r / R, n * (r + 1) / R, o, want, stream.get(),
                           what + ", split");
          walk_and_compare(walker, starts, 0, me == 0 ? n : 0, o, want, stream.get(),
                           what + ", one rank");
        }
      });
    }
  }
}

TEST(GpuWalksDistributed, OneGpuEqualsContinuous) {
  WHOLESTORE_REQUIRE_GPUS(1);
  equal_to_continuous(1);
}

TEST(GpuWalksDistributed, TwoGpusEqualContinuous) {
  WHOLESTORE_REQUIRE_GPUS(2);
  equal_to_continuous(2);
}

// More walks on one rank than a round takes (2^24 / 2 = 8,388,608 on two ranks for DeepWalk,
// 2^21 / 2 for node2vec): that rank walks in two rounds and the other takes part in both with
// its few walks.
TEST(GpuWalksDistributed, TwoRoundsOnTwoGpus) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const host_csr g = graph_of(false);
  for (const bool second_order : {false, true}) {
    const std::size_t big = (std::size_t{1} << (second_order ? 20 : 23)) + 4321, small = 777;
    std::vector<std::int64_t> starts(big + small);
    for (std::size_t i = 0; i < starts.size(); ++i)
      starts[i] = static_cast<std::int64_t>((i * 104729 + 11) % g.num_nodes);
    walk_options o;
    o.length = 3;
    o.seed = 99;
    if (second_order) {
      o.p = 0.5;
      o.q = 2.0;
    }
    const std::vector<std::int64_t> want = reference(g, starts, o);
    on_gpus(2, [&](std::shared_ptr<wm::bootstrap> bs) {
      const int me = bs->rank();
      wm::set_device(me);
      auto comm = wm::make_nccl_communicator(bs, me);
      cuda_stream stream;
      csr_graph wg = make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::device);
      gpu_walker walker(wg);
      walk_and_compare(walker, starts, me == 0 ? 0 : big, me == 0 ? big : big + small, o, want,
                       stream.get(),
                       (second_order ? "node2vec, rank " : "DeepWalk, rank ") + std::to_string(me));
    });
  }
}

std::string error_of(gpu_walker& walker, const std::vector<std::int64_t>& starts,
                     const walk_options& o, cudaStream_t stream) {
  const std::size_t width = static_cast<std::size_t>(o.length) + 1;
  device_buffer d_starts(starts.size() * 8 + 8, wm::current_device());
  device_buffer d_out(starts.size() * width * 8 + 8, wm::current_device());
  WM_CUDA_TRY(
      copy_and_wait(d_starts.get(), starts.data(), starts.size() * 8, cudaMemcpyHostToDevice));
  try {
    walker.walk(d_starts.as<std::int64_t>(), starts.size(), o, d_out.as<std::int64_t>(), stream);
    WM_CUDA_TRY(cudaStreamSynchronize(stream));
  } catch (const wm::logic_error& e) {
    return e.what();
  }
  return "(no error)";
}

// A call the ranks cannot walk together fails on every rank, naming why, and the next good call
// works.  One GPU per rank over NCCL where there are two; then a host communicator (both ranks
// on GPU 0), which the GPU path refuses.
TEST(GpuWalksDistributed, RefusalsOnEveryRank) {
  WHOLESTORE_REQUIRE_GPUS(1);
  const host_csr g = graph_of(false);
  int devices = 0;
  {
    const cuda_probe& probe = probe_cuda_forked();
    devices = probe.devices;
  }
  const std::vector<std::int64_t> ok = {3, 400, 5};
  walk_options o;
  o.length = 6;
  o.seed = 1;
  const std::vector<std::int64_t> want = reference(g, ok, o);
  if (devices >= 2) {
    on_gpus(2, [&](std::shared_ptr<wm::bootstrap> bs) {
      const int me = bs->rank();
      wm::set_device(me);
      auto comm = wm::make_nccl_communicator(bs, me);
      cuda_stream stream;
      csr_graph wg = make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::device);
      gpu_walker walker(wg);
      walk_options other = o;
      if (me == 1) other.length = 7;
      std::string msg = error_of(walker, ok, other, stream.get());
      EXPECT_NE(msg.find("same length, p and q"), std::string::npos) << msg;
      std::vector<std::int64_t> bad = ok;
      if (me == 1) bad[2] = static_cast<std::int64_t>(g.num_nodes) + 4;
      msg = error_of(walker, bad, o, stream.get());
      EXPECT_NE(msg.find(me == 1 ? "at position 2" : "rank 1 passed start node"), std::string::npos)
          << msg;
      // Still in step: the same walks as the CPU walker.
      walk_and_compare(walker, ok, 0, ok.size(), o, want, stream.get(),
                       "after the refusals, rank " + std::to_string(me));
    });
  }
  on_gpus(2, [&](std::shared_ptr<wm::bootstrap> bs) {
    wm::set_device(0);
    auto comm = wm::make_host_communicator(bs);
    cuda_stream stream;
    csr_graph wg = make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::host);
    gpu_walker walker(wg);
    const std::string msg = error_of(walker, ok, o, stream.get());
    EXPECT_NE(msg.find("needs an NCCL communicator"), std::string::npos) << msg;
  });
}

// A corrupt part met while an owner serves another rank's steps (every column of rank 1's part
// outside the graph, or its first row ending past its edges; the graph in pinned host memory,
// which the test writes directly): every rank throws, rank 0 naming rank 1, for DeepWalk and
// node2vec (whose first call also tries to copy rank 1's hub lists from the corrupt part); the
// repaired graph walks the reference's walks.
TEST(GpuWalksDistributed, CorruptPartFailsOnEveryRank) {
  WHOLESTORE_REQUIRE_GPUS(2);
  const host_csr g = graph_of(false);
  on_gpus(2, [&](std::shared_ptr<wm::bootstrap> bs) {
    const int me = bs->rank();
    wm::set_device(me);
    auto comm = wm::make_nccl_communicator(bs, me);
    cuda_stream stream;
    csr_graph wg = make_graph(comm, g, wm::memory_type::distributed, wm::memory_location::host);
    gpu_walker walker(wg);
    // Rank 0 starts walks at every node of rank 1's part, rank 1 at none.
    const auto first1 = static_cast<std::int64_t>(wg.row_offsets.part(1).offset / 8);
    std::vector<std::int64_t> starts;
    if (me == 0) {
      for (std::int64_t v = first1; v < static_cast<std::int64_t>(g.num_nodes); ++v)
        starts.push_back(v);
    }
    auto* col = static_cast<std::int32_t*>(wg.col_indices.local_part().ptr);
    auto* ro = static_cast<std::int64_t*>(wg.row_offsets.local_part().ptr);
    const std::size_t cols = wg.col_indices.local_part().bytes / 4;
    auto in_step = [&] {
      comm->barrier(stream.get());
      WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
    };
    for (auto [p, q] : {std::pair{1.0, 1.0}, std::pair{0.5, 2.0}}) {
      walk_options o;
      o.length = 6;
      o.p = p;
      o.q = q;
      o.seed = 77;
      const std::vector<std::int64_t> want = reference(g, starts, o);
      for (int fault : {0, 1}) {
        const std::string what = "p " + std::to_string(p) + ", fault " + std::to_string(fault) +
                                 ", rank " + std::to_string(me);
        std::vector<std::int32_t> saved_cols;
        std::int64_t saved_row = 0;
        if (me == 1) {
          if (fault == 0) {
            saved_cols.assign(col, col + cols);
            std::fill(col, col + cols, static_cast<std::int32_t>(g.num_nodes) + 5);
          } else {
            saved_row = ro[1];
            ro[1] = static_cast<std::int64_t>(g.num_edges()) + 9;
          }
        }
        in_step();
        const std::string msg = error_of(walker, starts, o, stream.get());
        EXPECT_NE(msg.find("the graph is corrupt"), std::string::npos) << what << ": " << msg;
        if (me == 0) {
          EXPECT_NE(msg.find("met by rank 1"), std::string::npos) << what << ": " << msg;
        }
        if (me == 1) {
          if (fault == 0) {
            std::copy(saved_cols.begin(), saved_cols.end(), col);
          } else {
            ro[1] = saved_row;
          }
        }
        in_step();
        walk_and_compare(walker, starts, 0, starts.size(), o, want, stream.get(),
                         "after the repair, " + what);
      }
    }
  });
}

}  // namespace
}  // namespace wholestore_test
