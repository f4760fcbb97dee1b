/*
 * device_cache: a GPU's copy of the hot rows of an embedding table whose weights live in host
 * memory (or anywhere the GPU reads slowly), in front of the table's lookups.
 *
 * Random reads of pinned host memory are bound by address translation at about 35-40 million
 * rows per second whatever the row size (docs/benchmarks.md); real index streams are skewed, so
 * a small set of rows takes most lookups.  The cache holds a fixed set of rows chosen up front
 * (static policy: the most frequent rows of an access sample, or any list the caller chooses,
 * such as the highest-degree nodes), in device memory of one GPU, with a row -> slot map (4
 * bytes per table row) so that a lookup costs one extra 4-byte read per index and no search.
 * docs/architecture.md ("Embedding cache") gives the measurements behind the static policy.
 *
 * Lookups through the cache give exactly the bytes table::lookup gives (the same conversions),
 * for every index, cached or not.  Coherence with training is write-through: apply_gradients
 * and scatter_rows through the cache update the table as the table's own calls do, then copy
 * the changed cached rows back into the cache (each once per call, read through the table's
 * lookup), so a cached row is never stale and a checkpoint of the table needs no flush.  With one rank the rows of the call's list are re-read on the
 * same stream; with several, any rank's list may change any row, so the call waits for every
 * rank's update (a stream wait and a barrier) and re-reads every cached row.  flush() does the
 * same for callers that changed the table behind the cache's back (load_checkpoint, the
 * table's own calls).
 *
 * One cache serves one rank on one GPU; every rank of a job may hold its own over the same
 * table.  The table must be continuous or chunked (any location); a cache of a distributed
 * table is refused (its remote rows are reached only through the exchange).  Building a cache
 * is local (not collective) and synchronous; lookup synchronizes its stream once (the index
 * check); the collective calls are those of the table (apply_gradients).  Needs a build with
 * CUDA (logic_error otherwise).
 */
#pragma once

#include <embedding/table.hpp>
#include <wholememory/gather.hpp>
#include <wholememory/stream.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace wholestore::embedding {

/// Lookup counts since the cache was made (or reset_stats).
struct cache_stats {
  std::uint64_t lookups = 0;  ///< indices looked up
  std::uint64_t hits = 0;     ///< of them, served from the cache
  double hit_rate() const {
    return lookups ? static_cast<double>(hits) / static_cast<double>(lookups) : 0.0;
  }
};

/// The static policy: the `capacity` rows that appear most often in `access_sample` (ties go
/// to the lower row id), at most the number of distinct rows in the sample.  Indices outside
/// [0, rows) throw logic_error naming the first one and its position.
std::vector<std::int64_t> hottest_rows(const std::vector<std::int64_t>& access_sample,
                                       std::size_t rows, std::size_t capacity);

namespace detail {
struct cache_impl;
}

class device_cache {
 public:
  device_cache() noexcept;
  /// Caches rows `rows` of `t` (distinct, in [0, t.rows()); at most t.rows() of them) in
  /// device memory of `device`, reading them from the table now.  `t` must outlive the cache.
  /// Throws logic_error for a distributed table, a bad or repeated row (naming it), a build
  /// without CUDA; out_of_memory.  Synchronous.
  device_cache(table& t, const std::vector<std::int64_t>& rows, int device);
  device_cache(device_cache&&) noexcept;
  device_cache& operator=(device_cache&&) noexcept;
  device_cache(const device_cache&) = delete;
  device_cache& operator=(const device_cache&) = delete;
  ~device_cache();

  std::size_t capacity() const;
  int device() const;

  /// table::lookup through the cache: `indices` (int32 or int64) and `out` (any float dtype,
  /// out.rows == indices.count, out.cols == dim) in memory the GPU reads.  An index outside
  /// [0, rows) throws logic_error naming it and its position, with `out` untouched.
  /// Hits are copied from the cache; misses are listed on the device and read through the
  /// table's lookup (the memory layer's gather).  Waits for `stream` after the index check,
  /// after the miss listing, and in the table's lookup; the last copies are left enqueued.
  void lookup(const wholememory::index_array& indices, const wholememory::dense_matrix& out,
              cudaStream_t stream);

  /// table::apply_gradients, then the touched cached rows are re-read from the table on
  /// `stream`.  Collective as apply_gradients (every rank calls; a rank without a cache calls
  /// the table's).
  void apply_gradients(const wholememory::index_array& indices,
                       const wholememory::dense_matrix& grads, float lr, cudaStream_t stream);

  /// table::scatter_rows, then the touched rows of this cache are re-read on `stream`.  Not
  /// collective (as the table's on continuous or chunked memory): other ranks' caches of the
  /// same table call flush() once the write is done.
  void scatter_rows(const wholememory::index_array& indices, const wholememory::dense_matrix& rows,
                    cudaStream_t stream);

  /// Re-reads every cached row from the table on `stream` (after the table changed by other
  /// means: another rank's cache, load_checkpoint, the table's own calls).
  void flush(cudaStream_t stream);

  /// Counts of this cache's lookups; reading them synchronizes `stream`.
  cache_stats stats(cudaStream_t stream) const;
  void reset_stats(cudaStream_t stream);

 private:
  /// Makes the cached copies of rows changed by apply_gradients current again.
  void after_table_change(const wholememory::index_array& indices, cudaStream_t stream);

  std::unique_ptr<detail::cache_impl> impl_;
};

}  // namespace wholestore::embedding
