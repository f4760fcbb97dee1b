// Random walks on distributed graphs, CPU side (random_walks_host's walk_distributed_host), and
// the agreement every rank reaches before a distributed walk on either path
// (agree_distributed_walk; the GPU side is cuda/walks_distributed.cu).
#include "owned_rows_host.hpp"
#include "parallel_host.hpp"
#include "walks_common.hpp"

#include <graph/detail/walk_step.hpp>
#include <graph/walks.hpp>
#include <wholememory/bootstrap.hpp>
#include <wholememory/communicator.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace wholestore::graph::detail {

namespace wm = ::wholememory;

namespace {
/// What every rank must agree on before a distributed walk's steps, and its start check.
struct walk_call {
  std::int64_t length = 0;
  double p = 1.0, q = 1.0;
  std::int64_t count = 0, bad_position = -1, bad_value = 0;
};
}  // namespace

std::vector<std::int64_t> agree_distributed_walk(const csr_graph& g, std::size_t count,
                                                 const walk_options& o, std::int64_t bad_position,
                                                 std::int64_t bad_value, wm::backend needed,
                                                 const char* op) {
  wm::communicator& comm = g.row_offsets.comm();
  const auto R = static_cast<std::size_t>(comm.size());
  walk_call mine;
  mine.length = o.length;
  mine.p = o.p;
  mine.q = o.q;
  mine.count = static_cast<std::int64_t>(count);
  mine.bad_position = bad_position;
  mine.bad_value = bad_value;
  std::vector<walk_call> all(R);
  comm.get_bootstrap().allgather(&mine, all.data(), sizeof(walk_call));
  // Every rank sees every rank's call, so all throw here or none does.
  for (std::size_t r = 0; r < R; ++r) {
    WM_EXPECTS(all[r].length == all[0].length && all[r].p == all[0].p && all[r].q == all[0].q,
               op << ": the ranks walk a distributed graph together and must pass the same "
                     "length, p and q; rank "
                  << r << " has length " << all[r].length << ", p " << all[r].p << ", q "
                  << all[r].q << ", rank 0 length " << all[0].length << ", p " << all[0].p << ", q "
                  << all[0].q);
  }
  WM_EXPECTS(comm.get_backend() == needed,
             op << ": a distributed graph walked "
                << (needed == wm::backend::host ? "on the CPU needs the host communicator"
                                                : "on the GPU needs an NCCL communicator"));
  for (std::size_t r = 0; r < R; ++r) {
    if (all[r].bad_position < 0) continue;
    WM_EXPECTS(static_cast<int>(r) != comm.rank(),
               op << ": start node " << all[r].bad_value << " at position " << all[r].bad_position
                  << " is outside the graph of " << g.num_nodes << " nodes");
    WM_FAIL(wm::logic_error, op << ": rank " << r << " passed start node " << all[r].bad_value
                                << ", outside the graph of " << g.num_nodes << " nodes");
  }
  // Collective, the same answer everywhere.
  WM_EXPECTS(edges_follow_nodes(g),
             op << ": the distributed graph's edges do not follow its nodes (it was not laid out "
                   "by make_graph or load_graph), so no rank holds whole rows to walk");
  std::vector<std::int64_t> counts(R);
  for (std::size_t r = 0; r < R; ++r) counts[r] = all[r].count;
  return counts;
}

namespace {

// ---------------------------------------------------------------------------------------------
// Distributed graphs whose edges follow their nodes: every step is served by the owner of the
// walks' current nodes.  Collective: per step every rank sends its live walks (key, current
// node, and for node2vec the previous node) to the owners, which draw the next node from their
// own parts and reply with it (-1: a dead end).  DeepWalk, and node2vec's first step, take the
// first draw; node2vec's later steps run walk_step's trials (node2vec_trials), and a trial that
// must know whether its candidate neighbors the previous node asks that node's owner: rounds
// of (owner of cur -> owner of prev) questions and answers until no rank has one left.  A
// walk's draws depend on its key and step only, so the walks are those of continuous memory.

/// Collective: the counts every rank sends to every other, then `width`-word records placed
/// by owner (`owner[j]` for record j): `got` receives what this rank is sent, in rank order;
/// `order[slot]` is the record at each position of the buckets.
struct bucket_exchange {
  std::vector<std::size_t> send, send_displs, recv, recv_displs, ones, each;
  std::vector<std::int64_t> sent_counts, got_counts, packed;
  std::vector<std::size_t> order;
  explicit bucket_exchange(std::size_t R)
      : send(R),
        send_displs(R),
        recv(R),
        recv_displs(R),
        ones(R, 1),
        each(R),
        sent_counts(R),
        got_counts(R) {
    for (std::size_t r = 0; r < R; ++r) each[r] = r;
  }
  /// Returns the number of records received.  write(j, dst) puts record j's `width` words
  /// at dst, in its owner's bucket.
  template <typename Write>
  std::size_t run(wm::communicator& comm, const std::vector<int>& owner, std::size_t width,
                  const Write& write, std::vector<std::int64_t>& got) {
    const std::size_t R = send.size();
    std::fill(send.begin(), send.end(), 0);
    for (int w : owner) ++send[static_cast<std::size_t>(w)];
    send_displs[0] = 0;
    for (std::size_t r = 1; r < R; ++r) send_displs[r] = send_displs[r - 1] + send[r - 1];
    std::vector<std::size_t> cursor = send_displs;
    order.resize(owner.size());
    packed.resize(width * owner.size());
    for (std::size_t j = 0; j < owner.size(); ++j) {
      const std::size_t slot = cursor[static_cast<std::size_t>(owner[j])]++;
      order[slot] = j;
      write(j, packed.data() + width * slot);
    }
    for (std::size_t r = 0; r < R; ++r) sent_counts[r] = static_cast<std::int64_t>(send[r]);
    exchange(comm, sent_counts.data(), ones, each, got_counts.data(), ones, each);
    recv_displs[0] = 0;
    for (std::size_t r = 0; r < R; ++r) {
      recv[r] = static_cast<std::size_t>(got_counts[r]);
      if (r > 0) recv_displs[r] = recv_displs[r - 1] + recv[r - 1];
    }
    const std::size_t m = recv_displs[R - 1] + recv[R - 1];
    got.resize(width * m);
    exchange(comm, packed.data(), send, send_displs, got.data(), recv, recv_displs, width);
    return m;
  }
  /// One word per received record back to its sender; `back[j]` answers record j of run().
  void reply(wm::communicator& comm, const std::vector<std::int64_t>& answers,
             std::vector<std::int64_t>& back) {
    std::vector<std::int64_t> in_order(order.size());
    exchange(comm, answers.data(), recv, recv_displs, in_order.data(), send, send_displs);
    back.resize(order.size());
    for (std::size_t slot = 0; slot < order.size(); ++slot) back[order[slot]] = in_order[slot];
  }
};

/// The owner's candidate for a draw: position rand_below(x, degree) of its row [first, first +
/// degree), walk_fault for a neighbor id outside the graph.
struct own_neighbor {
  const own_parts& own;
  std::int64_t first, degree, num_nodes;
  std::int64_t operator()(std::uint64_t x) const {
    const std::int64_t next = own.column(
        first + static_cast<std::int64_t>(rand_below(x, static_cast<std::uint64_t>(degree))));
    return next >= 0 && next < num_nodes ? next : walk_fault;
  }
};

/// The owner's first draw of every request in [q0, q1) (detail/walk_step.hpp): the reply, or a
/// node2vec trial that must ask about the previous node (appended to `waits`).  `asked`: the
/// requests (key, current node, previous node for node2vec); first/end: their rows, filled
/// here.  Row and
/// column reads run ahead of the draws by prefetch (they are cache misses on a large graph,
/// and the requests' rows are independent).
/// The owner's step takes a thread for every this many requests, up to the call's threads.
constexpr std::size_t owner_step_min_part = 4096;

struct owner_step {
  const own_parts& own;
  const walk_rule& rule;
  std::int64_t num_nodes;
  std::uint32_t step;
  const std::int64_t* asked;  // per request: key, current node, and previous node (node2vec)
  std::size_t width;          // words a request: 2, or 3 for node2vec
  std::int64_t* first;
  std::int64_t* end;
  std::int64_t* replies;

  struct waiting {
    std::size_t q;
    std::uint32_t t;
    std::int64_t candidate;
  };

  std::uint64_t first_draw(std::size_t q) const {
    return draw(static_cast<std::uint64_t>(asked[width * q]), static_cast<std::uint64_t>(step)
                                                                  << 32);
  }

  void run(std::size_t q0, std::size_t q1, std::vector<waiting>& waits, bool& fault) const {
    constexpr std::size_t row_ahead = 16, column_ahead = 8;
    for (std::size_t q = q0; q < q1; ++q) {
      if (q + row_ahead < q1) {
        const std::int64_t v = asked[width * (q + row_ahead) + 1];
        if (v >= own.first && v < own.end) own.prefetch_row(v);
      }
      if (q + column_ahead < q1) {
        const std::size_t r = q + column_ahead;
        std::int64_t s = 0, e = 0;
        if (own.row(asked[width * r + 1], s, e) && e > s) {
          own.prefetch_column(s + static_cast<std::int64_t>(rand_below(
                                      first_draw(r), static_cast<std::uint64_t>(e - s))));
        }
      }
      const std::int64_t v = asked[width * q + 1], from = width > 2 ? asked[width * q + 2] : -1;
      if (!own.row(v, first[q], end[q])) {
        fault = true;
        continue;
      }
      if (end[q] == first[q]) continue;
      const own_neighbor neighbor{own, first[q], end[q] - first[q], num_nodes};
      std::int64_t next = 0;
      if (!rule.second_order || from < 0) {
        next = neighbor(first_draw(q));
      } else {
        std::uint32_t t = 0;
        std::int64_t candidate = walk_fault;
        next = node2vec_trials(rule, static_cast<std::uint64_t>(asked[width * q]), step, from, t,
                               candidate, neighbor);
        if (next == walk_ask) {
          waits.push_back({q, t, candidate});
          continue;
        }
      }
      if (next == walk_fault) {
        fault = true;
        next = -1;
      }
      replies[q] = next;
    }
  }
};

}  // namespace

void walk_distributed_host(const csr_graph& g, const std::int64_t* starts, std::size_t count,
                           const walk_options& o, std::int64_t* out, unsigned threads) {
  const char* op = "random_walks_host";
  wm::communicator& comm = g.row_offsets.comm();
  const auto R = static_cast<std::size_t>(comm.size());
  std::int64_t bad_position = -1, bad_value = 0;
  for (std::size_t i = 0; i < count && bad_position < 0; ++i) {
    if (starts[i] < 0 || static_cast<std::uint64_t>(starts[i]) >= g.num_nodes) {
      bad_position = static_cast<std::int64_t>(i);
      bad_value = starts[i];
    }
  }
  agree_distributed_walk(g, count, o, bad_position, bad_value, wm::backend::host, op);

  const own_parts own(g);
  const walk_rule rule = make_walk_rule(o.p, o.q);
  const auto num_nodes = static_cast<std::int64_t>(g.num_nodes);
  const std::size_t width = static_cast<std::size_t>(o.length) + 1;
  std::vector<std::uint64_t> keys(count);
  std::vector<std::int64_t> cur(count), prev(count, -1);
  std::vector<std::size_t> live;
  for (std::size_t i = 0; i < count; ++i) {
    keys[i] = walk_key(o.seed, o.first_walk + i, starts[i]);
    cur[i] = starts[i];
    out[i * width] = starts[i];
    if (width > 1) live.push_back(i);
  }
  bool fault = false;
  bucket_exchange steps(R), questions(R);
  std::vector<int> owner;
  std::vector<std::int64_t> asked, replies, answers, ask_got, said, heard;
  const std::size_t W = rule.second_order ? 3 : 2;  // words a request
  // The owner's trials of request q that wait for an answer: (request, trial, candidate).
  using waiting = owner_step::waiting;
  std::vector<waiting> waits, still;
  std::vector<std::vector<waiting>> part_waits;
  std::vector<char> part_faults;
  for (std::size_t s = 1; s < width; ++s) {
    const auto step = static_cast<std::uint32_t>(s - 1);
    // The live walks' requests to the owners of their current nodes.
    owner.resize(live.size());
    for (std::size_t j = 0; j < live.size(); ++j) owner[j] = own.owner_of(cur[live[j]]);
    const std::size_t m = steps.run(
        comm, owner, W,
        [&](std::size_t j, std::int64_t* r) {
          const std::size_t i = live[j];
          r[0] = static_cast<std::int64_t>(keys[i]);
          r[1] = cur[i];
          if (W > 2) r[2] = prev[i];
        },
        asked);
    // The owner's step (detail/walk_step.hpp): a row of its own, then the draws.
    replies.assign(m, -1);
    std::vector<std::int64_t> first(m), end(m);
    // One contiguous part of the requests per thread; the parts' waiting trials are joined in
    // request order (interleaved small chunks made node2vec's question rounds a third slower).
    const owner_step serve{own, rule,         num_nodes,  step,          asked.data(),
                           W,   first.data(), end.data(), replies.data()};
    const std::size_t parts =
        std::max<std::size_t>(1, std::min<std::size_t>(threads, m / owner_step_min_part));
    const std::size_t grain = (m + parts - 1) / parts;
    part_waits.assign(parts, {});
    part_faults.assign(parts, 0);
    parallel_chunks(m, grain, threads, [&](std::size_t b, std::size_t e, unsigned) {
      bool f = false;
      serve.run(b, e, part_waits[b / grain], f);
      if (f) part_faults[b / grain] = 1;
    });
    waits.clear();
    for (std::size_t c = 0; c < parts; ++c) {
      fault = fault || part_faults[c] != 0;
      waits.insert(waits.end(), part_waits[c].begin(), part_waits[c].end());
    }
    // node2vec: rounds of questions to the previous nodes' owners, every rank as long as any
    // rank has one (the totals are summed: the same loop everywhere).
    while (rule.second_order) {  // DeepWalk never asks, as every rank knows
      auto total = static_cast<std::int64_t>(waits.size());
      comm.allreduce_sum(&total, &total, 1, wm::dtype::int64, nullptr);
      if (total == 0) break;
      owner.resize(waits.size());
      for (std::size_t k = 0; k < waits.size(); ++k)
        owner[k] = own.owner_of(asked[W * waits[k].q + 2]);
      const std::size_t asks = questions.run(
          comm, owner, 2,
          [&](std::size_t k, std::int64_t* r) {
            r[0] = asked[W * waits[k].q + 2];  // the previous node
            r[1] = waits[k].candidate;
          },
          ask_got);
      said.assign(asks, 0);
      for (std::size_t a = 0; a < asks; ++a) {
        std::int64_t pf = 0, pe = 0;
        if (!own.row(ask_got[2 * a], pf, pe)) {
          fault = true;
          continue;
        }
        for (std::int64_t e = pf; e < pe; ++e) {
          if (own.column(e) == ask_got[2 * a + 1]) {
            said[a] = 1;
            break;
          }
        }
      }
      questions.reply(comm, said, heard);
      still.clear();
      for (std::size_t k = 0; k < waits.size(); ++k) {
        waiting w = waits[k];
        const std::size_t q = w.q;
        const auto key = static_cast<std::uint64_t>(asked[W * q]);
        const std::int64_t from = asked[W * q + 2];
        const own_neighbor neighbor{own, first[q], end[q] - first[q], num_nodes};
        std::int64_t next =
            node2vec_resume(rule, key, step, from, heard[k] != 0, w.t, w.candidate, neighbor);
        if (next == walk_ask) {
          still.push_back(w);
          continue;
        }
        if (next == walk_fault) {
          fault = true;
          next = -1;
        }
        replies[q] = next;
      }
      waits.swap(still);
    }
    steps.reply(comm, replies, answers);
    std::vector<std::size_t> next_live;
    for (std::size_t j = 0; j < live.size(); ++j) {
      const std::size_t i = live[j];
      const std::int64_t v = answers[j];
      if (v < 0) {
        std::fill(out + i * width + s, out + (i + 1) * width, std::int64_t{-1});
        continue;
      }
      out[i * width + s] = v;
      prev[i] = cur[i];
      cur[i] = v;
      if (s + 1 < width) next_live.push_back(i);
    }
    live.swap(next_live);
  }
  std::vector<std::int64_t> faults(R, 0);
  faults[static_cast<std::size_t>(comm.rank())] = fault ? 1 : 0;
  comm.allreduce_sum(faults.data(), faults.data(), R, wm::dtype::int64, nullptr);
  for (std::size_t r = 0; r < R; ++r) {
    WM_EXPECTS(faults[r] == 0, corrupt_graph_message(op)
                                   << (static_cast<int>(r) == comm.rank()
                                           ? std::string()
                                           : " (met by rank " + std::to_string(r) + ")"));
  }
}

}  // namespace wholestore::graph::detail
