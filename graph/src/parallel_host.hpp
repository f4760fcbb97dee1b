// Threads for the CPU paths of the graph layer (sampling_host.cpp,
// walks_distributed_host.cpp).  Internal.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace wholestore::graph::detail {

/// Runs body(begin, end, worker) over [0, n) in chunks of `grain` items, taken dynamically by
/// up to `threads` threads (worker in [0, threads)).  The first exception is rethrown here.
template <typename Body>
void parallel_chunks(std::size_t n, std::size_t grain, unsigned threads, const Body& body) {
  if (n == 0) return;
  const std::size_t chunks = (n + grain - 1) / grain;
  const unsigned t = static_cast<unsigned>(std::min<std::size_t>(std::max(threads, 1u), chunks));
  if (t == 1) {
    body(std::size_t{0}, n, 0u);
    return;
  }
  std::atomic<std::size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&](unsigned worker) {
    try {
      for (;;) {
        std::size_t c = next.fetch_add(1, std::memory_order_relaxed);
        if (c >= chunks) break;
        body(c * grain, std::min(n, (c + 1) * grain), worker);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
      next.store(chunks);  // the others stop after their current chunk
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  for (unsigned w = 1; w < t; ++w) pool.emplace_back(work, w);
  work(0);
  for (auto& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace wholestore::graph::detail
