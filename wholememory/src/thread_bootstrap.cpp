// Bootstrap for ranks that are threads of one process: the ranks meet in a shared state object
// under one mutex.  Each round, every rank copies its contribution in; the last to arrive
// checks that all agree, builds the result and advances the generation, which wakes the others.
#include <wholememory/bootstrap.hpp>
#include <wholememory/error.hpp>

#include "bootstrap_rounds.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

namespace wholememory {
namespace {

using detail::collective_op;
using detail::round_args;

// Shared by the bootstraps of one group.  Owned through shared_ptr by each of them, so it
// lives as long as the last rank's bootstrap; split() hands a new group's state from its first
// member to the others through shared_from_this().
class thread_group : public std::enable_shared_from_this<thread_group> {
 public:
  thread_group(int size, std::chrono::milliseconds timeout)
      : size_(size),
        timeout_(timeout),
        present_(size, false),
        departed_(size, false),
        args_(size),
        payloads_(size) {}

  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  // A rank timed out or left: the next round cannot complete.
  bool broken() {
    std::lock_guard<std::mutex> lock(mutex_);
    return !broken_.empty() ||
           std::find(departed_.begin(), departed_.end(), true) != departed_.end();
  }

  // One collective round.  `send` holds `send_bytes` bytes (the rank's contribution, or
  // nothing for a non-root broadcast); `recv` receives the round's result.
  void run_round(int rank, round_args args, const void* send, std::size_t send_bytes, void* recv) {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::uint64_t generation = generation_;
    args.seq = generation + 1;
    if (!broken_.empty()) {
      WM_FAIL(timeout_error, "bootstrap unusable after an earlier failure: " << broken_);
    }
    std::vector<int> departed = ranks_where(departed_);
    if (!departed.empty()) {
      break_group(detail::describe_ranks(departed) + " left (bootstrap destroyed) before " +
                  detail::op_name(args.op) + " #" + std::to_string(args.seq));
      WM_FAIL(timeout_error, broken_);
    }

    args_[rank] = args;
    const char* bytes = static_cast<const char*>(send);
    payloads_[rank].assign(bytes, bytes + send_bytes);
    present_[rank] = true;
    if (++arrived_ == size_) {
      complete_round();
    } else {
      const auto deadline = std::chrono::steady_clock::now() + timeout_;
      bool done = cv_.wait_until(lock, deadline,
                                 [&] { return generation_ != generation || !broken_.empty(); });
      if (generation_ == generation) {
        if (done) WM_FAIL(timeout_error, broken_);
        // This rank is the first to give up: it names the missing ranks for everybody.
        std::vector<bool> missing(size_);
        for (int r = 0; r < size_; ++r) missing[r] = !present_[r];
        break_group(std::string(detail::op_name(args.op)) + " #" + std::to_string(args.seq) + ": " +
                    detail::describe_ranks(ranks_where(missing)) + " did not arrive within " +
                    std::to_string(timeout_.count()) + " ms");
        WM_FAIL(timeout_error, broken_);
      }
    }
    // The result stays valid until the next round completes, which needs this rank.
    if (!result_error_.empty()) WM_FAIL(mismatch_error, result_error_);
    if (!result_.empty()) std::memcpy(recv, result_.data(), result_.size());
  }

  // The state of the subset meeting named `key`: made by the first member to arrive, handed to
  // each of the `members` members, forgotten once all have it.
  std::shared_ptr<thread_group> join_subset(const std::string& key, int members) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& entry = subsets_[key];
    if (!entry.first) entry.first = std::make_shared<thread_group>(members, timeout_);
    std::shared_ptr<thread_group> group = entry.first;
    if (++entry.second == members) subsets_.erase(key);
    return group;
  }

  // Called by a rank's destructor.  A round in progress can then never complete: the waiting
  // ranks fail now instead of at their timeout.
  void depart(int rank) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    departed_[rank] = true;
    if (arrived_ > 0 && broken_.empty()) {
      const round_args& waiting = args_[ranks_where(present_).front()];
      break_group("rank " + std::to_string(rank) + " left (bootstrap destroyed) during " +
                  detail::op_name(waiting.op) + " #" + std::to_string(waiting.seq));
    }
  }

 private:
  static std::vector<int> ranks_where(const std::vector<bool>& flags) {
    std::vector<int> out;
    for (std::size_t r = 0; r < flags.size(); ++r)
      if (flags[r]) out.push_back(static_cast<int>(r));
    return out;
  }

  // Caller holds the mutex.  After a timeout or a departure the ranks can no longer agree on
  // where they are, so every later call fails too.
  void break_group(std::string message) {
    broken_ = std::move(message);
    cv_.notify_all();
  }

  // Caller holds the mutex and is the last to arrive.
  void complete_round() {
    result_error_ = detail::check_round(args_);
    result_.clear();
    if (result_error_.empty()) {
      switch (args_[0].op) {
        case collective_op::allgather:
          for (const auto& payload : payloads_)
            result_.insert(result_.end(), payload.begin(), payload.end());
          break;
        case collective_op::broadcast:
          result_ = payloads_[args_[0].root];
          break;
        default:
          break;
      }
    }
    for (auto& payload : payloads_) payload.clear();
    std::fill(present_.begin(), present_.end(), false);
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
  }

  const int size_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::uint64_t generation_ = 0;  // rounds completed
  int arrived_ = 0;               // ranks in the current round
  std::vector<bool> present_;     // which ranks are in the current round
  std::vector<bool> departed_;    // ranks whose bootstrap was destroyed
  std::vector<round_args> args_;
  std::vector<std::vector<char>> payloads_;
  std::vector<char> result_;  // of the last completed round
  std::string result_error_;  // its mismatch, if any
  std::string broken_;        // non-empty once a rank timed out or left
  // Subset meetings in progress: key -> (state, members that took it so far).
  std::map<std::string, std::pair<std::shared_ptr<thread_group>, int>> subsets_;
};

class thread_bootstrap final : public bootstrap {
 public:
  thread_bootstrap(std::shared_ptr<thread_group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  ~thread_bootstrap() override { group_->depart(rank_); }

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::chrono::milliseconds timeout() const override { return group_->timeout(); }
  bool broken() const override { return group_->broken(); }

  void allgather(const void* send, void* recv, std::size_t bytes) override {
    count_round();
    group_->run_round(rank_, {collective_op::allgather, 0, bytes, 0}, send, bytes, recv);
  }

  void broadcast(void* buffer, std::size_t bytes, int root) override {
    // Only the root's bytes are needed; the others still declare the size for the check.
    count_round();
    group_->run_round(rank_, {collective_op::broadcast, 0, bytes, root}, buffer,
                      rank_ == root ? bytes : 0, buffer);
  }

  void barrier() override {
    count_round();
    group_->run_round(rank_, {collective_op::barrier, 0, 0, 0}, nullptr, 0, nullptr);
  }

  std::unique_ptr<bootstrap> split(int color, int key) override {
    const int n = size();
    std::int32_t mine[2] = {color, key};
    std::vector<std::int32_t> all(2 * static_cast<std::size_t>(n));
    allgather(mine, all.data(), sizeof(mine));

    std::vector<int> members;  // old ranks of my group, in new-rank order
    if (color >= 0) {
      for (int r = 0; r < n; ++r)
        if (all[2 * r] == color) members.push_back(r);
      std::stable_sort(members.begin(), members.end(),
                       [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });
    }
    // The group's first member creates the state; the others find it through its address.
    std::shared_ptr<thread_group> group;
    if (!members.empty() && members.front() == rank_) {
      group = std::make_shared<thread_group>(static_cast<int>(members.size()), timeout());
    }
    std::uintptr_t my_address = reinterpret_cast<std::uintptr_t>(group.get());
    std::vector<std::uintptr_t> addresses(n);
    allgather(&my_address, addresses.data(), sizeof(my_address));
    if (!members.empty() && !group) {
      group = reinterpret_cast<thread_group*>(addresses[members.front()])->shared_from_this();
    }
    // The creators keep their state alive until every member holds a reference.
    barrier();
    if (members.empty()) return nullptr;
    int new_rank =
        static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    return std::make_unique<thread_bootstrap>(std::move(group), new_rank);
  }

  std::unique_ptr<bootstrap> subset(const std::vector<int>& members) override {
    detail::check_subset_members(members, rank_, size());
    // Calls for the same member list pair up in order, so the count names the meeting.
    std::string key;
    for (int m : members) key += std::to_string(m) + " ";
    key += "#" + std::to_string(subset_calls_[members]++);
    int new_rank =
        static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
    return std::make_unique<thread_bootstrap>(
        group_->join_subset(key, static_cast<int>(members.size())), new_rank);
  }

 private:
  std::shared_ptr<thread_group> group_;
  int rank_;
  std::map<std::vector<int>, int> subset_calls_;
};

}  // namespace

std::vector<std::unique_ptr<bootstrap>> make_thread_bootstraps(int size,
                                                               std::chrono::milliseconds timeout) {
  WM_EXPECTS(size >= 1, "make_thread_bootstraps: size " << size << " must be at least 1");
  WM_EXPECTS(timeout.count() > 0,
             "make_thread_bootstraps: timeout " << timeout.count() << " ms must be positive");
  auto group = std::make_shared<thread_group>(size, timeout);
  std::vector<std::unique_ptr<bootstrap>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<thread_bootstrap>(group, r));
  return out;
}

}  // namespace wholememory
