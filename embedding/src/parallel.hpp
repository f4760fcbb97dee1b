// Splitting host loops over threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace wholestore::embedding::detail {

/// Runs body(begin, end) over [0, n) in up to `threads` contiguous ranges, one per thread, with
/// at least `min_per_thread` items each (small work stays on the calling thread).  The ranges
/// never share an item, so a body that writes only its items' outputs gives the same result for
/// any thread count.
template <typename Body>
void parallel_ranges(std::size_t n, unsigned threads, std::size_t min_per_thread, Body body) {
  const std::size_t by_work =
      std::max<std::size_t>(1, n / std::max<std::size_t>(min_per_thread, 1));
  const std::size_t t = std::min<std::size_t>(std::max(threads, 1u), by_work);
  if (t <= 1) {
    body(std::size_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(t - 1);
  const std::size_t chunk = (n + t - 1) / t;
  for (std::size_t k = 1; k < t; ++k) {
    const std::size_t b = std::min(n, k * chunk), e = std::min(n, b + chunk);
    pool.emplace_back([=] { body(b, e); });
  }
  body(0, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

}  // namespace wholestore::embedding::detail
