// Host-side steps shared by both apply_gradients paths: local argument checks, the one
// agreement round among ranks before anything changes, and the optimizer's float parameters.
#include "table_impl.hpp"

#include <embedding/detail/optimizer_update.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace wholestore::embedding::detail {

using wholememory::dtype;

update_params make_update_params(const optimizer_options& o, float lr, std::uint64_t t) {
  update_params p{};
  p.lr = lr;
  p.weight_decay = o.weight_decay;
  p.beta1 = o.beta1;
  p.one_minus_beta1 = static_cast<float>(1.0 - static_cast<double>(o.beta1));
  p.beta2 = o.beta2;
  p.one_minus_beta2 = static_cast<float>(1.0 - static_cast<double>(o.beta2));
  p.eps = o.eps;
  p.alpha = o.alpha;
  p.one_minus_alpha = static_cast<float>(1.0 - static_cast<double>(o.alpha));
  const double steps = static_cast<double>(t);
  const double bc1 = 1.0 - std::pow(static_cast<double>(o.beta1), steps);
  const double bc2 = 1.0 - std::pow(static_cast<double>(o.beta2), steps);
  p.adam_step_size = static_cast<float>(static_cast<double>(lr) / bc1);
  p.adam_inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  return p;
}

std::size_t apply_counts::total_recv() const {
  std::size_t total = 0;
  for (std::size_t c : recv) total += c;
  return total;
}

namespace {

/// The checks of the index list, the learning rate and the table that every apply call makes;
/// writes the first failure to `os` and returns false.
bool check_indices_and_table(const table_impl& t, const wholememory::index_array& indices, float lr,
                             const char* op, std::ostringstream& os) {
  if (indices.type != dtype::int32 && indices.type != dtype::int64) {
    os << op << ": indices must be int32 or int64, not " << wholememory::dtype_name(indices.type);
  } else if (indices.count > 0 && indices.data == nullptr) {
    os << op << ": " << indices.count << " indices at a null address";
  } else if (!std::isfinite(lr)) {
    os << op << ": the learning rate must be finite, got " << lr;
  } else if (t.own().size() > std::numeric_limits<std::uint32_t>::max()) {
    os << op << ": rank " << t.rank() << " owns " << t.own().size()
       << " rows; updates address at most 2^32 - 1 rows per rank (spread the table over more "
          "ranks)";
  } else {
    return true;
  }
  return false;
}

}  // namespace

std::string check_apply_arguments(const table_impl& t, const wholememory::index_array& indices,
                                  const wholememory::dense_matrix& grads, float lr, const char* op,
                                  apply_path path) {
  std::ostringstream os;
  const table_options& o = t.options;
  if (!check_indices_and_table(t, indices, lr, op, os)) return os.str();
  if (grads.type != dtype::float32 && grads.type != dtype::float16 &&
      grads.type != dtype::bfloat16) {
    os << op << ": gradients must be float32, float16 or bfloat16, not "
       << wholememory::dtype_name(grads.type);
  } else if (grads.rows != indices.count) {
    os << op << ": " << grads.rows << " gradient rows for " << indices.count << " indices";
  } else if (grads.cols != o.dim) {
    os << op << ": gradients have " << grads.cols << " columns, the table " << o.dim;
  } else if (grads.row_stride < grads.cols) {
    os << op << ": gradient row stride " << grads.row_stride << " is less than its " << grads.cols
       << " columns";
  } else if (grads.rows > 0 && grads.data == nullptr) {
    os << op << ": " << grads.rows << " gradient rows at a null address";
  } else if (reinterpret_cast<std::uintptr_t>(grads.data) % wholememory::dtype_size(grads.type) !=
             0) {
    os << op << ": the gradients are not aligned to their " << wholememory::dtype_size(grads.type)
       << "-byte elements";
  } else if (path == apply_path::host &&
             t.weights.location() != wholememory::memory_location::host) {
    os << op << " needs a host-location table, this one is in device memory; use apply_gradients";
  } else if (path == apply_path::host && t.ranks() > 1 &&
             t.comm->get_backend() != wholememory::backend::host) {
    os << op << " exchanges rows through the host backend; this table's communicator is "
       << wholememory::backend_name(t.comm->get_backend()) << " (use apply_gradients)";
  }
  return os.str();
}

std::string check_scaled_arguments(const table_impl& t, const wholememory::index_array& indices,
                                   const scaled_rows& grads, float lr, const char* op) {
  std::ostringstream os;
  const table_options& o = t.options;
  const wholememory::index_array& src = grads.source_rows;
  if (!check_indices_and_table(t, indices, lr, op, os)) return os.str();
  if (grads.source == nullptr || !*grads.source) {
    os << op << ": no source table (scaled_rows::source is " << (grads.source ? "empty" : "null")
       << ")";
  } else if (&grads.source->weights_memory() == &t.weights) {
    os << op << ": the source table is the table being updated (its rows would change while "
       << "they are read)";
  } else if (grads.source->dtype() != dtype::float32) {
    os << op << ": the source table must be float32, it is "
       << wholememory::dtype_name(grads.source->dtype());
  } else if (grads.source->dim() != o.dim) {
    os << op << ": the source table has dim " << grads.source->dim() << ", this table " << o.dim;
  } else if (grads.source->options().type == wholememory::memory_type::distributed) {
    os << op << ": the source table is in distributed memory, whose rows this rank cannot "
       << "read in place; use apply_gradients with the gradient rows";
  } else if (grads.source->comm().size() != t.ranks()) {
    os << op << ": the source table is spread over " << grads.source->comm().size()
       << " rank(s), this table over " << t.ranks() << "; they must share their ranks";
  } else if (t.ranks() > 1 && grads.source->comm().topology().num_hosts > 1) {
    os << op << ": the source table's ranks span " << grads.source->comm().topology().num_hosts
       << " hosts, so its rows are not all mapped on this rank; use apply_gradients with the "
          "gradient rows";
  } else if (grads.group == 0) {
    os << op << ": scaled_rows::group must be at least 1";
  } else if (src.type != dtype::int32 && src.type != dtype::int64) {
    os << op << ": source rows must be int32 or int64, not " << wholememory::dtype_name(src.type);
  } else if (src.count > indices.count / grads.group || src.count * grads.group != indices.count) {
    os << op << ": " << src.count << " source rows x group " << grads.group << " for "
       << indices.count << " indices";
  } else if (src.count > 0 && src.data == nullptr) {
    os << op << ": " << src.count << " source rows at a null address";
  } else if (indices.count > 0 && grads.coefs == nullptr) {
    os << op << ": " << indices.count << " coefficients at a null address";
  } else if (reinterpret_cast<std::uintptr_t>(grads.coefs) % sizeof(float) != 0) {
    os << op << ": the coefficients are not aligned to their 4-byte elements";
  }
  return os.str();
}

std::vector<std::int64_t> encode_apply_record(const table_impl& t, const std::string& local_error,
                                              bad_index bad,
                                              const std::vector<std::size_t>& send_counts,
                                              float lr) {
  const std::size_t ranks = static_cast<std::size_t>(t.ranks());
  std::vector<std::int64_t> mine(apply_record_fields + ranks, 0);
  mine[apply_record_error] = !local_error.empty() ? 2 : (bad.position >= 0 ? 1 : 0);
  mine[apply_record_bad_position] = bad.position;
  mine[apply_record_bad_value] = bad.value;
  mine[apply_record_step] = static_cast<std::int64_t>(t.step);
  mine[apply_record_lr_bits] = lr_bits(lr);
  if (local_error.empty() && bad.position < 0) {
    for (std::size_t r = 0; r < ranks; ++r)
      mine[apply_record_fields + r] = static_cast<std::int64_t>(send_counts[r]);
  }
  return mine;
}

std::int64_t lr_bits(float lr) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &lr, sizeof(lr));
  return bits;
}

apply_counts decide_apply(const table_impl& t, const char* op, const std::string& local_error,
                          const std::vector<std::int64_t>& all,
                          const std::vector<std::size_t>& send_counts) {
  const std::size_t ranks = static_cast<std::size_t>(t.ranks());
  const std::size_t width = apply_record_fields + ranks;
  const std::size_t me = static_cast<std::size_t>(t.rank());
  if (!local_error.empty()) WM_FAIL(wholememory::logic_error, local_error);
  const std::string rows_text = std::to_string(t.options.rows);
  for (std::size_t r = 0; r < ranks; ++r) {
    const std::int64_t* rec = all.data() + r * width;
    if (rec[apply_record_error] == 0) continue;
    if (rec[apply_record_error] == 3 && r == me) {
      WM_FAIL(wholememory::logic_error, op << ": source row " << rec[apply_record_bad_value]
                                           << " at position " << rec[apply_record_bad_position]
                                           << " is outside the source table; nothing was changed");
    }
    if (rec[apply_record_error] >= 2) {
      WM_FAIL(wholememory::logic_error, op << ": rank " << r << " passed invalid arguments (its "
                                           << "error names them); nothing was changed");
    }
    if (r == me) {
      WM_FAIL(wholememory::logic_error, op << ": index " << rec[apply_record_bad_value]
                                           << " at position " << rec[apply_record_bad_position]
                                           << " is outside the table of " << rows_text
                                           << " rows; nothing was changed on any rank");
    }
    WM_FAIL(wholememory::logic_error,
            op << ": rank " << r << " passed index " << rec[apply_record_bad_value]
               << " at position " << rec[apply_record_bad_position] << ", outside the table of "
               << rows_text << " rows; nothing was changed on any rank");
  }
  for (std::size_t r = 1; r < ranks; ++r) {
    const std::int64_t* rec = all.data() + r * width;
    if (rec[apply_record_step] != all[apply_record_step]) {
      WM_FAIL(wholememory::mismatch_error,
              op << ": rank " << r << " is at step " << rec[apply_record_step]
                 << ", rank 0 at step " << all[apply_record_step]
                 << "; every rank must call apply_gradients equally often");
    }
    if (rec[apply_record_lr_bits] != all[apply_record_lr_bits]) {
      float theirs, ours;
      const auto a = static_cast<std::uint32_t>(rec[apply_record_lr_bits]);
      const auto b = static_cast<std::uint32_t>(all[apply_record_lr_bits]);
      std::memcpy(&theirs, &a, sizeof(float));
      std::memcpy(&ours, &b, sizeof(float));
      WM_FAIL(wholememory::mismatch_error, op << ": rank " << r << " passed learning rate "
                                              << theirs << ", rank 0 " << ours
                                              << "; every rank must pass the same");
    }
  }
  apply_counts counts;
  counts.send = send_counts;
  counts.recv.resize(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    counts.recv[r] = static_cast<std::size_t>(all[r * width + apply_record_fields + me]);
    std::size_t sent = 0;
    for (std::size_t d = 0; d < ranks; ++d)
      sent += static_cast<std::size_t>(all[r * width + apply_record_fields + d]);
    counts.sent_by.push_back(sent);
    counts.most_sent = std::max(counts.most_sent, sent);
  }
  return counts;
}

apply_counts agree_on_apply(const table_impl& t, const char* op, const std::string& local_error,
                            bad_index bad, const std::vector<std::size_t>& send_counts, float lr) {
  const std::vector<std::int64_t> mine = encode_apply_record(t, local_error, bad, send_counts, lr);
  std::vector<std::int64_t> all = mine;
  if (t.ranks() > 1) {  // no round trip through the bootstrap's store for a job of one
    all.resize(mine.size() * static_cast<std::size_t>(t.ranks()));
    t.comm->get_bootstrap().allgather(mine.data(), all.data(), mine.size() * sizeof(std::int64_t));
  }
  return decide_apply(t, op, local_error, all, send_counts);
}

}  // namespace wholestore::embedding::detail
