// The static hot-row policy of device_cache (host code, shared by every build), and the cache's
// refusal in a build without CUDA.
#include <embedding/cache.hpp>
#include <wholememory/error.hpp>

#include <algorithm>
#include <unordered_map>
#include <utility>

namespace wholestore::embedding {

std::vector<std::int64_t> hottest_rows(const std::vector<std::int64_t>& access_sample,
                                       std::size_t rows, std::size_t capacity) {
  std::unordered_map<std::int64_t, std::uint64_t> counts;
  counts.reserve(std::min(access_sample.size(), rows));
  for (std::size_t i = 0; i < access_sample.size(); ++i) {
    const std::int64_t r = access_sample[i];
    WM_EXPECTS(r >= 0 && static_cast<std::size_t>(r) < rows,
               "hottest_rows: index " << r << " at position " << i << " is outside the table of "
                                      << rows << " rows");
    ++counts[r];
  }
  std::vector<std::pair<std::uint64_t, std::int64_t>> order;
  order.reserve(counts.size());
  for (const auto& [row, n] : counts) order.emplace_back(n, row);
  const std::size_t keep = std::min(capacity, order.size());
  // Most frequent first; equal counts by row id, so the choice does not depend on hashing.
  auto hotter = [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    hotter);
  std::vector<std::int64_t> out(keep);
  for (std::size_t i = 0; i < keep; ++i) out[i] = order[i].second;
  return out;
}

#if !defined(WHOLESTORE_HAS_CUDA)

namespace detail {
struct cache_impl {};
}  // namespace detail

namespace {
[[noreturn]] void no_cuda() {
  WM_FAIL(wholememory::logic_error,
          "device_cache needs a build with CUDA (WHOLESTORE_WITH_CUDA=ON)");
}
}  // namespace

device_cache::device_cache() noexcept = default;
device_cache::device_cache(table&, const std::vector<std::int64_t>&, int) { no_cuda(); }
device_cache::device_cache(device_cache&&) noexcept = default;
device_cache& device_cache::operator=(device_cache&&) noexcept = default;
device_cache::~device_cache() = default;
std::size_t device_cache::capacity() const { return 0; }
int device_cache::device() const { return -1; }
void device_cache::lookup(const wholememory::index_array&, const wholememory::dense_matrix&,
                          cudaStream_t) {
  no_cuda();
}
void device_cache::apply_gradients(const wholememory::index_array&,
                                   const wholememory::dense_matrix&, float, cudaStream_t) {
  no_cuda();
}
void device_cache::scatter_rows(const wholememory::index_array&, const wholememory::dense_matrix&,
                                cudaStream_t) {
  no_cuda();
}
void device_cache::flush(cudaStream_t) { no_cuda(); }
cache_stats device_cache::stats(cudaStream_t) const { return {}; }
void device_cache::reset_stats(cudaStream_t) {}

#endif

}  // namespace wholestore::embedding
