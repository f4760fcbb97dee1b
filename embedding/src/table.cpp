// The table object: option agreement, allocation with the weights' row split, the
// counter-based initialisation, and the gather/scatter based accessors.
#include "dispatch.hpp"
#include "parallel.hpp"
#include "table_impl.hpp"

#include <embedding/detail/optimizer_update.hpp>
#include <embedding/table.hpp>
#include <wholememory/convert.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>
#include <wholememory/log.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <sstream>
#include <utility>

namespace wholestore::embedding {

using wholememory::dtype;
using wholememory::logic_error;

const char* init_kind_name(init_options::kind k) {
  switch (k) {
    case init_options::zeros:
      return "zeros";
    case init_options::uniform:
      return "uniform";
    case init_options::normal:
      return "normal";
  }
  return "unknown";
}

init_options::kind parse_init_kind(const std::string& name) {
  for (auto k : {init_options::zeros, init_options::uniform, init_options::normal}) {
    if (name == init_kind_name(k)) return k;
  }
  WM_FAIL(logic_error, "unknown init method '" << name << "' (zeros, uniform, normal)");
}

const char* optimizer_name(optimizer_kind k) {
  switch (k) {
    case optimizer_kind::sgd:
      return "sgd";
    case optimizer_kind::adam:
      return "adam";
    case optimizer_kind::adagrad:
      return "adagrad";
    case optimizer_kind::rowwise_adagrad:
      return "rowwise_adagrad";
    case optimizer_kind::rmsprop:
      return "rmsprop";
  }
  return "unknown";
}

optimizer_kind parse_optimizer(const std::string& name) {
  for (auto k : {optimizer_kind::sgd, optimizer_kind::adam, optimizer_kind::adagrad,
                 optimizer_kind::rowwise_adagrad, optimizer_kind::rmsprop}) {
    if (name == optimizer_name(k)) return k;
  }
  WM_FAIL(logic_error,
          "unknown optimizer '" << name << "' (sgd, adam, adagrad, rowwise_adagrad, rmsprop)");
}

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Draw `k` of element (row, col): 64 bits keyed by (seed, row, col, k) alone.
std::uint64_t element_bits(std::uint64_t seed, std::uint64_t row, std::uint64_t col, unsigned k) {
  std::uint64_t h = splitmix64(seed);
  h = splitmix64(h ^ row);
  return splitmix64(h ^ (2 * col + k));
}

/// Uniform in [0, 1) from the top 53 bits.
double unit_interval(std::uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

}  // namespace

double init_value(const init_options& init, std::uint64_t row, std::uint64_t col) {
  switch (init.method) {
    case init_options::zeros:
      return 0.0;
    case init_options::uniform:
      return init.a + (init.b - init.a) * unit_interval(element_bits(init.seed, row, col, 0));
    case init_options::normal: {
      // u1 in (0, 1] keeps the logarithm finite.
      const double u1 =
          static_cast<double>((element_bits(init.seed, row, col, 0) >> 11) + 1) * 0x1.0p-53;
      const double u2 = unit_interval(element_bits(init.seed, row, col, 1));
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      return init.mean + init.std * z;
    }
  }
  WM_FAIL(logic_error, "unknown init method " << static_cast<int>(init.method));
}

namespace detail {

int owner_of(const std::vector<std::int64_t>& row_begin, std::int64_t row) {
  auto it = std::upper_bound(row_begin.begin(), row_begin.end() - 1, row);
  return static_cast<int>(it - row_begin.begin()) - 1;
}

std::vector<std::size_t> displacements(const std::vector<std::size_t>& counts) {
  std::vector<std::size_t> d(counts.size(), 0);
  for (std::size_t r = 1; r < counts.size(); ++r) d[r] = d[r - 1] + counts[r - 1];
  return d;
}

namespace {

/// How a published option field is shown in a mismatch message.
enum class field_kind { integer, floating, dtype, memory_type, location, init, optimizer };

/// One field of table_options as every rank publishes it: 64 bits (doubles by their bits).
struct option_field {
  const char* name;
  field_kind kind;
  std::uint64_t bits;
};

template <typename T>
option_field field(const char* name, field_kind kind, T value) {
  std::uint64_t bits = 0;
  if constexpr (std::is_floating_point<T>::value) {
    const double d = static_cast<double>(value);
    std::memcpy(&bits, &d, sizeof(d));
  } else {
    bits = static_cast<std::uint64_t>(value);
  }
  return option_field{name, kind, bits};
}

std::vector<option_field> option_fields(const table_options& o) {
  const optimizer_options& op = o.optimizer;
  return {
      field("rows", field_kind::integer, o.rows),
      field("dim", field_kind::integer, o.dim),
      field("dtype", field_kind::dtype, static_cast<int>(o.dtype)),
      field("type", field_kind::memory_type, static_cast<int>(o.type)),
      field("location", field_kind::location, static_cast<int>(o.location)),
      field("init.method", field_kind::init, static_cast<int>(o.init.method)),
      field("init.a", field_kind::floating, o.init.a),
      field("init.b", field_kind::floating, o.init.b),
      field("init.mean", field_kind::floating, o.init.mean),
      field("init.std", field_kind::floating, o.init.std),
      field("init.seed", field_kind::integer, o.init.seed),
      field("optimizer.kind", field_kind::optimizer, static_cast<int>(op.kind)),
      field("optimizer.weight_decay", field_kind::floating, op.weight_decay),
      field("optimizer.beta1", field_kind::floating, op.beta1),
      field("optimizer.beta2", field_kind::floating, op.beta2),
      field("optimizer.eps", field_kind::floating, op.eps),
      field("optimizer.alpha", field_kind::floating, op.alpha),
      field("optimizer.initial_accumulator", field_kind::floating, op.initial_accumulator),
      field("exchange", field_kind::integer, static_cast<int>(o.exchange)),
  };
}

std::string field_text(field_kind kind, std::uint64_t bits) {
  std::ostringstream os;
  const int v = static_cast<int>(bits);
  switch (kind) {
    case field_kind::integer:
      os << bits;
      break;
    case field_kind::floating: {
      double d;
      std::memcpy(&d, &bits, sizeof(d));
      os.precision(9);
      os << d;
      break;
    }
    case field_kind::dtype:
      os << wholememory::dtype_name(static_cast<dtype>(v));
      break;
    case field_kind::memory_type:
      os << wholememory::memory_type_name(static_cast<wholememory::memory_type>(v));
      break;
    case field_kind::location:
      os << wholememory::memory_location_name(static_cast<wholememory::memory_location>(v));
      break;
    case field_kind::init:
      os << init_kind_name(static_cast<init_options::kind>(v));
      break;
    case field_kind::optimizer:
      os << optimizer_name(static_cast<optimizer_kind>(v));
      break;
  }
  return os.str();
}

/// Every rank publishes its options (one allgather over the bootstrap); any difference from
/// rank 0 throws mismatch_error naming the field and both values, on every rank.
void agree_on_options(wholememory::communicator& comm, const table_options& o) {
  const std::vector<option_field> mine = option_fields(o);
  const std::size_t n = mine.size();
  std::vector<std::uint64_t> send(n), all(n * static_cast<std::size_t>(comm.size()));
  for (std::size_t i = 0; i < n; ++i) send[i] = mine[i].bits;
  comm.get_bootstrap().allgather(send.data(), all.data(), n * sizeof(std::uint64_t));
  for (int r = 1; r < comm.size(); ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      if (all[r * n + i] == all[i]) continue;
      WM_FAIL(wholememory::mismatch_error,
              "embedding::table::create: rank "
                  << r << " passed " << mine[i].name << " = "
                  << field_text(mine[i].kind, all[r * n + i]) << ", rank 0 passed "
                  << field_text(mine[i].kind, all[i]) << "; every rank must pass the same options");
    }
  }
}

void validate_options(const table_options& o) {
  WM_EXPECTS(o.dim >= 1, "embedding::table::create: dim must be at least 1, got " << o.dim);
  WM_EXPECTS(o.dtype == dtype::float32 || o.dtype == dtype::float16 || o.dtype == dtype::bfloat16,
             "embedding::table::create: dtype must be float32, float16 or bfloat16, not "
                 << wholememory::dtype_name(o.dtype));
  WM_EXPECTS(o.dim <= std::numeric_limits<std::size_t>::max() / 8 &&
                 o.rows <= std::numeric_limits<std::size_t>::max() / (o.dim * 8),
             "embedding::table::create: " << o.rows << " x " << o.dim
                                          << " elements overflow the address space");
  const init_options& in = o.init;
  WM_EXPECTS(in.method == init_options::zeros || in.method == init_options::uniform ||
                 in.method == init_options::normal,
             "embedding::table::create: unknown init method " << static_cast<int>(in.method));
  if (in.method == init_options::uniform) {
    WM_EXPECTS(std::isfinite(in.a) && std::isfinite(in.b) && in.a <= in.b,
               "embedding::table::create: uniform init needs finite bounds a <= b, got a = "
                   << in.a << ", b = " << in.b);
  }
  if (in.method == init_options::normal) {
    WM_EXPECTS(std::isfinite(in.mean) && std::isfinite(in.std) && in.std >= 0,
               "embedding::table::create: normal init needs a finite mean and std >= 0, got mean "
                   << in.mean << ", std " << in.std);
  }
  const optimizer_options& op = o.optimizer;
  WM_EXPECTS(static_cast<int>(op.kind) >= 0 && static_cast<int>(op.kind) <= 4,
             "embedding::table::create: unknown optimizer kind " << static_cast<int>(op.kind));
  WM_EXPECTS(std::isfinite(op.weight_decay),
             "embedding::table::create: weight_decay must be finite, got " << op.weight_decay);
  WM_EXPECTS(op.beta1 >= 0 && op.beta1 < 1 && op.beta2 >= 0 && op.beta2 < 1,
             "embedding::table::create: Adam's beta1 and beta2 must be in [0, 1), got "
                 << op.beta1 << " and " << op.beta2);
  WM_EXPECTS(op.eps >= 0 && std::isfinite(op.eps),
             "embedding::table::create: eps must be finite and >= 0, got " << op.eps);
  WM_EXPECTS(op.alpha >= 0 && op.alpha <= 1,
             "embedding::table::create: RMSProp's alpha must be in [0, 1], got " << op.alpha);
  WM_EXPECTS(op.initial_accumulator >= 0 && std::isfinite(op.initial_accumulator),
             "embedding::table::create: initial_accumulator must be finite and >= 0, got "
                 << op.initial_accumulator);
}

/// Rows generated per copy during initialisation (bounded host staging).
constexpr std::size_t init_chunk_bytes = std::size_t{8} << 20;

/// Writes this rank's rows [own.begin, own.end) of an array of `cols` elements of T per row,
/// value(r, c) each, through the own part pointer (copy_bytes, so device parts work too).
template <typename T, typename Value>
void fill_own_rows(const wholememory::allocation& wm, row_range own, std::size_t cols,
                   Value value) {
  if (own.size() == 0 || cols == 0) return;
  wholememory::part_info part = wm.local_part();
  const std::size_t row_bytes = cols * sizeof(T);
  const std::size_t chunk_rows = std::max<std::size_t>(1, init_chunk_bytes / row_bytes);
  std::vector<T> buffer(std::min(chunk_rows, own.size()) * cols);
  const unsigned threads = wholememory::default_host_threads();
  for (std::size_t first = own.begin; first < own.end; first += chunk_rows) {
    const std::size_t n = std::min(chunk_rows, own.end - first);
    parallel_ranges(n, threads, 1024, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i)
        for (std::size_t c = 0; c < cols; ++c) buffer[i * cols + c] = value(first + i, c);
    });
    char* dst = static_cast<char*>(part.ptr) + ((first - own.begin) * row_bytes);
    wholememory::copy_bytes(dst, buffer.data(), n * row_bytes);
  }
}

std::vector<const char*> state_names_of(optimizer_kind k) {
  switch (k) {
    case optimizer_kind::sgd:
      return {};
    case optimizer_kind::adam:
      return {"m", "v"};
    case optimizer_kind::adagrad:
    case optimizer_kind::rowwise_adagrad:
      return {"sum"};
    case optimizer_kind::rmsprop:
      return {"square_avg"};
  }
  return {};
}

}  // namespace
}  // namespace detail

table::table() noexcept = default;
table::table(table&&) noexcept = default;
table& table::operator=(table&& other) noexcept {
  if (this != &other) {
    try {
      free();
    } catch (const std::exception& e) {
      WM_LOG(wholememory::log_level::warn,
             "embedding::table: freeing on assignment failed: " << e.what());
    }
    impl_ = std::move(other.impl_);
  }
  return *this;
}
table::table(std::unique_ptr<detail::table_impl> impl) : impl_(std::move(impl)) {}

table::~table() {
  try {
    free();
  } catch (const std::exception& e) {
    // While another exception unwinds the stack (the collective that failed first), that one
    // is the error to report; the memory is released either way.
    if (std::uncaught_exceptions() == 0) {
      WM_LOG(wholememory::log_level::warn, "embedding::table: free failed: " << e.what());
    }
  }
}

void table::free() {
  if (!impl_) return;
  std::unique_ptr<detail::table_impl> impl = std::move(impl_);
  impl->gpu.reset();
  for (auto& s : impl->state) s.free();
  impl->weights.free();
}

table table::create(std::shared_ptr<wholememory::communicator> comm, const table_options& o) {
  WM_EXPECTS(comm != nullptr, "embedding::table::create needs a communicator");
  detail::agree_on_options(*comm, o);
  detail::validate_options(o);

  auto impl = std::make_unique<detail::table_impl>();
  impl->comm = comm;
  impl->options = o;
  const int ranks = comm->size();
  const std::size_t row_bytes = o.dim * wholememory::dtype_size(o.dtype);
  wholememory::allocation_options weights_options;
  weights_options.granularity = row_bytes;
  weights_options.name = "the embedding table's weights";
  impl->weights = wholememory::allocation::create(comm, o.rows * row_bytes, o.type, o.location,
                                                  weights_options);
  const wholememory::partition& parts = impl->weights.get_partition();
  WM_EXPECTS(parts.num_parts() == ranks, "embedding::table::create: the weights have "
                                             << parts.num_parts() << " parts for " << ranks
                                             << " ranks");
  impl->rank_rows.resize(ranks);
  impl->row_begin.resize(ranks + 1);
  for (int p = 0; p < ranks; ++p) {
    impl->rank_rows[p] = row_range{parts.part_offset(p) / row_bytes,
                                   (parts.part_offset(p) + parts.part_bytes(p)) / row_bytes};
    impl->row_begin[p] = static_cast<std::int64_t>(impl->rank_rows[p].begin);
  }
  impl->row_begin[ranks] = static_cast<std::int64_t>(o.rows);

  // State arrays: float32, the weights' row split given explicitly.
  const std::size_t cols = detail::state_cols(o.optimizer.kind, o.dim);
  for (const char* name : detail::state_names_of(o.optimizer.kind)) {
    wholememory::allocation_options so;
    so.granularity = cols * sizeof(float);
    so.name = std::string("the embedding table's optimizer state '") + name + "'";
    for (int p = 0; p < ranks; ++p) so.part_bytes.push_back(impl->rank_rows[p].size() * cols * 4);
    impl->state.push_back(wholememory::allocation::create(comm, o.rows * cols * sizeof(float),
                                                          o.type, o.location, so));
    impl->state_names.emplace_back(name);
  }

  // Own rows only; every rank computes the same values for the same (row, column).
  const row_range own = impl->own();
  detail::dispatch_float_type(o.dtype, "the table dtype", [&](auto tag) {
    using T = decltype(tag);
    const init_options init = o.init;
    detail::fill_own_rows<T>(impl->weights, own, o.dim, [init](std::size_t r, std::size_t c) {
      return wholememory::convert_element<T>(init_value(init, r, c));
    });
  });
  const float start =
      o.optimizer.kind == optimizer_kind::adam ? 0.0f : o.optimizer.initial_accumulator;
  for (auto& s : impl->state)
    detail::fill_own_rows<float>(s, own, cols, [start](std::size_t, std::size_t) { return start; });
  comm->get_bootstrap().barrier();
  return table(std::move(impl));
}

namespace {
detail::table_impl& checked(const std::unique_ptr<detail::table_impl>& impl) {
  WM_EXPECTS(impl != nullptr, "use of an empty embedding::table");
  return *impl;
}
}  // namespace

std::size_t table::rows() const { return checked(impl_).options.rows; }
std::size_t table::dim() const { return checked(impl_).options.dim; }
wholememory::dtype table::dtype() const { return checked(impl_).options.dtype; }
const table_options& table::options() const { return checked(impl_).options; }
wholememory::communicator& table::comm() const { return *checked(impl_).comm; }
row_range table::own_rows() const { return checked(impl_).own(); }
const std::vector<row_range>& table::rank_rows() const { return checked(impl_).rank_rows; }
std::uint64_t table::step() const { return checked(impl_).step; }
void table::set_step(std::uint64_t step) { checked(impl_).step = step; }

wholememory::wm_tensor table::weights() const {
  const detail::table_impl& t = checked(impl_);
  return wholememory::wm_tensor{&t.weights,    t.options.dtype, t.options.rows,
                                t.options.dim, t.options.dim,   0};
}

const wholememory::allocation& table::weights_memory() const { return checked(impl_).weights; }

table_view table::view(int device) const {
  detail::table_impl& t = checked(impl_);
  WM_EXPECTS(t.options.type != wholememory::memory_type::distributed,
             "embedding::table::view: a table in distributed memory has no view of the other "
             "ranks' rows; use lookup");
  const wholememory::chunked_view* parts = nullptr;
  if (device < 0) {
    if (!t.host_view) {
      t.host_view = std::make_unique<wholememory::chunked_view>(t.weights.host_view());
    }
    parts = t.host_view.get();
  } else {
    parts = t.weights.device_view(device);
  }
  return table_view{parts, t.options.rows, t.options.dim, t.options.dtype};
}

const std::vector<wholememory::allocation>& table::state() const { return checked(impl_).state; }
const std::vector<std::string>& table::state_names() const { return checked(impl_).state_names; }

wholememory::wm_tensor table::state_tensor(std::size_t i) const {
  const detail::table_impl& t = checked(impl_);
  WM_EXPECTS(i < t.state.size(),
             "embedding::table::state_tensor: state " << i << " of " << t.state.size());
  const std::size_t cols = detail::state_cols(t.options.optimizer.kind, t.options.dim);
  return wholememory::wm_tensor{&t.state[i], dtype::float32, t.options.rows, cols, cols, 0};
}

std::vector<checkpoint_array> table::checkpoint_arrays() {
  detail::table_impl& t = checked(impl_);
  std::vector<checkpoint_array> out;
  out.push_back(checkpoint_array{"weights", &t.weights, t.options.dtype, t.options.dim});
  const std::size_t cols = detail::state_cols(t.options.optimizer.kind, t.options.dim);
  for (std::size_t i = 0; i < t.state.size(); ++i)
    out.push_back(checkpoint_array{t.state_names[i], &t.state[i], dtype::float32, cols});
  return out;
}

void table::lookup(const wholememory::index_array& indices, const wholememory::dense_matrix& out,
                   cudaStream_t stream) const {
  wholememory::gather(weights(), indices, out, stream);
}

void table::lookup_host(const wholememory::index_array& indices,
                        const wholememory::dense_matrix& out, unsigned threads) const {
  wholememory::gather_host(weights(), indices, out, threads);
}

void table::scatter_rows(const wholememory::index_array& indices,
                         const wholememory::dense_matrix& rows, cudaStream_t stream) {
  wholememory::scatter(rows, indices, weights(), stream);
}

void table::scatter_rows_host(const wholememory::index_array& indices,
                              const wholememory::dense_matrix& rows, unsigned threads) {
  wholememory::scatter_host(rows, indices, weights(), threads);
}

}  // namespace wholestore::embedding
