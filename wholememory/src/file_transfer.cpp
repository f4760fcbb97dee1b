// Moving this rank's bytes between memory and files: chunks, worker threads, staging buffers
// and progress (file_transfer.hpp).
#include "file_transfer.hpp"

#include "cuda_memory.hpp"
#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

namespace wholememory::detail {

std::vector<owned_range> owned_ranges(const allocation& memory) {
  std::vector<owned_range> ranges;
  const int me = memory.comm().rank();
  for (int i = 0; i < memory.num_parts(); ++i) {
    const part_info p = memory.part(i);
    if (p.rank != me || p.bytes == 0) continue;
    WM_EXPECTS(p.ptr != nullptr, "part " << i << " of " << p.bytes << " bytes, owned by rank " << me
                                         << ", is not mapped in this process");
    ranges.push_back(owned_range{p.offset, p.bytes, p.ptr, p.device});
  }
  return ranges;
}

void append_chunks(std::size_t array, std::uint64_t offset, std::uint64_t bytes, void* ptr,
                   int device, std::vector<io_chunk>& out) {
  const std::uint64_t end = offset + bytes;
  for (std::uint64_t at = offset; at < end;) {
    const std::uint64_t stop = std::min(end, (at / io_chunk_bytes + 1) * io_chunk_bytes);
    void* at_ptr = ptr == nullptr ? nullptr : static_cast<char*>(ptr) + (at - offset);
    out.push_back(io_chunk{array, at, stop - at, at_ptr, device});
    at = stop;
  }
}

void progress_meter::report(bool force) {
  if (!callback_) return;
  const std::uint64_t done = done_.load(std::memory_order_relaxed);
  if (!force && reported_once_ && done == reported_) return;
  reported_ = done;
  reported_once_ = true;
  callback_(done, total_);
}

worker_scratch::worker_scratch() = default;
worker_scratch::~worker_scratch() = default;

unsigned char* worker_scratch::host_buffer() {
  if (!buffer_) buffer_.reset(new unsigned char[io_chunk_bytes]);
  return buffer_.get();
}

unsigned char* worker_scratch::staging_for(int device) {
  if (device != device_) {
    set_device(device);
    device_ = device;
  }
  unsigned char* buffer = host_buffer();
  // Registered once, after a device is current, so no other GPU gets a context; the
  // registration is portable, so it serves copies with any device.
  if (!registration_) registration_ = register_host_memory(buffer, io_chunk_bytes);
  return buffer;
}

void run_chunks(const std::vector<io_chunk>& chunks, unsigned threads, progress_meter& meter,
                const chunk_job& job) {
  const unsigned workers = static_cast<unsigned>(
      std::min<std::size_t>(std::max(threads, 1u), std::max<std::size_t>(chunks.size(), 1)));
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mutex;
  std::condition_variable changed;
  std::exception_ptr first_error;
  unsigned running = workers;

  auto fail = [&](const std::exception_ptr& e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!first_error) first_error = e;
    stop = true;
  };
  auto work = [&](unsigned worker) {
    try {
      worker_scratch scratch;
      while (!stop) {
        const std::size_t i = next.fetch_add(1);
        if (i >= chunks.size()) break;
        job(worker, chunks[i], scratch);
        meter.add(chunks[i].bytes);
        changed.notify_one();
      }
    } catch (...) {
      fail(std::current_exception());
    }
    std::lock_guard<std::mutex> lock(mutex);
    --running;
    changed.notify_one();
  };

  std::vector<std::thread> pool;
  pool.reserve(workers);
  try {
    for (unsigned w = 0; w < workers; ++w) pool.emplace_back(work, w);
  } catch (...) {  // thread creation failed: stop the ones that started
    fail(std::current_exception());
    std::lock_guard<std::mutex> lock(mutex);
    running -= workers - static_cast<unsigned>(pool.size());
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    while (running > 0) {
      changed.wait_for(lock, std::chrono::milliseconds(100));
      if (stop) continue;
      lock.unlock();
      try {
        meter.report();
      } catch (...) {
        fail(std::current_exception());
      }
      lock.lock();
    }
  }
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
}

unsigned io_threads(unsigned requested) {
  if (requested > 0) return requested;
  const unsigned hardware = std::thread::hardware_concurrency();
  return std::clamp(hardware, 1u, 4u);
}

unique_fd open_file(const std::string& path, int flags, unsigned mode) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd < 0) {
    const int err = errno;
    WM_FAIL(system_error, path << ": cannot open: " << errno_text(err));
  }
  return unique_fd(fd);
}

void sync_file(int fd, const std::string& path) {
  if (::fsync(fd) != 0) {
    const int err = errno;
    WM_FAIL(system_error, path << ": fsync failed: " << errno_text(err));
  }
}

void write_all(int fd, const void* data, std::uint64_t bytes, std::uint64_t offset,
               const std::string& path) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, p, std::min<std::uint64_t>(bytes, std::uint64_t{1} << 30),
                               static_cast<off_t>(offset));
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      WM_FAIL(system_error, path << ": writing " << bytes << " bytes at offset " << offset
                                 << " failed: " << errno_text(err));
    }
    WM_EXPECTS(n > 0, path << ": pwrite wrote nothing at offset " << offset);
    p += n;
    bytes -= static_cast<std::uint64_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

void read_all(int fd, void* data, std::uint64_t bytes, std::uint64_t offset,
              const std::string& path) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, p, std::min<std::uint64_t>(bytes, std::uint64_t{1} << 30),
                              static_cast<off_t>(offset));
    if (n < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      WM_FAIL(system_error, path << ": reading " << bytes << " bytes at offset " << offset
                                 << " failed: " << errno_text(err));
    }
    WM_EXPECTS(n > 0, path << ": ends at offset " << offset << ", " << bytes
                           << " bytes earlier than expected (did it change on disk?)");
    p += n;
    bytes -= static_cast<std::uint64_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
}

}  // namespace wholememory::detail
