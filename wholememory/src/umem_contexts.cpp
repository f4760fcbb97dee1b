// The four umem contexts (umem_context.hpp): host RAM, stdio files, device memory of one GPU
// through device_buffer, and WholeMemory through its parts' addresses.
#include "umem_context.hpp"

#include <wholememory/allocation.hpp>
#include <wholememory/device.hpp>
#include <wholememory/device_buffer.hpp>
#include <wholememory/error.hpp>

#include <sys/stat.h>
#include <sys/types.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

namespace wholememory {
namespace detail {

std::uintptr_t offset_ranges::reserve(std::size_t bytes) {
  std::size_t want = std::max<std::size_t>(bytes, 1);
  std::uintptr_t cursor = base_;
  for (const auto& [start, size] : live_) {
    if (start - cursor >= want) break;
    cursor = start + size;
  }
  if (cursor > limit_ || limit_ - cursor < want)
    WM_UMEM_FAIL(umemMemoryError,
                 "no free range of " << bytes << " bytes in [" << base_ << ", " << limit_ << ")");
  live_.emplace(cursor, want);
  return cursor;
}

bool offset_ranges::release(std::uintptr_t start) { return live_.erase(start) == 1; }

void umem_context::read(std::uintptr_t, void*, std::size_t) {
  WM_UMEM_FAIL(umemRuntimeError, "this context has no read path");
}

void umem_context::write(std::uintptr_t, const void*, std::size_t) {
  WM_UMEM_FAIL(umemRuntimeError, "this context has no write path");
}

void umem_context::set(std::uintptr_t adr, int c, std::size_t bytes) {
  std::vector<umem_piece> pieces;
  std::vector<unsigned char> fill;
  auto fill_buffer = [&](std::size_t want) {
    if (fill.size() < want) fill.assign(want, static_cast<unsigned char>(c));
  };
  if (map(adr, bytes, pieces)) {
    for (const umem_piece& p : pieces) {
      if (p.host) {
        std::memset(p.ptr, c, p.bytes);
        continue;
      }
      fill_buffer(std::min(p.bytes, umem_staging_bytes));
      for (std::size_t done = 0; done < p.bytes;) {
        std::size_t n = std::min(p.bytes - done, fill.size());
        copy_bytes(static_cast<char*>(p.ptr) + done, fill.data(), n);
        done += n;
      }
    }
    return;
  }
  fill_buffer(std::min(bytes, umem_staging_bytes));
  for (std::size_t done = 0; done < bytes;) {
    std::size_t n = std::min(bytes - done, fill.size());
    write(adr + done, fill.data(), n);
    done += n;
  }
}

namespace {

void expect_not_null(std::uintptr_t adr) {
  if (adr == 0) WM_UMEM_FAIL(umemValueError, "null address");
}

// ---- host RAM ----

class host_context final : public umem_context {
 public:
  ~host_context() override {
    for (const auto& entry : live_) std::free(reinterpret_cast<void*>(entry.first));
  }
  umemDeviceType type() const override { return umemHostDevice; }
  std::size_t fundamental_alignment() const override { return alignof(std::max_align_t); }
  bool same_memory(const umem_context&) const override { return true; }

  std::uintptr_t alloc(std::size_t bytes) override {
    void* p = std::malloc(std::max<std::size_t>(bytes, 1));
    if (p == nullptr) WM_UMEM_FAIL(umemMemoryError, "malloc(" << bytes << ") failed");
    auto adr = reinterpret_cast<std::uintptr_t>(p);
    live_.emplace(adr, bytes);
    return adr;
  }
  bool free(std::uintptr_t adr) override {
    auto it = live_.find(adr);
    if (it == live_.end()) return false;
    std::free(reinterpret_cast<void*>(adr));
    live_.erase(it);
    return true;
  }
  bool map(std::uintptr_t adr, std::size_t bytes, std::vector<umem_piece>& out) override {
    expect_not_null(adr);
    out.push_back({reinterpret_cast<void*>(adr), bytes, true});
    return true;
  }

 private:
  std::map<std::uintptr_t, std::size_t> live_;
};

// ---- stdio files ----

class file_context final : public umem_context {
 public:
  file_context(const char* filename, const char* mode) {
    if (filename == nullptr) WM_UMEM_FAIL(umemValueError, "null file name");
    if (mode == nullptr) WM_UMEM_FAIL(umemValueError, "null mode for file '" << filename << "'");
    name_ = filename;
    mode_ = mode;
    parse_mode();
    fp_ = std::fopen(filename, mode);
    if (fp_ == nullptr)
      WM_UMEM_FAIL(umemIOError,
                   "fopen(\"" << name_ << "\", \"" << mode_ << "\") failed: " << errno_text(errno));
    // Unbuffered: each call reads or writes the file itself, so a context sees what other
    // contexts, descriptors and processes wrote (a read buffer would keep stale bytes across
    // seeks), and the copies move large chunks anyway.
    std::setvbuf(fp_, nullptr, _IONBF, 0);
    struct stat st {};
    if (::fstat(::fileno(fp_), &st) != 0) {
      int err = errno;
      std::fclose(fp_);
      fp_ = nullptr;
      WM_UMEM_FAIL(umemIOError, "fstat of '" << name_ << "' failed: " << errno_text(err));
    }
    dev_ = st.st_dev;
    ino_ = st.st_ino;
    ranges_ = offset_ranges(static_cast<std::uintptr_t>(st.st_size), max_offset);
  }
  ~file_context() override {
    if (fp_ != nullptr) std::fclose(fp_);
  }

  umemDeviceType type() const override { return umemFileDevice; }
  bool same_memory(const umem_context& other) const override {
    const auto& f = static_cast<const file_context&>(other);
    return f.dev_ == dev_ && f.ino_ == ino_;
  }
  std::uintptr_t alloc(std::size_t bytes) override { return ranges_.reserve(bytes); }
  bool free(std::uintptr_t adr) override { return ranges_.release(adr); }
  bool map(std::uintptr_t, std::size_t, std::vector<umem_piece>&) override { return false; }

  void read(std::uintptr_t adr, void* host_dst, std::size_t bytes) override {
    if (!readable_)
      WM_UMEM_FAIL(umemIOError, "file '" << name_ << "' was opened with mode \"" << mode_
                                         << "\", which does not allow reading");
    seek(adr, bytes);
    std::size_t got = std::fread(host_dst, 1, bytes, fp_);
    if (got != bytes) {
      int err = errno;
      bool failed = std::ferror(fp_) != 0;
      std::clearerr(fp_);
      if (failed)
        WM_UMEM_FAIL(umemIOError, "reading " << bytes << " bytes at offset " << adr << " of '"
                                             << name_ << "': " << errno_text(err));
      WM_UMEM_FAIL(umemIOError, "reading " << bytes << " bytes at offset " << adr << " of '"
                                           << name_ << "': the file ends at offset " << adr + got);
    }
  }

  void write(std::uintptr_t adr, const void* host_src, std::size_t bytes) override {
    if (!writable_)
      WM_UMEM_FAIL(umemIOError, "file '" << name_ << "' was opened with mode \"" << mode_
                                         << "\" (read-only); cannot write " << bytes
                                         << " bytes at offset " << adr);
    if (append_) {
      std::uintptr_t end = file_size();
      if (adr != end)
        WM_UMEM_FAIL(umemValueError, "file '" << name_ << "' was opened with mode \"" << mode_
                                              << "\": writes go to its end (offset " << end
                                              << "), not to offset " << adr);
    }
    seek(adr, bytes);
    std::size_t put = std::fwrite(host_src, 1, bytes, fp_);
    // Flushed at once, so that other contexts and processes reading the file see the bytes.
    if (put != bytes || std::fflush(fp_) != 0) {
      int err = errno;
      std::clearerr(fp_);
      WM_UMEM_FAIL(umemIOError, "writing " << bytes << " bytes at offset " << adr << " of '"
                                           << name_ << "': " << errno_text(err));
    }
  }

 private:
  static constexpr std::uintptr_t max_offset =
      static_cast<std::uintptr_t>(std::numeric_limits<off_t>::max());

  void parse_mode() {
    bool plus = false, binary = false, ok = !mode_.empty();
    if (ok && mode_[0] != 'r' && mode_[0] != 'w' && mode_[0] != 'a') ok = false;
    for (std::size_t i = 1; ok && i < mode_.size(); ++i) {
      bool& seen = mode_[i] == '+' ? plus : binary;
      if ((mode_[i] != '+' && mode_[i] != 'b') || seen) ok = false;
      seen = true;
    }
    if (!ok)
      WM_UMEM_FAIL(umemValueError, "mode \"" << mode_ << "\" for file '" << name_
                                             << "' is not one of r, r+, w, w+, a, a+ "
                                                "(each with an optional b)");
    readable_ = mode_[0] == 'r' || plus;
    writable_ = mode_[0] != 'r' || plus;
    append_ = mode_[0] == 'a';
  }

  void seek(std::uintptr_t adr, std::size_t bytes) {
    if (adr > max_offset || bytes > max_offset - adr)
      WM_UMEM_FAIL(umemIndexError, "bytes [" << adr << ", " << adr << " + " << bytes
                                             << ") exceed the largest file offset");
    if (::fseeko(fp_, static_cast<off_t>(adr), SEEK_SET) != 0)
      WM_UMEM_FAIL(umemIOError,
                   "fseeko(" << adr << ") in '" << name_ << "': " << errno_text(errno));
  }

  std::uintptr_t file_size() {
    struct stat st {};
    if (std::fflush(fp_) != 0 || ::fstat(::fileno(fp_), &st) != 0)
      WM_UMEM_FAIL(umemIOError, "size of '" << name_ << "': " << errno_text(errno));
    return static_cast<std::uintptr_t>(st.st_size);
  }

  std::FILE* fp_ = nullptr;
  std::string name_, mode_;
  bool readable_ = false, writable_ = false, append_ = false;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  offset_ranges ranges_{0, 0};
};

// ---- device memory of one GPU ----

class cuda_context final : public umem_context {
 public:
  explicit cuda_context(int device) : device_(device) {}
  umemDeviceType type() const override { return umemCudaDevice; }
  std::size_t fundamental_alignment() const override { return 256; }
  bool same_memory(const umem_context& other) const override {
    return static_cast<const cuda_context&>(other).device_ == device_;
  }
  std::uintptr_t alloc(std::size_t bytes) override {
    device_buffer buffer(std::max<std::size_t>(bytes, 1), device_);
    auto adr = reinterpret_cast<std::uintptr_t>(buffer.data());
    live_.emplace(adr, std::move(buffer));
    return adr;
  }
  bool free(std::uintptr_t adr) override { return live_.erase(adr) == 1; }
  bool map(std::uintptr_t adr, std::size_t bytes, std::vector<umem_piece>& out) override {
    expect_not_null(adr);
    out.push_back({reinterpret_cast<void*>(adr), bytes, false});
    return true;
  }

 private:
  int device_;
  std::map<std::uintptr_t, device_buffer> live_;
};

// ---- WholeMemory ----

class wholememory_context final : public umem_context {
 public:
  explicit wholememory_context(allocation* memory) : memory_(memory), ranges_(0, memory->size()) {}
  umemDeviceType type() const override { return umemWholeMemoryDevice; }
  bool same_memory(const umem_context& other) const override {
    return static_cast<const wholememory_context&>(other).memory_ == memory_;
  }
  std::uintptr_t alloc(std::size_t bytes) override { return ranges_.reserve(bytes); }
  bool free(std::uintptr_t adr) override { return ranges_.release(adr); }

  bool map(std::uintptr_t adr, std::size_t bytes, std::vector<umem_piece>& out) override {
    std::size_t size = memory_->size();
    if (adr > size || bytes > size - adr)
      WM_UMEM_FAIL(umemIndexError, "bytes [" << adr << ", " << adr << " + " << bytes
                                             << ") are outside the WholeMemory of " << size
                                             << " bytes");
    bool host = memory_->location() == memory_location::host;
    if (memory_->type() == memory_type::continuous) {
      // One virtual range in this process, whichever GPUs hold its pieces.
      out.push_back({static_cast<char*>(memory_->data()) + adr, bytes, host});
      return true;
    }
    std::size_t end = adr + bytes;
    for (int i = 0; i < memory_->num_parts(); ++i) {
      part_info p = memory_->part(i);
      std::size_t lo = std::max<std::size_t>(adr, p.offset);
      std::size_t hi = std::min<std::size_t>(end, p.offset + p.bytes);
      if (lo >= hi) continue;
      if (p.ptr == nullptr)
        WM_UMEM_FAIL(umemValueError, "bytes [" << lo << ", " << hi << ") lie in rank " << p.rank
                                               << "'s part of distributed memory, which only "
                                                  "that rank maps (gather/scatter reach it)");
      out.push_back({static_cast<char*>(p.ptr) + (lo - p.offset), hi - lo, host});
    }
    return true;
  }

 private:
  allocation* memory_;
  offset_ranges ranges_;
};

}  // namespace

umem_context* make_host_context() { return new host_context(); }

umem_context* make_file_context(const char* filename, const char* mode) {
  return new file_context(filename, mode);
}

umem_context* make_cuda_context(int device) {
  if (device < 0) WM_UMEM_FAIL(umemValueError, "device " << device << " is not a device number");
#if !defined(WHOLESTORE_HAS_CUDA)
  WM_UMEM_FAIL(
      umemNotImplementedError,
      "device " << device << ": wholestore was built without CUDA (WHOLESTORE_WITH_CUDA=OFF)");
#else
  int count = device_count();
  if (count == 0)
    WM_UMEM_FAIL(umemRuntimeError, "device " << device << ": no CUDA device is visible");
  if (device >= count)
    WM_UMEM_FAIL(umemValueError, "device " << device << " out of range: " << count
                                           << " visible (0.." << count - 1 << ")");
  set_device(device);
  return new cuda_context(device);
#endif
}

umem_context* make_wholememory_context(allocation* memory) {
  if (memory == nullptr) WM_UMEM_FAIL(umemValueError, "null WholeMemory handle");
  if (!*memory) WM_UMEM_FAIL(umemValueError, "empty WholeMemory handle (freed or moved from)");
  return new wholememory_context(memory);
}

}  // namespace detail
}  // namespace wholememory
