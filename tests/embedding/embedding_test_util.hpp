/*
 * Helpers of the embedding tests: forked ranks over the host communicator, a deterministic
 * global batch with many duplicate indices and its per-rank slices, gradient and index
 * encodings, and reading a table's own rows back as bytes.
 *
 * Every test body that makes a table runs in forked children, so the test process never
 * registers host memory with CUDA (a child of a process that did could not use CUDA).
 */
#pragma once

#include "common/multiprocess.hpp"

#include <embedding/table.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/convert.hpp>
#include <wholememory/device.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace wholestore_test::embed {

using namespace wholestore::embedding;
using wholememory::dtype;
using wholememory::memory_location;
using wholememory::memory_type;

using comm_body = std::function<void(std::shared_ptr<wholememory::communicator>)>;

/// Runs `body` as `ranks` forked processes, each with a host communicator; expects every rank
/// to finish without a failure.
inline void run_ranks(int ranks, const comm_body& body) {
  fork_result result = fork_ranks(ranks, [&](std::shared_ptr<wholememory::bootstrap> bs) {
    body(wholememory::make_host_communicator(std::move(bs)));
  });
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(result.status[r], 0) << "rank " << r << " failed";
}

/// A communicator of one rank over this process alone (the in-process baseline tables).
inline std::shared_ptr<wholememory::communicator> solo_comm() {
  auto bs = wholememory::make_thread_bootstraps(1);
  return wholememory::make_host_communicator(
      std::shared_ptr<wholememory::bootstrap>(std::move(bs[0])));
}

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline std::uint64_t hash3(std::uint64_t a, std::uint64_t b, std::uint64_t c) {
  return mix(mix(mix(a) ^ b) ^ c);
}
/// Uniform in [-1, 1) from a hash.
inline float signed_unit(std::uint64_t h) {
  return static_cast<float>(static_cast<double>(h >> 11) * 0x1.0p-52 - 1.0);
}

/// One step's global batch: indices and float gradient values (n x dim).
struct batch {
  std::vector<std::int64_t> index;
  std::vector<float> grads;
};

/// n entries over `rows` rows: about half from a hot set of 4 rows (many duplicates), the rest
/// uniform; the first and last rows appear.  Gradients in [-1, 1) plus a bias of 0.25.
inline batch global_batch(std::uint64_t seed, int step, std::size_t n, std::size_t rows,
                          std::size_t dim) {
  batch b;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t h = hash3(seed, static_cast<std::uint64_t>(step), i);
    std::int64_t r = (h & 1) ? static_cast<std::int64_t>((h >> 8) % 4 * (rows / 4 + 1) % rows)
                             : static_cast<std::int64_t>((h >> 8) % rows);
    if (i == 3) r = 0;
    if (i == n / 2) r = static_cast<std::int64_t>(rows) - 1;
    b.index.push_back(r);
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < dim; ++c)
      b.grads.push_back(signed_unit(hash3(seed + 1000 + static_cast<std::uint64_t>(step), i, c)) +
                        0.25f);
  return b;
}

/// The sum of duplicate gradients as docs/architecture.md specifies it, written from the
/// spec: while more than 32 values remain, each group of 32 consecutive values (the last may
/// be shorter) becomes its left-to-right sum; the values left are summed left to right.
inline float tree_sum_reference(std::vector<float> v) {
  auto fold = [](const float* p, std::size_t n) {
    float acc = p[0];
    for (std::size_t i = 1; i < n; ++i) acc = acc + p[i];
    return acc;
  };
  while (v.size() > 32) {
    std::vector<float> next;
    for (std::size_t i = 0; i < v.size(); i += 32)
      next.push_back(fold(v.data() + i, std::min<std::size_t>(32, v.size() - i)));
    v.swap(next);
  }
  return fold(v.data(), v.size());
}

/// A batch in which row 2 r + 1 appears lengths[r] times, the entries in a fixed shuffled
/// order, with gradients of mixed magnitude (about 1 and about 1e4) so that the order of the
/// additions shows in the bits.  Rows: 2 * lengths.size() + 1.
inline batch long_run_batch(const std::vector<std::size_t>& lengths, std::size_t dim,
                            std::uint64_t seed) {
  batch b;
  for (std::size_t r = 0; r < lengths.size(); ++r)
    b.index.insert(b.index.end(), lengths[r], static_cast<std::int64_t>(2 * r + 1));
  for (std::size_t i = b.index.size(); i > 1; --i)
    std::swap(b.index[i - 1], b.index[hash3(seed, 7, i) % i]);
  for (std::size_t i = 0; i < b.index.size(); ++i) {
    for (std::size_t c = 0; c < dim; ++c) {
      const std::uint64_t h = hash3(seed, i, c);
      b.grads.push_back(signed_unit(h) * ((h & 16) ? 1e4f : 1.0f));
    }
  }
  return b;
}

/// Per row of long_run_batch and column: the expected weight after one SGD step at lr 1 from
/// zeros (0 - tree sum), and whether a plain left-to-right sum would give other bits.
struct long_run_expectation {
  std::vector<float> weights;  // rows x dim
  bool tree_differs_from_plain = false;
};

inline long_run_expectation expect_long_runs(const batch& b, std::size_t rows, std::size_t dim) {
  long_run_expectation e;
  e.weights.assign(rows * dim, 0.0f);
  for (std::size_t row = 0; row < rows; ++row) {
    for (std::size_t c = 0; c < dim; ++c) {
      std::vector<float> values;
      for (std::size_t i = 0; i < b.index.size(); ++i)
        if (static_cast<std::size_t>(b.index[i]) == row) values.push_back(b.grads[i * dim + c]);
      if (values.empty()) continue;
      float plain = values[0];
      for (std::size_t i = 1; i < values.size(); ++i) plain = plain + values[i];
      const float tree = tree_sum_reference(values);
      e.weights[row * dim + c] = 0.0f - tree;
      if (std::memcmp(&plain, &tree, sizeof(float)) != 0) e.tree_differs_from_plain = true;
    }
  }
  return e;
}

/// Run lengths around the tree's group size and its powers, and one hot row.
inline std::vector<std::size_t> long_run_lengths() {
  return {1, 2, 31, 32, 33, 64, 65, 1023, 1024, 1025, 1057, 40000};
}

/// Rank r's contiguous slice [first, last) of a global batch of n entries: uneven cuts, and
/// rank 1 gets nothing on odd steps when there are more than two ranks.
inline std::pair<std::size_t, std::size_t> slice(std::size_t n, int ranks, int r, int step) {
  std::vector<std::size_t> cut(ranks + 1);
  cut[0] = 0;
  cut[ranks] = n;
  for (int k = 1; k < ranks; ++k) cut[k] = n * (2 * k + (k % 2)) / (2 * ranks + 1);
  if (ranks > 2 && step % 2 == 1) cut[2] = cut[1];
  for (int k = 1; k <= ranks; ++k) cut[k] = std::max(cut[k], cut[k - 1]);
  return {cut[r], cut[r + 1]};
}

/// Indices encoded as int32 or int64 (one spare byte so an empty list has an address).
inline std::vector<char> index_bytes(const std::int64_t* idx, std::size_t n, dtype t) {
  std::vector<char> out(n * wholememory::dtype_size(t) + 1);
  for (std::size_t i = 0; i < n; ++i) {
    if (t == dtype::int32) {
      const auto v = static_cast<std::int32_t>(idx[i]);
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      std::memcpy(out.data() + 8 * i, &idx[i], 8);
    }
  }
  return out;
}

/// Float values stored as `t` (float32, float16, bfloat16), rows of `stride` elements.
inline std::vector<char> encode_floats(const float* v, std::size_t rows, std::size_t cols,
                                       std::size_t stride, dtype t) {
  const std::size_t e = wholememory::dtype_size(t);
  std::vector<char> out(rows * stride * e + 8, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) {
      char* dst = out.data() + (r * stride + c) * e;
      const float x = v[r * cols + c];
      if (t == dtype::float16) {
        auto h = wholememory::convert_element<wholememory::half_t>(x);
        std::memcpy(dst, &h, 2);
      } else if (t == dtype::bfloat16) {
        auto h = wholememory::convert_element<wholememory::bfloat16_t>(x);
        std::memcpy(dst, &h, 2);
      } else {
        std::memcpy(dst, &x, 4);
      }
    }
  }
  return out;
}

/// The value of one stored element of a float dtype, as a double.
inline double decode_float(dtype t, const void* p) {
  if (t == dtype::float16) {
    wholememory::half_t h;
    std::memcpy(&h, p, 2);
    return wholememory::float_element_to_double(h);
  }
  if (t == dtype::bfloat16) {
    wholememory::bfloat16_t h;
    std::memcpy(&h, p, 2);
    return wholememory::float_element_to_double(h);
  }
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

/// `value` rounded to dtype t (as the table stores it), as a double.
inline double round_to(dtype t, double value) {
  if (t == dtype::float16)
    return wholememory::float_element_to_double(
        wholememory::convert_element<wholememory::half_t>(value));
  if (t == dtype::bfloat16)
    return wholememory::float_element_to_double(
        wholememory::convert_element<wholememory::bfloat16_t>(value));
  return static_cast<double>(static_cast<float>(value));
}

/// The bytes of this rank's own part of an allocation (any location: copy_bytes).
inline std::vector<unsigned char> own_bytes(const wholememory::allocation& wm) {
  wholememory::part_info mine = wm.local_part();
  std::vector<unsigned char> out(mine.bytes);
  if (mine.bytes) wholememory::copy_bytes(out.data(), mine.ptr, mine.bytes);
  return out;
}

/// Bytes of rows [range.begin, range.end) of a continuous allocation with `row_bytes` per row.
inline std::vector<unsigned char> row_bytes_of(const wholememory::allocation& wm, row_range range,
                                               std::size_t row_bytes) {
  std::vector<unsigned char> out(range.size() * row_bytes);
  if (!out.empty()) {
    wholememory::copy_bytes(out.data(), static_cast<char*>(wm.data()) + range.begin * row_bytes,
                            out.size());
  }
  return out;
}

/// Everything trainable this rank owns: weights and state, own rows, as bytes.
struct own_content {
  std::vector<unsigned char> weights;
  std::vector<std::vector<unsigned char>> state;
  std::uint64_t step = 0;
  bool operator==(const own_content& o) const {
    return weights == o.weights && state == o.state && step == o.step;
  }
};

inline own_content own_content_of(const table& t) {
  own_content c;
  c.weights = own_bytes(t.weights_memory());
  for (const auto& s : t.state()) c.state.push_back(own_bytes(s));
  c.step = t.step();
  return c;
}

/// Rows `range` of a one-rank continuous table (the baseline), weights and state.
inline own_content rows_of(const table& base, row_range range) {
  own_content c;
  const std::size_t wb = base.dim() * wholememory::dtype_size(base.dtype());
  c.weights = row_bytes_of(base.weights_memory(), range, wb);
  for (std::size_t i = 0; i < base.state().size(); ++i)
    c.state.push_back(
        row_bytes_of(base.state()[i], range, base.state_tensor(i).cols * sizeof(float)));
  c.step = base.step();
  return c;
}

/// Index of the first differing byte of two equal-length byte strings, or -1.
inline long first_difference(const std::vector<unsigned char>& a,
                             const std::vector<unsigned char>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<long>(i);
  return -1;
}

inline const std::vector<optimizer_kind>& all_optimizers() {
  static const std::vector<optimizer_kind> v{
      optimizer_kind::sgd, optimizer_kind::adam, optimizer_kind::adagrad,
      optimizer_kind::rowwise_adagrad, optimizer_kind::rmsprop};
  return v;
}
inline const std::vector<dtype>& table_dtypes() {
  static const std::vector<dtype> v{dtype::float32, dtype::float16, dtype::bfloat16};
  return v;
}

/// Options of the optimizer tests: weight decay and a starting accumulator on some.
inline optimizer_options optimizer_for(optimizer_kind k, bool decay) {
  optimizer_options o;
  o.kind = k;
  o.weight_decay = decay ? 0.05f : 0.0f;
  if (k == optimizer_kind::adagrad || k == optimizer_kind::rowwise_adagrad) {
    o.initial_accumulator = decay ? 0.1f : 0.0f;
  }
  if (k == optimizer_kind::rmsprop) o.alpha = 0.9f;
  return o;
}

}  // namespace wholestore_test::embed
