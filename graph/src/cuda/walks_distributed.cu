// gpu_walker on a distributed graph whose edges follow their nodes (csr_graph.hpp): DeepWalk
// and node2vec, every step served by the owners of the walks' current nodes, collectively over
// the graph's NCCL communicator.  The walks are continuous memory's bit for bit: a step's
// draws depend on the walk's key and the step only (detail/walk_step.hpp), and the owner
// draws them with the requester's key from its own rows.
//
// Sizes come from bounds, so a DeepWalk step never waits for the host: rank r never has more
// than its round's walk count n_r live, so its region for every owner holds n_r requests (led
// by how many it filled) and every owner's reply region for r holds n_r answers.  Every rank
// knows every n_r from the call's one allgather (agree_distributed_walk).  A step is four
// kernels and two exchanges; the call waits once at the end, for the fault flags.  node2vec's
// trials that must know whether a candidate neighbors the previous node make the walk wait at
// the owner of the current node, which asks the previous node's owner in rounds (every rank's
// count of questions summed, one wait a round, then questions and answers) until no walk waits.
// A waiting walk asks about its next ask_batch such trials at once, run ahead as if each were
// rejected, so a round settles up to ask_batch of them and a step takes a few rounds.
// Walk counts past round_walks are walked in rounds, the same number on every rank (a rank
// out of walks takes part with none), so that the exchanges stay within a few hundred MB.
#include "../edge_layout.hpp"
#include "../walks_common.hpp"
#include "walks_distributed.hpp"
#include "walks_hubs.cuh"

#include <graph/detail/walk_step.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/cuda_check.hpp>
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/ptr_gen.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

namespace wholestore::graph::detail {

namespace wm = ::wholememory;

namespace {

constexpr int block_threads = 256;

unsigned grid_for(std::size_t n) {
  return static_cast<unsigned>(
      std::clamp<std::size_t>((n + block_threads - 1) / block_threads, 1, std::size_t{1} << 16));
}

/// The rank holding node v's row: the last part starting at or before v (node_begin: ranks + 1
/// entries, an empty part shares its start with the next one, which owns the node).
__device__ int owner_of(const std::int64_t* node_begin, int ranks, std::int64_t v) {
  int lo = 0, hi = ranks;  // node_begin[lo] <= v < node_begin[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (node_begin[mid] <= v) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/// The round's walks: their keys and start nodes, column 0 of their rows, every walk live
/// (list `live` of `live_count` = n).
__global__ void start_walks(const std::int64_t* starts, std::size_t n, std::uint64_t seed,
                            std::uint64_t first_walk, std::size_t width, std::uint64_t* keys,
                            std::int64_t* prev, std::int64_t* cur, int* live, int* live_count,
                            std::int64_t* out) {
  if (blockIdx.x == 0 && threadIdx.x == 0) *live_count = static_cast<int>(n);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t v = starts[i];
    keys[i] = walk_key(seed, first_walk + i, v);
    prev[i] = -1;
    cur[i] = v;
    out[i * width] = v;
    live[i] = static_cast<int>(i);
  }
}

/// A slot from `*counter` for every lane of the warp whose `key` equals its own (>= 0), one
/// atomic per distinct key: tens of thousands of walks bump a handful of counters, which
/// lane-by-lane atomics serialize.  Every lane of the warp calls; lanes with key -1 get -1.
__device__ int claim_slot(int* counters, int key) {
  const unsigned peers = __match_any_sync(0xffffffffu, key);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int leader = __ffs(peers) - 1;
  int first = 0;
  if (key >= 0 && lane == leader) first = atomicAdd(counters + key, __popc(peers));
  first = __shfl_sync(0xffffffffu, first, leader);
  return key >= 0 ? first + __popc(peers & ((1u << lane) - 1)) : -1;
}

constexpr std::size_t request_words = 3;  // key, previous node, current node

/// Each live walk's request into the region of its node's owner: region o of `send` is
/// [count, request, request, ...] with room for n requests, and slot j of region o asks for
/// walk order[o * n + j].  Whole warps step through the list (claim_slot).
__global__ void bucket_walks(const int* live, const int* live_count, const std::uint64_t* keys,
                             const std::int64_t* prev, const std::int64_t* cur,
                             const std::int64_t* node_begin, int ranks, std::size_t n, int* filled,
                             long long* order, long long* send) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const auto m = static_cast<std::size_t>(*live_count);
  for (std::size_t at = static_cast<std::size_t>(blockIdx.x) * blockDim.x + (threadIdx.x & ~31u);
       at < m; at += stride) {
    const std::size_t j = at + threadIdx.x % 32;
    int i = -1, o = -1;
    std::int64_t v = 0;
    if (j < m) {
      i = live[j];
      v = cur[i];
      o = owner_of(node_begin, ranks, v);
    }
    const int slot = claim_slot(filled, o);
    if (o < 0) continue;
    long long* r = send + static_cast<std::size_t>(o) * (1 + request_words * n) + 1 +
                   request_words * static_cast<std::size_t>(slot);
    order[static_cast<std::size_t>(o) * n + static_cast<std::size_t>(slot)] = i;
    r[0] = static_cast<long long>(keys[i]);
    r[1] = prev[i];
    r[2] = v;
  }
}

/// Every region's count into its header (regions of `region_words`); the next list of live
/// walks starts empty (next_count, when given).
__global__ void seal_regions(const int* filled, int ranks, std::size_t region_words,
                             long long* send, int* next_count) {
  const int o = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (o < ranks) send[static_cast<std::size_t>(o) * region_words] = filled[o];
  if (o == 0 && next_count != nullptr) *next_count = 0;
}

/// This rank's rows: entries [first, end) of row_offsets at ro, its edges [edge_begin,
/// edge_end), the whole of its column part (csr_graph.hpp's layout).
template <typename ColT>
struct own_rows {
  const std::int64_t* ro;
  std::int64_t first, end, edge_begin, edge_end;
  const ColT* col;
  std::int64_t num_nodes;
  /// Node v's row [s, e); false when v is not this rank's or the row leaves its edges.
  __device__ bool row(std::int64_t v, std::int64_t& s, std::int64_t& e) const {
    if (v < first || v >= end) return false;
    s = ro[v - first];
    e = v + 1 < end ? ro[v + 1 - first] : edge_end;
    return s >= edge_begin && e >= s && e <= edge_end;
  }
  __device__ std::int64_t column(std::int64_t edge) const {
    return static_cast<std::int64_t>(col[edge - edge_begin]);
  }
};

/// The candidate of draw x in row [s, s + degree): walk_fault for an id outside the graph.
template <typename ColT>
struct row_neighbor {
  own_rows<ColT> rows;
  std::int64_t s, degree;
  __device__ std::int64_t operator()(std::uint64_t x) const {
    const std::int64_t v = rows.column(
        s + static_cast<std::int64_t>(rand_below(x, static_cast<std::uint64_t>(degree))));
    return v >= 0 && v < rows.num_nodes ? v : walk_fault;
  }
};

/// The questions a waiting walk sends in one round: its next trials that need an answer, run
/// ahead as if each were rejected, so that a round settles up to this many of them.
constexpr int ask_batch = 8;

/// A node2vec walk waiting at the owner of its node for the previous node's owner: where its
/// reply goes and its request (recv), its asked trials and their candidates, and what comes
/// after them when every one is rejected: `after` (a decided node, walk_fault, or walk_ask to
/// go on from trial `next_trial`).
struct waiting_walk {
  long long reply_at, request_at, after;
  unsigned next_trial;
  int asks;
  unsigned trial[ask_batch];
  long long candidate[ask_batch];
};

/// The trials of walk_step from `t` (node2vec, prev >= 0), running ahead of up to ask_batch
/// trials that need an answer: the decided node (or walk_fault) when none did, else walk_ask
/// with `w`'s asks and `after` filled.
template <typename Neighbor>
__device__ std::int64_t trials_ahead(const walk_rule& rule, std::uint64_t key, std::uint32_t step,
                                     std::int64_t prev, std::uint32_t t, const Neighbor& neighbor,
                                     waiting_walk& w) {
  w.asks = 0;
  std::int64_t candidate = walk_fault;
  for (;;) {
    const std::int64_t next = node2vec_trials(rule, key, step, prev, t, candidate, neighbor);
    if (next != walk_ask) {
      if (w.asks == 0) return next;
      w.after = next;
      return walk_ask;
    }
    w.trial[w.asks] = t;
    w.candidate[w.asks] = candidate;
    ++w.asks;
    ++t;
    if (t >= max_walk_trials) {  // every asked trial rejected: walk_step takes the last one
      w.after = candidate;
      return walk_ask;
    }
    if (w.asks == ask_batch) {
      w.after = walk_ask;
      w.next_trial = t;
      return walk_ask;
    }
  }
}

/// The own part's rows as a CSR of its own: out[i] = ro[i] - edge_begin, out[n] = edges.
__global__ void rebase_rows(const std::int64_t* ro, std::size_t n, std::int64_t edge_begin,
                            std::int64_t edges, std::int64_t* out) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i <= n;
       i += stride)
    out[i] = i < n ? ro[i] - edge_begin : edges;
}

/// *sum = *count (a question count into the device words that the ranks sum).
__global__ void count_to_sum(const int* count, long long* sum) { *sum = *count; }
/// to[0..1] = from[0..1] (the next round's waiting walks and questions become this round's).
__global__ void move_counts(const int* from, int* to) {
  to[0] = from[0];
  to[1] = from[1];
}

/// The owner's side of step `step`: request j of requester r's region (recv + in_base[r],
/// blockIdx.y = r) gets the next node, drawn as walk_step draws it from this rank's rows, at
/// reply[out_base[r] + j]; -1 for a dead end.  A node2vec trial that must ask the previous
/// node's owner joins `waits` instead (its reply comes later).  A row or neighbor outside this
/// rank's part or the graph sets `fault` (and answers -1).
template <typename ColT>
__global__ void serve_steps(const long long* recv, const std::size_t* in_base,
                            const std::size_t* out_base, own_rows<ColT> rows, walk_rule rule,
                            std::uint32_t step, long long* reply, waiting_walk* waits,
                            int* wait_count, unsigned long long* fault) {
  const long long* region = recv + in_base[blockIdx.y];
  const auto m = static_cast<std::size_t>(region[0]);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t at = static_cast<std::size_t>(blockIdx.x) * blockDim.x + (threadIdx.x & ~31u);
       at < m; at += stride) {
    const std::size_t j = at + threadIdx.x % 32;
    const std::size_t request_at = in_base[blockIdx.y] + 1 + request_words * j;
    std::int64_t next = -1;
    waiting_walk w;
    if (j < m) {
      const auto key = static_cast<std::uint64_t>(recv[request_at]);
      const std::int64_t from = recv[request_at + 1], v = recv[request_at + 2];
      std::int64_t s = 0, e = 0;
      if (!rows.row(v, s, e)) {
        *fault = 1;
      } else if (e > s) {
        const row_neighbor<ColT> neighbor{rows, s, e - s};
        if (!rule.second_order || from < 0) {
          next = neighbor(draw(key, static_cast<std::uint64_t>(step) << 32));
        } else {
          next = trials_ahead(rule, key, step, from, 0, neighbor, w);
        }
        if (next == walk_fault) {
          *fault = 1;
          next = -1;
        }
      }
    }
    const bool asks = next == walk_ask;
    const int slot = claim_slot(wait_count, asks ? 0 : -1);
    if (j >= m) continue;
    if (asks) {
      w.reply_at = static_cast<long long>(out_base[blockIdx.y] + j);
      w.request_at = static_cast<long long>(request_at);
      atomicAdd(wait_count + 1, w.asks);
      waits[slot] = w;
    } else {
      reply[out_base[blockIdx.y] + j] = next;
    }
  }
}

/// The owner of the current node asks: question i of waiting walk k, (previous node,
/// candidate), into the region of the previous node's owner, region o of `send` holding up to w
/// questions [count, question, ...], slot j of region o from question order[o * w + j] =
/// k * ask_batch + i.
__global__ void bucket_questions(const waiting_walk* waits, const int* wait_count,
                                 const long long* recv, const std::int64_t* node_begin, int ranks,
                                 std::size_t w, int* filled, long long* order, long long* send) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const auto m = static_cast<std::size_t>(*wait_count);
  for (std::size_t at = static_cast<std::size_t>(blockIdx.x) * blockDim.x + (threadIdx.x & ~31u);
       at < m; at += stride) {
    const std::size_t k = at + threadIdx.x % 32;
    int o = -1, asks = 0;
    std::int64_t from = 0;
    if (k < m) {
      from = recv[waits[k].request_at + 1];
      o = owner_of(node_begin, ranks, from);
      asks = waits[k].asks;
    }
    for (int i = 0; i < ask_batch; ++i) {
      const int to = i < asks ? o : -1;
      const int slot = claim_slot(filled, to);
      if (to < 0) continue;
      long long* q = send + static_cast<std::size_t>(to) * (1 + 2 * w) + 1 +
                     2 * static_cast<std::size_t>(slot);
      order[static_cast<std::size_t>(to) * w + static_cast<std::size_t>(slot)] =
          static_cast<long long>(k * ask_batch + static_cast<std::size_t>(i));
      q[0] = from;
      q[1] = waits[k].candidate[i];
    }
  }
}

/// The previous node's owner answers: question j of asker r's region (recv + in_base[r],
/// blockIdx.y = r), 1 when the candidate is among the node's neighbors, at
/// answer[out_base[r] + j]: a binary search in the sorted copy of a hub's row (`hubs`), else a
/// warp a question, its lanes scanning the row together.  A row outside this rank's part sets
/// `fault`.
template <typename ColT>
__global__ void answer_questions(const long long* recv, const std::size_t* in_base,
                                 const std::size_t* out_base, own_rows<ColT> rows, hub_lists hubs,
                                 long long* answer, unsigned long long* fault) {
  const long long* region = recv + in_base[blockIdx.y];
  const auto m = static_cast<std::size_t>(region[0]);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * blockDim.x / 32;
  for (std::size_t j = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       j < m; j += warps) {
    const std::int64_t from = region[1 + 2 * j], x = region[2 + 2 * j];
    std::int64_t s = 0, e = 0;
    bool found = false;
    const bool own = rows.row(from, s, e);
    const std::int64_t b = own && hubs.begin != nullptr ? hubs.begin[from - rows.first] : -1;
    if (!own) {
      if (lane == 0) *fault = 1;
    } else if (b >= 0) {
      found = sorted_list_holds(hubs.sorted, hubs.entries, b, e - s, x);
    } else {
      for (std::int64_t edge = s + lane; __any_sync(0xffffffffu, edge < e) && !found; edge += 32) {
        found = __any_sync(0xffffffffu, edge < e && rows.column(edge) == x);
      }
    }
    if (lane == 0) answer[out_base[blockIdx.y] + j] = found ? 1 : 0;
  }
}

/// The answers back at the asker: answer j of owner o's region (blockIdx.y = o) to question
/// order[o * w + j], at heard[question].
__global__ void place_answers(const long long* answers, const long long* order, const int* filled,
                              std::size_t w, long long* heard) {
  const std::size_t o = blockIdx.y;
  const auto m = static_cast<std::size_t>(filled[o]);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t j = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m;
       j += stride)
    heard[order[o * w + j]] = answers[o * w + j];
}

/// The owner of the current node goes on with waiting walk k: its asked trials in order, the
/// first taken by its answer (heard[k * ask_batch + i]) decides; when all are rejected, what
/// came after them (a decided node, or more trials run ahead).  A walk decided gets its reply,
/// one that must ask again joins the next list (next_count: [0] walks, [1] questions).
template <typename ColT>
__global__ void resume_walks(const waiting_walk* waits, const int* wait_count,
                             const long long* heard, const long long* recv, own_rows<ColT> rows,
                             walk_rule rule, std::uint32_t step, long long* reply,
                             waiting_walk* next_waits, int* next_count, unsigned long long* fault) {
  const auto m = static_cast<std::size_t>(*wait_count);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t at = static_cast<std::size_t>(blockIdx.x) * blockDim.x + (threadIdx.x & ~31u);
       at < m; at += stride) {
    const std::size_t k = at + threadIdx.x % 32;
    waiting_walk w;
    std::int64_t next = -1;
    if (k < m) {
      w = waits[k];
      const auto key = static_cast<std::uint64_t>(recv[w.request_at]);
      const std::int64_t from = recv[w.request_at + 1], v = recv[w.request_at + 2];
      const std::uint64_t base = static_cast<std::uint64_t>(step) << 32;
      next = walk_ask;
      for (int i = 0; i < w.asks && next == walk_ask; ++i) {
        const double u =
            static_cast<double>(draw(key, base + 2 * static_cast<std::uint64_t>(w.trial[i]) + 1) >>
                                11) *
            0x1.0p-53;
        const bool member = heard[k * ask_batch + static_cast<std::size_t>(i)] != 0;
        if (u < (member ? rule.neighbor_ratio : rule.away_ratio)) next = w.candidate[i];
      }
      if (next == walk_ask) next = w.after;
      if (next == walk_ask) {  // all rejected: run ahead again
        std::int64_t s = 0, e = 0;
        rows.row(v, s, e);  // checked when the walk's trials began
        const row_neighbor<ColT> neighbor{rows, s, e - s};
        const long long reply_at = w.reply_at, request_at = w.request_at;
        next = trials_ahead(rule, key, step, from, w.next_trial, neighbor, w);
        w.reply_at = reply_at;
        w.request_at = request_at;
      }
      if (next == walk_fault) {
        *fault = 1;
        next = -1;
      }
    }
    const bool asks = next == walk_ask;
    const int slot = claim_slot(next_count, asks ? 0 : -1);
    if (k >= m) continue;
    if (asks) {
      atomicAdd(next_count + 1, w.asks);
      next_waits[slot] = w;
    } else {
      reply[w.reply_at] = next;
    }
  }
}

/// The requester's side: answer j of owner o's region (blockIdx.y = o) is walk
/// order[o * n + j]'s node at column s; a walk that met a dead end gets -1 to its row's end,
/// the others stay live while columns remain.  Whole warps step through the answers.
__global__ void apply_steps(const long long* answers, const long long* order, const int* filled,
                            std::size_t n, std::size_t s, std::size_t width, std::int64_t* prev,
                            std::int64_t* cur, std::int64_t* out, int* next_live,
                            int* next_live_count) {
  const std::size_t o = blockIdx.y;
  const auto m = static_cast<std::size_t>(filled[o]);
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t at = static_cast<std::size_t>(blockIdx.x) * blockDim.x + (threadIdx.x & ~31u);
       at < m; at += stride) {
    const std::size_t j = at + threadIdx.x % 32;
    bool keep = false;
    std::size_t i = 0;
    if (j < m) {
      i = static_cast<std::size_t>(order[o * n + j]);
      const std::int64_t v = answers[o * n + j];
      std::int64_t* row = out + i * width;
      if (v < 0) {
        for (std::size_t t = s; t < width; ++t) row[t] = -1;
      } else {
        row[s] = v;
        prev[i] = cur[i];
        cur[i] = v;
        keep = s + 1 < width;
      }
    }
    const int slot = claim_slot(next_live_count, keep ? 0 : -1);
    if (keep) next_live[slot] = static_cast<int>(i);
  }
}

/// Carves `bytes` (aligned to 256) off a grow-only buffer.
class carver {
 public:
  explicit carver(char* base) : base_(base) {}
  template <typename T>
  T* take(std::size_t count) {
    T* p = reinterpret_cast<T*>(base_ == nullptr ? nullptr : base_ + used_);
    used_ += (count * sizeof(T) + 255) / 256 * 256;
    return p;
  }
  std::size_t used() const { return used_; }

 private:
  char* base_;
  std::size_t used_ = 0;
};

}  // namespace

/// The rounds of node2vec questions of one step (see the top): collective, one wait a round.
struct question_rounds {
  wm::communicator& comm;
  std::size_t R, me;
  int device;
  wm::device_buffer& scratch;  // grown between rounds, after their wait
  cudaStream_t stream;
  std::vector<long long> totals;
  std::vector<std::size_t> send_counts, send_displs, recv_counts, recv_displs;
  std::vector<std::size_t> answer_counts, answer_displs, back_counts, back_displs, bases;
  hub_lists hubs;  // this rank's sorted hub lists, when it has them

  question_rounds(wm::communicator& c, int dev, wm::device_buffer& buf, cudaStream_t s)
      : comm(c),
        R(static_cast<std::size_t>(c.size())),
        me(static_cast<std::size_t>(c.rank())),
        device(dev),
        scratch(buf),
        stream(s),
        totals(R),
        send_counts(R),
        send_displs(R),
        recv_counts(R),
        recv_displs(R),
        answer_counts(R),
        answer_displs(R),
        back_counts(R),
        back_displs(R),
        bases(2 * R) {}

  /// Every rank's count of questions (`questions` on the device; `sums`: R words of device
  /// scratch); one wait.
  void count(const int* questions, long long* sums) {
    WM_CUDA_TRY(cudaMemsetAsync(sums, 0, R * sizeof(long long), stream));
    count_to_sum<<<1, 1, 0, stream>>>(questions, sums + me);
    WM_CUDA_CHECK_LAUNCH(stream);
    comm.allreduce_sum(sums, sums, R, wm::dtype::int64, stream);
    comm.synchronize(stream);
    WM_CUDA_TRY(cudaMemcpy(totals.data(), sums, R * sizeof(long long), cudaMemcpyDeviceToHost));
  }

  /// counts: [0] waiting walks, [1] their questions, [2] and [3] the next round's.
  template <typename ColT>
  void run(const own_rows<ColT>& rows, const walk_rule& rule, std::uint32_t step,
           const long long* recv, const std::int64_t* node_begin, long long* reply,
           waiting_walk* waits, waiting_walk* next_waits, int* filled, int* counts, long long* sums,
           unsigned long long* fault) {
    for (;;) {
      count(counts + 1, sums);
      long long total = 0;
      for (long long x : totals) total += x;
      if (total == 0) return;
      const auto w = static_cast<std::size_t>(totals[me]);  // this rank's questions
      std::size_t in_at = 0, out_at = 0, widest = 1;
      for (std::size_t r = 0; r < R; ++r) {
        const auto wr = static_cast<std::size_t>(totals[r]);
        send_counts[r] = 1 + 2 * w;
        send_displs[r] = r * (1 + 2 * w);
        recv_counts[r] = 1 + 2 * wr;
        recv_displs[r] = in_at;
        bases[r] = in_at;
        answer_counts[r] = wr;
        answer_displs[r] = out_at;
        bases[R + r] = out_at;
        back_counts[r] = w;
        back_displs[r] = r * w;
        in_at += 1 + 2 * wr;
        out_at += wr;
        widest = std::max(widest, wr);
      }
      // The round's buffers; the stream is idle here (count() waited), so growing is safe.
      const auto layout = [&](carver& c) {
        struct parts {
          std::size_t* bases;
          long long *send, *got, *said, *answers, *order, *heard;
        } q;
        q.bases = c.take<std::size_t>(2 * R);
        q.send = c.take<long long>(R * (1 + 2 * w));
        q.got = c.take<long long>(in_at);
        q.said = c.take<long long>(out_at);
        q.answers = c.take<long long>(R * w);
        q.order = c.take<long long>(R * w);
        q.heard = c.take<long long>(w * ask_batch);  // by waiting walk and ask
        return q;
      };
      carver sizing(nullptr);
      layout(sizing);
      if (scratch.size() < sizing.used()) {
        scratch.reset();
        scratch = wm::device_buffer(sizing.used(), device);
      }
      carver c(static_cast<char*>(scratch.data()));
      const auto q = layout(c);
      WM_CUDA_TRY(cudaMemcpyAsync(q.bases, bases.data(), bases.size() * sizeof(std::size_t),
                                  cudaMemcpyHostToDevice, stream));
      WM_CUDA_TRY(cudaMemsetAsync(filled, 0, R * sizeof(int), stream));
      WM_CUDA_TRY(cudaMemsetAsync(counts + 2, 0, 2 * sizeof(int), stream));
      if (w > 0) {
        bucket_questions<<<grid_for(w), block_threads, 0, stream>>>(
            waits, counts, recv, node_begin, static_cast<int>(R), w, filled, q.order, q.send);
        WM_CUDA_CHECK_LAUNCH(stream);
      }
      seal_regions<<<grid_for(R), block_threads, 0, stream>>>(filled, static_cast<int>(R),
                                                              1 + 2 * w, q.send, nullptr);
      WM_CUDA_CHECK_LAUNCH(stream);
      comm.alltoallv(q.send, send_counts.data(), send_displs.data(), q.got, recv_counts.data(),
                     recv_displs.data(), wm::dtype::int64, stream);
      answer_questions<<<dim3(grid_for(32 * widest), static_cast<unsigned>(R)), block_threads, 0,
                         stream>>>(q.got, q.bases, q.bases + R, rows, hubs, q.said, fault);
      WM_CUDA_CHECK_LAUNCH(stream);
      comm.alltoallv(q.said, answer_counts.data(), answer_displs.data(), q.answers,
                     back_counts.data(), back_displs.data(), wm::dtype::int64, stream);
      if (w > 0) {
        place_answers<<<dim3(grid_for(w), static_cast<unsigned>(R)), block_threads, 0, stream>>>(
            q.answers, q.order, filled, w, q.heard);
        WM_CUDA_CHECK_LAUNCH(stream);
        resume_walks<<<grid_for(w), block_threads, 0, stream>>>(
            waits, counts, q.heard, recv, rows, rule, step, reply, next_waits, counts + 2, fault);
        WM_CUDA_CHECK_LAUNCH(stream);
      }
      // The walks that ask again are in next_waits: swap the lists and their counts.
      std::swap(waits, next_waits);
      move_counts<<<1, 1, 0, stream>>>(counts + 2, counts);
      WM_CUDA_CHECK_LAUNCH(stream);
    }
  }
};

void walk_distributed_gpu(const csr_graph& g, const std::int64_t* starts, std::size_t count,
                          const walk_options& o, std::int64_t* out, std::int64_t bad_position,
                          std::int64_t bad_value, int device, wm::device_buffer& scratch,
                          wm::device_buffer& question_scratch, own_hub_lists hubs,
                          cudaStream_t stream) {
  const char* op = "gpu_walker::walk";
  const std::vector<std::int64_t> counts =
      agree_distributed_walk(g, count, o, bad_position, bad_value, wm::backend::nccl, op);
  const walk_rule rule = make_walk_rule(o.p, o.q);
  wm::communicator& comm = g.row_offsets.comm();
  const int ranks = comm.size();
  const auto R = static_cast<std::size_t>(ranks);
  const std::size_t width = static_cast<std::size_t>(o.length) + 1;
  if (width == 1) {  // no steps: the starts are the walks
    if (count > 0) {
      WM_CUDA_TRY(
          cudaMemcpyAsync(out, starts, count * sizeof(std::int64_t), cudaMemcpyDefault, stream));
    }
    return;
  }
  const std::int64_t most = *std::max_element(counts.begin(), counts.end());
  // node2vec keeps a waiting-walk record (~140 bytes) per request: smaller rounds.
  const auto round_walks = static_cast<std::int64_t>(
      std::max<std::size_t>(1024, (std::size_t{1} << (rule.second_order ? 21 : 24)) / R));
  const std::int64_t rounds = (most + round_walks - 1) / round_walks;

  // This rank's rows and edges (its parts), and every part's first node.
  const wm::part_info rows = g.row_offsets.local_part();
  const wm::part_info cols = g.col_indices.local_part();
  const std::size_t col_elem = wm::dtype_size(g.col_type);
  const auto* ro = static_cast<const std::int64_t*>(rows.ptr);
  const auto first = static_cast<std::int64_t>(rows.offset / sizeof(std::int64_t));
  const auto end = static_cast<std::int64_t>((rows.offset + rows.bytes) / sizeof(std::int64_t));
  const auto edge_begin = static_cast<std::int64_t>(cols.offset / col_elem);
  const auto edge_end = static_cast<std::int64_t>((cols.offset + cols.bytes) / col_elem);
  const std::vector<std::uint64_t> nodes = first_nodes(g.row_offsets.get_partition(), g.num_nodes);

  // Scratch for the biggest round: sized by the walks of a round on every rank.
  auto round_count = [&](std::size_t r, std::int64_t k) {
    return static_cast<std::size_t>(
        std::clamp<std::int64_t>(counts[r] - k * round_walks, 0, round_walks));
  };
  const std::size_t W = request_words;
  const auto layout = [&](carver& c, std::size_t n, std::size_t in_words, std::size_t out_words) {
    struct parts {
      std::int64_t* node_begin;
      std::size_t* bases;  // per round: in_base[R] | out_base[R]
      std::uint64_t* keys;
      std::int64_t *prev, *cur;
      int *live, *counters;  // live: two lists of n; counters: below
      unsigned long long* fault;
      long long *order, *send, *recv, *reply, *answers;
      waiting_walk* waits;  // node2vec: two lists of out_words
    } p;
    p.node_begin = c.take<std::int64_t>(R + 1);
    p.bases = c.take<std::size_t>(2 * R * static_cast<std::size_t>(rounds));
    p.keys = c.take<std::uint64_t>(n);
    p.prev = c.take<std::int64_t>(n);
    p.cur = c.take<std::int64_t>(n);
    p.live = c.take<int>(2 * n);
    p.counters = c.take<int>(2 * R + 6);
    p.fault = c.take<unsigned long long>(1);
    p.order = c.take<long long>(R * n);
    p.send = c.take<long long>(R * (1 + W * n));
    p.recv = c.take<long long>(in_words);
    p.reply = c.take<long long>(out_words);
    p.answers = c.take<long long>(R * std::max<std::size_t>(n, 1));  // also the fault sums
    p.waits = c.take<waiting_walk>(rule.second_order ? 2 * out_words : 0);
    return p;
  };
  std::size_t n_most = 0, in_most = 0, out_most = 0;
  for (std::int64_t k = 0; k < rounds; ++k) {
    std::size_t in_words = 0, out_words = 0;
    for (std::size_t r = 0; r < R; ++r) {
      in_words += 1 + W * round_count(r, k);
      out_words += round_count(r, k);
    }
    n_most = std::max(n_most, round_count(static_cast<std::size_t>(comm.rank()), k));
    in_most = std::max(in_most, in_words);
    out_most = std::max(out_most, out_words);
  }
  carver sizing(nullptr);
  layout(sizing, n_most, in_most, out_most);
  if (scratch.size() < sizing.used()) {
    scratch.reset();
    scratch = wm::device_buffer(sizing.used(), device);
  }
  carver c(static_cast<char*>(scratch.data()));
  const auto p = layout(c, n_most, in_most, out_most);
  // Where every requester's region starts in what this rank receives and replies, per round.
  // Copied once, before this call's first collective: a copy from pageable memory may wait
  // for the stream, which must not hold exchanges then (they wait with a timeout, below).
  std::vector<std::size_t> bases(2 * R * static_cast<std::size_t>(rounds));
  for (std::int64_t k = 0; k < rounds; ++k) {
    std::size_t in_at = 0, out_at = 0;
    std::size_t* b = bases.data() + 2 * R * static_cast<std::size_t>(k);
    for (std::size_t r = 0; r < R; ++r) {
      b[r] = in_at;
      b[R + r] = out_at;
      in_at += 1 + W * round_count(r, k);
      out_at += round_count(r, k);
    }
  }
  const std::vector<std::int64_t> begin(nodes.begin(), nodes.end());
  WM_CUDA_TRY(cudaMemcpyAsync(p.node_begin, begin.data(), begin.size() * sizeof(std::int64_t),
                              cudaMemcpyHostToDevice, stream));
  if (!bases.empty()) {
    WM_CUDA_TRY(cudaMemcpyAsync(p.bases, bases.data(), bases.size() * sizeof(std::size_t),
                                cudaMemcpyHostToDevice, stream));
  }
  WM_CUDA_TRY(cudaMemsetAsync(p.fault, 0, sizeof(unsigned long long), stream));
  int* filled = p.counters;               // requests per owner
  int* live_count = p.counters + R;       // [0], [1]
  int* wait_counts = p.counters + R + 2;  // node2vec: waiting walks, questions; the next ones
  int* asked = p.counters + R + 6;        // questions per owner

  question_rounds questions(comm, device, question_scratch, stream);
  if (rule.second_order) {
    // Sorted copies of this rank's hub lists, once per walker: a question about a hub is a
    // binary search instead of a scan of its row.  Local only (no rank waits for another).
    const auto own_nodes = static_cast<std::size_t>(
        std::min<std::int64_t>(end, static_cast<std::int64_t>(g.num_nodes)) - first);
    if (!hubs.tried) {
      wm::device_buffer local_rows((own_nodes + 1) * sizeof(std::int64_t), device);
      rebase_rows<<<grid_for(own_nodes + 1), block_threads, 0, stream>>>(
          ro, own_nodes, edge_begin, edge_end - edge_begin, local_rows.data_as<std::int64_t>());
      WM_CUDA_CHECK_LAUNCH(stream);
      const wm::PtrGen<const std::int64_t, const std::int64_t> row(
          local_rows.data_as<std::int64_t>());
      auto build = [&](const auto* col_part) {
        using ColT = std::remove_const_t<std::remove_pointer_t<decltype(col_part)>>;
        const wm::PtrGen<const ColT, const ColT> col(col_part);
        return build_sorted_lists(
            row, col, own_nodes, static_cast<std::uint64_t>(edge_end - edge_begin), g.num_nodes,
            gpu_walker::hub_degree, device, p.fault, stream, hubs.begin, hubs.sorted);
      };
      const sorted_lists made = g.col_type == wm::dtype::int32
                                    ? build(static_cast<const std::int32_t*>(cols.ptr))
                                    : build(static_cast<const std::int64_t*>(cols.ptr));
      hubs.tried = made != sorted_lists::corrupt;  // a corrupt part: the walk reports it
      WM_CUDA_TRY(cudaMemsetAsync(p.fault, 0, sizeof(unsigned long long), stream));
    }
    if (hubs.sorted.size() > 0) {
      questions.hubs.begin = hubs.begin.data_as<std::int64_t>();
      questions.hubs.sorted = hubs.sorted.data_as<std::int64_t>();
      questions.hubs.entries = static_cast<std::int64_t>(hubs.sorted.size() / sizeof(std::int64_t));
    }
  }
  std::vector<std::size_t> send_counts(R), send_displs(R), recv_counts(R), recv_displs(R);
  std::vector<std::size_t> reply_counts(R), reply_displs(R), answer_counts(R), answer_displs(R);
  const auto me = static_cast<std::size_t>(comm.rank());
  auto with_rows = [&](auto&& f) {
    auto typed = [&](const auto* col) {
      using ColT = std::remove_const_t<std::remove_pointer_t<decltype(col)>>;
      f(own_rows<ColT>{ro, first, end, edge_begin, edge_end, col,
                       static_cast<std::int64_t>(g.num_nodes)});
    };
    if (g.col_type == wm::dtype::int32) {
      typed(static_cast<const std::int32_t*>(cols.ptr));
    } else {
      typed(static_cast<const std::int64_t*>(cols.ptr));
    }
  };
  for (std::int64_t k = 0; k < rounds; ++k) {
    const std::size_t n = round_count(me, k);
    const std::size_t offset = static_cast<std::size_t>(k * round_walks);
    const std::size_t* in_base = p.bases + 2 * R * static_cast<std::size_t>(k);
    std::size_t in_at = 0, out_at = 0, widest = 1;
    for (std::size_t r = 0; r < R; ++r) {
      const std::size_t nr = round_count(r, k);
      send_counts[r] = 1 + W * n;
      send_displs[r] = r * (1 + W * n);
      recv_counts[r] = 1 + W * nr;
      recv_displs[r] = in_at;
      reply_counts[r] = nr;
      reply_displs[r] = out_at;
      answer_counts[r] = n;
      answer_displs[r] = r * n;
      in_at += 1 + W * nr;
      out_at += nr;
      widest = std::max(widest, nr);
    }
    if (n > 0) {
      start_walks<<<grid_for(n), block_threads, 0, stream>>>(
          starts + offset, n, o.seed, o.first_walk + offset, width, p.keys, p.prev, p.cur, p.live,
          live_count, out + offset * width);
      WM_CUDA_CHECK_LAUNCH(stream);
    }
    int which = 0;
    for (std::size_t s = 1; s < width; ++s) {
      const auto step = static_cast<std::uint32_t>(s - 1);
      int* live = p.live + which * n;
      int* next_live = p.live + (1 - which) * n;
      WM_CUDA_TRY(cudaMemsetAsync(filled, 0, R * sizeof(int), stream));
      if (n > 0) {
        bucket_walks<<<grid_for(n), block_threads, 0, stream>>>(live, live_count + which, p.keys,
                                                                p.prev, p.cur, p.node_begin, ranks,
                                                                n, filled, p.order, p.send);
        WM_CUDA_CHECK_LAUNCH(stream);
      }
      seal_regions<<<grid_for(R), block_threads, 0, stream>>>(filled, ranks, 1 + W * n, p.send,
                                                              live_count + 1 - which);
      WM_CUDA_CHECK_LAUNCH(stream);
      comm.alltoallv(p.send, send_counts.data(), send_displs.data(), p.recv, recv_counts.data(),
                     recv_displs.data(), wm::dtype::int64, stream);
      WM_CUDA_TRY(cudaMemsetAsync(wait_counts, 0, 4 * sizeof(int), stream));
      with_rows([&](const auto& own) {
        serve_steps<<<dim3(grid_for(widest), static_cast<unsigned>(R)), block_threads, 0, stream>>>(
            p.recv, in_base, in_base + R, own, rule, step, p.reply, p.waits, wait_counts, p.fault);
        WM_CUDA_CHECK_LAUNCH(stream);
        if (rule.second_order && s > 1) {  // the first step draws first-order: nobody asks
          questions.run(own, rule, step, p.recv, p.node_begin, p.reply, p.waits, p.waits + out_most,
                        asked, wait_counts, p.answers, p.fault);
        }
      });
      comm.alltoallv(p.reply, reply_counts.data(), reply_displs.data(), p.answers,
                     answer_counts.data(), answer_displs.data(), wm::dtype::int64, stream);
      if (n > 0) {
        const dim3 apply_grid(grid_for(n), static_cast<unsigned>(R));
        apply_steps<<<apply_grid, block_threads, 0, stream>>>(
            p.answers, p.order, filled, n, s, width, p.prev, p.cur, out + offset * width, next_live,
            live_count + 1 - which);
        WM_CUDA_CHECK_LAUNCH(stream);
      }
      which = 1 - which;
    }
  }
  // Every rank's fault flag, summed on the device; one wait (with the communicator's timeout).
  auto* faults = reinterpret_cast<long long*>(p.answers);  // free now: R words needed
  std::vector<long long> host(R, 0);
  WM_CUDA_TRY(cudaMemsetAsync(faults, 0, R * sizeof(long long), stream));
  WM_CUDA_TRY(
      cudaMemcpyAsync(faults + me, p.fault, sizeof(long long), cudaMemcpyDeviceToDevice, stream));
  comm.allreduce_sum(faults, faults, R, wm::dtype::int64, stream);
  comm.synchronize(stream);
  WM_CUDA_TRY(cudaMemcpy(host.data(), faults, R * sizeof(long long), cudaMemcpyDeviceToHost));
  for (std::size_t r = 0; r < R; ++r) {
    WM_EXPECTS(host[r] == 0,
               corrupt_graph_message(op)
                   << (r == me ? std::string() : " (met by rank " + std::to_string(r) + ")"));
  }
}

}  // namespace wholestore::graph::detail
