/*
 * The contexts behind umem.h.  A context names its bytes in one of two ways: as pointers of
 * this process (host memory, device memory, the mapped parts of a WholeMemory), which
 * copy_bytes moves between, or through read/write calls (files).  umem.cpp copies between any
 * two contexts with these, and turns the umem_failure and wholememory exceptions thrown here
 * into context status.
 */
#pragma once

#include <wholememory/umem.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace wholememory {
class allocation;

namespace detail {

/// A failure with the umem status it maps to; the message is the reason alone (umem.cpp
/// prefixes the call).
class umem_failure : public std::runtime_error {
 public:
  umem_failure(umemStatusType status, const std::string& what)
      : std::runtime_error(what), status_(status) {}
  umemStatusType status() const { return status_; }

 private:
  umemStatusType status_;
};

/// Throws umem_failure with a message streamed from `msg`.
#define WM_UMEM_FAIL(status, msg)                                         \
  do {                                                                    \
    std::ostringstream wm_umem_os_;                                       \
    wm_umem_os_ << msg;                                                   \
    throw ::wholememory::detail::umem_failure(status, wm_umem_os_.str()); \
  } while (0)

/// A run of bytes of a context that sits at `ptr` in this process.
struct umem_piece {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  bool host = true;  ///< host memory (memset, stdio reach it); else device memory
};

/// First-fit reservation of offset ranges in [base, limit): the allocator of contexts whose
/// addresses are offsets (files, WholeMemory).  Reserves at least one byte per range, so every
/// live range has a distinct start.
class offset_ranges {
 public:
  offset_ranges(std::uintptr_t base, std::uintptr_t limit) : base_(base), limit_(limit) {}
  /// Start of a free range of `bytes` bytes; throws umem_failure(umemMemoryError) when none.
  std::uintptr_t reserve(std::size_t bytes);
  /// Releases the range starting at `start`; false when no range starts there.
  bool release(std::uintptr_t start);

 private:
  std::uintptr_t base_, limit_;
  std::map<std::uintptr_t, std::size_t> live_;  // start -> bytes
};

/// One memory context.  Addresses are checked by the callers for overflow of adr + bytes.
class umem_context {
 public:
  virtual ~umem_context() = default;
  virtual umemDeviceType type() const = 0;
  /// Smallest alignment of umem_aligned_alloc.
  virtual std::size_t fundamental_alignment() const { return 1; }
  /// Same memory as `other` (which has the same type()).
  virtual bool same_memory(const umem_context& other) const = 0;

  virtual std::uintptr_t alloc(std::size_t bytes) = 0;
  /// Frees an address alloc() returned; false when it returned no such live address.
  virtual bool free(std::uintptr_t adr) = 0;

  /// The pieces making up [adr, adr + bytes), in order, when they sit in this process's
  /// address space; false when the context reaches its bytes only through read/write.
  /// Throws umem_failure for ranges it cannot reach (null, out of bounds, not mapped here).
  virtual bool map(std::uintptr_t adr, std::size_t bytes, std::vector<umem_piece>& out) = 0;
  /// For contexts that map() nothing: copies between the context and host memory.
  virtual void read(std::uintptr_t adr, void* host_dst, std::size_t bytes);
  virtual void write(std::uintptr_t adr, const void* host_src, std::size_t bytes);

  /// Fills with (unsigned char)c: memset on host pieces, staged copies to device pieces,
  /// write() otherwise.
  virtual void set(std::uintptr_t adr, int c, std::size_t bytes);

  /// umem_aligned_alloc's bookkeeping: aligned address -> what alloc() returned.
  std::map<std::uintptr_t, std::uintptr_t> aligned_origins;
};

/// Host staging size of copies and fills that go through host memory.
constexpr std::size_t umem_staging_bytes = std::size_t{8} << 20;

umem_context* make_host_context();
/// Throws umem_failure (bad mode, fopen failure).
umem_context* make_file_context(const char* filename, const char* mode);
/// Throws umem_failure (no CUDA build, no device, device out of range).
umem_context* make_cuda_context(int device);
/// Throws umem_failure (null or empty handle).
umem_context* make_wholememory_context(allocation* memory);

}  // namespace detail
}  // namespace wholememory
