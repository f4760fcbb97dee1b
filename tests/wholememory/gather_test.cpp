// gather_host / scatter_host on host memory: every type, 1 to 4 ranks (forked processes and
// threads), every dtype pair of a class, int32 and int64 indices, against references computed
// here (gather_reference.hpp); odd widths, strides, column offsets, empty lists, zero-row
// tables, out-of-range indices with untouched output, duplicate indices, bad dtype pairs.
#include "common/multiprocess.hpp"
#include "wholememory/gather_reference.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/convert.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>
#include <wholememory/log.hpp>

#include <gtest/gtest.h>

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

using namespace wholememory;
using namespace gather_ref;

namespace {

enum class mode { processes, threads };

void run(mode how, int ranks, const wholestore_test::rank_body& body) {
  if (how == mode::processes) {
    auto result = wholestore_test::fork_ranks(ranks, body);
    for (int r = 0; r < ranks; ++r) EXPECT_EQ(result.status[r], 0) << "rank " << r << " failed";
  } else {
    wholestore_test::thread_ranks(ranks, body);
  }
}

::wholememory::allocation make_table(std::shared_ptr<communicator> comm, const table_layout& lay,
                                     memory_type type) {
  allocation_options opts;
  opts.granularity = lay.stride_bytes();
  return ::wholememory::allocation::create(comm, lay.bytes(), type, memory_location::host, opts);
}

/// Address of table byte `off` in this process, nullptr when not mapped here.
char* table_byte(const ::wholememory::allocation& wm, const chunked_view* view, std::size_t off) {
  if (wm.type() == memory_type::distributed) {
    part_info mine = wm.local_part();
    if (off < mine.offset || off >= mine.offset + mine.bytes) return nullptr;
    return static_cast<char*>(mine.ptr) + (off - mine.offset);
  }
  return static_cast<char*>(view->byte_ptr(off));
}

/// Rows [first, end) this rank owns.
std::pair<std::size_t, std::size_t> own_rows(const ::wholememory::allocation& wm,
                                             const table_layout& lay) {
  part_info mine = wm.local_part();
  std::size_t s = lay.stride_bytes();
  std::size_t b = std::min(first_row(mine.offset, s), lay.rows);
  std::size_t e = std::min(first_row(mine.offset + mine.bytes, s), lay.rows);
  return {b, std::max(b, e)};
}

/// Every rank writes its own rows (padding included), then all meet.
void fill_table(const ::wholememory::allocation& wm, const table_layout& lay) {
  chunked_view view{};
  if (wm.type() != memory_type::distributed) view = wm.host_view();
  auto [b, e] = own_rows(wm, lay);
  for (std::size_t r = b; r < e; ++r)
    for (std::size_t c = 0; c < lay.stride; ++c)
      lay.element(r, c, table_byte(wm, &view, r * lay.stride_bytes() + c * lay.elem()));
  wm.comm().barrier(nullptr);
}

std::vector<char> make_indices(const std::vector<std::int64_t>& idx, dtype t) {
  std::vector<char> out(idx.size() * dtype_size(t) + 1);
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (t == dtype::int32) {
      std::int32_t v = static_cast<std::int32_t>(idx[i]);
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      std::memcpy(out.data() + 8 * i, &idx[i], 8);
    }
  }
  return out;
}

/// Gathers random rows (with duplicates and both ends) and checks every element and the
/// untouched padding of the output.
void gather_case(const ::wholememory::allocation& wm, const table_layout& lay, dtype out_type,
                 dtype index_type, std::uint64_t seed, bool refill = true,
                 std::size_t count = static_cast<std::size_t>(-1)) {
  if (refill) fill_table(wm, lay);  // a scatter case may have changed it
  const int rank = wm.comm().rank();
  std::size_t n = lay.rows == 0 ? 0 : 29 + 7 * rank;
  if (count != static_cast<std::size_t>(-1)) n = count;
  std::vector<std::int64_t> idx(n);
  for (std::size_t i = 0; i < n; ++i) idx[i] = hash3(seed, rank, i) % lay.rows;
  if (n > 2) {
    idx[0] = static_cast<std::int64_t>(lay.rows) - 1;
    idx[n - 1] = 0;
    idx[n / 2] = idx[1];
  }
  auto idx_bytes = make_indices(idx, index_type);
  const std::size_t out_stride = lay.cols + 2, oe = dtype_size(out_type);
  std::vector<unsigned char> out(std::max<std::size_t>(n * out_stride * oe, 1), 0x5A);
  gather_host(lay.tensor(wm), index_array{idx_bytes.data(), index_type, n},
              dense_matrix{out.data(), out_type, n, lay.cols, out_stride});
  std::vector<unsigned char> elem(8), want(8);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t c = 0; c < out_stride; ++c) {
      const unsigned char* got = out.data() + (i * out_stride + c) * oe;
      if (c >= lay.cols) {
        for (std::size_t b = 0; b < oe; ++b)
          ASSERT_EQ(got[b], 0x5A) << "padding written at row " << i << " col " << c;
        continue;
      }
      lay.element(idx[i], c + lay.col_offset, elem.data());
      ref_convert(lay.type, elem.data(), out_type, want.data());
      ASSERT_TRUE(same_element(out_type, got, want.data()))
          << dtype_name(lay.type) << " -> " << dtype_name(out_type) << " index "
          << dtype_name(index_type) << ": entry " << i << " (row " << idx[i] << ") col " << c;
    }
  }
}

/// The rows rank r scatters, in list order: 23 rows with row % size == r, with repeats; or,
/// with `anywhere`, `count` rows anywhere in the table (repeats within and across ranks).
std::vector<std::int64_t> scatter_list(std::uint64_t seed, int r, int size, std::size_t rows,
                                       std::size_t count = 23, bool anywhere = false) {
  std::vector<std::int64_t> idx;
  if (anywhere) {
    for (std::size_t i = 0; i < count && rows > 0; ++i)
      idx.push_back(static_cast<std::int64_t>(hash3(seed, r, i) % rows));
    return idx;
  }
  std::size_t mine = rows / size + (static_cast<std::size_t>(r) < rows % size ? 1 : 0);
  if (mine == 0) return idx;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t k = hash3(seed, r, i) % std::min<std::size_t>(mine, i % 3 == 0 ? 3 : mine);
    idx.push_back(static_cast<std::int64_t>(k * size + r));
  }
  return idx;
}

/// Scatters a fresh dense matrix, then checks every row this rank can see: the last entry
/// written to a row wins, other rows and padding keep their contents.
void scatter_case(const ::wholememory::allocation& wm, const table_layout& lay, dtype in_type,
                  dtype index_type, std::uint64_t seed, bool refill = true, std::size_t count = 23,
                  bool anywhere = false) {
  if (refill) fill_table(wm, lay);  // a scatter case may have changed it
  const int rank = wm.comm().rank(), size = wm.comm().size();
  std::vector<std::int64_t> idx = scatter_list(seed, rank, size, lay.rows, count, anywhere);
  const std::size_t n = idx.size(), ie = dtype_size(in_type), in_stride = lay.cols + 1;
  std::vector<unsigned char> in(std::max<std::size_t>(n * in_stride * ie, 1));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < lay.cols; ++c)
      test_value(in_type, seed + 1000 + rank, i, c, in.data() + (i * in_stride + c) * ie);
  auto idx_bytes = make_indices(idx, index_type);
  scatter_host(dense_matrix{in.data(), in_type, n, lay.cols, in_stride},
               index_array{idx_bytes.data(), index_type, n}, lay.tensor(wm));
  wm.comm().barrier(nullptr);

  // Last writer of every row: (rank, entry).
  std::vector<std::pair<int, std::int64_t>> writer(lay.rows, {-1, -1});
  for (int r = 0; r < size; ++r) {
    auto list = scatter_list(seed, r, size, lay.rows, count, anywhere);
    for (std::size_t i = 0; i < list.size(); ++i)
      writer[list[i]] = {r, static_cast<std::int64_t>(i)};
  }
  chunked_view view{};
  if (wm.type() != memory_type::distributed) view = wm.host_view();
  std::vector<unsigned char> src(8), want(8);
  for (std::size_t row = 0; row < lay.rows; ++row) {
    for (std::size_t c = 0; c < lay.stride; ++c) {
      const char* got = table_byte(wm, &view, row * lay.stride_bytes() + c * lay.elem());
      if (got == nullptr) break;  // another rank's part of distributed memory
      bool in_view = c >= lay.col_offset && c < lay.col_offset + lay.cols;
      if (writer[row].first < 0 || !in_view) {
        lay.element(row, c, want.data());
      } else {
        test_value(in_type, seed + 1000 + writer[row].first, writer[row].second, c - lay.col_offset,
                   src.data());
        ref_convert(in_type, src.data(), lay.type, want.data());
      }
      ASSERT_TRUE(same_element(lay.type, got, want.data()))
          << dtype_name(in_type) << " -> " << dtype_name(lay.type) << " index "
          << dtype_name(index_type) << ": row " << row << " col " << c << " writer rank "
          << writer[row].first;
    }
  }
  wm.comm().barrier(nullptr);
}

class HostGather : public ::testing::TestWithParam<std::tuple<mode, int, memory_type>> {};

}  // namespace

TEST(Convert, HalfAndBfloat16MatchTheReference) {
  using namespace wholememory;
  // Every pattern decodes to the reference value.
  for (std::uint32_t p = 0; p < 65536; ++p) {
    auto h = static_cast<std::uint16_t>(p);
    double hv = half_value(h), bv = bf16_value(h);
    float hf = half_to_float(half_t{h}), bf = bfloat16_to_float(bfloat16_t{h});
    if (std::isnan(hv)) {
      ASSERT_TRUE(std::isnan(hf)) << p;
    } else {
      ASSERT_EQ(static_cast<double>(hf), hv) << p;
    }
    if (std::isnan(bv)) {
      ASSERT_TRUE(std::isnan(bf)) << p;
    } else {
      ASSERT_EQ(static_cast<double>(bf), bv) << p;
    }
  }
  // Midpoints between neighbours (exact ties), just above and below them, and random values.
  std::vector<double> values = {0.0,
                                -0.0,
                                65504.0,
                                65519.99,
                                65520.0,
                                1e10,
                                -1e10,
                                1e-9,
                                std::ldexp(1.0, -25),
                                std::ldexp(1.0, -24),
                                std::ldexp(3.0, -26),
                                3.3895313892515355e38,
                                3.4e38};
  for (std::uint32_t p = 0; p + 1 < 0x7c00; p += 37) {
    double a = half_value(static_cast<std::uint16_t>(p)),
           b = half_value(static_cast<std::uint16_t>(p + 1));
    values.push_back((a + b) / 2);
    values.push_back(std::nextafter((a + b) / 2, 0.0));
    values.push_back(-std::nextafter((a + b) / 2, 1e9));
  }
  for (std::uint32_t p = 0; p + 1 < 0x7f80; p += 41) {
    double a = bf16_value(static_cast<std::uint16_t>(p)),
           b = bf16_value(static_cast<std::uint16_t>(p + 1));
    values.push_back((a + b) / 2);
    values.push_back(-std::nextafter((a + b) / 2, 0.0));
  }
  for (std::uint64_t i = 0; i < 20000; ++i) {
    std::uint64_t bits = hash3(7, i, 0);
    double d;
    std::memcpy(&d, &bits, 8);
    if (!std::isfinite(d) || std::fabs(d) > 1e40 || std::fabs(d) < 1e-40) {
      d = std::ldexp(static_cast<double>(bits % 100000) - 50000, -static_cast<int>(i % 40));
    }
    values.push_back(d);
  }
  for (double v : values) {
    ASSERT_EQ(convert_element<half_t>(v).bits, ref_half(v)) << v;
    ASSERT_EQ(convert_element<bfloat16_t>(v).bits, ref_bf16(v)) << v;
    float f = static_cast<float>(v);
    ASSERT_EQ(convert_element<half_t>(f).bits, ref_half(f)) << f;
    ASSERT_EQ(convert_element<bfloat16_t>(f).bits, ref_bf16(f)) << f;
  }
  EXPECT_EQ(convert_element<half_t>(std::numeric_limits<float>::quiet_NaN()).bits & 0x7e00, 0x7e00);
  EXPECT_EQ(convert_element<bfloat16_t>(-INFINITY).bits, 0xff80);
  EXPECT_EQ(convert_element<std::int8_t>(std::int64_t{300}), static_cast<std::int8_t>(44));
  EXPECT_EQ(convert_element<std::int16_t>(std::int32_t{-70000}), static_cast<std::int16_t>(-4464));
}

TEST_P(HostGather, EveryDtypePairAgainstTheReference) {
  auto [how, ranks, type] = GetParam();
  run(how, ranks, [type = type](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    std::uint64_t seed = 11;
    for (const auto* group : {&float_types, &int_types}) {
      for (dtype table_type : *group) {
        // 7 columns at offset 1 in rows of 9: a view of part of each row.
        table_layout lay{table_type, 103, 7, 9, 1, seed++};
        auto wm = make_table(comm, lay, type);
        fill_table(wm, lay);
        for (dtype other : *group) {
          for (dtype index_type : {dtype::int32, dtype::int64}) {
            gather_case(wm, lay, other, index_type, seed++);
            scatter_case(wm, lay, other, index_type, seed++);
          }
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, HostGather,
    ::testing::Combine(::testing::Values(mode::processes, mode::threads),
                       ::testing::Values(1, 2, 3, 4),
                       ::testing::Values(memory_type::continuous, memory_type::chunked,
                                         memory_type::distributed)),
    [](const auto& info) {
      return std::string(std::get<0>(info.param) == mode::processes ? "processes" : "threads") +
             std::to_string(std::get<1>(info.param)) + "_" +
             memory_type_name(std::get<2>(info.param));
    });

class HostGatherEdges : public ::testing::TestWithParam<memory_type> {};

TEST_P(HostGatherEdges, OddWidthsStridesAndOffsets) {
  run(mode::threads, 3, [type = GetParam()](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    std::uint64_t seed = 500;
    for (dtype t : {dtype::int8, dtype::float16, dtype::float32, dtype::float64, dtype::uint8}) {
      for (std::size_t cols : {1, 3, 7, 33}) {
        for (std::size_t extra : {0, 3}) {
          for (std::size_t offset : {0, 2}) {
            table_layout lay{t, 37, cols, cols + extra + offset, offset, seed++};
            auto wm = make_table(comm, lay, type);
            fill_table(wm, lay);
            gather_case(wm, lay, t, dtype::int64, seed++);
            scatter_case(wm, lay, t, dtype::int32, seed++);
          }
        }
      }
    }
  });
}

TEST_P(HostGatherEdges, EmptyListsAndZeroRowTables) {
  run(mode::threads, 2, [type = GetParam()](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    table_layout lay{dtype::float32, 10, 4, 4, 0, 3};
    auto wm = make_table(comm, lay, type);
    fill_table(wm, lay);
    // Rank 0 passes no indices (null pointers), rank 1 some: the collective still works.
    if (comm->rank() == 0) {
      gather_host(lay.tensor(wm), index_array{nullptr, dtype::int64, 0},
                  dense_matrix{nullptr, dtype::float32, 0, 4, 4});
      scatter_host(dense_matrix{nullptr, dtype::float16, 0, 4, 4},
                   index_array{nullptr, dtype::int32, 0}, lay.tensor(wm));
    } else {
      gather_case(wm, lay, dtype::float16, dtype::int32, 9, false);
      std::vector<float> in(4, 1.5f);
      std::int64_t row = 9;
      scatter_host(dense_matrix{in.data(), dtype::float32, 1, 4, 4},
                   index_array{&row, dtype::int64, 1}, lay.tensor(wm));
    }
    comm->barrier(nullptr);

    table_layout none{dtype::int16, 0, 5, 6, 1, 4};
    auto empty = make_table(comm, none, type);
    gather_host(none.tensor(empty), index_array{nullptr, dtype::int64, 0},
                dense_matrix{nullptr, dtype::int32, 0, 5, 5});
    std::int64_t zero = 0;
    std::vector<std::int16_t> out(5, 77);
    EXPECT_THROW(gather_host(none.tensor(empty), index_array{&zero, dtype::int64, 1},
                             dense_matrix{out.data(), dtype::int16, 1, 5, 5}),
                 logic_error);
    EXPECT_EQ(out, std::vector<std::int16_t>(5, 77));
  });
}

TEST_P(HostGatherEdges, OutOfRangeIndicesThrowAndWriteNothing) {
  run(mode::processes, 2, [type = GetParam()](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    table_layout lay{dtype::float32, 1000, 3, 3, 0, 5};
    auto wm = make_table(comm, lay, type);
    fill_table(wm, lay);
    for (dtype it : {dtype::int32, dtype::int64}) {
      for (std::int64_t bad : {std::int64_t{1000}, std::int64_t{1234567}, std::int64_t{-1}}) {
        // Only rank 0 has the bad index, at position 42.
        std::vector<std::int64_t> idx(50, 7);
        if (comm->rank() == 0) idx[42] = bad;
        idx[45] = -5;  // a later bad one on rank 0; rank 1's first
        auto bytes = make_indices(idx, it);
        std::vector<float> out(50 * 3, 42.0f);
        try {
          gather_host(lay.tensor(wm), index_array{bytes.data(), it, 50},
                      dense_matrix{out.data(), dtype::float32, 50, 3, 3});
          ADD_FAILURE() << "no error for index " << bad;
        } catch (const logic_error& e) {
          std::string what = e.what();
          std::string want = comm->rank() == 0 ? "index " + std::to_string(bad) + " at position 42"
                                               : "index -5 at position 45";
          if (type == memory_type::distributed && comm->rank() == 1) want = "index -5";
          EXPECT_NE(what.find(want), std::string::npos) << what;
          EXPECT_NE(what.find("1000 rows"), std::string::npos) << what;
        }
        EXPECT_EQ(out, std::vector<float>(50 * 3, 42.0f)) << "output written despite the error";
        // Scatter: the table stays as it was.
        std::vector<float> in(50 * 3, -3.0f);
        EXPECT_THROW(scatter_host(dense_matrix{in.data(), dtype::float32, 50, 3, 3},
                                  index_array{bytes.data(), it, 50}, lay.tensor(wm)),
                     logic_error);
        comm->barrier(nullptr);
        std::vector<std::int64_t> all(1000);
        for (int i = 0; i < 1000; ++i) all[i] = i;
        std::vector<float> table(1000 * 3);
        gather_host(lay.tensor(wm), index_array{all.data(), dtype::int64, 1000},
                    dense_matrix{table.data(), dtype::float32, 1000, 3, 3});
        for (std::size_t r = 0; r < 1000; ++r)
          for (std::size_t c = 0; c < 3; ++c) {
            float want;
            lay.element(r, c, &want);
            ASSERT_TRUE(same_element(dtype::float32, &table[r * 3 + c], &want)) << r;
          }
      }
    }
  });
}

TEST_P(HostGatherEdges, DuplicatesAcrossRanksLeaveOneWrittenRow) {
  run(mode::threads, 3, [type = GetParam()](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    table_layout lay{dtype::int64, 16, 5, 5, 0, 6};
    auto wm = make_table(comm, lay, type);
    fill_table(wm, lay);
    // Every rank writes row 3 twice and row 15 once; each row of `in` is distinct.
    std::vector<std::int64_t> idx = {3, 15, 3};
    std::vector<std::int64_t> in(15);
    for (int i = 0; i < 15; ++i) in[i] = 1000 * comm->rank() + 100 * (i / 5) + i % 5;
    scatter_host(dense_matrix{in.data(), dtype::int64, 3, 5, 5},
                 index_array{idx.data(), dtype::int64, 3}, lay.tensor(wm));
    comm->barrier(nullptr);
    std::vector<std::int64_t> rows = {3, 15}, out(10);
    gather_host(lay.tensor(wm), index_array{rows.data(), dtype::int64, 2},
                dense_matrix{out.data(), dtype::int64, 2, 5, 5});
    for (int k = 0; k < 2; ++k) {
      std::int64_t base = out[5 * k] - out[5 * k] % 1000;  // the writing rank's 1000s
      int writer = static_cast<int>(base / 1000);
      ASSERT_GE(writer, 0);
      ASSERT_LT(writer, comm->size());
      // Row 3: the last of the writer's two entries (entry 2); row 15: entry 1.
      int entry = k == 0 ? 2 : 1;
      for (int c = 0; c < 5; ++c) EXPECT_EQ(out[5 * k + c], base + 100 * entry + c) << k;
    }
    comm->barrier(nullptr);
  });
}

TEST_P(HostGatherEdges, FloatIntPairsAndBadShapesAreRejected) {
  run(mode::threads, 1, [type = GetParam()](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    table_layout lay{dtype::float32, 8, 2, 2, 0, 7};
    auto wm = make_table(comm, lay, type);
    std::int64_t row = 1;
    std::vector<std::int32_t> out(2, 5);
    try {
      gather_host(lay.tensor(wm), index_array{&row, dtype::int64, 1},
                  dense_matrix{out.data(), dtype::int32, 1, 2, 2});
      ADD_FAILURE() << "float32 -> int32 accepted";
    } catch (const logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("cannot convert float32 to int32"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(out, std::vector<std::int32_t>(2, 5));
    std::vector<float> f(4);
    EXPECT_THROW(gather_host(lay.tensor(wm), index_array{&row, dtype::int64, 1},
                             dense_matrix{f.data(), dtype::float32, 2, 2, 2}),
                 logic_error);  // rows != count
    EXPECT_THROW(gather_host(lay.tensor(wm), index_array{&row, dtype::int16, 1},
                             dense_matrix{f.data(), dtype::float32, 1, 2, 2}),
                 logic_error);  // index type
    wm_tensor too_long = lay.tensor(wm);
    too_long.rows = 9;
    EXPECT_THROW(gather_host(too_long, index_array{&row, dtype::int64, 1},
                             dense_matrix{f.data(), dtype::float32, 1, 2, 2}),
                 logic_error);  // past the allocation
  });
}

INSTANTIATE_TEST_SUITE_P(AllTypes, HostGatherEdges,
                         ::testing::Values(memory_type::continuous, memory_type::chunked,
                                           memory_type::distributed),
                         [](const auto& info) { return memory_type_name(info.param); });

/// Runs `call` with the library's debug log captured; true when the log has `says`.
template <typename Fn>
bool log_says(const char* says, Fn&& call) {
  const log_level before = current_log_level();
  set_log_level(log_level::debug);
  ::testing::internal::CaptureStderr();
  call();
  const std::string log = ::testing::internal::GetCapturedStderr();
  set_log_level(before);
  return log.find(says) != std::string::npos;
}

/// True when a gather's owners copied into the asking ranks' buffers.
template <typename Fn>
bool owners_wrote(Fn&& gather) {
  return log_says("owners copy into the asking ranks' buffers", gather);
}

/// Runs `body(on, settings)` in three phases of WHOLESTORE_GATHER_PEER: 1 everywhere, 0 on rank
/// 0 only (which keeps the exchange everywhere), 1 everywhere again (the buffers made in the
/// first phase are used again).  `on`: whether every rank has the setting on.
template <typename Fn>
void for_each_peer_phase(int rank, Fn&& body) {
  const struct {
    const char *first, *others;  // rank 0's setting and the others'
  } phases[] = {{"1", "1"}, {"0", "1"}, {"1", "1"}};
  for (const auto& phase : phases) {
    ::setenv("WHOLESTORE_GATHER_PEER", rank == 0 ? phase.first : phase.others, 1);
    const bool on = std::string(phase.first) == "1" && std::string(phase.others) == "1";
    body(on, std::string(phase.first) + "/" + phase.others);
  }
}

// On distributed memory the owners copy the rows a gather asks of them straight into the
// asking rank's buffer (WHOLESTORE_GATHER_PEER=1, the default) once some rank asks for 32 MiB,
// buffers kept with the table and grown when a call asks for more; 0 on any rank keeps the
// exchange of rows everywhere.  Both paths alternating on one table against the reference:
// calls that make the buffers, grow them, fit in them, stay below 32 MiB, and leave a rank
// with nothing to ask while the others ask; 2 and 3 processes.  (The buffers outlive the
// phase with rank 0 at 0: the last phase writes into them again.)
TEST(HostGatherPeer, OwnersWriteIntoTheAskingRanksBuffersOrExchange) {
  for (int ranks : {2, 3}) {
    run(mode::processes, ranks, [](std::shared_ptr<bootstrap> bs) {
      auto comm = make_host_communicator(bs);
      const int rank = comm->rank();
      // 1000 of 1003 float64 columns at offset 2: rows of 8000 bytes, 32 MiB in 4,195 rows.
      table_layout lay{dtype::float64, 3007, 1000, 1003, 2, 31};
      const std::size_t row_bytes = 8000, threshold = std::size_t{32} << 20;
      auto wm = make_table(comm, lay, memory_type::distributed);
      fill_table(wm, lay);
      const std::size_t sizes[] = {0, 4500, 100, 5000, 1, 50};
      std::uint64_t seed = 77;
      for_each_peer_phase(rank, [&](bool on, const std::string& settings) {
        for (std::size_t i = 0; i < std::size(sizes); ++i) {
          std::size_t largest = 0;
          for (int r = 0; r < comm->size(); ++r)
            largest =
                std::max(largest, sizes[(i + static_cast<std::size_t>(r)) % std::size(sizes)]);
          const std::size_t n = sizes[(i + static_cast<std::size_t>(rank)) % std::size(sizes)];
          const bool wrote = owners_wrote([&] {
            gather_case(wm, lay, rank % 2 == 0 ? dtype::float64 : dtype::float32,
                        i % 2 == 0 ? dtype::int64 : dtype::int32, seed++, false, n);
          });
          EXPECT_EQ(wrote, on && largest * row_bytes >= threshold)
              << "rows " << n << ", largest " << largest << ", settings " << settings;
        }
      });
    });
  }
}

// Scatter on distributed memory the same way: each rank packs the rows for the others into its
// own buffer, and after a barrier every owner reads them from there and writes them in rank
// order, so the last occurrence in rank order wins (duplicates within and across ranks here).
// Both paths alternating on one table against the reference, above and below 32 MiB.
TEST(HostGatherPeer, ScatterOwnersReadFromTheSendersBuffersOrExchange) {
  for (int ranks : {2, 3}) {
    run(mode::processes, ranks, [](std::shared_ptr<bootstrap> bs) {
      auto comm = make_host_communicator(bs);
      const int rank = comm->rank();
      // Rows of 8,000 bytes (1000 float64 of 1001): 4,500 of them are 36 MB.
      table_layout lay{dtype::float64, 3007, 1000, 1001, 1, 61};
      auto wm = make_table(comm, lay, memory_type::distributed);
      std::uint64_t seed = 300;
      for_each_peer_phase(rank, [&](bool on, const std::string& settings) {
        for (std::size_t n : {std::size_t{4500}, std::size_t{40}}) {
          const bool read = log_says("owners read the rows from the sending ranks' buffers", [&] {
            // The reference takes every writer's values in this rank's input type: one type
            // on every rank (converting from float32 on the large calls).
            scatter_case(wm, lay, n == 40 ? dtype::float64 : dtype::float32,
                         n == 40 ? dtype::int32 : dtype::int64, seed++, true, n, true);
          });
          EXPECT_EQ(read, on && n == 4500) << n << " rows, settings " << settings;
        }
      });
    });
  }
}

std::vector<std::string> shm_entries() {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm"))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A rank killed after a gather that made the buffers: the survivor's next large gather ends in
// timeout_error within the timeout (never a hang), its unwinding frees the table and the
// buffers without a second error, and nothing is left in /dev/shm.
TEST(HostGatherPeer, KilledPeerFailsTheNextGatherWithinTheTimeout) {
  const auto shm_before = shm_entries();
  auto result = wholestore_test::fork_ranks(
      2,
      [](std::shared_ptr<bootstrap> bs) {
        auto comm = make_host_communicator(bs);
        table_layout lay{dtype::float64, 3007, 1000, 1000, 0, 13};
        auto wm = make_table(comm, lay, memory_type::distributed);
        fill_table(wm, lay);
        // 4,500 rows of 8,000 bytes a rank: 36 MB, over the 32 MiB from which owners copy.
        const std::size_t n = 4500;
        EXPECT_TRUE(
            owners_wrote([&] { gather_case(wm, lay, dtype::float64, dtype::int64, 3, false, n); }));
        if (comm->rank() == 1) ::raise(SIGKILL);
        const auto start = std::chrono::steady_clock::now();
        std::vector<std::int64_t> idx(n);
        for (std::size_t i = 0; i < n; ++i) idx[i] = static_cast<std::int64_t>(i % lay.rows);
        std::vector<double> out(n * lay.cols);
        try {
          gather_host(lay.tensor(wm), index_array{idx.data(), dtype::int64, n},
                      dense_matrix{out.data(), dtype::float64, n, lay.cols, lay.cols});
          ADD_FAILURE() << "a gather that needs a dead rank's rows succeeded";
        } catch (const timeout_error& e) {
          EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
        }
        const double waited =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        EXPECT_LT(waited, 2.0 + 1.0) << "the survivor waited for more than one timeout";
      },
      std::chrono::seconds(2));
  EXPECT_EQ(result.status[0], 0);
  EXPECT_EQ(result.status[1], 128 + SIGKILL);
  EXPECT_EQ(shm_entries(), shm_before);
}

// The same on ranks that are threads of one process (the setting left at its default).
TEST(HostGatherPeer, ThreadRanksShareTheirBuffers) {
  run(mode::threads, 3, [](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    table_layout lay{dtype::int32, 7001, 40, 40, 0, 41};
    auto wm = make_table(comm, lay, memory_type::distributed);
    fill_table(wm, lay);
    std::uint64_t seed = 5;
    // 250,000 rows of 160 bytes are 40 MB: over the 32 MiB from which owners copy.  (The log
    // that says which path ran is process-wide: not captured from thread ranks.)
    for (std::size_t n : {std::size_t{250000}, std::size_t{7}, std::size_t{300000}})
      gather_case(wm, lay, dtype::int64, dtype::int64, seed++, false,
                  n + static_cast<std::size_t>(comm->rank()));
  });
}

// A WHOLESTORE_GATHER_PEER other than 0 or 1 on one rank fails a distributed gather on every
// rank after the one exchange of counts, naming the variable and the rank (and, there, the
// value), and writes nothing.
TEST(HostGatherPeer, BadSettingFailsOnEveryRank) {
  run(mode::processes, 3, [](std::shared_ptr<bootstrap> bs) {
    ::setenv("WHOLESTORE_GATHER_PEER", bs->rank() == 1 ? "on" : "1", 1);
    auto comm = make_host_communicator(bs);
    table_layout lay{dtype::float32, 1000, 4, 4, 0, 5};
    auto wm = make_table(comm, lay, memory_type::distributed);
    fill_table(wm, lay);
    std::vector<std::int64_t> idx(64, 7);
    std::vector<float> out(64 * 4, -1.0f);
    try {
      gather_host(lay.tensor(wm), index_array{idx.data(), dtype::int64, 64},
                  dense_matrix{out.data(), dtype::float32, 64, 4, 4});
      ADD_FAILURE() << "no error for WHOLESTORE_GATHER_PEER=on on rank 1";
    } catch (const logic_error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("WHOLESTORE_GATHER_PEER"), std::string::npos) << msg;
      EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
      if (bs->rank() == 1) {
        EXPECT_NE(msg.find("'on'"), std::string::npos) << msg;
      }
    }
    for (float v : out) ASSERT_EQ(v, -1.0f);
  });
}

TEST(HostGatherThreads, LargeListsSplitOverThreads) {
  run(mode::threads, 1, [](std::shared_ptr<bootstrap> bs) {
    auto comm = make_host_communicator(bs);
    for (memory_type type : {memory_type::continuous, memory_type::chunked}) {
      table_layout lay{dtype::float32, 5000, 64, 64, 0, 21};
      auto wm = make_table(comm, lay, type);
      fill_table(wm, lay);
      const std::size_t n = 40000;  // 10 MiB of rows: several threads
      std::vector<std::int64_t> idx(n);
      for (std::size_t i = 0; i < n; ++i) idx[i] = hash3(3, i, 0) % lay.rows;
      std::vector<float> out(n * 64);
      gather_host(lay.tensor(wm), index_array{idx.data(), dtype::int64, n},
                  dense_matrix{out.data(), dtype::float32, n, 64, 64}, 4);
      for (std::size_t i = 0; i < n; i += 7) {
        float want;
        lay.element(idx[i], i % 64, &want);
        ASSERT_TRUE(same_element(dtype::float32, &out[i * 64 + i % 64], &want)) << i;
      }
      // Scatter the gathered rows back with a marker: the last entry of each row wins.
      for (std::size_t i = 0; i < n; ++i) out[i * 64] = static_cast<float>(i);
      scatter_host(dense_matrix{out.data(), dtype::float32, n, 64, 64},
                   index_array{idx.data(), dtype::int64, n}, lay.tensor(wm), 4);
      std::vector<std::int64_t> last(lay.rows, -1);
      for (std::size_t i = 0; i < n; ++i) last[idx[i]] = static_cast<std::int64_t>(i);
      chunked_view view = wm.host_view();
      for (std::size_t r = 0; r < lay.rows; ++r) {
        float got;
        std::memcpy(&got, view.byte_ptr(r * lay.stride_bytes()), 4);
        if (last[r] >= 0) {
          ASSERT_EQ(got, static_cast<float>(last[r])) << "row " << r;
        }
      }
    }
  });
}
