/*
 * RAII for the operating-system resources of the memory layer: file descriptors, anonymous
 * shared memory (memfd) and mappings.  Nothing here creates a name in /dev/shm, so a crash
 * leaves nothing behind.
 */
#pragma once

#include <cstddef>
#include <string>
#include <utility>

namespace wholememory::detail {

/// Owns one file descriptor; closes it on destruction.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept;
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// An anonymous shared-memory file of `bytes` bytes (memfd_create + ftruncate), close-on-exec.
/// `name` only labels it in /proc.  Throws system_error.
unique_fd create_shared_memory(const std::string& name, std::size_t bytes);

/// Owns one mmap'ed range; unmaps on destruction.
class mapping {
 public:
  mapping() = default;
  mapping(void* addr, std::size_t bytes) : addr_(addr), bytes_(bytes) {}
  mapping(mapping&& other) noexcept
      : addr_(std::exchange(other.addr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  mapping& operator=(mapping&& other) noexcept;
  mapping(const mapping&) = delete;
  mapping& operator=(const mapping&) = delete;
  ~mapping() { reset(); }

  void* get() const { return addr_; }
  std::size_t size() const { return bytes_; }
  void reset();

 private:
  void* addr_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Maps `bytes` bytes of `fd` shared and read-write.  `bytes` == 0 gives an empty mapping.
/// Throws system_error.
mapping map_shared(int fd, std::size_t bytes);

}  // namespace wholememory::detail
