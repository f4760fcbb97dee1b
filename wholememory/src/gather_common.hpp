/*
 * Argument checks and small helpers shared by the CPU path (src/gather.cpp) and the CUDA path
 * (src/cuda/gather_device.cu) of gather/scatter.  Plain C++.
 */
#pragma once

#include <wholememory/allocation.hpp>
#include <wholememory/gather.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace wholememory::detail {

/// Byte geometry of a checked call.
struct gather_geometry {
  std::size_t table_elem_bytes = 0;
  std::size_t dense_elem_bytes = 0;
  std::size_t stride_bytes = 0;      ///< table row stride
  std::size_t col_offset_bytes = 0;  ///< table column offset
  std::size_t dense_stride_bytes = 0;
  std::size_t table_row_bytes = 0;  ///< cols * table element size
  std::size_t count = 0;            ///< number of indices (= dense rows)
  bool same_type = false;
  /// Distributed memory: first table row of every rank, size() + 1 entries (last = rows).
  std::vector<std::int64_t> owner_row_begin;
};

/// Checks shapes, dtypes and the table's placement in its allocation; `op` names the calling
/// function in messages.  Throws logic_error.
gather_geometry check_arguments(const wm_tensor& table, const index_array& indices,
                                const dense_matrix& dense, const char* op);

/// The first out-of-range index of a list: position -1 when none.
struct bad_index {
  std::int64_t position = -1;
  std::int64_t value = 0;
};

/// Throws logic_error "index V at position P is outside the table of R rows".
[[noreturn]] void throw_bad_index(const char* op, bad_index bad, std::size_t rows);

/// Distributed memory: every rank learned which ranks had a bad index (flags[r] != 0); throws
/// on every rank when any did, naming the own bad index where this rank had one.
void agree_on_bad_indices(const char* op, const std::vector<std::int64_t>& flags, int my_rank,
                          bad_index mine, std::size_t rows);

/// WHOLESTORE_GATHER_PEER, read at every call: 1 (unset) lets owners on one host write the rows
/// a distributed gather asks of them straight into the asking rank's receive buffer (a buffer
/// every rank maps, kept with the table), 0 keeps the exchange of rows; -1 for any other value.
int gather_peer_setting();

/// This rank's peer-write proposal for a distributed gather of `rows` rows (travels with the
/// counts): `rows` when the setting is on and `eligible`, -1 when not, -2 for an invalid
/// setting.
std::int64_t gather_peer_proposal(int setting, bool eligible, std::size_t rows);

/// Throws logic_error on every rank when some rank proposed -2 (an invalid
/// WHOLESTORE_GATHER_PEER), naming that rank and, on it, the value.
void check_peer_proposals(const char* op, const std::vector<std::int64_t>& proposals, int my_rank);

/// The buffers owners on one host write a distributed gather's rows into: one per rank, each
/// mapped by every rank (chunked memory over the table's communicator), kept with the table
/// (allocation_access.hpp) and grown collectively.
struct peer_buffer_set {
  allocation memory;
  std::vector<char*> parts;        // every rank's buffer, in this process
  std::vector<std::size_t> bytes;  // and its size, the same list on every rank
};

/// True when `set` (may be null) holds every rank's `need` bytes.
bool peer_buffers_hold(const peer_buffer_set* set, const std::vector<std::size_t>& need);

/// Buffers holding every rank's `need` bytes, at least `old`'s sizes (freed first), rounded up
/// to `step`, at `location`.  Collective: every rank passes the same list.  nullptr on every
/// rank when they cannot be made (creation agrees on its errors; a logic_error or
/// out_of_memory is logged as a warning naming `op`, other errors propagate).
std::unique_ptr<peer_buffer_set> grow_peer_buffers(const allocation& table,
                                                   std::unique_ptr<peer_buffer_set> old,
                                                   const std::vector<std::size_t>& need,
                                                   memory_location location, std::size_t step,
                                                   const char* op);

}  // namespace wholememory::detail
