// apply_gradients_host: the CPU path.  Route raw (index, gradient row) pairs to the owning
// rank through the host communicator, sort the received list stably by index, and run the
// shared element update (detail/optimizer_update.hpp) once per touched row, rows split over
// threads.
#include "dispatch.hpp"
#include "parallel.hpp"
#include "table_impl.hpp"

#include <embedding/detail/optimizer_update.hpp>
#include <embedding/table.hpp>
#include <wholememory/convert.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace wholestore::embedding {
namespace detail {
namespace {

using wholememory::convert_element;

template <typename IndexT>
bad_index first_bad_index(const IndexT* idx, std::size_t n, std::size_t rows) {
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<std::int64_t>(idx[i]);
    if (v < 0 || static_cast<std::uint64_t>(v) >= rows)
      return bad_index{static_cast<std::int64_t>(i), v};
  }
  return bad_index{};
}

template <typename IndexT>
std::int64_t index_at(const wholememory::index_array& a, std::size_t i) {
  return static_cast<std::int64_t>(static_cast<const IndexT*>(a.data)[i]);
}

std::int64_t index_at(const wholememory::index_array& a, std::size_t i) {
  return a.type == wholememory::dtype::int32 ? index_at<std::int32_t>(a, i)
                                             : index_at<std::int64_t>(a, i);
}

/// Copies gradient rows to `dst` as float32: row k of dst is row src_row[k] of `grads`.
void pack_gradients(const wholememory::dense_matrix& grads, const std::size_t* src_row,
                    std::size_t n, float* dst, unsigned threads) {
  const std::size_t dim = grads.cols;
  dispatch_float_type(grads.type, "gradients", [&](auto tag) {
    using G = decltype(tag);
    const G* g = static_cast<const G*>(grads.data);
    parallel_ranges(n, threads, 4096, [&](std::size_t b, std::size_t e) {
      for (std::size_t k = b; k < e; ++k) {
        const G* row = g + src_row[k] * grads.row_stride;
        for (std::size_t c = 0; c < dim; ++c) dst[k * dim + c] = convert_element<float>(row[c]);
      }
    });
  });
}

/// The received gradient rows of the owner: row k is grads[k * stride, + dim), float32.
struct gradient_rows {
  const float* grads = nullptr;
  std::size_t stride = 0;
  const float* row(std::size_t k) const { return grads + k * stride; }
};

/// out = rows item(first), ..., item(first + count - 1) summed left to right from the first.
template <typename Item>
void sum_left_to_right(float* out, std::size_t dim, const Item& item, std::size_t first,
                       std::size_t count) {
  const float* r0 = item(first);
  std::copy(r0, r0 + dim, out);
  for (std::size_t j = 1; j < count; ++j) {
    const float* r = item(first + j);
    for (std::size_t c = 0; c < dim; ++c) out[c] = out[c] + r[c];
  }
}

/// g = the tree sum (optimizer_update.hpp) of the run's rows item(0), ..., item(len - 1): the
/// same float operations in the same order as the GPU's levels of warps.
template <typename Item>
void tree_sum(float* g, std::size_t dim, const Item& item, std::size_t len,
              std::vector<float>& level, std::vector<float>& next) {
  const std::size_t fan = static_cast<std::size_t>(sum_fan_in);
  if (len <= fan) {
    sum_left_to_right(g, dim, item, 0, len);
    return;
  }
  std::size_t items = (len + fan - 1) / fan;
  level.resize(items * dim);
  for (std::size_t q = 0; q < items; ++q)
    sum_left_to_right(level.data() + q * dim, dim, item, q * fan, std::min(fan, len - q * fan));
  auto partial = [&](std::size_t q) { return level.data() + q * dim; };
  while (items > fan) {
    const std::size_t out = (items + fan - 1) / fan;
    next.resize(out * dim);
    for (std::size_t q = 0; q < out; ++q)
      sum_left_to_right(next.data() + q * dim, dim, partial, q * fan,
                        std::min(fan, items - q * fan));
    level.swap(next);
    items = out;
  }
  sum_left_to_right(g, dim, partial, 0, items);
}

/// Owner side: applies every run of equal rows of the sorted list to the own rows.  Sorted
/// entry k is received entry order[k], of local row rows[k]; run i is entries
/// [heads[i], heads[i + 1]).
template <typename TableT, optimizer_kind Kind>
void update_runs(const table_impl& t, const update_params& p, const gradient_rows& in,
                 const std::vector<std::uint32_t>& rows, const std::vector<std::uint32_t>& order,
                 const std::vector<std::size_t>& heads, unsigned threads) {
  const std::size_t dim = t.options.dim;
  const std::size_t scols = state_cols(Kind, dim);
  auto* weights = static_cast<TableT*>(t.weights.local_part().ptr);
  float* s0 = t.state.size() > 0 ? static_cast<float*>(t.state[0].local_part().ptr) : nullptr;
  float* s1 = t.state.size() > 1 ? static_cast<float*>(t.state[1].local_part().ptr) : nullptr;
  const std::size_t runs = heads.size() - 1;
  parallel_ranges(runs, threads, 64, [&](std::size_t first, std::size_t last) {
    std::vector<float> g(dim), level, next;
    for (std::size_t run = first; run < last; ++run) {
      const std::size_t b = heads[run], e = heads[run + 1];
      const std::size_t local = rows[b];
      auto item = [&](std::size_t j) { return in.row(order[b + j]); };
      tree_sum(g.data(), dim, item, e - b, level, next);
      TableT* w = weights + local * dim;
      for (std::size_t c = 0; c < dim; ++c)
        g[c] = apply_weight_decay(p, g[c], convert_element<float>(w[c]));
      float row_state = 0.0f;
      if constexpr (Kind == optimizer_kind::rowwise_adagrad) {
        // The warp's reduction: per-lane sequential sums, then the xor butterfly.
        float partial[reduction_lanes] = {};
        for (std::size_t c = 0; c < dim; ++c) {
          float& lane = partial[c % reduction_lanes];
          lane = lane + g[c] * g[c];
        }
        for (int off = reduction_lanes / 2; off >= 1; off /= 2) {
          float next_lanes[reduction_lanes];
          for (int l = 0; l < reduction_lanes; ++l) next_lanes[l] = partial[l] + partial[l ^ off];
          std::copy(next_lanes, next_lanes + reduction_lanes, partial);
        }
        row_state = rowwise_state(s0[local], partial[0], dim);
        s0[local] = row_state;
      }
      for (std::size_t c = 0; c < dim; ++c) {
        float* e0 = nullptr;
        float* e1 = nullptr;
        if constexpr (Kind != optimizer_kind::sgd && Kind != optimizer_kind::rowwise_adagrad) {
          e0 = s0 + local * scols + c;
        }
        if constexpr (Kind == optimizer_kind::adam) e1 = s1 + local * scols + c;
        const float updated =
            update_element<Kind>(p, convert_element<float>(w[c]), g[c], e0, e1, row_state);
        w[c] = convert_element<TableT>(updated);
      }
    }
  });
}

/// Sorts (rows, order) by row, stably (equal rows keep their received order): an LSD radix
/// sort on the bits rows below `bound` need, 8 bits a pass.  order starts as 0, 1, 2, ...
void sort_by_row(std::vector<std::uint32_t>& rows, std::vector<std::uint32_t>& order,
                 std::uint64_t bound) {
  const std::size_t m = rows.size();
  order.resize(m);
  for (std::size_t k = 0; k < m; ++k) order[k] = static_cast<std::uint32_t>(k);
  std::vector<std::uint32_t> rows_tmp(m), order_tmp(m);
  for (int shift = 0; shift < 32 && (bound - 1) >> shift != 0; shift += 8) {
    std::size_t count[257] = {};
    for (std::size_t k = 0; k < m; ++k) ++count[((rows[k] >> shift) & 0xffu) + 1];
    for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (std::size_t k = 0; k < m; ++k) {
      const std::size_t dst = count[(rows[k] >> shift) & 0xffu]++;
      rows_tmp[dst] = rows[k];
      order_tmp[dst] = order[k];
    }
    rows.swap(rows_tmp);
    order.swap(order_tmp);
  }
}

}  // namespace
}  // namespace detail

void table::apply_gradients_host(const wholememory::index_array& indices,
                                 const wholememory::dense_matrix& grads, float lr,
                                 unsigned threads) {
  WM_EXPECTS(impl_ != nullptr, "use of an empty embedding::table");
  detail::table_impl& t = *impl_;
  const char* op = "apply_gradients_host";
  const std::size_t ranks = static_cast<std::size_t>(t.ranks());
  const std::size_t n = indices.count, dim = t.options.dim;

  std::string error =
      detail::check_apply_arguments(t, indices, grads, lr, op, detail::apply_path::host);
  detail::bad_index bad;
  detail::host_workspace& ws = t.host;
  int* owner = nullptr;
  std::vector<std::size_t> send_counts(ranks, 0);
  if (error.empty()) {
    bad = indices.type == wholememory::dtype::int32
              ? detail::first_bad_index(static_cast<const std::int32_t*>(indices.data), n,
                                        t.options.rows)
              : detail::first_bad_index(static_cast<const std::int64_t*>(indices.data), n,
                                        t.options.rows);
    if (bad.position < 0) {
      owner = detail::scratch(ws.owner, n);
      for (std::size_t i = 0; i < n; ++i) {
        owner[i] = ranks == 1 ? 0 : detail::owner_of(t.row_begin, detail::index_at(indices, i));
        ++send_counts[owner[i]];
      }
    }
  }
  const detail::apply_counts counts = detail::agree_on_apply(t, op, error, bad, send_counts, lr);
  // Everything was checked on every rank: from here on the call changes the table.
  t.step += 1;
  const detail::update_params params = detail::make_update_params(t.options.optimizer, lr, t.step);

  // Bucket by owner, stably (counting sort), so each bucket keeps the caller's order.  The
  // lists live in the table's workspace (kept across calls, so their pages stay mapped).
  std::vector<std::size_t> send_displs = detail::displacements(counts.send);
  std::size_t* src_row = detail::scratch(ws.src_row, n);
  std::int64_t* send_index = detail::scratch(ws.send_index, n);
  {
    std::vector<std::size_t> fill = send_displs;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t k = fill[owner[i]]++;
      src_row[k] = i;
      send_index[k] = detail::index_at(indices, i);
    }
  }
  // One rank with float32 gradients: the update reads the caller's rows where they are.
  const bool packed = ranks > 1 || grads.type != wholememory::dtype::float32;
  float* send_grads = nullptr;
  if (packed) {
    send_grads = detail::scratch(ws.send_grads, n * dim);
    detail::pack_gradients(grads, src_row, n, send_grads, threads);
  }

  // The owner's list: global indices and their float32 gradient rows, in rank order and,
  // within a rank, in that rank's list order.
  std::size_t m = n;
  const std::int64_t* recv_index = send_index;
  const float* recv_grads = send_grads;
  if (ranks > 1) {
    // Raw rows to their owners: the owner receives them in rank order.
    m = counts.total_recv();
    const std::vector<std::size_t> recv_displs = detail::displacements(counts.recv);
    std::int64_t* in_index = detail::scratch(ws.recv_index, m);
    float* in_grads = detail::scratch(ws.recv_grads, m * dim);
    t.comm->alltoallv(send_index, counts.send.data(), send_displs.data(), in_index,
                      counts.recv.data(), recv_displs.data(), wholememory::dtype::int64, nullptr);
    auto scaled = [dim](std::vector<std::size_t> v) {
      for (auto& x : v) x *= dim;
      return v;
    };
    t.comm->alltoallv(send_grads, scaled(counts.send).data(), scaled(send_displs).data(), in_grads,
                      scaled(counts.recv).data(), scaled(recv_displs).data(),
                      wholememory::dtype::float32, nullptr);
    recv_index = in_index;
    recv_grads = in_grads;
  }

  if (m == 0) return;
  WM_EXPECTS(m <= UINT32_MAX, op << ": " << m << " gradient rows reached rank " << t.rank()
                                 << " in one call; at most 2^32 - 1 are supported");
  const row_range own = t.own();
  std::vector<std::uint32_t> rows(m), order;
  for (std::size_t k = 0; k < m; ++k)
    rows[k] = static_cast<std::uint32_t>(static_cast<std::size_t>(recv_index[k]) - own.begin);
  detail::sort_by_row(rows, order, std::max<std::uint64_t>(own.size(), 1));
  std::vector<std::size_t> heads;
  for (std::size_t k = 0; k < m; ++k)
    if (k == 0 || rows[k] != rows[k - 1]) heads.push_back(k);
  heads.push_back(m);

  const detail::gradient_rows received =
      packed ? detail::gradient_rows{recv_grads, dim}
             : detail::gradient_rows{static_cast<const float*>(grads.data), grads.row_stride};
  detail::dispatch_float_type(t.options.dtype, "the table dtype", [&](auto tag) {
    using T = decltype(tag);
    detail::dispatch_optimizer(t.options.optimizer.kind, [&](auto kind) {
      detail::update_runs<T, decltype(kind)::value>(t, params, received, rows, order, heads,
                                                    threads);
    });
  });
}

}  // namespace wholestore::embedding
