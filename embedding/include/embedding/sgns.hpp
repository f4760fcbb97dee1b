/*
 * Skip-gram with negative sampling (SGNS, word2vec's objective, as DeepWalk, node2vec and LINE
 * train it): the loss and its gradients for a batch of rows already looked up from two tables,
 * the input vectors of center nodes and the output vectors of their contexts and negatives.
 * The caller looks the rows up (table::lookup*), calls sgns_gradients*, and hands the gradient
 * rows to each table's apply_gradients*, which sums duplicate rows in a fixed order.
 *
 * For pair i with center row u_i, context row v_i and negative rows n_i0 .. n_i(K-1):
 *   loss_i = -log sigmoid(u_i . v_i) - sum_k log sigmoid(-u_i . n_ik)
 *   d loss_i / d u_i  = (sigmoid(s_o) - 1) v_i + sum_k sigmoid(s_k) n_ik      (s_o = u_i . v_i,
 *   d loss_i / d v_i  = (sigmoid(s_o) - 1) u_i                                  s_k = u_i . n_ik)
 *   d loss_i / d n_ik = sigmoid(s_k) u_i
 * The step's objective is the SUM of loss_i over the batch, so the gradient rows are these per
 * pair rows as they are (a row that appears several times gets the sum, as in word2vec's
 * per-pair SGD).
 *
 * Layout (float32, row-major, rows contiguous):
 *   centers       pairs x dim             u_i
 *   targets       pairs * (1 + K) x dim   row i * (1 + K) is v_i, row i * (1 + K) + 1 + k is n_ik
 *   center_grads  pairs x dim             d loss_i / d u_i
 *   target_grads  like targets            d loss_i / d v_i, d loss_i / d n_ik
 *   target_coefs  pairs * (1 + K)         the factor c of each target row: d loss_i / d v_i =
 *                                         c * u_i (c = sigmoid(s_o) - 1), d loss_i / d n_ik =
 *                                         c * u_i (c = sigmoid(s_k)), each element one rounded
 *                                         float32 product, as target_grads holds it
 *   losses        pairs                   loss_i
 * So the target rows of a pair stay together: a batch split among ranks in contiguous chunks of
 * pairs, each rank's lists concatenated in rank order, is the one-rank batch.
 *
 * Determinism: every output element is a fixed sequence of float32 operations
 * (detail/sgns_math.hpp: dot products in a fixed 32-lane order, exp and log built from + - * /
 * only, scores clamped to [-20, 20]), so the CPU path (any thread count) and the GPU path give
 * the same bits.
 */
#pragma once

#include <embedding/table.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>

namespace wholestore::embedding {

/// One batch's buffers (see the layout above).  Inputs and outputs must not overlap.
struct sgns_batch {
  const float* centers = nullptr;
  const float* targets = nullptr;
  std::size_t pairs = 0;
  int negatives = 1;  ///< K >= 0 (K = 0 trains on positives alone)
  std::size_t dim = 0;
  float* center_grads = nullptr;
  /// May be nullptr when target_coefs is set: the target gradient rows are not written (a
  /// table takes them by reference, table::apply_scaled_gradients with the centers' rows).
  float* target_grads = nullptr;
  float* losses = nullptr;  ///< may be nullptr: the losses are not written
  /// May be nullptr.  Else *loss_units += sum over pairs of llround(loss_i * loss_scale): an
  /// integer sum, exact in any order (a step's loss without copying every loss back).  Scores
  /// are clamped (sgns_math.hpp), so a finite pair's loss is at most about 20.7 * (1 + K).
  long long* loss_units = nullptr;
  double loss_scale = 16777216.0;  ///< 2^24
  /// May be nullptr.  Else += the number of pairs with a score that is NaN or infinite (rows
  /// holding NaN or Inf: a diverged table); such a pair adds nothing to loss_units, and its
  /// loss in `losses` is NaN.  A trainer stops on the first one (its gradients are not finite).
  unsigned long long* nonfinite_pairs = nullptr;
  /// May be nullptr.  Else one coefficient per target row (see the layout above).
  float* target_coefs = nullptr;
};

/// The rows of a batch read straight from two tables (sgns_gradients_from_tables) instead of
/// from looked-up buffers: center i is row center_rows[i] of `input`; target row
/// i * (1 + K) + j is row target_rows[i * (1 + K) + j] of `output`.  The views are device
/// views (table::view(device)) of float32 tables of the batch's dim.  Gradients and losses go
/// to `out`'s buffers as in sgns_batch (out.centers and out.targets are not used).
struct sgns_table_batch {
  table_view input, output;
  const std::int64_t* center_rows = nullptr;  ///< device memory, pairs entries
  const std::int64_t* target_rows = nullptr;  ///< device memory, pairs * (1 + K) entries
  sgns_batch out;
  /// Device word the caller sets to ~0 before the call: the kernel lowers it to the first
  /// position (centers first, then targets + pairs) whose row is outside its table; such a
  /// row reads as zeros.  The caller checks it after waiting and reports the bad index.
  unsigned long long* first_bad = nullptr;
};

/// CPU path: host buffers, `threads` threads (0: the hardware's count).  Throws logic_error for
/// dim 0, K < 0 or, with pairs > 0, a null input or center_grads, or neither target_grads nor
/// target_coefs.  Synchronous.
void sgns_gradients_host(const sgns_batch& batch, unsigned threads = 0);

/// GPU path, on the current device: buffers the GPU reads and writes, enqueued on `stream`
/// (does not wait).  Same checks as the CPU path; throws logic_error in a build without CUDA.
void sgns_gradients(const sgns_batch& batch, cudaStream_t stream);

/// GPU path with the lookups fused in: the same bits as table::lookup of both row lists
/// followed by sgns_gradients, without writing and reading the looked-up rows.  Throws
/// logic_error for views that are not float32 of dim out.dim, null index lists or first_bad
/// with pairs > 0 (or the gradient buffers sgns_gradients_host needs), and in a build without CUDA.
/// Enqueued on `stream` (does not wait); the tables must not change until it has run.
void sgns_gradients_from_tables(const sgns_table_batch& batch, cudaStream_t stream);

}  // namespace wholestore::embedding
