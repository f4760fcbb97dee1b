// Pieces every bench suite uses (bench_common.hpp).
#include "bench_common.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

namespace wholestore::apps {

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double host_memcpy_rate(unsigned threads) {
  const std::size_t bytes = std::size_t(256) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> times;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    const std::size_t chunk = bytes / threads;
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { std::memcpy(b.data() + t * chunk, a.data() + t * chunk, chunk); });
    for (auto& th : pool) th.join();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return bytes / median(times);
}

}  // namespace wholestore::apps
