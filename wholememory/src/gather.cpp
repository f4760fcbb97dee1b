// Gather/scatter: argument checks shared with the CUDA path, and the CPU path (threads over the
// same row addressing and element conversions the kernels use).  Distributed memory goes
// through the host communicator: bucket by owner, exchange, copy locally, exchange back.

#include "allocation_access.hpp"
#include "dtype_dispatch.hpp"
#include "gather_common.hpp"
#include "gather_rows.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/convert.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>
#include <wholememory/log.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace wholememory {
namespace detail {

gather_geometry check_arguments(const wm_tensor& table, const index_array& indices,
                                const dense_matrix& dense, const char* op) {
  WM_EXPECTS(table.memory != nullptr && static_cast<bool>(*table.memory),
             op << ": the table has no WholeMemory allocation");
  const allocation& wm = *table.memory;
  gather_geometry g;
  g.table_elem_bytes = dtype_size(table.type);
  g.dense_elem_bytes = dtype_size(dense.type);
  g.stride_bytes = table.row_stride * g.table_elem_bytes;
  g.col_offset_bytes = table.col_offset * g.table_elem_bytes;
  g.dense_stride_bytes = dense.row_stride * g.dense_elem_bytes;
  g.table_row_bytes = table.cols * g.table_elem_bytes;
  g.count = indices.count;
  g.same_type = table.type == dense.type;
  check_convert_pair(table.type, dense.type);
  WM_EXPECTS(indices.type == dtype::int32 || indices.type == dtype::int64,
             op << ": indices must be int32 or int64, not " << dtype_name(indices.type));
  WM_EXPECTS(indices.count == 0 || indices.data != nullptr,
             op << ": " << indices.count << " indices at a null address");
  WM_EXPECTS(table.row_stride >= table.col_offset + table.cols,
             op << ": table row stride " << table.row_stride << " is less than column offset "
                << table.col_offset << " + " << table.cols << " columns");
  WM_EXPECTS(dense.rows == indices.count, op << ": the dense matrix has " << dense.rows
                                             << " rows for " << indices.count << " indices");
  WM_EXPECTS(dense.cols == table.cols,
             op << ": the dense matrix has " << dense.cols << " columns, the table " << table.cols);
  WM_EXPECTS(dense.row_stride >= dense.cols, op << ": dense row stride " << dense.row_stride
                                                << " is less than its " << dense.cols
                                                << " columns");
  WM_EXPECTS(
      dense.rows == 0 || dense.cols == 0 || dense.data != nullptr,
      op << ": a " << dense.rows << " x " << dense.cols << " dense matrix at a null address");
  WM_EXPECTS(
      reinterpret_cast<std::uintptr_t>(dense.data) % g.dense_elem_bytes == 0,
      op << ": the dense matrix is not aligned to its " << g.dense_elem_bytes << "-byte elements");
  if (table.rows > 0) {
    const std::size_t end_elems =
        (table.rows - 1) * table.row_stride + table.col_offset + table.cols;
    WM_EXPECTS(end_elems * g.table_elem_bytes <= wm.size(),
               op << ": a table of " << table.rows << " rows of stride " << table.row_stride << " ("
                  << dtype_name(table.type) << ") ends at byte " << end_elems * g.table_elem_bytes
                  << ", past the " << wm.size() << "-byte allocation");
  }
  const partition& parts = wm.get_partition();
  const std::size_t table_bytes = table.rows * g.stride_bytes;
  if (wm.type() != memory_type::continuous) {
    for (int p = 1; p < parts.num_parts(); ++p) {
      const std::size_t boundary = parts.part_offset(p);
      if (boundary == 0 || boundary >= table_bytes) continue;
      WM_EXPECTS(boundary % g.stride_bytes == 0,
                 op << ": part " << p << " of the " << memory_type_name(wm.type())
                    << " allocation starts at byte " << boundary << ", inside a row of "
                    << g.stride_bytes
                    << " bytes; allocate with a granularity that is a multiple of the row "
                       "stride in bytes");
    }
  }
  if (wm.type() == memory_type::distributed) {
    const int ranks = parts.num_parts();
    g.owner_row_begin.resize(ranks + 1);
    for (int p = 0; p < ranks; ++p) {
      std::size_t first = g.stride_bytes == 0 ? 0 : parts.part_offset(p) / g.stride_bytes;
      g.owner_row_begin[p] = static_cast<std::int64_t>(std::min(first, table.rows));
    }
    g.owner_row_begin[0] = 0;
    g.owner_row_begin[ranks] = static_cast<std::int64_t>(table.rows);
  }
  return g;
}

void throw_bad_index(const char* op, bad_index bad, std::size_t rows) {
  WM_FAIL(logic_error, op << ": index " << bad.value << " at position " << bad.position
                          << " is outside the table of " << rows << " rows");
}

void agree_on_bad_indices(const char* op, const std::vector<std::int64_t>& flags, int my_rank,
                          bad_index mine, std::size_t rows) {
  if (mine.position >= 0) throw_bad_index(op, mine, rows);
  for (std::size_t r = 0; r < flags.size(); ++r) {
    if (flags[r] != 0) {
      WM_FAIL(logic_error, op << ": rank " << r << " passed an index outside the table of " << rows
                              << " rows; nothing was written on any rank");
    }
  }
  (void)my_rank;
}

int gather_peer_setting() {
  const char* text = std::getenv("WHOLESTORE_GATHER_PEER");
  if (text == nullptr) return 1;
  const std::string v = text;
  return v == "1" ? 1 : v == "0" ? 0 : -1;
}

std::int64_t gather_peer_proposal(int setting, bool eligible, std::size_t rows) {
  if (setting < 0) return -2;
  return setting == 1 && eligible ? static_cast<std::int64_t>(rows) : -1;
}

void check_peer_proposals(const char* op, const std::vector<std::int64_t>& proposals, int my_rank) {
  for (std::size_t r = 0; r < proposals.size(); ++r) {
    if (proposals[r] != -2) continue;
    const char* text =
        static_cast<int>(r) == my_rank ? std::getenv("WHOLESTORE_GATHER_PEER") : nullptr;
    WM_FAIL(logic_error,
            op << ": WHOLESTORE_GATHER_PEER must be 0 or 1; rank " << r << " has another value"
               << (text != nullptr ? std::string(" (here: '") + text + "')" : std::string()));
  }
}

bool peer_buffers_hold(const peer_buffer_set* set, const std::vector<std::size_t>& need) {
  if (set == nullptr) return false;
  for (std::size_t r = 0; r < need.size(); ++r)
    if (need[r] > set->bytes[r]) return false;
  return true;
}

std::unique_ptr<peer_buffer_set> grow_peer_buffers(const allocation& table,
                                                   std::unique_ptr<peer_buffer_set> old,
                                                   const std::vector<std::size_t>& need,
                                                   memory_location location, std::size_t step,
                                                   const char* op) {
  auto set = std::make_unique<peer_buffer_set>();
  set->bytes.resize(need.size());
  std::size_t total = 0;
  for (std::size_t r = 0; r < need.size(); ++r) {
    const std::size_t b = std::max(need[r], old != nullptr ? old->bytes[r] : 0);
    set->bytes[r] = std::max(step, (b + step - 1) / step * step);
    total += set->bytes[r];
  }
  // The old buffers go first (collective, after a barrier): the callers make sure that no
  // rank still reads or writes them.
  if (old != nullptr) old->memory.free();
  old.reset();
  allocation_options options;
  options.part_bytes = set->bytes;
  options.name = "distributed gather receive buffers";
  try {
    set->memory =
        allocation::create(table.comm_ptr(), total, memory_type::chunked, location, options);
  } catch (const logic_error& e) {
    WM_LOG(log_level::warn, op << " on distributed memory: no receive buffers mapped by every "
                                  "rank ("
                               << e.what() << "); rows go through the exchange from now on");
    return nullptr;
  } catch (const out_of_memory& e) {
    WM_LOG(log_level::warn, op << " on distributed memory: no room for receive buffers ("
                               << e.what() << "); rows go through the exchange from now on");
    return nullptr;
  }
  set->parts.resize(need.size());
  for (std::size_t r = 0; r < need.size(); ++r)
    set->parts[r] = static_cast<char*>(set->memory.part(static_cast<int>(r)).ptr);
  return set;
}

namespace {

using row_copy_fn = void (*)(const char* src, char* dst, std::size_t cols);

template <typename Src, typename Dst>
void convert_row_bytes(const char* src, char* dst, std::size_t cols) {
  convert_row(reinterpret_cast<const Src*>(src), reinterpret_cast<Dst*>(dst), cols);
}

/// Row function for `src` -> `dst` elements; nullptr for a same-dtype copy (memcpy).
row_copy_fn select_row_copy(dtype src, dtype dst) {
  if (src == dst) return nullptr;
  return dispatch_convert_pair(src, dst, [](auto s, auto d) -> row_copy_fn {
    return &convert_row_bytes<decltype(s), decltype(d)>;
  });
}

/// Runs body(begin, end) over [0, n) split into contiguous ranges on up to `threads` threads;
/// small work stays on the calling thread.
template <typename Body>
void parallel_ranges(std::size_t n, std::size_t bytes_per_item, unsigned threads, Body body) {
  constexpr std::size_t min_bytes_per_thread = 1 << 20;
  std::size_t by_work =
      std::max<std::size_t>(1, n * std::max<std::size_t>(bytes_per_item, 1) / min_bytes_per_thread);
  std::size_t t =
      std::min<std::size_t>({std::max(threads, 1u), by_work, std::max<std::size_t>(n, 1)});
  if (t <= 1) {
    body(std::size_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  const std::size_t chunk = (n + t - 1) / t;
  for (std::size_t k = 1; k < t; ++k) {
    std::size_t b = std::min(n, k * chunk), e = std::min(n, b + chunk);
    pool.emplace_back([=] { body(b, e); });
  }
  body(0, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

/// Rows the CPU gather requests ahead of the one it copies, cache lines of each, and the
/// largest row it does it for.
constexpr std::size_t prefetch_rows = 16;
constexpr std::size_t prefetch_lines = 4;
constexpr std::size_t prefetch_max_bytes = 1024;

/// Copies n rows: list entry i moves from source row row_at(src_idx, i) to destination row
/// row_at(dst_idx, i).  The CPU twin of the kernels' row loop.  With `dst_rows` > 0 (scatter)
/// the threads split the destination rows instead of the list, each walking the whole list in
/// order, so the last of duplicate indices wins and no row is written by two threads.
template <typename SrcGen, typename DstGen, typename SrcIdx, typename DstIdx>
void copy_rows_host(row_addresser<SrcGen> src, const SrcIdx* src_idx, row_addresser<DstGen> dst,
                    const DstIdx* dst_idx, std::size_t n, std::size_t cols,
                    std::size_t src_row_bytes, row_copy_fn fn, unsigned threads,
                    std::size_t dst_rows = 0) {
  auto copy_one = [&](std::size_t i) {
    const char* s = src.row(row_at(src_idx, static_cast<std::int64_t>(i)));
    char* d = dst.row(row_at(dst_idx, static_cast<std::int64_t>(i)));
    if (fn == nullptr) {
      std::memcpy(d, s, src_row_bytes);
    } else {
      fn(s, d, cols);
    }
  };
  if (dst_rows == 0) {
    // Random source rows are cache misses one after another: the first lines of the row
    // `prefetch_rows` entries ahead are requested before each copy, so a thread has that many
    // rows in flight instead of the few the core's own window overlaps.
    // Rows above prefetch_max_bytes are left to the hardware prefetcher (measured slower with
    // the requests: 4 KiB rows 8.8-11.1 GB/s against 10.5-12.9 without, on the 2-core VM).
    const std::size_t lines =
        src_row_bytes > prefetch_max_bytes
            ? 0
            : std::min<std::size_t>((src_row_bytes + 63) / 64, prefetch_lines);
    parallel_ranges(n, src_row_bytes, threads, [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        if (lines > 0 && i + prefetch_rows < e) {
          const char* ahead =
              src.row(row_at(src_idx, static_cast<std::int64_t>(i + prefetch_rows)));
          for (std::size_t l = 0; l < lines; ++l) __builtin_prefetch(ahead + 64 * l);
        }
        copy_one(i);
      }
    });
    return;
  }
  // Split by destination rows, as many threads as the bytes justify.
  const std::size_t t = std::min<std::size_t>(
      std::max(threads, 1u), std::max<std::size_t>(1, n * src_row_bytes / (1 << 20)));
  parallel_ranges(t, 1 << 20, static_cast<unsigned>(t), [&](std::size_t b, std::size_t e) {
    for (std::size_t part = b; part < e; ++part) {
      const auto lo = static_cast<std::int64_t>(dst_rows * part / t);
      const auto hi = static_cast<std::int64_t>(dst_rows * (part + 1) / t);
      for (std::size_t i = 0; i < n; ++i) {
        std::int64_t r = row_at(dst_idx, static_cast<std::int64_t>(i));
        if (r >= lo && r < hi) copy_one(i);
      }
    }
  });
}

template <typename IndexT>
bad_index find_bad_index(const IndexT* idx, std::size_t n, std::size_t rows, unsigned threads) {
  // Each range stops at its own first bad index; the smallest position wins.
  std::mutex m;
  bad_index best;
  parallel_ranges(n, sizeof(IndexT) * 64, threads, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) {
      std::int64_t v = static_cast<std::int64_t>(idx[i]);
      if (v < 0 || static_cast<std::uint64_t>(v) >= rows) {
        std::lock_guard<std::mutex> lock(m);
        if (best.position < 0 || static_cast<std::int64_t>(i) < best.position)
          best = bad_index{static_cast<std::int64_t>(i), v};
        return;
      }
    }
  });
  return best;
}

/// Table side of a host call: a PtrGen over its bytes, continuous or chunked.
struct host_table {
  bool chunked = false;
  chunked_view view{};
  char* base = nullptr;
};

host_table host_table_of(const allocation& wm, const char* op) {
  WM_EXPECTS(wm.location() == memory_location::host,
             op << " needs host-location memory, this allocation is in device memory; use "
                   "the GPU functions (gather/scatter with a stream)");
  host_table t;
  if (wm.type() == memory_type::continuous) {
    t.base = static_cast<char*>(wm.data());
  } else {
    t.chunked = true;
    t.view = wm.host_view();
  }
  return t;
}

template <typename IndexT>
void gather_local_host(const host_table& t, const gather_geometry& g, const IndexT* idx,
                       const dense_matrix& out, std::size_t n, std::size_t cols, row_copy_fn fn,
                       unsigned threads) {
  row_addresser<plain_bytes> dst{plain_bytes(out.data), g.dense_stride_bytes, 0};
  const std::int64_t* none = nullptr;
  if (t.chunked) {
    row_addresser<chunked_bytes> src{chunked_bytes(&t.view), g.stride_bytes, g.col_offset_bytes};
    copy_rows_host(src, idx, dst, none, n, cols, g.table_row_bytes, fn, threads);
  } else {
    row_addresser<plain_bytes> src{plain_bytes(t.base), g.stride_bytes, g.col_offset_bytes};
    copy_rows_host(src, idx, dst, none, n, cols, g.table_row_bytes, fn, threads);
  }
}

template <typename IndexT>
void scatter_local_host(const dense_matrix& in, const IndexT* idx, const host_table& t,
                        const gather_geometry& g, std::size_t n, std::size_t cols,
                        std::size_t table_rows, row_copy_fn fn, unsigned threads) {
  row_addresser<plain_bytes> src{plain_bytes(in.data), g.dense_stride_bytes, 0};
  const std::int64_t* none = nullptr;
  const std::size_t src_row_bytes = cols * g.dense_elem_bytes;
  if (t.chunked) {
    row_addresser<chunked_bytes> dst{chunked_bytes(&t.view), g.stride_bytes, g.col_offset_bytes};
    copy_rows_host(src, none, dst, idx, n, cols, src_row_bytes, fn, threads, table_rows);
  } else {
    row_addresser<plain_bytes> dst{plain_bytes(t.base), g.stride_bytes, g.col_offset_bytes};
    copy_rows_host(src, none, dst, idx, n, cols, src_row_bytes, fn, threads, table_rows);
  }
}

/// The distributed plan of one call: indices bucketed by owner and exchanged.
struct host_exchange {
  std::vector<std::int64_t> positions;   // caller positions in bucket order
  std::vector<std::size_t> send_counts;  // rows to each owner
  std::vector<std::size_t> send_displs;
  std::vector<std::size_t> recv_counts;  // rows each rank asks of this one
  std::vector<std::size_t> recv_displs;
  std::vector<std::int64_t> send_rows;   // owner-local row of every entry, bucket order
  std::vector<std::int64_t> local_rows;  // rows of the own part asked for, in receive order
  /// The own bucket [self_begin, self_begin + self_count) when it skips the exchange.
  std::size_t self_begin = 0, self_count = 0;
  /// Every rank's peer-write proposal (gather_peer_proposal) and, for every rank r, where the
  /// rows it asks of this rank start in r's receive order.
  std::vector<std::int64_t> peer_rows;
  std::vector<std::size_t> peer_starts;
};

template <typename IndexT>
host_exchange plan_exchange_host(communicator& comm, const IndexT* idx, std::size_t n,
                                 const gather_geometry& g, std::size_t rows, unsigned threads,
                                 const char* op, bool skip_self, std::int64_t peer_proposal) {
  const int ranks = comm.size();
  bad_index bad = find_bad_index(idx, n, rows, threads);
  host_exchange x;
  x.send_counts.assign(ranks, 0);
  x.send_displs.assign(ranks, 0);
  std::vector<int> owner(bad.position < 0 ? n : 0);
  const auto& begin = g.owner_row_begin;
  for (std::size_t i = 0; i < owner.size(); ++i) {
    auto it = std::upper_bound(begin.begin(), begin.end() - 1, static_cast<std::int64_t>(idx[i]));
    owner[i] = static_cast<int>(it - begin.begin()) - 1;
    ++x.send_counts[owner[i]];
  }
  for (int r = 1; r < ranks; ++r) x.send_displs[r] = x.send_displs[r - 1] + x.send_counts[r - 1];

  // Counts, the bad-index flag and the peer-write words travel together, to every r: [rows
  // asked of r, my flag, where r's rows start in my receive order, my peer-write proposal].
  constexpr std::size_t mw = 4;
  std::vector<std::int64_t> send_meta(mw * ranks), recv_meta(mw * ranks);
  std::vector<std::size_t> each(ranks, mw), displs(ranks);
  for (int r = 0; r < ranks; ++r) {
    send_meta[mw * r] = static_cast<std::int64_t>(x.send_counts[r]);
    send_meta[mw * r + 1] = bad.position >= 0 ? 1 : 0;
    send_meta[mw * r + 2] = static_cast<std::int64_t>(x.send_displs[r]);
    send_meta[mw * r + 3] = peer_proposal;
    displs[r] = mw * static_cast<std::size_t>(r);
  }
  comm.alltoallv(send_meta.data(), each.data(), displs.data(), recv_meta.data(), each.data(),
                 displs.data(), dtype::int64, nullptr);
  std::vector<std::int64_t> flags(ranks);
  for (int r = 0; r < ranks; ++r) flags[r] = recv_meta[mw * r + 1];
  agree_on_bad_indices(op, flags, comm.rank(), bad, rows);
  x.peer_rows.resize(ranks);
  x.peer_starts.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    x.peer_starts[r] = static_cast<std::size_t>(recv_meta[mw * r + 2]);
    x.peer_rows[r] = recv_meta[mw * r + 3];
  }
  check_peer_proposals(op, x.peer_rows, comm.rank());

  x.recv_counts.assign(ranks, 0);
  x.recv_displs.assign(ranks, 0);
  for (int r = 0; r < ranks; ++r) x.recv_counts[r] = static_cast<std::size_t>(recv_meta[mw * r]);
  if (skip_self) {
    // The own bucket is copied directly by the caller: out of both exchanges.
    const int me = comm.rank();
    x.self_begin = x.send_displs[me];
    x.self_count = x.send_counts[me];
    x.send_counts[me] = 0;
    x.recv_counts[me] = 0;
  }
  for (int r = 1; r < ranks; ++r) x.recv_displs[r] = x.recv_displs[r - 1] + x.recv_counts[r - 1];

  // Counting sort by owner, stable: positions in bucket order, rows local to their owner.
  x.positions.resize(n);
  x.send_rows.resize(n);
  std::vector<std::int64_t>& send_rows = x.send_rows;
  std::vector<std::size_t> fill = x.send_displs;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t k = fill[owner[i]]++;
    x.positions[k] = static_cast<std::int64_t>(i);
    send_rows[k] = static_cast<std::int64_t>(idx[i]) - begin[owner[i]];
  }
  std::size_t total_recv = x.recv_displs[ranks - 1] + x.recv_counts[ranks - 1];
  x.local_rows.resize(total_recv);
  comm.alltoallv(send_rows.data(), x.send_counts.data(), x.send_displs.data(), x.local_rows.data(),
                 x.recv_counts.data(), x.recv_displs.data(), dtype::int64, nullptr);
  return x;
}

std::vector<std::size_t> scaled(const std::vector<std::size_t>& v, std::size_t factor) {
  std::vector<std::size_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = v[i] * factor;
  return out;
}

communicator& host_comm_of(const allocation& wm, const char* op) {
  communicator& comm = wm.comm();
  WM_EXPECTS(comm.get_backend() == backend::host,
             op << " on distributed memory exchanges rows through the host backend; this "
                   "allocation's communicator is "
                << backend_name(comm.get_backend()) << " (use gather/scatter with a stream)");
  return comm;
}

/// The CPU path's state kept with a distributed table: its receive buffers (chunked host
/// memory), or the fact that they could not be made.
struct host_peer_buffers {
  std::unique_ptr<peer_buffer_set> set;
  bool unavailable = false;  // creation failed on every rank: the exchange from now on
};

/// Below this many bytes asked by every rank, a gather exchanges its rows through the host
/// backend's slots.  Measured on a 2-core VM (2 ranks, one thread each, 262,144 lookups): at
/// 16 MiB a rank (64 B rows) the owners' copies were 12-32% slower than the exchange (the rows
/// stay in the caches there), at 32 MiB (128 B) 1.95x faster, at 128 MiB 2-3.9x.
constexpr std::size_t host_peer_min_bytes = std::size_t{32} << 20;

/// The table's buffers holding every rank's `need` bytes, made or grown collectively (every
/// rank decides from the same list); nullptr on every rank when they cannot be made.  The CPU
/// path is synchronous: when a call grows them, every rank has finished its last call.
peer_buffer_set* ensure_host_peer_buffers(const allocation& table,
                                          const std::vector<std::size_t>& need) {
  std::shared_ptr<void>& slot = allocation_access::host_exchange_state(table);
  if (slot == nullptr) slot = std::make_shared<host_peer_buffers>();
  auto& state = *std::static_pointer_cast<host_peer_buffers>(slot);
  if (state.unavailable) return nullptr;
  if (!peer_buffers_hold(state.set.get(), need)) {
    state.set = grow_peer_buffers(table, std::move(state.set), need, memory_location::host,
                                  std::size_t{1} << 20, "gather_host");
    state.unavailable = state.set == nullptr;
  }
  return state.set.get();
}

/// This rank's proposal to move a call's `rows` rows through the table's buffers.
std::int64_t host_peer_proposal(const allocation& table, std::size_t rows) {
  auto state =
      std::static_pointer_cast<host_peer_buffers>(allocation_access::host_exchange_state(table));
  const bool eligible = table.comm().size() > 1 && !(state != nullptr && state->unavailable);
  return gather_peer_proposal(gather_peer_setting(), eligible, rows);
}

/// The buffers a call on distributed memory copies its rows through when every rank proposed
/// it and some rank moves host_peer_min_bytes; every rank decides from the same proposals, and
/// makes or grows the buffers together.  nullptr: the exchange.
peer_buffer_set* peer_buffers_for(const allocation& table, const host_exchange& x,
                                  std::size_t row_bytes) {
  const std::size_t ranks = x.peer_rows.size();
  bool peer = ranks > 1;
  std::vector<std::size_t> need(ranks);
  std::size_t largest = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    peer = peer && x.peer_rows[r] >= 0;
    need[r] = static_cast<std::size_t>(std::max<std::int64_t>(x.peer_rows[r], 0)) * row_bytes;
    largest = std::max(largest, need[r]);
  }
  if (!peer || largest < host_peer_min_bytes) return nullptr;
  return ensure_host_peer_buffers(table, need);
}

template <typename IndexT>
void gather_distributed_host(const wm_tensor& table, const IndexT* idx, const dense_matrix& out,
                             const gather_geometry& g, row_copy_fn fn, unsigned threads) {
  const char* op = "gather_host";
  communicator& comm = host_comm_of(*table.memory, op);
  const int ranks = comm.size();
  const int me = comm.rank();
  const std::size_t row_bytes = g.table_row_bytes;
  host_exchange x =
      plan_exchange_host(comm, idx, g.count, g, table.rows, threads, op,
                         /*skip_self=*/true, host_peer_proposal(*table.memory, g.count));
  peer_buffer_set* buffers = peer_buffers_for(*table.memory, x, row_bytes);
  const bool peer = buffers != nullptr;
  WM_LOG(log_level::debug,
         op << " on distributed memory: " << g.count << " rows of " << row_bytes << " bytes, "
            << (peer ? "owners copy into the asking ranks' buffers" : "rows through the exchange"));
  part_info mine = table.memory->local_part();
  row_addresser<plain_bytes> own{plain_bytes(mine.ptr), g.stride_bytes, g.col_offset_bytes};
  row_addresser<plain_bytes> dense{plain_bytes(out.data), g.dense_stride_bytes, 0};
  const std::int64_t* none = nullptr;
  // Rows asked of this rank by the others, in the table's dtype: straight into each asking
  // rank's buffer where its bucket for this rank starts, or packed for the exchange.
  std::unique_ptr<char[]> send, recv;
  if (peer) {
    for (int r = 0; r < ranks; ++r) {
      if (x.recv_counts[r] == 0) continue;
      row_addresser<plain_bytes> theirs{
          plain_bytes(buffers->parts[r] + x.peer_starts[r] * row_bytes), row_bytes, 0};
      copy_rows_host(own, x.local_rows.data() + x.recv_displs[r], theirs, none, x.recv_counts[r],
                     table.cols, row_bytes, nullptr, threads);
    }
  } else {
    send.reset(new char[x.local_rows.size() * row_bytes + 1]);
    copy_rows_host(own, x.local_rows.data(),
                   row_addresser<plain_bytes>{plain_bytes(send.get()), row_bytes, 0}, none,
                   x.local_rows.size(), table.cols, row_bytes, nullptr, threads);
  }
  // The own bucket goes straight from the own part to its caller positions.
  copy_rows_host(own, x.send_rows.data() + x.self_begin, dense, x.positions.data() + x.self_begin,
                 x.self_count, table.cols, row_bytes, fn, threads);
  // Received rows lie in bucket order, leaving the own bucket's gap.
  char* received = nullptr;
  if (peer) {
    // Every rank's copies into this rank's buffer ended before it reached the barrier.
    comm.barrier(nullptr);
    received = buffers->parts[me];
  } else {
    recv.reset(new char[g.count * row_bytes + 1]);
    comm.alltoallv(send.get(), scaled(x.recv_counts, row_bytes).data(),
                   scaled(x.recv_displs, row_bytes).data(), recv.get(),
                   scaled(x.send_counts, row_bytes).data(), scaled(x.send_displs, row_bytes).data(),
                   dtype::uint8, nullptr);
    received = recv.get();
  }
  const std::size_t ranges[2][2] = {{0, x.self_begin}, {x.self_begin + x.self_count, g.count}};
  for (const auto& range : ranges) {
    if (range[1] <= range[0]) continue;
    row_addresser<plain_bytes> src{plain_bytes(received + range[0] * row_bytes), row_bytes, 0};
    copy_rows_host(src, none, dense, x.positions.data() + range[0], range[1] - range[0], table.cols,
                   row_bytes, fn, threads);
  }
}

template <typename IndexT>
void scatter_distributed_host(const dense_matrix& in, const IndexT* idx, const wm_tensor& table,
                              const gather_geometry& g, row_copy_fn fn, unsigned threads) {
  const char* op = "scatter_host";
  communicator& comm = host_comm_of(*table.memory, op);
  const int ranks = comm.size();
  const int me = comm.rank();
  const std::size_t row_bytes = g.table_row_bytes;
  host_exchange x =
      plan_exchange_host(comm, idx, g.count, g, table.rows, threads, op,
                         /*skip_self=*/true, host_peer_proposal(*table.memory, g.count));
  peer_buffer_set* buffers = peer_buffers_for(*table.memory, x, row_bytes);
  WM_LOG(log_level::debug,
         op << " on distributed memory: " << g.count << " rows of " << row_bytes << " bytes, "
            << (buffers != nullptr ? "owners read the rows from the sending ranks' buffers"
                                   : "rows through the exchange"));
  part_info mine = table.memory->local_part();
  const std::int64_t* none = nullptr;
  row_addresser<plain_bytes> dense{plain_bytes(in.data), g.dense_stride_bytes, 0};
  row_addresser<plain_bytes> own{plain_bytes(mine.ptr), g.stride_bytes, g.col_offset_bytes};
  const auto own_rows = std::max<std::size_t>(
      static_cast<std::size_t>(g.owner_row_begin[me + 1] - g.owner_row_begin[me]), 1);
  // Pack the rows for the other ranks in bucket order, converted to the table's dtype, into
  // this rank's buffer (every owner reads its rows from there after the barrier) or for the
  // exchange; the own bucket's gap stays empty.
  std::unique_ptr<char[]> send, recv;
  char* packed = buffers != nullptr ? buffers->parts[me] : nullptr;
  if (packed == nullptr) {
    send.reset(new char[g.count * row_bytes + 1]);
    packed = send.get();
  }
  const std::size_t ranges[2][2] = {{0, x.self_begin}, {x.self_begin + x.self_count, g.count}};
  for (const auto& range : ranges) {
    if (range[1] <= range[0]) continue;
    row_addresser<plain_bytes> dst{plain_bytes(packed + range[0] * row_bytes), row_bytes, 0};
    copy_rows_host(dense, x.positions.data() + range[0], dst, none, range[1] - range[0], table.cols,
                   table.cols * g.dense_elem_bytes, fn, threads);
  }
  if (buffers != nullptr) {
    // Every rank's packing ended before it reached the barrier.  No rank packs into its buffer
    // again before every owner has read it: the next call starts with an exchange of counts
    // that every rank joins only after finishing this one.
    comm.barrier(nullptr);
  } else {
    recv.reset(new char[x.local_rows.size() * row_bytes + 1]);
    comm.alltoallv(send.get(), scaled(x.send_counts, row_bytes).data(),
                   scaled(x.send_displs, row_bytes).data(), recv.get(),
                   scaled(x.recv_counts, row_bytes).data(), scaled(x.recv_displs, row_bytes).data(),
                   dtype::uint8, nullptr);
  }
  // Write in rank order (lower ranks' rows, the own rows, higher ranks' rows), so the last
  // occurrence in rank order wins for duplicates.
  for (int r = 0; r < ranks; ++r) {
    if (r == me) {
      copy_rows_host(dense, x.positions.data() + x.self_begin, own,
                     x.send_rows.data() + x.self_begin, x.self_count, table.cols,
                     table.cols * g.dense_elem_bytes, fn, threads, own_rows);
      continue;
    }
    if (x.recv_counts[r] == 0) continue;
    char* rows = buffers != nullptr ? buffers->parts[r] + x.peer_starts[r] * row_bytes
                                    : recv.get() + x.recv_displs[r] * row_bytes;
    copy_rows_host(row_addresser<plain_bytes>{plain_bytes(rows), row_bytes, 0}, none, own,
                   x.local_rows.data() + x.recv_displs[r], x.recv_counts[r], table.cols, row_bytes,
                   nullptr, threads, own_rows);
  }
}

template <typename IndexT>
void gather_host_typed(const wm_tensor& table, const IndexT* idx, const dense_matrix& out,
                       const gather_geometry& g, unsigned threads) {
  row_copy_fn fn = select_row_copy(table.type, out.type);
  if (table.memory->type() == memory_type::distributed) {
    gather_distributed_host(table, idx, out, g, fn, threads);
    return;
  }
  host_table t = host_table_of(*table.memory, "gather_host");
  bad_index bad = find_bad_index(idx, g.count, table.rows, threads);
  if (bad.position >= 0) throw_bad_index("gather_host", bad, table.rows);
  if (g.count == 0 || table.cols == 0) return;
  gather_local_host(t, g, idx, out, g.count, table.cols, fn, threads);
}

template <typename IndexT>
void scatter_host_typed(const dense_matrix& in, const IndexT* idx, const wm_tensor& table,
                        const gather_geometry& g, unsigned threads) {
  row_copy_fn fn = select_row_copy(in.type, table.type);
  if (table.memory->type() == memory_type::distributed) {
    scatter_distributed_host(in, idx, table, g, fn, threads);
    return;
  }
  host_table t = host_table_of(*table.memory, "scatter_host");
  bad_index bad = find_bad_index(idx, g.count, table.rows, threads);
  if (bad.position >= 0) throw_bad_index("scatter_host", bad, table.rows);
  if (g.count == 0 || table.cols == 0) return;
  scatter_local_host(in, idx, t, g, g.count, table.cols, std::max<std::size_t>(table.rows, 1), fn,
                     threads);
}

}  // namespace
}  // namespace detail

void gather_host(const wm_tensor& table, const index_array& indices, const dense_matrix& out,
                 unsigned threads) {
  detail::gather_geometry g = detail::check_arguments(table, indices, out, "gather_host");
  if (table.memory->type() == memory_type::distributed) {
    WM_EXPECTS(table.memory->location() == memory_location::host,
               "gather_host needs host-location memory, this allocation is in device memory");
  }
  if (indices.type == dtype::int32) {
    detail::gather_host_typed(table, static_cast<const std::int32_t*>(indices.data), out, g,
                              threads);
  } else {
    detail::gather_host_typed(table, static_cast<const std::int64_t*>(indices.data), out, g,
                              threads);
  }
}

void scatter_host(const dense_matrix& in, const index_array& indices, const wm_tensor& table,
                  unsigned threads) {
  detail::gather_geometry g = detail::check_arguments(table, indices, in, "scatter_host");
  if (table.memory->type() == memory_type::distributed) {
    WM_EXPECTS(table.memory->location() == memory_location::host,
               "scatter_host needs host-location memory, this allocation is in device memory");
  }
  if (indices.type == dtype::int32) {
    detail::scatter_host_typed(in, static_cast<const std::int32_t*>(indices.data), table, g,
                               threads);
  } else {
    detail::scatter_host_typed(in, static_cast<const std::int64_t*>(indices.data), table, g,
                               threads);
  }
}

#if !defined(WHOLESTORE_HAS_CUDA)
namespace {
[[noreturn]] void no_cuda(const char* op) {
  WM_FAIL(logic_error,
          op << " runs on a GPU and wholestore was built without CUDA; use " << op << "_host");
}
}  // namespace

void gather(const wm_tensor&, const index_array&, const dense_matrix&, cudaStream_t) {
  no_cuda("gather");
}
void gather(const wm_tensor&, const index_array&, const dense_matrix&, const gather_options&,
            cudaStream_t) {
  no_cuda("gather");
}
void gather_unchecked_async(const wm_tensor&, const index_array&, const dense_matrix&,
                            cudaStream_t) {
  WM_FAIL(logic_error,
          "gather_unchecked_async runs on a GPU and wholestore was built without CUDA");
}
void scatter(const dense_matrix&, const index_array&, const wm_tensor&, cudaStream_t) {
  no_cuda("scatter");
}
void scatter(const dense_matrix&, const index_array&, const wm_tensor&, const gather_options&,
             cudaStream_t) {
  no_cuda("scatter");
}
#endif

}  // namespace wholememory
