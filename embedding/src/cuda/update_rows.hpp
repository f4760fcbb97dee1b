// The owner's half of the GPU apply_gradients: from the received entries sorted by row, find
// the runs of equal rows, sum each run's gradient rows in the fixed tree order of
// detail/optimizer_update.hpp (long runs over many warps, level by level), and apply the
// fused optimizer update, one warp per touched row.  The kernels and their 15 update
// instantiations (3 table dtypes x 5 optimizers) live in update_rows.cu alone.
#pragma once

#include <embedding/detail/optimizer_update.hpp>
#include <embedding/table.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/dtype.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>

namespace wholestore::embedding::detail {

/// Gradient rows given by reference (table::apply_scaled_gradients): entry e's row is
/// coefs[e] * row source_rows[e] of `source` (float32), each element one rounded multiply.
struct scaled_rows_args {
  const float* coefs = nullptr;                ///< m coefficients, received order
  const std::uint64_t* source_rows = nullptr;  ///< m global rows of `source`, received order
  table_view source{};                         ///< float32 device view of the source table
};

/// What the kernels read and write.  The received entries are sorted by local row, ties in
/// received (global batch) order: order[k] is the received position of sorted entry k, whose
/// gradient row is grads[order[k] * grad_stride, + dim), or, with scaled.coefs set, the
/// product scaled.coefs[order[k]] * scaled.source row scaled.source_rows[order[k]].
struct update_rows_args {
  const std::uint32_t* sorted_rows = nullptr;  ///< m local rows, ascending
  const std::uint32_t* order = nullptr;        ///< m received positions
  const std::uint32_t* positions = nullptr;    ///< 0, 1, ..., m - 1 (scratch input)
  const float* grads = nullptr;                ///< received rows, float32 (nullptr: scaled)
  std::size_t grad_stride = 0;                 ///< elements between gradient rows (>= dim)
  scaled_rows_args scaled{};                   ///< used when grads is nullptr
  /// Device array of one row pointer per sender, or nullptr.  Set (with grads set too, to
  /// the own sender's rows, for the alignment checks): received position e is row
  /// e & (2^slot_shift - 1) of sender e >> slot_shift's rows, read in place (the peer
  /// exchange: every sender's buffer is mapped here; all 16-byte aligned as grads is).
  const float* const* sender_rows = nullptr;
  int slot_shift = 0;
  std::size_t m = 0;
  std::size_t dim = 0;
  void* weights = nullptr;  ///< own part of the weights (table dtype)
  float* state0 = nullptr;  ///< own part of state 0 (m, or the accumulator), or nullptr
  float* state1 = nullptr;  ///< own part of state 1 (Adam's v), or nullptr
  update_params params{};
  bool vec4 = false;  ///< set by the launcher: float4 access is aligned for every array
  /// Set by the caller of the scaled form: every source row is 16-byte aligned.
  bool source_aligned16 = false;
  /// A device word, or nullptr: while it is not ~0 (an index check failed on the device and
  /// nobody waited for it: apply_options::deferred_check), the sums and the update do nothing.
  const unsigned long long* gate = nullptr;
  /// An event, or nullptr: the update kernel waits for it (apply_options::update_after).
  cudaEvent_t update_after = nullptr;
};

/// Scratch of the run finding and the tree reduction, kept across calls.
struct runs_workspace {
  wholememory::device_buffer run_start;    // uint32 per run
  wholememory::device_buffer counters;     // uint32: runs, long runs
  wholememory::device_buffer long_state;   // per long run: uint32 length, uint32 first entry
  wholememory::device_buffer long_of_run;  // uint32 per run: its long-run slot (long runs only)
  wholememory::device_buffer chunks;       // uint32 per (level, slot): partial rows made there
  wholememory::device_buffer chunk_begin;  // uint32 per (level, slot): exclusive scan of chunks
  wholememory::device_buffer partials;     // float32 rows: the tree's inner sums, by level
  wholememory::device_buffer temp;         // CUB temporary storage
  int sm_count = 0;                        // the device's, read on first use
  int blocks_per_sm = 0;
};

/// The whole owner side on `stream`: runs, the tree sums of runs longer than sum_fan_in, and
/// the update of every touched row.  Enqueues only (launches sized by bounds on args.m).
void launch_update_rows(wholememory::dtype table_type, optimizer_kind kind,
                        const update_rows_args& args, runs_workspace& ws, int device,
                        cudaStream_t stream);

}  // namespace wholestore::embedding::detail
