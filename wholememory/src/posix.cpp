#include "posix.hpp"

#include <wholememory/error.hpp>
#include <wholememory/log.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace wholememory::detail {

unique_fd& unique_fd::operator=(unique_fd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

void unique_fd::reset(int fd) {
  int old = std::exchange(fd_, fd);
  // close() may report EINTR after the descriptor is already released (Linux), so it is never
  // retried; a failure here cannot be acted on by the caller and destructors must not throw.
  if (old >= 0 && ::close(old) == -1 && errno != EINTR) {
    WM_LOG(log_level::warn, "close(" << old << ") failed: " << errno_text(errno));
  }
}

unique_fd create_shared_memory(const std::string& name, std::size_t bytes) {
  int raw = -1;
  WM_SYSCALL_TRY(raw = ::memfd_create(name.c_str(), MFD_CLOEXEC));
  unique_fd fd(raw);
  if (bytes > 0) {
    if (::ftruncate(fd.get(), static_cast<off_t>(bytes)) == -1) {
      int err = errno;
      WM_FAIL(system_error, "ftruncate of shared memory '" << name << "' to " << bytes
                                                           << " bytes failed: " << errno_text(err));
    }
  }
  return fd;
}

mapping& mapping::operator=(mapping&& other) noexcept {
  if (this != &other) {
    reset();
    addr_ = std::exchange(other.addr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void mapping::reset() {
  if (addr_ != nullptr && bytes_ > 0 && ::munmap(addr_, bytes_) == -1) {
    WM_LOG(log_level::warn,
           "munmap(" << addr_ << ", " << bytes_ << ") failed: " << errno_text(errno));
  }
  addr_ = nullptr;
  bytes_ = 0;
}

mapping map_shared(int fd, std::size_t bytes) {
  if (bytes == 0) return mapping{};
  void* addr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) {
    int err = errno;
    WM_FAIL(system_error, "mmap(MAP_SHARED) of fd " << fd << " for " << bytes
                                                    << " bytes failed: " << errno_text(err));
  }
  return mapping(addr, bytes);
}

}  // namespace wholememory::detail
