/*
 * gather / scatter on the GPU: every type x location, one and two GPUs (one forked process per
 * GPU; distributed memory over NCCL), every dtype pair of a class, int32 and int64 indices,
 * random and address-sorted visiting of host memory, checked against the host references of
 * gather_reference.hpp.  Row shapes cover every vector width of the copy kernel (1 to 16
 * bytes), narrow rows packed per warp and wide rows.  The test process never calls CUDA itself
 * (gpu_test_util.hpp).
 */
#include "common/multiprocess.hpp"
#include "wholememory/gather_reference.hpp"
#include "wholememory/gpu/gpu_test_util.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

namespace wholestore_test {
namespace {

using namespace wholememory;
using namespace gather_ref;
using wm_handle = ::wholememory::allocation;

struct gpu_rank {
  std::shared_ptr<communicator> comm;
  int device = 0;
};

gpu_rank start_rank(std::shared_ptr<bootstrap> bs, memory_type type) {
  int count = 0;
  WM_CUDA_TRY(cudaGetDeviceCount(&count));
  gpu_rank r;
  r.device = bs->rank() % count;
  WM_CUDA_TRY(cudaSetDevice(r.device));
  r.comm = type == memory_type::distributed ? make_nccl_communicator(bs, r.device)
                                            : make_host_communicator(bs);
  return r;
}

void rank_barrier(communicator& comm, cudaStream_t stream) {
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  comm.barrier(stream);
  comm.synchronize(stream);
}

wm_handle make_table(std::shared_ptr<communicator> comm, const table_layout& lay, memory_type type,
                     memory_location loc) {
  allocation_options opts;
  opts.granularity = lay.stride_bytes();
  return wm_handle::create(comm, lay.bytes(), type, loc, opts);
}

std::pair<std::size_t, std::size_t> own_rows(const wm_handle& wm, const table_layout& lay) {
  part_info mine = wm.local_part();
  std::size_t s = lay.stride_bytes();
  std::size_t b = std::min(first_row(mine.offset, s), lay.rows);
  std::size_t e = std::min(first_row(mine.offset + mine.bytes, s), lay.rows);
  return {b, std::max(b, e)};
}

/// Each rank writes its own rows (padding included) with one copy, then all meet.
void fill_table(const wm_handle& wm, const table_layout& lay, cudaStream_t stream) {
  auto [b, e] = own_rows(wm, lay);
  const std::size_t s = lay.stride_bytes();
  std::vector<char> rows((e - b) * s + 1);
  for (std::size_t r = b; r < e; ++r)
    for (std::size_t c = 0; c < lay.stride; ++c)
      lay.element(r, c, rows.data() + (r - b) * s + c * lay.elem());
  part_info mine = wm.local_part();
  if (e > b)
    WM_CUDA_TRY(copy_and_wait(static_cast<char*>(mine.ptr) + (b * s - mine.offset), rows.data(),
                              (e - b) * s, cudaMemcpyDefault));
  rank_barrier(wm.comm(), stream);
}

/// The table bytes this rank can read (all parts, or its own for distributed memory), with
/// the offset of the first byte.
std::pair<std::size_t, std::vector<char>> read_table(const wm_handle& wm) {
  std::vector<char> bytes(wm.size());
  if (wm.type() == memory_type::distributed) {
    part_info mine = wm.local_part();
    bytes.resize(mine.bytes);
    if (mine.bytes)
      WM_CUDA_TRY(copy_and_wait(bytes.data(), mine.ptr, mine.bytes, cudaMemcpyDefault));
    return {mine.offset, bytes};
  }
  for (int p = 0; p < wm.num_parts(); ++p) {
    part_info part = wm.part(p);
    if (part.bytes)
      WM_CUDA_TRY(
          copy_and_wait(bytes.data() + part.offset, part.ptr, part.bytes, cudaMemcpyDefault));
  }
  return {0, bytes};
}

std::vector<char> index_bytes(const std::vector<std::int64_t>& idx, dtype t) {
  std::vector<char> out(idx.size() * dtype_size(t) + 1);
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (t == dtype::int32) {
      auto v = static_cast<std::int32_t>(idx[i]);
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      std::memcpy(out.data() + 8 * i, &idx[i], 8);
    }
  }
  return out;
}

void gather_case(const wm_handle& wm, const table_layout& lay, dtype out_type, dtype index_type,
                 std::size_t n, std::uint64_t seed, const gather_options& options, int device,
                 cudaStream_t stream) {
  fill_table(wm, lay, stream);
  const int rank = wm.comm().rank();
  std::vector<std::int64_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = hash3(seed, rank, i) % lay.rows;
  if (n > 2) {
    idx[0] = static_cast<std::int64_t>(lay.rows) - 1;
    idx[n - 1] = 0;
  }
  auto ib = index_bytes(idx, index_type);
  device_buffer d_idx(ib.size(), device);
  WM_CUDA_TRY(copy_and_wait(d_idx.get(), ib.data(), ib.size(), cudaMemcpyHostToDevice));
  const std::size_t out_stride = lay.cols + 1, oe = dtype_size(out_type);
  const std::size_t out_bytes = n * out_stride * oe + 1;
  device_buffer d_out(out_bytes, device);
  WM_CUDA_TRY(cudaMemset(d_out.get(), 0x5A, out_bytes));
  gather(lay.tensor(wm), index_array{d_idx.get(), index_type, n},
         dense_matrix{d_out.get(), out_type, n, lay.cols, out_stride}, options, stream);
  WM_CUDA_TRY(cudaStreamSynchronize(stream));
  std::vector<unsigned char> out(out_bytes);
  WM_CUDA_TRY(copy_and_wait(out.data(), d_out.get(), out_bytes, cudaMemcpyDeviceToHost));
  std::vector<unsigned char> elem(8), want(8);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t c = 0; c < out_stride; ++c) {
      const unsigned char* got = out.data() + (i * out_stride + c) * oe;
      if (c >= lay.cols) {
        for (std::size_t b = 0; b < oe; ++b) ASSERT_EQ(got[b], 0x5A) << "padding, entry " << i;
        continue;
      }
      lay.element(idx[i], c + lay.col_offset, elem.data());
      ref_convert(lay.type, elem.data(), out_type, want.data());
      ASSERT_TRUE(same_element(out_type, got, want.data()))
          << dtype_name(lay.type) << " -> " << dtype_name(out_type) << " (" << lay.cols
          << " cols, stride " << lay.stride << ") entry " << i << " row " << idx[i] << " col " << c;
    }
  }
}

std::vector<std::int64_t> scatter_list(std::uint64_t seed, int r, int size, std::size_t rows,
                                       std::size_t n) {
  std::size_t mine = rows / size + (static_cast<std::size_t>(r) < rows % size ? 1 : 0);
  std::vector<std::int64_t> idx;
  for (std::size_t i = 0; i < n && mine > 0; ++i) {
    std::size_t k = hash3(seed, r, i) % (i % 3 == 0 ? std::min<std::size_t>(mine, 5) : mine);
    idx.push_back(static_cast<std::int64_t>(k * size + r));
  }
  return idx;
}

void scatter_case(const wm_handle& wm, const table_layout& lay, dtype in_type, dtype index_type,
                  std::size_t n, std::uint64_t seed, const gather_options& options, int device,
                  cudaStream_t stream) {
  fill_table(wm, lay, stream);
  const int rank = wm.comm().rank(), size = wm.comm().size();
  const std::size_t asked = n;
  auto idx = scatter_list(seed, rank, size, lay.rows, asked);
  n = idx.size();
  const std::size_t ie = dtype_size(in_type), in_stride = lay.cols + 2;
  std::vector<unsigned char> in(n * in_stride * ie + 1);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < lay.cols; ++c)
      test_value(in_type, seed + 77 + rank, i, c, in.data() + (i * in_stride + c) * ie);
  auto ib = index_bytes(idx, index_type);
  device_buffer d_idx(ib.size(), device), d_in(in.size(), device);
  WM_CUDA_TRY(copy_and_wait(d_idx.get(), ib.data(), ib.size(), cudaMemcpyHostToDevice));
  WM_CUDA_TRY(copy_and_wait(d_in.get(), in.data(), in.size(), cudaMemcpyHostToDevice));
  scatter(dense_matrix{d_in.get(), in_type, n, lay.cols, in_stride},
          index_array{d_idx.get(), index_type, n}, lay.tensor(wm), options, stream);
  rank_barrier(wm.comm(), stream);

  std::vector<std::pair<int, std::int64_t>> writer(lay.rows, {-1, -1});
  for (int r = 0; r < size; ++r) {
    auto list = scatter_list(seed, r, size, lay.rows, asked);
    for (std::size_t i = 0; i < list.size(); ++i) writer[list[i]] = {r, std::int64_t(i)};
  }
  auto [first, bytes] = read_table(wm);
  std::vector<unsigned char> src(8), want(8);
  for (std::size_t row = 0; row < lay.rows; ++row) {
    for (std::size_t c = 0; c < lay.stride; ++c) {
      std::size_t off = row * lay.stride_bytes() + c * lay.elem();
      if (off < first || off >= first + bytes.size()) break;
      const char* got = bytes.data() + (off - first);
      bool in_view = c >= lay.col_offset && c < lay.col_offset + lay.cols;
      if (writer[row].first < 0 || !in_view) {
        lay.element(row, c, want.data());
      } else {
        test_value(in_type, seed + 77 + writer[row].first, writer[row].second, c - lay.col_offset,
                   src.data());
        ref_convert(in_type, src.data(), lay.type, want.data());
      }
      ASSERT_TRUE(same_element(lay.type, got, want.data()))
          << dtype_name(in_type) << " -> " << dtype_name(lay.type) << " (" << lay.cols
          << " cols) row " << row << " col " << c << " writer " << writer[row].first;
    }
  }
  rank_barrier(wm.comm(), stream);
}

using gpu_param = std::tuple<int, memory_type, memory_location>;

class GpuGather : public ::testing::TestWithParam<gpu_param> {};

void run_on_gpus(int ranks, const rank_body& body) {
  fork_result result = fork_ranks(ranks, body);
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(result.status[r], 0) << "rank " << r << " failed";
}

}  // namespace

TEST_P(GpuGather, EveryDtypePairAgainstTheReference) {
  auto [ranks, type, loc] = GetParam();
  WHOLESTORE_REQUIRE_GPUS(ranks);
  run_on_gpus(ranks, [type = type, loc = loc](std::shared_ptr<bootstrap> bs) {
    gpu_rank g = start_rank(bs, type);
    cuda_stream stream;
    std::uint64_t seed = 100;
    gather_options random_order, sorted;
    random_order.sort_host_threshold = std::numeric_limits<std::size_t>::max();
    sorted.sort_host_threshold = 0;
    for (const auto* group : {&float_types, &int_types}) {
      for (dtype table_type : *group) {
        table_layout lay{table_type, 1003, 7, 9, 1, seed++};
        auto wm = make_table(g.comm, lay, type, loc);
        for (dtype other : *group) {
          for (dtype it : {dtype::int32, dtype::int64}) {
            const gather_options& o = (seed % 2) ? sorted : random_order;
            gather_case(wm, lay, other, it, 300, seed++, o, g.device, stream.get());
            scatter_case(wm, lay, other, it, 200, seed++, o, g.device, stream.get());
          }
        }
      }
    }
  });
}

TEST_P(GpuGather, EveryVectorWidthNarrowAndWideRows) {
  auto [ranks, type, loc] = GetParam();
  WHOLESTORE_REQUIRE_GPUS(ranks);
  run_on_gpus(ranks, [type = type, loc = loc](std::shared_ptr<bootstrap> bs) {
    gpu_rank g = start_rank(bs, type);
    cuda_stream stream;
    std::uint64_t seed = 900;
    gather_options random_order, sorted;
    random_order.sort_host_threshold = std::numeric_limits<std::size_t>::max();
    sorted.sort_host_threshold = 0;
    // {dtype, cols, stride, offset}: 16-byte rows of 16 to 4000 bytes (narrow and wide
    // shapes), and 8-, 4-, 2- and 1-byte aligned ones.
    struct shape {
      dtype t;
      std::size_t cols, stride, offset;
    };
    for (shape s : {shape{dtype::float32, 16, 16, 0}, shape{dtype::float32, 64, 64, 0},
                    shape{dtype::float32, 128, 132, 4}, shape{dtype::float32, 256, 256, 0},
                    shape{dtype::float32, 1000, 1024, 4}, shape{dtype::float64, 33, 35, 1},
                    shape{dtype::int32, 129, 130, 1}, shape{dtype::float16, 7, 9, 1},
                    shape{dtype::int8, 3, 5, 1}, shape{dtype::int8, 600, 601, 1}}) {
      table_layout lay{s.t, 2049, s.cols, s.stride, s.offset, seed++};
      auto wm = make_table(g.comm, lay, type, loc);
      for (const gather_options* o : {&random_order, &sorted}) {
        gather_case(wm, lay, s.t, dtype::int64, 5000, seed++, *o, g.device, stream.get());
        scatter_case(wm, lay, s.t, dtype::int32, 3000, seed++, *o, g.device, stream.get());
      }
    }
  });
}

// A gather of tens of MiB on distributed memory pipelines its exchange of rows in slices (a
// slice packed, one crossing, one placed); every rank proposes a slice count from its own
// call and the largest wins.  Ranks asking for one slice's worth and for several, converting
// and not, random and sorted visits of host parts: every entry equal to the reference.
TEST_P(GpuGather, LargeCallsMatchTheReference) {
  auto [ranks, type, loc] = GetParam();
  if (type != memory_type::distributed || ranks < 2) {
    GTEST_SKIP() << "the exchange in slices is distributed memory's, over several ranks";
  }
  WHOLESTORE_REQUIRE_GPUS(ranks);
  run_on_gpus(ranks, [type = type, loc = loc](std::shared_ptr<bootstrap> bs) {
    // Ranks may cap their proposals differently; the largest proposal still wins everywhere.
    ::setenv("WHOLESTORE_GATHER_SLICES", bs->rank() == 0 ? "8" : "2", 1);
    gpu_rank g = start_rank(bs, type);
    cuda_stream stream;
    gather_options random_order, sorted;
    random_order.sort_host_threshold = std::numeric_limits<std::size_t>::max();
    sorted.sort_host_threshold = 0;
    // 512-byte rows, 205 MB: 300,000 entries ask for 146 MiB (4 slices), 20,000 for 1.
    table_layout lay{dtype::float32, 400000, 128, 129, 1, 31};
    auto wm = make_table(g.comm, lay, type, loc);
    const int rank = g.comm->rank();
    gather_case(wm, lay, dtype::float32, dtype::int64, rank == 0 ? 300000 : 20000, 7, random_order,
                g.device, stream.get());
    gather_case(wm, lay, dtype::float16, dtype::int32, rank == 0 ? 1000 : 300000, 8, sorted,
                g.device, stream.get());
  });
}

// Owners on one host write the rows a distributed gather asks of them straight into the asking
// rank's receive buffer (WHOLESTORE_GATHER_PEER=1, the default), buffers kept with the table and
// grown when a call asks for more; 0 keeps NCCL's exchange of rows.  Both paths, alternating on
// one table, against the reference: calls that grow the buffers, shrink, and leave one rank
// with nothing to ask while the other asks.
TEST_P(GpuGather, PeerWrittenRowsAndTheNcclExchangeMatchTheReference) {
  auto [ranks, type, loc] = GetParam();
  if (type != memory_type::distributed || ranks < 2) {
    GTEST_SKIP() << "owners write into peers' buffers for distributed memory, over several ranks";
  }
  WHOLESTORE_REQUIRE_GPUS(ranks);
  run_on_gpus(ranks, [type = type, loc = loc](std::shared_ptr<bootstrap> bs) {
    gpu_rank g = start_rank(bs, type);
    cuda_stream stream;
    table_layout lay{dtype::float32, 30011, 32, 35, 2, 43};
    auto wm = make_table(g.comm, lay, type, loc);
    const int rank = g.comm->rank();
    const std::size_t sizes[] = {100, 0, 40000, 3000, 90000, 1};
    std::uint64_t seed = 101;
    for (const char* setting : {"1", "0", "1"}) {
      ::setenv("WHOLESTORE_GATHER_PEER", setting, 1);
      for (std::size_t i = 0; i < std::size(sizes); ++i) {
        const std::size_t n = sizes[(i + static_cast<std::size_t>(rank)) % std::size(sizes)];
        gather_case(wm, lay, rank % 2 == 0 ? dtype::float32 : dtype::float16,
                    i % 2 == 0 ? dtype::int64 : dtype::int32, n, seed++, gather_options{}, g.device,
                    stream.get());
      }
    }
  });
}

// Two distributed gathers on two streams, the second issued without waiting for the first: the
// first's rows are still being placed from this rank's receive buffer when owners could write
// the second's into it.  Both outputs equal the reference.
TEST_P(GpuGather, BackToBackGathersOnTwoStreamsKeepTheirRows) {
  auto [ranks, type, loc] = GetParam();
  if (type != memory_type::distributed || ranks < 2) {
    GTEST_SKIP() << "owners write into peers' buffers for distributed memory, over several ranks";
  }
  WHOLESTORE_REQUIRE_GPUS(ranks);
  run_on_gpus(ranks, [type = type, loc = loc](std::shared_ptr<bootstrap> bs) {
    gpu_rank g = start_rank(bs, type);
    cuda_stream first, second;
    table_layout lay{dtype::float32, 200003, 64, 64, 0, 47};
    auto wm = make_table(g.comm, lay, type, loc);
    fill_table(wm, lay, first.get());
    const int rank = g.comm->rank();
    const std::size_t n = 300000;
    std::vector<std::vector<std::int64_t>> idx(2, std::vector<std::int64_t>(n));
    for (int k = 0; k < 2; ++k)
      for (std::size_t i = 0; i < n; ++i) idx[k][i] = hash3(900 + k, rank, i) % lay.rows;
    std::vector<device_buffer> d_idx, d_out;
    for (int k = 0; k < 2; ++k) {
      d_idx.emplace_back(n * 8, g.device);
      d_out.emplace_back(n * lay.cols * 4, g.device);
      WM_CUDA_TRY(copy_and_wait(d_idx[k].get(), idx[k].data(), n * 8, cudaMemcpyHostToDevice));
    }
    for (int round = 0; round < 2; ++round) {
      for (int k = 0; k < 2; ++k) {
        WM_CUDA_TRY(cudaMemset(d_out[k].get(), 0, n * lay.cols * 4));
        gather(lay.tensor(wm), index_array{d_idx[k].get(), dtype::int64, n},
               dense_matrix{d_out[k].get(), dtype::float32, n, lay.cols, lay.cols},
               gather_options{}, k == 0 ? first.get() : second.get());
      }
      WM_CUDA_TRY(cudaStreamSynchronize(first.get()));
      WM_CUDA_TRY(cudaStreamSynchronize(second.get()));
      // Compared as bytes: the reference table's random bits include NaNs.
      std::vector<unsigned char> out(n * lay.cols * 4), want(4);
      for (int k = 0; k < 2; ++k) {
        WM_CUDA_TRY(copy_and_wait(out.data(), d_out[k].get(), out.size(), cudaMemcpyDeviceToHost));
        for (std::size_t i = 0; i < n; ++i) {
          for (std::size_t c = 0; c < lay.cols; ++c) {
            lay.element(idx[k][i], c, want.data());
            ASSERT_EQ(std::memcmp(out.data() + (i * lay.cols + c) * 4, want.data(), 4), 0)
                << "gather " << k << " round " << round << " entry " << i << " col " << c;
          }
        }
      }
    }
    rank_barrier(*g.comm, first.get());
  });
}

namespace {

/// Rank 1 sets `variable` to `bad`, the others to `good`: a distributed gather fails on every
/// rank after the one exchange of counts (never one rank waiting), naming the variable and
/// rank 1, and on rank 1 the value.
void expect_bad_setting_fails_everywhere(const gpu_param& param, const char* variable,
                                         const char* bad, const char* good) {
  auto [ranks, type, loc] = param;
  run_on_gpus(ranks, [=, type = type, loc = loc](std::shared_ptr<bootstrap> bs) {
    ::setenv(variable, bs->rank() == 1 ? bad : good, 1);
    gpu_rank g = start_rank(bs, type);
    cuda_stream stream;
    table_layout lay{dtype::float32, 1000, 4, 4, 0, 5};
    auto wm = make_table(g.comm, lay, type, loc);
    fill_table(wm, lay, stream.get());
    std::vector<std::int64_t> idx(64, 7);
    device_buffer d_idx(64 * 8, g.device), d_out(64 * 16, g.device);
    WM_CUDA_TRY(copy_and_wait(d_idx.get(), idx.data(), 64 * 8, cudaMemcpyHostToDevice));
    try {
      gather(lay.tensor(wm), index_array{d_idx.get(), dtype::int64, 64},
             dense_matrix{d_out.get(), dtype::float32, 64, 4, 4}, gather_options{}, stream.get());
      ADD_FAILURE() << "no error for " << variable << "=" << bad << " on rank 1";
    } catch (const logic_error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(variable), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
      if (bs->rank() == 1) {
        EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
      }
    }
  });
}

}  // namespace

// A WHOLESTORE_GATHER_PEER other than 0 or 1 on one rank fails a distributed gather on every
// rank.
TEST_P(GpuGather, BadPeerSettingFailsOnEveryRank) {
  auto [ranks, type, loc] = GetParam();
  if (type != memory_type::distributed || ranks < 2) {
    GTEST_SKIP() << "owners write into peers' buffers for distributed memory, over several ranks";
  }
  WHOLESTORE_REQUIRE_GPUS(ranks);
  expect_bad_setting_fails_everywhere(GetParam(), "WHOLESTORE_GATHER_PEER", "yes", "1");
}

// A WHOLESTORE_GATHER_SLICES outside 1..8 on one rank fails a distributed gather on every rank.
TEST_P(GpuGather, BadSliceSettingFailsOnEveryRank) {
  auto [ranks, type, loc] = GetParam();
  if (type != memory_type::distributed || ranks < 2) {
    GTEST_SKIP() << "the exchange in slices is distributed memory's, over several ranks";
  }
  WHOLESTORE_REQUIRE_GPUS(ranks);
  expect_bad_setting_fails_everywhere(GetParam(), "WHOLESTORE_GATHER_SLICES", "9", "4");
}

TEST_P(GpuGather, OutOfRangeAndEmptyLists) {
  auto [ranks, type, loc] = GetParam();
  WHOLESTORE_REQUIRE_GPUS(ranks);
  run_on_gpus(ranks, [type = type, loc = loc](std::shared_ptr<bootstrap> bs) {
    gpu_rank g = start_rank(bs, type);
    cuda_stream stream;
    table_layout lay{dtype::float32, 1000, 4, 4, 0, 5};
    auto wm = make_table(g.comm, lay, type, loc);
    fill_table(wm, lay, stream.get());
    for (std::int64_t bad : {std::int64_t{1000}, std::int64_t{-3}}) {
      std::vector<std::int64_t> idx(64, 5);
      if (g.comm->rank() == 0) idx[42] = bad;
      device_buffer d_idx(64 * 8, g.device), d_out(64 * 16, g.device);
      WM_CUDA_TRY(copy_and_wait(d_idx.get(), idx.data(), 64 * 8, cudaMemcpyHostToDevice));
      WM_CUDA_TRY(cudaMemset(d_out.get(), 0x5A, 64 * 16));
      const bool expect_error = g.comm->rank() == 0 || type == memory_type::distributed;
      try {
        gather(lay.tensor(wm), index_array{d_idx.get(), dtype::int64, 64},
               dense_matrix{d_out.get(), dtype::float32, 64, 4, 4}, stream.get());
        EXPECT_FALSE(expect_error) << "no error for index " << bad;
      } catch (const logic_error& e) {
        EXPECT_TRUE(expect_error) << e.what();
        if (g.comm->rank() == 0) {
          EXPECT_NE(std::string(e.what()).find("index " + std::to_string(bad) + " at position 42"),
                    std::string::npos)
              << e.what();
        }
      }
      WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
      if (expect_error) {
        std::vector<unsigned char> out(64 * 16);
        WM_CUDA_TRY(copy_and_wait(out.data(), d_out.get(), out.size(), cudaMemcpyDeviceToHost));
        for (unsigned char b : out) ASSERT_EQ(b, 0x5A) << "output written despite the error";
      }
      rank_barrier(*g.comm, stream.get());
    }
    // Empty lists (null pointers) on every rank, and on one rank only.
    gather(lay.tensor(wm), index_array{nullptr, dtype::int32, 0},
           dense_matrix{nullptr, dtype::float16, 0, 4, 4}, stream.get());
    scatter(dense_matrix{nullptr, dtype::float16, 0, 4, 4}, index_array{nullptr, dtype::int32, 0},
            lay.tensor(wm), stream.get());
    const std::size_t n = g.comm->rank() == 0 ? 0 : 50;
    gather_options o;
    gather_case(wm, lay, dtype::bfloat16, dtype::int32, n, 3, o, g.device, stream.get());
    rank_barrier(*g.comm, stream.get());
  });
}

// The copy is enqueued behind the index check and skips itself when the check found a bad
// index (the host waits for the check only after the copy is queued).  Every path that copies
// behind a check: same-dtype and converting gathers, address-sorted host visiting, scatter
// with and without duplicate removal, converting scatter; long lists so that many blocks run,
// bad entries late in the list and more than one of them (the first is reported).  Nothing
// may change: the output of a gather, the table of a scatter.
TEST_P(GpuGather, BadIndexSkipsEveryCopyBehindTheCheck) {
  auto [ranks, type, loc] = GetParam();
  WHOLESTORE_REQUIRE_GPUS(ranks);
  if (type == memory_type::distributed) GTEST_SKIP() << "the exchange checks on every rank";
  run_on_gpus(ranks, [type = type, loc = loc](std::shared_ptr<bootstrap> bs) {
    gpu_rank g = start_rank(bs, type);
    cuda_stream stream;
    table_layout lay{dtype::float32, 3000, 8, 8, 0, 17};
    auto wm = make_table(g.comm, lay, type, loc);
    fill_table(wm, lay, stream.get());
    const std::vector<char> before = read_table(wm).second;
    const std::size_t n = 300000;
    const std::size_t first_bad = 250003;
    std::vector<std::int64_t> idx(n);
    for (std::size_t i = 0; i < n; ++i) idx[i] = hash3(99, g.comm->rank(), i) % lay.rows;
    const bool bad_here = g.comm->rank() == 0;
    if (bad_here) {
      idx[first_bad] = 3000;
      idx[first_bad + 7] = -1;
      idx[n - 1] = 1 << 30;
    }
    for (dtype it : {dtype::int64, dtype::int32}) {
      auto ib = index_bytes(idx, it);
      device_buffer d_idx(ib.size(), g.device);
      WM_CUDA_TRY(copy_and_wait(d_idx.get(), ib.data(), ib.size(), cudaMemcpyHostToDevice));
      const index_array indices{d_idx.get(), it, n};
      device_buffer d_rows(n * 8 * 4, g.device);
      auto expect_refused = [&](const char* what, auto&& call) {
        try {
          call();
          EXPECT_FALSE(bad_here) << what << ": no error";
        } catch (const logic_error& e) {
          EXPECT_TRUE(bad_here) << what << ": " << e.what();
          EXPECT_NE(
              std::string(e.what()).find("index 3000 at position " + std::to_string(first_bad)),
              std::string::npos)
              << what << ": " << e.what();
        }
        WM_CUDA_TRY(cudaStreamSynchronize(stream.get()));
      };
      for (dtype out_type : {dtype::float32, dtype::float16}) {
        for (std::size_t threshold : {std::size_t{0}, std::numeric_limits<std::size_t>::max()}) {
          gather_options o;
          o.sort_host_threshold = threshold;
          WM_CUDA_TRY(cudaMemset(d_rows.get(), 0x5A, n * 8 * 4));
          expect_refused("gather", [&] {
            gather(lay.tensor(wm), indices, dense_matrix{d_rows.get(), out_type, n, 8, 8}, o,
                   stream.get());
          });
          if (bad_here) {
            std::vector<unsigned char> out(n * 8 * dtype_size(out_type));
            WM_CUDA_TRY(
                copy_and_wait(out.data(), d_rows.get(), out.size(), cudaMemcpyDeviceToHost));
            for (std::size_t b = 0; b < out.size(); ++b)
              ASSERT_EQ(out[b], 0x5A) << "gather to " << dtype_name(out_type)
                                      << " wrote output byte " << b << " despite the error";
          }
        }
      }
      rank_barrier(*g.comm, stream.get());
      for (dtype in_type : {dtype::float32, dtype::float16}) {
        for (bool unique : {false, true}) {
          gather_options o;
          o.unique_indices = unique;
          WM_CUDA_TRY(cudaMemset(d_rows.get(), 0x11, n * 8 * 4));
          if (bad_here) {
            expect_refused("scatter", [&] {
              scatter(dense_matrix{d_rows.get(), in_type, n, 8, 8}, indices, lay.tensor(wm), o,
                      stream.get());
            });
          }
          rank_barrier(*g.comm, stream.get());
          ASSERT_TRUE(read_table(wm).second == before)
              << "scatter from " << dtype_name(in_type) << (unique ? " (unique)" : "")
              << " changed the table despite the error";
        }
      }
    }
  });
}

TEST_P(GpuGather, ScatterWithUniqueIndicesSkipsTheSort) {
  auto [ranks, type, loc] = GetParam();
  WHOLESTORE_REQUIRE_GPUS(ranks);
  run_on_gpus(ranks, [type = type, loc = loc](std::shared_ptr<bootstrap> bs) {
    gpu_rank g = start_rank(bs, type);
    cuda_stream stream;
    table_layout lay{dtype::float32, 4099, 64, 64, 0, 31};
    auto wm = make_table(g.comm, lay, type, loc);
    fill_table(wm, lay, stream.get());
    const int rank = g.comm->rank(), size = g.comm->size();
    // Every row of this rank's residue class once, in a shuffled order.
    std::vector<std::int64_t> idx;
    for (std::size_t r = rank; r < lay.rows; r += size) idx.push_back(static_cast<std::int64_t>(r));
    for (std::size_t i = idx.size(); i > 1; --i) std::swap(idx[i - 1], idx[hash3(5, rank, i) % i]);
    const std::size_t n = idx.size();
    std::vector<float> in(n * 64);
    for (std::size_t i = 0; i < n * 64; ++i) in[i] = static_cast<float>(idx[i / 64] * 64 + i % 64);
    device_buffer d_idx(n * 8, g.device), d_in(n * 64 * 4, g.device);
    WM_CUDA_TRY(copy_and_wait(d_idx.get(), idx.data(), n * 8, cudaMemcpyHostToDevice));
    WM_CUDA_TRY(copy_and_wait(d_in.get(), in.data(), n * 256, cudaMemcpyHostToDevice));
    gather_options o;
    o.unique_indices = true;
    o.sort_host_threshold = std::numeric_limits<std::size_t>::max();
    scatter(dense_matrix{d_in.get(), dtype::float32, n, 64, 64},
            index_array{d_idx.get(), dtype::int64, n}, lay.tensor(wm), o, stream.get());
    rank_barrier(*g.comm, stream.get());
    auto [first, bytes] = read_table(wm);
    for (std::size_t off = 0; off + 4 <= bytes.size(); off += 4) {
      float got;
      std::memcpy(&got, bytes.data() + off, 4);
      ASSERT_EQ(got, static_cast<float>((first + off) / 4)) << "byte " << first + off;
    }
    rank_barrier(*g.comm, stream.get());
  });
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, GpuGather,
    ::testing::Combine(::testing::Values(1, 2, 4),
                       ::testing::Values(memory_type::continuous, memory_type::chunked,
                                         memory_type::distributed),
                       ::testing::Values(memory_location::device, memory_location::host)),
    [](const auto& info) {
      return "gpus" + std::to_string(std::get<0>(info.param)) + "_" +
             memory_type_name(std::get<1>(info.param)) + "_" +
             memory_location_name(std::get<2>(info.param));
    });

}  // namespace wholestore_test
