// What a table holds, and the host-side pieces both apply_gradients paths share: the argument
// checks, the agreement among ranks before anything changes, and the row routing.
#pragma once

#include <embedding/table.hpp>
#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/gather.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace wholestore::embedding::detail {

/// Scratch of the GPU path (src/cuda/apply_gradients.cu), kept across calls.
struct gpu_workspace;
void destroy_gpu_workspace(gpu_workspace* ws) noexcept;

/// Scratch of the CPU path's exchange (src/apply_host.cpp), kept across calls and only grown:
/// a two-rank update of 262k rows of 128 floats spent 87 ms packing into fresh vectors and
/// 90 ms receiving into them (zero-filling and faulting in 134 MB each) against 22 ms for the
/// exchange itself.  Sizes in elements; the vectors may be longer than one call uses.
struct host_workspace {
  std::vector<std::int64_t> send_index, recv_index;
  std::vector<float> send_grads, recv_grads;
  std::vector<std::size_t> src_row;
  std::vector<int> owner;
};

/// v's data with room for n elements; grows v (never shrinks it), so later calls reuse pages.
template <typename T>
T* scratch(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) {
    v.clear();  // nothing to keep: no copy of the old contents on growth
    v.resize(n);
  }
  return v.data();
}

struct table_impl {
  std::shared_ptr<wholememory::communicator> comm;
  table_options options;
  wholememory::allocation weights;
  std::vector<wholememory::allocation> state;
  std::vector<std::string> state_names;
  std::vector<row_range> rank_rows;
  /// rank_rows[p].begin for every rank, then rows: owner lookup by binary search.
  std::vector<std::int64_t> row_begin;
  std::uint64_t step = 0;
  std::unique_ptr<wholememory::chunked_view> host_view;  // made by view(-1)
  std::unique_ptr<gpu_workspace, void (*)(gpu_workspace*)> gpu{nullptr, &destroy_gpu_workspace};
  host_workspace host;

  int rank() const { return comm->rank(); }
  int ranks() const { return comm->size(); }
  row_range own() const { return rank_rows[static_cast<std::size_t>(comm->rank())]; }
};

/// Rank owning global row `row` (0 <= row < rows): the last rank whose range starts at or
/// before it (empty ranges share their start with the next rank).
int owner_of(const std::vector<std::int64_t>& row_begin, std::int64_t row);

/// The first index outside [0, rows) of a list, position -1 when none.
struct bad_index {
  std::int64_t position = -1;
  std::int64_t value = 0;
};

enum class apply_path { host, gpu };

/// The local checks of an apply_gradients call; returns the error message, empty when they
/// pass.  Nothing is thrown here so that every rank can learn of the error first.
std::string check_apply_arguments(const table_impl& t, const wholememory::index_array& indices,
                                  const wholememory::dense_matrix& grads, float lr, const char* op,
                                  apply_path path);

/// The local checks of an apply_scaled_gradients call, like check_apply_arguments (the
/// source indices' range is checked on the device).
std::string check_scaled_arguments(const table_impl& t, const wholememory::index_array& indices,
                                   const scaled_rows& grads, float lr, const char* op);

/// Entries each rank sends to this one, and this rank to each, agreed by all ranks.
struct apply_counts {
  std::vector<std::size_t> send;     ///< to rank r
  std::vector<std::size_t> recv;     ///< from rank r
  std::vector<std::size_t> sent_by;  ///< entries every rank passed (decide_apply)
  std::size_t most_sent = 0;         ///< the largest of them
  std::size_t total_recv() const;
};

/// One rank's published record of an apply call: these fields, then its send count to every
/// rank (ranks int64 words in all after the fields).  Error: 0 none, 1 a bad index (position,
/// value), 2 an argument error (the rank's own message), 3 a bad source row of the scaled form
/// (position, value).
enum apply_record_field : std::size_t {
  apply_record_error,
  apply_record_bad_position,
  apply_record_bad_value,
  apply_record_step,
  apply_record_lr_bits,
  apply_record_fields
};

/// The bits of a learning rate as the record carries them.
std::int64_t lr_bits(float lr);

/// This rank's record (send counts zero when it has an error).
std::vector<std::int64_t> encode_apply_record(const table_impl& t, const std::string& local_error,
                                              bad_index bad,
                                              const std::vector<std::size_t>& send_counts,
                                              float lr);

/// The verdict on every rank's record (`all`: ranks records in rank order), as agree_on_apply
/// states it; returns the agreed counts.
apply_counts decide_apply(const table_impl& t, const char* op, const std::string& local_error,
                          const std::vector<std::int64_t>& all,
                          const std::vector<std::size_t>& send_counts);

/// Every rank publishes its error (argument error or bad index), step, learning rate and send
/// counts over the bootstrap (one allgather; no CUDA stream involved).  When any rank reported
/// an error every rank throws logic_error (the rank at fault with its own message, the others
/// naming it) and nothing has changed; different steps or learning rates throw
/// mismatch_error on every rank.  Collective.
apply_counts agree_on_apply(const table_impl& t, const char* op, const std::string& local_error,
                            bad_index bad, const std::vector<std::size_t>& send_counts, float lr);

/// Exclusive prefix sums of counts.
std::vector<std::size_t> displacements(const std::vector<std::size_t>& counts);

}  // namespace wholestore::embedding::detail
