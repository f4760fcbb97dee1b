/*
 * Private to file IO: moving this rank's bytes between memory and files.  The bytes are cut
 * into chunks at fixed offsets of the array, and a few threads take chunks in turn and pread
 * or pwrite them; device memory is staged through a page-locked host buffer per thread.  The
 * calling thread only reports progress.  Nothing here is collective.
 */
#pragma once

#include <wholememory/allocation.hpp>
#include <wholememory/file_io.hpp>
#include "posix.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace wholememory::detail {

class resource;

/// Bytes [offset, offset + bytes) of an array that this rank moves, at `ptr` in this process,
/// on CUDA device `device` (-1: host memory).
struct owned_range {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  void* ptr = nullptr;
  int device = -1;
};

/// The non-empty parts of `memory` this rank owns: its own part, or every part in
/// single-process multi-GPU mode (where the one rank owns them all), in offset order.
std::vector<owned_range> owned_ranges(const allocation& memory);

/// Bytes a worker moves in one step, and the size of its staging buffer; a multiple of 8 so
/// that chunk boundaries are word boundaries of the checksum.
constexpr std::uint64_t io_chunk_bytes = std::uint64_t{4} << 20;

/// One step of a worker: bytes [offset, offset + bytes) of array `array`, at `ptr` on
/// `device` in memory (`ptr` is nullptr in the verify pass, which reads the file only).
struct io_chunk {
  std::size_t array = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  void* ptr = nullptr;
  int device = -1;
};

/// Appends the chunks of bytes [offset, offset + bytes) of `array`, cut at the multiples of
/// io_chunk_bytes; `ptr` (may be nullptr) holds byte `offset`.
void append_chunks(std::size_t array, std::uint64_t offset, std::uint64_t bytes, void* ptr,
                   int device, std::vector<io_chunk>& out);

/// The bytes this rank moves in one call and how many are done; reports them through
/// file_io_options::progress, from the calling thread only.
class progress_meter {
 public:
  progress_meter(std::function<void(std::uint64_t, std::uint64_t)> callback, std::uint64_t total)
      : callback_(std::move(callback)), total_(total) {}
  void add(std::uint64_t bytes) { done_.fetch_add(bytes, std::memory_order_relaxed); }
  /// Calls the callback when the count changed since the last report (or `force`).
  void report(bool force = false);

 private:
  std::function<void(std::uint64_t, std::uint64_t)> callback_;
  std::uint64_t total_;
  std::atomic<std::uint64_t> done_{0};
  std::uint64_t reported_ = 0;
  bool reported_once_ = false;
};

/// What one worker thread keeps between chunks: a host buffer of io_chunk_bytes and the CUDA
/// device it made current last.
class worker_scratch {
 public:
  worker_scratch();
  worker_scratch(const worker_scratch&) = delete;
  worker_scratch& operator=(const worker_scratch&) = delete;
  ~worker_scratch();

  /// A plain host buffer of io_chunk_bytes (the verify pass).
  unsigned char* host_buffer();
  /// The same buffer page-locked for copies with `device`, which is made current.
  unsigned char* staging_for(int device);

 private:
  std::unique_ptr<unsigned char[]> buffer_;
  std::unique_ptr<resource> registration_;
  int device_ = -1;
};

/// The job of one chunk; `worker` is in [0, threads).
using chunk_job = std::function<void(unsigned worker, const io_chunk& chunk, worker_scratch&)>;

/// Runs `job` on every chunk, on min(threads, chunks) threads taking chunks in turn, adding
/// each finished chunk's bytes to `meter` and reporting it from the calling thread.  The
/// first exception, of a job or of the progress callback, stops the workers after their
/// current chunk and is rethrown once all have stopped.
void run_chunks(const std::vector<io_chunk>& chunks, unsigned threads, progress_meter& meter,
                const chunk_job& job);

/// IO threads for file_io_options::threads (0: up to 4, at most the hardware's threads).
unsigned io_threads(unsigned requested);

/// `dir`/`file`.
inline std::string file_path(const std::string& dir, const std::string& file) {
  return dir + "/" + file;
}

/// open(2) with O_CLOEXEC added; throws system_error naming `path`.
unique_fd open_file(const std::string& path, int flags, unsigned mode = 0644);

/// fsync(2); throws system_error naming `path`.
void sync_file(int fd, const std::string& path);

/// pwrite of all `bytes`, retrying short writes and EINTR.  Throws system_error naming `path`
/// and the offset (a full disk shows here as ENOSPC).
void write_all(int fd, const void* data, std::uint64_t bytes, std::uint64_t offset,
               const std::string& path);

/// pread of all `bytes`, retrying short reads and EINTR.  Throws system_error, or logic_error
/// when the file ends early (it changed after its size was checked).
void read_all(int fd, void* data, std::uint64_t bytes, std::uint64_t offset,
              const std::string& path);

}  // namespace wholememory::detail
