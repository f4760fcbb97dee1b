// The distributed path of gather/scatter: indices bucketed by owner rank, rows exchanged over
// NCCL, the own bucket copied directly (gather_device_common.cuh).
#include "allocation_access.hpp"
#include "cuda/gather_device_common.cuh"
#include "cuda/gather_launch.hpp"
#include "gather_common.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/error.hpp>
#include <wholememory/gather.hpp>
#include <wholememory/log.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace wholememory::detail {
namespace {

/// Owner rank of every index, and per-owner counts.  Counting goes through a per-block
/// histogram in shared memory with one add per warp and owner (__match_any_sync): millions of
/// global atomics on a handful of counters serialize in L2 and cost more than the pass itself.
template <typename IndexT>
__global__ void owner_kernel(const IndexT* __restrict__ idx, std::int64_t n,
                             const std::int64_t* __restrict__ row_begin, int ranks, int* owner,
                             unsigned long long* counts) {
  extern __shared__ unsigned long long block_counts[];
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) block_counts[r] = 0;
  __syncthreads();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t v = static_cast<std::int64_t>(idx[i]);
    int lo = 0, hi = ranks - 1;  // last rank whose first row is <= v
    while (lo < hi) {
      int mid = (lo + hi + 1) / 2;
      if (row_begin[mid] <= v) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    owner[i] = lo;
    const bool valid = v >= 0 && v < row_begin[ranks];
    // Out-of-range indices count nowhere (the call fails before any exchange).
    const int key = valid ? lo : -1;
    const unsigned same = __match_any_sync(__activemask(), key);
    const int leader = __ffs(same) - 1;
    if (valid && (threadIdx.x & 31) == leader)
      atomicAdd(block_counts + lo, static_cast<unsigned long long>(__popc(same)));
  }
  __syncthreads();
  for (int r = threadIdx.x; r < ranks; r += blockDim.x)
    if (block_counts[r] != 0) atomicAdd(counts + r, block_counts[r]);
}

// What this rank tells rank r before anything else crosses, meta_words words:
//   [0] rows asked of r,  [1] whether this rank had a bad index,
//   [2] the slices this rank would pipeline the exchange of rows in,
//   [3] where the rows from r go in this rank's receive order (its bucket start for r),
//   [4] the peer-write proposal: the rows this rank gathers when it proposes that owners
//       write them straight into its receive buffer (peer_proposal), else -1; -2 for an
//       invalid WHOLESTORE_GATHER_PEER.
constexpr int meta_words = 5;
__global__ void meta_kernel(const unsigned long long* counts, const unsigned long long* result,
                            int ranks, std::int64_t slices, std::int64_t peer, std::int64_t* meta) {
  for (int r = threadIdx.x; r < ranks; r += blockDim.x) {
    std::int64_t start = 0;
    for (int q = 0; q < r; ++q) start += static_cast<std::int64_t>(counts[q]);
    meta[meta_words * r] = static_cast<std::int64_t>(counts[r]);
    meta[meta_words * r + 1] = result[0] != ~0ull ? 1 : 0;
    meta[meta_words * r + 2] = slices;
    meta[meta_words * r + 3] = start;
    meta[meta_words * r + 4] = peer;
  }
}

constexpr std::int64_t max_slices = 8;

/// WHOLESTORE_GATHER_SLICES: the most slices this rank proposes, 1 to 8 (unset: 1, no
/// pipelining, until slices have run on two GPUs; docs/architecture.md); -1 for any other
/// value, which travels with the counts so that every rank throws after the same exchange.
std::int64_t slice_limit() {
  static const std::int64_t limit = [] {
    const char* text = std::getenv("WHOLESTORE_GATHER_SLICES");
    if (text == nullptr) return std::int64_t{1};
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    const bool valid = end != text && *end == '\0' && v >= 1 && v <= max_slices;
    return valid ? static_cast<std::int64_t>(v) : std::int64_t{-1};
  }();
  return limit;
}

/// Slices a gather's exchange of rows is pipelined in (packing slice s + 1 and placing slice
/// s - 1 while slice s crosses): one per 32 MiB of rows this rank asks for, at most
/// slice_limit().  Every rank proposes, the largest proposal wins, so all ranks issue the same
/// calls.
std::int64_t wanted_slices(std::size_t n, std::size_t row_bytes) {
  constexpr std::size_t slice_bytes = std::size_t{32} << 20;
  const std::int64_t limit = slice_limit();
  if (limit < 1) return -1;
  return std::clamp<std::int64_t>(static_cast<std::int64_t>(n * row_bytes / slice_bytes), 1, limit);
}

template <typename IndexT>
__global__ void local_rows_kernel(const IndexT* __restrict__ idx,
                                  const std::int64_t* __restrict__ positions,
                                  const int* __restrict__ owners,
                                  const std::int64_t* __restrict__ row_begin, std::int64_t n,
                                  std::int64_t* local_rows) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t k = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < n;
       k += stride)
    local_rows[k] = static_cast<std::int64_t>(idx[positions[k]]) - row_begin[owners[k]];
}

/// The exchange plan of one distributed call, in device memory, plus host counts.
struct device_exchange {
  std::vector<std::size_t> send_counts, send_displs, recv_counts, recv_displs;
  std::size_t recv_total = 0;
  std::unique_ptr<stream_buffer> positions;   // caller positions, bucket order (int64)
  std::unique_ptr<stream_buffer> send_rows;   // owner-local row of every entry, bucket order
  std::unique_ptr<stream_buffer> local_rows;  // rows of the own part asked for (int64)
  /// The own bucket [self_begin, self_begin + self_count) when it skips the exchange.
  std::size_t self_begin = 0, self_count = 0;
  /// Slices of the exchange of rows (the largest any rank asked for; 1 for scatter).
  std::size_t slices = 1;
  /// Every rank's peer-write proposal (meta word 4) and, for every rank r, where the rows it
  /// asks of this rank start in r's receive order (meta word 3 from r).
  std::vector<std::int64_t> peer_rows;
  std::vector<std::size_t> peer_starts;
};

/// The calling thread's pinned host words on the current device (at least `count`), kept
/// while the thread lives and freed when it ends: the exchanged counts come back into them by
/// an asynchronous copy.
std::int64_t* pinned_words(std::size_t count) {
  struct slot {
    pinned_host words;
    std::size_t count = 0;
  };
  thread_local std::vector<slot> slots;
  int device = 0;
  WM_CUDA_TRY(cudaGetDevice(&device));
  if (static_cast<int>(slots.size()) <= device) slots.resize(device + 1);
  slot& s = slots[device];
  if (s.count < count) {
    s.words = pinned_host(count * sizeof(std::int64_t), cudaHostAllocDefault);
    s.count = count;
  }
  return s.words.as<std::int64_t>();
}

communicator& nccl_comm_of(const allocation& wm, const char* op) {
  communicator& comm = wm.comm();
  WM_EXPECTS(comm.get_backend() == backend::nccl,
             op << " on distributed memory exchanges rows through NCCL; this allocation's "
                   "communicator is "
                << backend_name(comm.get_backend()) << " (use " << op
                << "_host, or create the memory with an NCCL communicator)");
  return comm;
}

std::vector<std::size_t> scaled(const std::vector<std::size_t>& v, std::size_t factor) {
  std::vector<std::size_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = v[i] * factor;
  return out;
}

/// Checks the indices on every rank, buckets them by owner and sends every owner the rows
/// asked of it.  With skip_self the own bucket stays out of the exchanges (the caller copies
/// it directly): self counts are 0, send displacements keep its gap, receive ones do not.
template <typename IndexT>
device_exchange plan_exchange_device(communicator& comm, const IndexT* idx, std::size_t n,
                                     const gather_geometry& g, std::size_t rows, const char* op,
                                     bool skip_self, std::int64_t slices,
                                     std::int64_t peer_proposal, cudaStream_t stream) {
  const int ranks = comm.size();
  const auto sn = static_cast<std::int64_t>(n);
  const int mw = meta_words;
  // Control block: result[2] | meta_recv[3R] | meta_send[3R] | counts[R] | row_begin[R + 1].
  const std::size_t words = 2 + 2 * mw * ranks + ranks + ranks + 1;
  stream_buffer ctl(words * 8, stream);
  auto* result = ctl.as<unsigned long long>();
  auto* meta_recv = ctl.as<std::int64_t>() + 2;
  auto* meta_send = meta_recv + mw * ranks;
  auto* counts = reinterpret_cast<unsigned long long*>(meta_send + mw * ranks);
  auto* row_begin = reinterpret_cast<std::int64_t*>(counts + ranks);
  WM_CUDA_TRY(cudaMemsetAsync(ctl.as<void>(), 0, words * 8, stream));
  WM_CUDA_TRY(cudaMemsetAsync(result, 0xff, 2 * 8, stream));
  WM_CUDA_TRY(cudaMemcpyAsync(row_begin, g.owner_row_begin.data(), (ranks + 1) * 8,
                              cudaMemcpyHostToDevice, stream));
  stream_buffer owner(n * sizeof(int), stream);
  if (n > 0) {
    find_bad_index_kernel<<<blocks_for_items(sn), block_threads, 0, stream>>>(
        idx, sn, static_cast<std::int64_t>(rows), result);
    WM_CUDA_CHECK_LAUNCH(stream);
    record_bad_value_kernel<<<1, 1, 0, stream>>>(idx, result);
    WM_CUDA_CHECK_LAUNCH(stream);
    owner_kernel<<<blocks_for_items(sn), block_threads, ranks * sizeof(unsigned long long),
                   stream>>>(idx, sn, row_begin, ranks, owner.as<int>(), counts);
    WM_CUDA_CHECK_LAUNCH(stream);
  }
  // Bucketing by owner (a stable sort) and every entry's owner-local row need no counts: they
  // run on a side stream while the counts cross and the host waits for them.  The guard makes
  // the caller's stream wait for it on every exit, before the buffers are freed there.
  device_exchange x;
  x.positions = std::make_unique<stream_buffer>(n * 8, stream);
  x.send_rows = std::make_unique<stream_buffer>(n * 8, stream);
  const cudaStream_t bucket = side_stream(0);
  stream_wait(bucket, stream);
  struct join_on_exit {
    cudaStream_t stream, side;
    ~join_on_exit() {
      try {
        stream_wait(stream, side);
      } catch (const std::exception&) {
      }
    }
  } join{stream, bucket};
  if (n > 0) {
    stream_buffer owner_sorted(n * sizeof(int), bucket);
    sort_by_key(owner.as<int>(), owner_sorted.as<int>(), x.positions->as<std::int64_t>(), sn,
                static_cast<std::uint64_t>(ranks - 1), bucket);
    local_rows_kernel<<<blocks_for_items(sn), block_threads, 0, bucket>>>(
        idx, x.positions->as<std::int64_t>(), owner_sorted.as<int>(), row_begin, sn,
        x.send_rows->as<std::int64_t>());
    WM_CUDA_CHECK_LAUNCH(bucket);
  }
  meta_kernel<<<1, 128, 0, stream>>>(counts, result, ranks, slices, peer_proposal, meta_send);
  WM_CUDA_CHECK_LAUNCH(stream);
  std::vector<std::size_t> each(ranks, mw), displs(ranks);
  for (int r = 0; r < ranks; ++r) displs[r] = static_cast<std::size_t>(mw) * r;
  comm.alltoallv(meta_send, each.data(), displs.data(), meta_recv, each.data(), displs.data(),
                 dtype::int64, stream);
  // Into pinned memory, so the copy is asynchronous and synchronize() keeps its timeout.
  const std::size_t host_words = 2 + 2 * static_cast<std::size_t>(mw) * ranks;
  std::int64_t* host = pinned_words(host_words);
  WM_CUDA_TRY(
      cudaMemcpyAsync(host, ctl.as<void>(), host_words * 8, cudaMemcpyDeviceToHost, stream));
  comm.synchronize(stream);

  std::vector<std::int64_t> flags(ranks);
  for (int r = 0; r < ranks; ++r) flags[r] = host[2 + mw * r + 1];
  bad_index mine;
  if (static_cast<unsigned long long>(host[0]) != ~0ull) mine = bad_index{host[0], host[1]};
  agree_on_bad_indices(op, flags, comm.rank(), mine, rows);
  // A rank whose WHOLESTORE_GATHER_SLICES is invalid proposed -1: every rank throws here.
  for (int r = 0; r < ranks; ++r) {
    if (host[2 + mw * r + 2] >= 1) continue;
    const char* text = r == comm.rank() ? std::getenv("WHOLESTORE_GATHER_SLICES") : nullptr;
    WM_FAIL(logic_error,
            op << ": WHOLESTORE_GATHER_SLICES must be a whole number from 1 to " << max_slices
               << "; rank " << r << " has another value"
               << (text != nullptr ? std::string(" (here: '") + text + "')" : std::string()));
  }

  x.peer_rows.resize(ranks);
  x.peer_starts.resize(ranks);
  for (int r = 0; r < ranks; ++r) {
    x.peer_rows[r] = host[2 + mw * r + 4];
    x.peer_starts[r] = static_cast<std::size_t>(host[2 + mw * r + 3]);
  }
  check_peer_proposals(op, x.peer_rows, comm.rank());

  x.send_counts.resize(ranks);
  x.send_displs.assign(ranks, 0);
  x.recv_counts.resize(ranks);
  x.recv_displs.assign(ranks, 0);
  for (int r = 0; r < ranks; ++r) {
    x.recv_counts[r] = static_cast<std::size_t>(host[2 + mw * r]);
    x.send_counts[r] = static_cast<std::size_t>(host[2 + mw * ranks + mw * r]);
    // Every proposal is at least 1 here (an invalid one has thrown above).
    x.slices =
        std::max(x.slices, static_cast<std::size_t>(std::min(host[2 + mw * r + 2], max_slices)));
  }
  for (int r = 1; r < ranks; ++r) x.send_displs[r] = x.send_displs[r - 1] + x.send_counts[r - 1];
  const int me = comm.rank();
  if (skip_self) {
    x.self_begin = x.send_displs[me];
    x.self_count = x.send_counts[me];
    x.send_counts[me] = 0;
    x.recv_counts[me] = 0;
  }
  for (int r = 1; r < ranks; ++r) x.recv_displs[r] = x.recv_displs[r - 1] + x.recv_counts[r - 1];
  x.recv_total = x.recv_displs[ranks - 1] + x.recv_counts[ranks - 1];

  stream_wait(stream, bucket);
  x.local_rows = std::make_unique<stream_buffer>(x.recv_total * 8, stream);
  comm.alltoallv(x.send_rows->as<std::int64_t>(), x.send_counts.data(), x.send_displs.data(),
                 x.local_rows->as<std::int64_t>(), x.recv_counts.data(), x.recv_displs.data(),
                 dtype::int64, stream);
  return x;
}

/// The GPU path's state kept with a distributed table: its receive buffers (chunked device
/// memory every rank maps; owners write the rows asked of them straight into them, so the rows
/// cross once, written by the kernel that reads them: no packed send buffer, no copy by NCCL),
/// or the fact that they could not be made.
struct peer_buffers {
  std::unique_ptr<peer_buffer_set> set;
  /// Recorded after this rank's last read of its own buffer: the next call's stream waits for
  /// it before its first collective, so no owner writes while a place still reads.
  cuda_event released{nullptr};
  bool unavailable = false;  // creation failed on every rank: the NCCL exchange from now on
};

std::shared_ptr<peer_buffers> peer_buffers_of(const allocation& table) {
  return std::static_pointer_cast<peer_buffers>(allocation_access::exchange_state(table));
}

/// The table's receive buffers, large enough for every rank's `need` bytes.  Every rank
/// decides from the same list (the proposals every rank received), so all of them grow
/// together, collectively; nullptr (on every rank) when they cannot be made.
peer_buffers* ensure_peer_buffers(const allocation& table, const std::vector<std::size_t>& need) {
  std::shared_ptr<void>& slot = allocation_access::exchange_state(table);
  if (slot == nullptr) slot = std::make_shared<peer_buffers>();
  auto& state = *std::static_pointer_cast<peer_buffers>(slot);
  if (state.unavailable) return nullptr;
  if (peer_buffers_hold(state.set.get(), need)) return &state;
  // Peers' writes into the old buffers ended before this call's first exchange, and this
  // rank's reads end with the event.  Grown in steps of 2 MiB.
  if (state.released.value() != nullptr) state.released.synchronize();
  state.set = grow_peer_buffers(table, std::move(state.set), need, memory_location::device,
                                std::size_t{2} << 20, "gather");
  state.unavailable = state.set == nullptr;
  if (state.unavailable) return nullptr;
  if (state.released.value() == nullptr) state.released = cuda_event(event_flags::disable_timing);
  return &state;
}

rows_ref own_part_rows(const allocation& wm, const gather_geometry& g) {
  part_info mine = wm.local_part();
  rows_ref r;
  r.base = static_cast<char*>(mine.ptr);
  r.stride_bytes = g.stride_bytes;
  r.col_offset_bytes = g.col_offset_bytes;
  r.address_bits = reinterpret_cast<std::uintptr_t>(mine.ptr);
  return r;
}

}  // namespace

template <typename IndexT>
void gather_distributed(const wm_tensor& table, const IndexT* idx, const dense_matrix& out,
                        const gather_geometry& g, const gather_options& options,
                        cudaStream_t stream) {
  const char* op = "gather";
  communicator& comm = nccl_comm_of(*table.memory, op);
  const int ranks = comm.size();
  const int me = comm.rank();
  const std::shared_ptr<peer_buffers> state = peer_buffers_of(*table.memory);
  // No owner writes into this rank's receive buffer before its last read has ended: the
  // first exchange below waits for it, and owners write only after that exchange.
  if (state != nullptr && state->released.value() != nullptr) state->released.wait(stream);
  const int setting = gather_peer_setting();
  const bool may_write_peers =
      ranks > 1 && comm.topology().num_hosts == 1 && !(state != nullptr && state->unavailable);
  device_exchange x =
      plan_exchange_device(comm, idx, g.count, g, table.rows, op, /*skip_self=*/true,
                           wanted_slices(g.count, g.table_row_bytes),
                           gather_peer_proposal(setting, may_write_peers, g.count), stream);
  const std::size_t row_bytes = g.table_row_bytes;
  // Owners write into the asking ranks' buffers when every rank proposed it (one host, the
  // setting on) and the exchange is not sliced (owners writing slices, each followed by a
  // barrier and placed during the next, ran at 60-65% of one piece's speed on two H200s); the
  // decision is the same on every rank.
  bool peer = x.slices == 1 && ranks > 1;
  std::vector<std::size_t> need(ranks);
  for (int r = 0; r < ranks; ++r) {
    peer = peer && x.peer_rows[r] >= 0;
    need[r] = static_cast<std::size_t>(std::max<std::int64_t>(x.peer_rows[r], 0)) * row_bytes;
  }
  peer_buffers* buffers = peer ? ensure_peer_buffers(*table.memory, need) : nullptr;
  peer = buffers != nullptr;
  const rows_ref own = own_part_rows(*table.memory, g);
  const rows_ref dense = dense_rows(out, g.dense_stride_bytes);
  const std::int64_t* positions = x.positions->as<std::int64_t>();
  // Host-located parts are read in address order when the call is large (as for continuous
  // memory): the rows land at their packed positions, so only the visiting order changes.
  const bool sorted_visit = sorts_host(table, g.count, options);
  const std::uint64_t own_rows_max = static_cast<std::uint64_t>(g.owner_row_begin[comm.rank() + 1] -
                                                                g.owner_row_begin[comm.rank()]);
  auto read_own = [&](const std::int64_t* rows, std::size_t n, const rows_ref& packed,
                      cudaStream_t on) {
    if (!sorted_visit || n == 0) {
      gather_entries(table.cols, table.type, own, rows, table.type, packed, nullptr, n, row_bytes,
                     on);
      return;
    }
    stream_buffer keys(n * sizeof(std::int64_t), on);
    stream_buffer order(n * sizeof(std::int64_t), on);
    sort_by_key(rows, keys.as<std::int64_t>(), order.as<std::int64_t>(),
                static_cast<std::int64_t>(n), own_rows_max, on);
    gather_entries(table.cols, table.type, own, keys.as<std::int64_t>(), table.type, packed,
                   order.as<std::int64_t>(), n, row_bytes, on);
  };
  // Rows asked of this rank by the others, packed in the table's dtype (in bucket order of
  // the asking ranks), and the rows received, in this rank's bucket order with the own
  // bucket's gap.
  stream_buffer send(peer ? 0 : x.recv_total * row_bytes, stream);
  stream_buffer recv(peer ? 0 : g.count * row_bytes, stream);
  // The own bucket goes from the own part to its caller positions on a side stream, while the
  // exchange runs (through a packed buffer when the visit is sorted, since the sorted order
  // scrambles the caller positions).  The positions it writes are disjoint from the received
  // rows' positions.  With several slices, slice s + 1 is packed on a second side stream and
  // slice s - 1 placed on a third while slice s crosses on the caller's stream.
  const std::size_t slices = x.slices;
  WM_LOG(log_level::debug, "gather on distributed memory: " << g.count << " rows of " << row_bytes
                                                            << " bytes, the exchange in " << slices
                                                            << " slice(s)");
  const std::int64_t* local_rows = x.local_rows->as<std::int64_t>();
  // One slice: everything asked of this rank packed at once, before the side stream starts.
  if (peer) {
    // Straight into each asking rank's buffer, where its bucket for this rank starts.
    for (int r = 0; r < ranks; ++r) {
      if (x.recv_counts[r] == 0) continue;
      read_own(local_rows + x.recv_displs[r], x.recv_counts[r],
               packed_rows(buffers->set->parts[r] + x.peer_starts[r] * row_bytes, row_bytes),
               stream);
    }
  } else if (slices == 1) {
    read_own(local_rows, x.recv_total, packed_rows(send.as<void>(), row_bytes), stream);
  }
  const cudaStream_t side = side_stream(0);
  const cudaStream_t pack = slices > 1 ? side_stream(1) : stream;
  const cudaStream_t place = slices > 1 ? side_stream(2) : stream;
  stream_wait(side, stream);
  if (slices > 1) {
    stream_wait(pack, stream);
    stream_wait(place, stream);
  }
  // Joins on every exit, exceptions included, before the buffers above are freed on `stream`.
  struct join_on_exit {
    cudaStream_t stream, side, pack, place;
    ~join_on_exit() {
      try {
        stream_wait(stream, side);
        if (pack != stream) stream_wait(stream, pack);
        if (place != stream) stream_wait(stream, place);
      } catch (const std::exception&) {
      }
    }
  } join{stream, side, pack, place};
  if (!sorted_visit) {
    gather_entries(table.cols, table.type, own, x.send_rows->as<std::int64_t>() + x.self_begin,
                   out.type, dense, positions + x.self_begin, x.self_count, row_bytes, side);
  } else if (x.self_count > 0) {
    stream_buffer mine(x.self_count * row_bytes, side);
    read_own(x.send_rows->as<std::int64_t>() + x.self_begin, x.self_count,
             packed_rows(mine.as<void>(), row_bytes), side);
    place_entries(table.cols, table.type, packed_rows(mine.as<void>(), row_bytes), nullptr,
                  out.type, dense, positions + x.self_begin, x.self_count, row_bytes, side);
  }
  if (slices == 1) {
    char* received = recv.as<char>();
    if (peer) {
      // Every rank's writes ended before it reached the barrier, and the barrier ends here only
      // when every rank reached it.
      comm.barrier(stream);
      received = buffers->set->parts[me];
    } else {
      comm.alltoallv(send.as<void>(), scaled(x.recv_counts, row_bytes).data(),
                     scaled(x.recv_displs, row_bytes).data(), recv.as<void>(),
                     scaled(x.send_counts, row_bytes).data(),
                     scaled(x.send_displs, row_bytes).data(), dtype::uint8, stream);
    }
    // Received rows land in bucket order, leaving the own bucket's gap; each goes to its
    // caller position (distinct positions: no duplicates).
    const std::size_t ranges[2][2] = {{0, x.self_begin}, {x.self_begin + x.self_count, g.count}};
    for (const auto& range : ranges) {
      const std::size_t b = range[0], e = range[1];
      if (e <= b) continue;
      place_entries(table.cols, table.type, packed_rows(received + b * row_bytes, row_bytes),
                    nullptr, out.type, dense, positions + b, e - b, row_bytes, stream);
    }
    if (peer) buffers->released.record(stream);
    return;
  }
  // Slice s of a block of `count` rows: [count * s / slices, count * (s + 1) / slices); both
  // ends of a pair compute it from the same count.
  auto cut = [slices](std::size_t count, std::size_t s) { return count * s / slices; };
  std::vector<std::size_t> sc(ranks), sd(ranks), rc(ranks), rd(ranks);
  for (std::size_t s = 0; s < slices; ++s) {
    for (int r = 0; r < ranks; ++r) {
      const std::size_t b = x.recv_displs[r] + cut(x.recv_counts[r], s);
      const std::size_t e = x.recv_displs[r] + cut(x.recv_counts[r], s + 1);
      read_own(local_rows + b, e - b, packed_rows(send.as<char>() + b * row_bytes, row_bytes),
               pack);
      sc[r] = (e - b) * row_bytes;
      sd[r] = b * row_bytes;
      const std::size_t rb = x.send_displs[r] + cut(x.send_counts[r], s);
      rc[r] = (x.send_displs[r] + cut(x.send_counts[r], s + 1) - rb) * row_bytes;
      rd[r] = rb * row_bytes;
    }
    if (pack != stream) stream_wait(stream, pack);
    comm.alltoallv(send.as<void>(), sc.data(), sd.data(), recv.as<void>(), rc.data(), rd.data(),
                   dtype::uint8, stream);
    if (place != stream) stream_wait(place, stream);
    // Every received row to its caller position (distinct positions: no duplicates).
    for (int r = 0; r < ranks; ++r) {
      if (rc[r] == 0) continue;
      const std::size_t b = rd[r] / row_bytes, n = rc[r] / row_bytes;
      place_entries(table.cols, table.type, packed_rows(recv.as<char>() + b * row_bytes, row_bytes),
                    nullptr, out.type, dense, positions + b, n, row_bytes, place);
    }
  }
}

template <typename IndexT>
void scatter_distributed(const dense_matrix& in, const IndexT* idx, const wm_tensor& table,
                         const gather_geometry& g, const gather_options& options,
                         cudaStream_t stream) {
  const char* op = "scatter";
  communicator& comm = nccl_comm_of(*table.memory, op);
  device_exchange x = plan_exchange_device(comm, idx, g.count, g, table.rows, op,
                                           /*skip_self=*/true, /*slices=*/1,
                                           /*peer_proposal=*/-1, stream);
  const std::size_t row_bytes = g.table_row_bytes;
  const rows_ref dense = dense_rows(in, g.dense_stride_bytes);
  const rows_ref own = own_part_rows(*table.memory, g);
  const std::int64_t* positions = x.positions->as<std::int64_t>();
  const std::size_t in_row_bytes = table.cols * g.dense_elem_bytes;
  // Pack the rows for the other ranks in bucket order, converted to the table's dtype; the own
  // bucket's gap stays unsent.
  stream_buffer send(g.count * row_bytes, stream);
  const std::size_t ranges[2][2] = {{0, x.self_begin}, {x.self_begin + x.self_count, g.count}};
  for (const auto& range : ranges) {
    const std::size_t b = range[0], e = range[1];
    if (e <= b) continue;
    gather_entries(table.cols, in.type, dense, positions + b, table.type,
                   packed_rows(send.as<char>() + b * row_bytes, row_bytes), nullptr, e - b,
                   in_row_bytes, stream);
  }
  stream_buffer recv(x.recv_total * row_bytes, stream);
  comm.alltoallv(send.as<void>(), scaled(x.send_counts, row_bytes).data(),
                 scaled(x.send_displs, row_bytes).data(), recv.as<void>(),
                 scaled(x.recv_counts, row_bytes).data(), scaled(x.recv_displs, row_bytes).data(),
                 dtype::uint8, stream);
  // Write in rank order (lower ranks' rows, the own rows, higher ranks' rows): the last
  // occurrence in rank order wins for duplicates.
  const int me = comm.rank();
  const auto own_rows = static_cast<std::size_t>(g.owner_row_begin[me + 1] - g.owner_row_begin[me]);
  const std::size_t before = x.recv_displs[me];
  const std::int64_t* local_rows = x.local_rows->as<std::int64_t>();
  const bool sort_rows =
      !options.unique_indices ||
      (table.memory->location() == memory_location::host && g.count >= options.sort_host_threshold);
  scatter_entries(table.cols, table.type, packed_rows(recv.as<void>(), row_bytes), nullptr,
                  table.type, own, local_rows, before, own_rows, row_bytes, sort_rows, stream);
  scatter_entries(table.cols, in.type, dense, positions + x.self_begin, table.type, own,
                  x.send_rows->as<std::int64_t>() + x.self_begin, x.self_count, own_rows,
                  in_row_bytes, sort_rows, stream);
  scatter_entries(table.cols, table.type,
                  packed_rows(recv.as<char>() + before * row_bytes, row_bytes), nullptr, table.type,
                  own, local_rows + before, x.recv_total - before, own_rows, row_bytes, sort_rows,
                  stream);
}

template void gather_distributed<std::int32_t>(const wm_tensor&, const std::int32_t*,
                                               const dense_matrix&, const gather_geometry&,
                                               const gather_options&, cudaStream_t);
template void gather_distributed<std::int64_t>(const wm_tensor&, const std::int64_t*,
                                               const dense_matrix&, const gather_geometry&,
                                               const gather_options&, cudaStream_t);
template void scatter_distributed<std::int32_t>(const dense_matrix&, const std::int32_t*,
                                                const wm_tensor&, const gather_geometry&,
                                                const gather_options&, cudaStream_t);
template void scatter_distributed<std::int64_t>(const dense_matrix&, const std::int64_t*,
                                                const wm_tensor&, const gather_geometry&,
                                                const gather_options&, cudaStream_t);

}  // namespace wholememory::detail
