/*
 * Embedding tables: [rows, dim] matrices of float32, float16 or bfloat16 in WholeMemory (any
 * type x location), trained by sparse optimizers whose float32 state lives beside them.
 *
 * Rows are split among the ranks of the table's communicator as whole rows (rank p owns rows
 * [own_rows().begin, own_rows().end)); the optimizer state arrays have the same row split, so
 * the rank that owns a row is the only one that ever writes it, its state included.
 *
 * Initialisation: element (r, c) is init_value(options.init, r, c) rounded to the table dtype,
 * a pure function of (seed, global row, column), so the table is the same for any rank count,
 * memory type and location.
 *
 * apply_gradients (GPU) and apply_gradients_host (CPU threads) take this rank's (index, gradient
 * row) pairs.  The batch of a step is every rank's list concatenated in rank order (the global
 * batch); gradients of duplicate indices are SUMMED (not averaged), in float32, in global
 * batch order: left to right for up to 32 duplicates, and as a fixed tree of left-to-right
 * groups of 32 for more (detail/optimizer_update.hpp), then weight decay and the optimizer update
 * run once per touched row (lazy: rows that no index names keep their weights and state).  Raw
 * gradient rows travel to the owning rank and are summed there, never partially summed on the
 * sender, so the result is bit for bit the same for any rank count, thread count, memory type and
 * location, and on the CPU and the GPU (docs/architecture.md, "Embedding tables", gives the
 * argument).
 *
 * apply_scaled_gradients takes the gradient rows by reference (coefficient x a row of another
 * float32 table, recomputed with one rounding as the update reads it): the same result as
 * apply_gradients of the materialized rows, without writing them; with several ranks each
 * entry crosses to its owner as (source row, coefficient), 12 bytes instead of a row.
 *
 * Collective calls: create, free, apply_gradients*, apply_scaled_gradients, and on distributed
 * memory lookup* and scatter_rows* (every rank of the communicator calls, with its own possibly
 * empty index list).
 * Errors are logic_error naming the bad value; an out-of-range index names the index and its
 * position and changes nothing on any rank (every rank throws).  Mismatched create arguments
 * throw mismatch_error on every rank.
 */
#pragma once

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/gather.hpp>
#include <wholememory/memory_type.hpp>
#include <wholememory/ptr_gen.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace wholestore::embedding {

/// How the weights start.  Element (r, c) is init_value(*this, r, c), rounded to the table dtype.
struct init_options {
  enum kind { zeros, uniform, normal };
  kind method = uniform;
  double a = -0.01;   ///< uniform: lower bound
  double b = 0.01;    ///< uniform: upper bound (values in [a, b))
  double mean = 0;    ///< normal
  double std = 0.01;  ///< normal, >= 0
  std::uint64_t seed = 0;
};

/// "zeros", "uniform", "normal".
const char* init_kind_name(init_options::kind k);
/// Parses a name of init_kind_name; throws logic_error naming the text and the accepted names.
init_options::kind parse_init_kind(const std::string& name);

/// The initial value of element (row, col) in double, before rounding to the table dtype: a
/// counter-based mix (SplitMix64) of (seed, row, col); uniform: a + (b - a) * u with u in
/// [0, 1) of 53 bits; normal: Box-Muller from two such draws.  Pure; the same on every rank.
double init_value(const init_options& init, std::uint64_t row, std::uint64_t col);

enum class optimizer_kind { sgd, adam, adagrad, rowwise_adagrad, rmsprop };

/// "sgd", "adam", "adagrad", "rowwise_adagrad", "rmsprop".
const char* optimizer_name(optimizer_kind k);
/// Parses a name of optimizer_name; throws logic_error naming the text and the accepted names.
optimizer_kind parse_optimizer(const std::string& name);

/// Optimizer hyperparameters (the learning rate is per call).  g is the summed gradient of a
/// row element, w its weight, t the table's step after the call's increment; all float32:
///   weight decay (all):  g = g + weight_decay * w             (skipped when weight_decay == 0)
///   sgd:                 w = w - lr * g
///   adam (lazy):         m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
///                        w = w - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
///   adagrad:             s = s + g * g;  w = w - lr * g / (sqrt(s) + eps)
///   rowwise_adagrad:     s_row = s_row + mean over the row of g * g;  same w update with s_row
///   rmsprop:             s = alpha * s + (1 - alpha) * g * g;  w = w - lr * g / (sqrt(s) + eps)
/// Adam's bias corrections are computed in double on the host, once per call.
struct optimizer_options {
  optimizer_kind kind = optimizer_kind::sgd;
  float weight_decay = 0;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float alpha = 0.99f;            ///< rmsprop
  float initial_accumulator = 0;  ///< starting s of adagrad, rowwise_adagrad and rmsprop
};

struct table_options {
  std::size_t rows = 0;
  std::size_t dim = 0;
  wholememory::dtype dtype = wholememory::dtype::float32;  ///< float32, float16 or bfloat16
  wholememory::memory_type type = wholememory::memory_type::continuous;
  wholememory::memory_location location = wholememory::memory_location::host;
  init_options init;
  optimizer_options optimizer;
  /// How a multi-rank GPU update moves gradient rows to the ranks that own them, when every
  /// rank is on one host and the communicator is NCCL: `peer`, each rank writes its rows once
  /// into a buffer every rank of the host maps and the owners read them during their update
  /// (no all-to-all, no sort by owner); `collective`, NCCL's all-to-all of rows sorted by
  /// owner.  Several hosts, a host communicator and the scaled form always take the
  /// collective.  The same bits either way; agreed at create (the same on every rank).
  enum class exchange_kind { peer, collective };
  exchange_kind exchange = exchange_kind::peer;
};

/// Rows [begin, end) of a table.
struct row_range {
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t size() const { return end - begin; }
};

/// One array a checkpoint stores: the weights or an optimizer state array (float32).
struct checkpoint_array {
  std::string name;  ///< "weights", or the state's name ("m", "v", "sum", "square_avg")
  wholememory::allocation* memory = nullptr;
  wholememory::dtype type = wholememory::dtype::float32;
  std::size_t cols = 0;  ///< elements per row (rows = the table's rows)
};

/// Trivially copyable view of a continuous or chunked table for kernels and host code: row r
/// is row<T>(r) where T is float, wholememory::half_t or wholememory::bfloat16_t per dtype.
struct table_view {
  const wholememory::chunked_view* parts = nullptr;
  std::size_t rows = 0;
  std::size_t dim = 0;
  wholememory::dtype dtype = wholememory::dtype::float32;

  template <typename T>
  WM_HOST_DEVICE T* row(std::size_t r) const {
    return wholememory::PtrGen<const wholememory::chunked_view, T>(parts).At(
        static_cast<std::ptrdiff_t>(r * dim));
  }
};

namespace detail {
struct table_impl;
}

class table;

/// Gradient rows given by reference instead of materialized (table::apply_scaled_gradients):
/// entry j's gradient row is coefs[j] * row source_rows[j / group] of `source`, element by
/// element a float32 product rounded once (never fused), read when the update runs.  This is
/// the shape of SGNS's output-table gradients (embedding/sgns.hpp): each of a pair's 1 + K
/// target rows gets sigmoid-coefficient x the pair's center row of the input table, so a step
/// passes 4 + 8 / (1 + K) bytes per entry instead of a 4 * dim-byte row.
struct scaled_rows {
  const table* source = nullptr;  ///< float32, continuous or chunked, this table's dim
  /// int32 or int64 rows of `source`, count * group == the entries; device memory or
  /// GPU-readable host memory.
  wholememory::index_array source_rows;
  std::size_t group = 1;         ///< consecutive entries that share one source row (>= 1)
  const float* coefs = nullptr;  ///< one per entry, like source_rows
};

/// How a GPU apply call (table::apply_gradients, table::apply_scaled_gradients) checks its
/// indices.
struct apply_options {
  /// A device word the caller set to ~0 (all bits), or nullptr (check before returning, as
  /// documented at each call).  Given, a table of one rank waits for nothing: the index check
  /// (and the scaled form's source-row check) runs on the device, leaves the first bad
  /// position it finds in the word (atomicMin; for the scaled form a bad source row's position
  /// in source_rows, which may win over a bad index's), and the update runs only while the word
  /// holds ~0, so a bad index still changes no weight and no state.  The call does not throw
  /// for it: the caller reads the word after `stream` and reports.  The step counter advances
  /// either way.  Calls may share one word: once it is set, every later call on the stream
  /// that carries it changes nothing.  Tables of several ranks wait for the per-owner counts
  /// anyway, and check and throw as without it.
  unsigned long long* deferred_check = nullptr;
  /// An event, or nullptr: the kernel that writes the rows waits for it on the device
  /// (cudaStreamWaitEvent just before it); routing, sorting and summing the gradients run
  /// before it.  Lets a table's call overlap work on another stream that must finish before
  /// this table changes, such as the other table's scaled update reading this table's rows.
  cudaEvent_t update_after = nullptr;
};

/// A trainable embedding table.  Move-only owner of its weights and optimizer state.
class table {
 public:
  /// Allocates and initialises a table over the ranks of `comm`.  Collective: every rank
  /// passes the same options (else mismatch_error naming the field on every rank).  Throws
  /// logic_error for dim 0, a dtype other than float32, float16 or
  /// bfloat16, bad init bounds (b < a, std < 0), bad optimizer options, and as
  /// wholememory::allocation::create (device memory without CUDA, ...).  Synchronous.
  static table create(std::shared_ptr<wholememory::communicator> comm,
                      const table_options& options);

  table() noexcept;
  table(table&&) noexcept;
  table& operator=(table&&) noexcept;
  table(const table&) = delete;
  table& operator=(const table&) = delete;
  /// Frees like free() but never throws.
  ~table();

  /// Frees weights and state.  Collective.  No-op on an empty table.
  void free();
  explicit operator bool() const { return impl_ != nullptr; }

  std::size_t rows() const;
  std::size_t dim() const;
  wholememory::dtype dtype() const;
  const table_options& options() const;
  wholememory::communicator& comm() const;
  /// The rows this rank owns (and alone updates).
  row_range own_rows() const;
  /// Row ranges of every rank, agreed at create (size comm().size()).
  const std::vector<row_range>& rank_rows() const;
  /// Number of apply_gradients calls so far (every rank counts every call).
  std::uint64_t step() const;

  /// The weights as a gather/scatter tensor.
  wholememory::wm_tensor weights() const;
  const wholememory::allocation& weights_memory() const;
  /// Kernel view (continuous or chunked memory; throws logic_error for distributed memory):
  /// addresses of `device`'s address space, or host addresses for device -1.  Device views
  /// are made on first use (synchronous) and live as long as the table.
  table_view view(int device = -1) const;

  /// Optimizer state arrays (float32, rows x state_cols(i)), same type, location and row split
  /// as the weights: none for sgd, {"m", "v"} for adam, {"sum"} for adagrad, {"sum"} (rows x 1)
  /// for rowwise_adagrad, {"square_avg"} for rmsprop.
  const std::vector<wholememory::allocation>& state() const;
  const std::vector<std::string>& state_names() const;
  /// State array i as a gather/scatter tensor (float32).
  wholememory::wm_tensor state_tensor(std::size_t i) const;

  /// Every array a checkpoint must store, weights first, then state(); with step() that is the
  /// table's whole trainable content.  A loader writes the arrays and calls set_step.
  std::vector<checkpoint_array> checkpoint_arrays();
  /// Sets the step counter (after loading a checkpoint).  Every rank must set the same value.
  void set_step(std::uint64_t step);

  /// Copies rows `indices` into `out` (out.rows == indices.count, out.cols == dim, any float
  /// dtype) on `stream`: wholememory::gather, with its conversions, checks and synchronization
  /// (an out-of-range index throws naming it, `out` untouched).  Collective on distributed
  /// memory (NCCL communicator).
  void lookup(const wholememory::index_array& indices, const wholememory::dense_matrix& out,
              cudaStream_t stream) const;
  /// CPU path of lookup (host-location tables): wholememory::gather_host.  Synchronous.
  void lookup_host(const wholememory::index_array& indices, const wholememory::dense_matrix& out,
                   unsigned threads = wholememory::default_host_threads()) const;

  /// Raw writes of rows (for custom updates): wholememory::scatter (duplicates: the last in
  /// global order wins).  Does not touch the optimizer state or the step.
  void scatter_rows(const wholememory::index_array& indices, const wholememory::dense_matrix& rows,
                    cudaStream_t stream);
  /// CPU path of scatter_rows: wholememory::scatter_host.  Synchronous.
  void scatter_rows_host(const wholememory::index_array& indices,
                         const wholememory::dense_matrix& rows,
                         unsigned threads = wholememory::default_host_threads());

  /// One optimizer step on the rows named by `indices` (int32 or int64, device memory or
  /// GPU-readable host memory), with `grads` (grads.rows == indices.count, grads.cols == dim;
  /// float32, float16 or bfloat16, converted to float32) and learning rate `lr` (the same on
  /// every rank).  Collective over the table's communicator: every rank calls, with its own
  /// count (0 allowed); the step counter advances by one on every rank.  Everything is checked
  /// before anything changes; an error on any rank (an index outside [0, rows) names the index
  /// and its position) makes every rank throw logic_error with the table, state and step
  /// unchanged.  The exchange uses NCCL on device buffers for an NCCL communicator and stages
  /// through host memory for a host communicator.  Synchronizes `stream` once after the index
  /// check (every rank's counts and verdict come back to the host: on an NCCL communicator in
  /// one allgather on `stream`, with no bootstrap round; on a host communicator over the
  /// bootstrap), and for a host communicator with several ranks once more to stage the
  /// exchange; the update itself is left enqueued:
  /// `indices` and `grads` must stay valid until `stream` has passed this call.  A table of
  /// one rank with apply_options::deferred_check waits for nothing and leaves the check's
  /// verdict in that word instead of throwing.  Throws logic_error in a build without CUDA.
  void apply_gradients(const wholememory::index_array& indices,
                       const wholememory::dense_matrix& grads, float lr, cudaStream_t stream,
                       const apply_options& options = {});
  /// apply_gradients with the gradient rows given by reference (scaled_rows): the same result,
  /// bit for bit, as apply_gradients of the materialized rows coefs[j] * source row (float32),
  /// without writing or exchanging them.  The source rows are read on `stream` during the
  /// update, so the source table must not change until `stream` has passed this call (train
  /// updates the output table this way before it updates the input table).  Everything is
  /// checked before anything changes: as apply_gradients, plus the source table (float32,
  /// this table's dim, continuous or chunked) and every source row (one outside the source
  /// table names the row and its position).  The source must be spread over the same ranks
  /// (else logic_error on every rank, nothing changed).  With several ranks each entry goes to
  /// the owner of its target row as (key, source row, coefficient) and the owner reads the
  /// source row in place (every row of a continuous or chunked table is mapped on every rank
  /// of a host): every rank's update of this table must end before any rank changes the
  /// source, which a collective call on the source (its apply_gradients) ensures.
  /// Collective, synchronizes like apply_gradients (once, after the checks; not at all with
  /// apply_options::deferred_check on one rank); throws logic_error in a build without CUDA.
  void apply_scaled_gradients(const wholememory::index_array& indices, const scaled_rows& grads,
                              float lr, cudaStream_t stream, const apply_options& options = {});
  /// CPU path of apply_gradients: host-location tables, host buffers, `threads` threads, the
  /// host communicator for several ranks.  Same semantics, bit for bit the same result.
  /// Synchronous.  Each rank returns once its own rows are updated: read other ranks' rows of
  /// continuous or chunked memory after a barrier (lookup of distributed memory needs none).
  void apply_gradients_host(const wholememory::index_array& indices,
                            const wholememory::dense_matrix& grads, float lr,
                            unsigned threads = wholememory::default_host_threads());

 private:
  explicit table(std::unique_ptr<detail::table_impl> impl);
  std::unique_ptr<detail::table_impl> impl_;
};

}  // namespace wholestore::embedding
