// The steps of store (file_store.hpp): the temporary directory, this rank's writes and
// checksum sums, rank 0's combination of the sums, the manifest and the swap into place.
#include "file_store.hpp"

#include "file_agreement.hpp"
#include "file_format.hpp"
#include "file_transfer.hpp"

#include <wholememory/device.hpp>
#include <wholememory/error.hpp>
#include <wholememory/log.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)  // linux/fs.h; older C libraries do not declare it
#endif

namespace wholememory::detail {

namespace {

namespace fs = std::filesystem;

void sync_directory(const std::string& path) {
  unique_fd fd = open_file(path, O_RDONLY | O_DIRECTORY);
  sync_file(fd.get(), path);
}

// A store may replace `dir` only when it is absent, an empty directory or a store: a wrong
// path must not swap away someone's home directory.
void check_replaceable(const std::string& dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return;
    WM_FAIL(system_error, dir << ": cannot stat: " << errno_text(err));
  }
  WM_EXPECTS(!S_ISLNK(st.st_mode),
             dir << ": is a symbolic link; store into the directory it points to");
  WM_EXPECTS(S_ISDIR(st.st_mode), dir << ": exists and is not a directory; refusing to replace it");
  std::error_code ec;
  if (fs::is_empty(dir, ec) && !ec) return;
  std::ifstream manifest(file_path(dir, manifest_file_name), std::ios::binary);
  std::string first_line;
  std::getline(manifest, first_line);
  WM_EXPECTS(first_line == manifest_magic_line,
             dir << ": exists and is neither empty nor a wholememory store (no manifest starting "
                    "with '"
                 << manifest_magic_line << "'); refusing to replace it");
}

std::string unique_suffix() {
  std::random_device random;
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%ld-%llx-%08x", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(now), static_cast<unsigned>(random()));
  return buf;
}

// Gives `fd` its final size, reserving the blocks where the file system can, so that a full
// disk shows before any rank writes.
void reserve(int fd, std::uint64_t bytes, const std::string& path) {
  if (bytes == 0) return;
  if (::fallocate(fd, 0, 0, static_cast<off_t>(bytes)) == 0) return;
  const int err = errno;
  if (err != EOPNOTSUPP && err != ENOSYS) {
    WM_FAIL(system_error, path << ": cannot reserve " << bytes << " bytes: " << errno_text(err));
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err2 = errno;
    WM_FAIL(system_error, path << ": cannot extend to " << bytes << " bytes: " << errno_text(err2));
  }
}

// Puts `temp` in place of `dir`.  Returns where the old store now is (to be removed), or an
// empty string when there was none.
std::string swap_into_place(const std::string& temp, const std::string& dir) {
  if (::syscall(SYS_renameat2, AT_FDCWD, temp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) ==
      0) {
    return temp;
  }
  const int err = errno;
  if (err == ENOENT) {  // no old store: a plain rename
    if (::rename(temp.c_str(), dir.c_str()) != 0) {
      const int err2 = errno;
      WM_FAIL(system_error,
              "renaming " << temp << " to " << dir << " failed: " << errno_text(err2));
    }
    return "";
  }
  if (err != EINVAL && err != ENOSYS && err != EOPNOTSUPP) {
    WM_FAIL(system_error,
            "exchanging " << temp << " and " << dir << " failed: " << errno_text(err));
  }
  // A file system without RENAME_EXCHANGE: move the old store aside, then the new one in.
  // Between the two renames `dir` is missing, but it is never incomplete.
  std::string aside = temp + ".old";
  if (::rename(dir.c_str(), aside.c_str()) != 0) {
    const int err2 = errno;
    WM_FAIL(system_error,
            "moving " << dir << " aside to " << aside << " failed: " << errno_text(err2));
  }
  if (::rename(temp.c_str(), dir.c_str()) != 0) {
    const int err2 = errno;
    ::rename(aside.c_str(), dir.c_str());
    WM_FAIL(system_error, "renaming " << temp << " to " << dir << " failed: " << errno_text(err2));
  }
  return aside;
}

// What a rank sends rank 0 after writing: per array, the checksum sums of the blocks its whole
// words fall in, and the bytes of its words that straddle a part boundary.
struct rank_checksums {
  struct fragment {
    std::uint64_t offset;
    std::string bytes;  // within one word
  };
  struct array {
    std::uint64_t first_block = 0;
    std::vector<std::uint64_t> sums;
    std::vector<fragment> fragments;
  };
  std::vector<array> arrays;

  std::string encode() const {
    byte_writer w;
    w.u64(arrays.size());
    for (const array& a : arrays) {
      w.u64(a.first_block);
      w.u64(a.sums.size());
      for (std::uint64_t s : a.sums) w.u64(s);
      w.u64(a.fragments.size());
      for (const fragment& f : a.fragments) {
        w.u64(f.offset);
        w.bytes(f.bytes);
      }
    }
    return w.take();
  }
  static rank_checksums decode(const std::string& s) {
    byte_reader r(s);
    rank_checksums c;
    c.arrays.resize(r.u64());
    for (array& a : c.arrays) {
      a.first_block = r.u64();
      a.sums.resize(r.u64());
      for (std::uint64_t& v : a.sums) v = r.u64();
      a.fragments.resize(r.u64());
      for (fragment& f : a.fragments) {
        f.offset = r.u64();
        f.bytes = r.bytes();
      }
    }
    return c;
  }
};

// The words of a part [begin, end) of an array of `total` bytes that lie wholly inside it:
// [align_up(begin), align_down(end)), or up to `total` when the part ends the array.  Every
// chunk boundary inside a part is a multiple of 8, so the same rule cut at a chunk gives the
// chunk's whole words.
std::pair<std::uint64_t, std::uint64_t> whole_words(std::uint64_t begin, std::uint64_t end,
                                                    std::uint64_t total) {
  const std::uint64_t first = (begin + 7) / 8 * 8;
  const std::uint64_t last = end == total ? end : end / 8 * 8;
  return {first, std::max(first, last)};
}

// Appends the bytes of `range` outside its whole words, cut at word boundaries: the pieces of
// the words it shares with a neighbouring part.
void append_fragments(const owned_range& range, std::uint64_t total,
                      std::vector<rank_checksums::fragment>& out) {
  const std::uint64_t begin = range.offset, end = range.offset + range.bytes;
  auto emit = [&](std::uint64_t from, std::uint64_t to) {
    for (std::uint64_t at = from; at < to;) {
      const std::uint64_t stop = std::min(to, (at / 8 + 1) * 8);
      std::string bytes(stop - at, '\0');
      copy_bytes(bytes.data(), static_cast<const char*>(range.ptr) + (at - begin), bytes.size());
      out.push_back({at, std::move(bytes)});
      at = stop;
    }
  };
  const auto [first, last] = whole_words(begin, end, total);
  if (first < last) {
    emit(begin, first);
    emit(last, end);
  } else {
    emit(begin, end);
  }
}

}  // namespace

void remove_tree(const std::string& path) {
  std::error_code ec;
  for (int attempt = 0; attempt < 5; ++attempt) {
    fs::remove_all(path, ec);
    if (!fs::exists(fs::symlink_status(path, ec))) return;
  }
  WM_LOG(log_level::warn, "could not remove " << path << ": " << ec.message());
}

std::string temp_store_name(const std::string& dir) {
  check_replaceable(dir);
  const fs::path parent = fs::path(dir).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) WM_FAIL(system_error, parent.string() << ": cannot create: " << ec.message());
  }
  return dir + ".tmp-" + unique_suffix();
}

void prepare_store(const std::string& temp, const std::vector<stored_array>& arrays) {
  if (::mkdir(temp.c_str(), 0755) != 0) {
    const int err = errno;
    WM_FAIL(system_error, temp << ": cannot create: " << errno_text(err));
  }
  for (const stored_array& a : arrays) {
    const std::string file = file_path(temp, a.name + ".bin");
    unique_fd fd = open_file(file, O_WRONLY | O_CREAT | O_EXCL);
    reserve(fd.get(), a.memory->size(), file);
  }
}

std::string write_own_parts(const std::vector<stored_array>& arrays, const std::string& temp,
                            std::uint64_t block_bytes, const file_io_options& options) {
  const std::size_t n = arrays.size();
  rank_checksums out;
  out.arrays.resize(n);
  std::vector<io_chunk> chunks;
  std::vector<unique_fd> fds(n);
  std::vector<std::string> paths(n);
  std::uint64_t my_bytes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t total = arrays[i].memory->size();
    const auto ranges = owned_ranges(*arrays[i].memory);
    std::uint64_t lo = ~std::uint64_t{0}, hi = 0;
    for (const owned_range& r : ranges) {
      const auto [first, last] = whole_words(r.offset, r.offset + r.bytes, total);
      if (first < last) {
        lo = std::min(lo, first / block_bytes);
        hi = std::max(hi, (last - 1) / block_bytes);
      }
      append_fragments(r, total, out.arrays[i].fragments);
      append_chunks(i, r.offset, r.bytes, r.ptr, r.device, chunks);
      my_bytes += r.bytes;
    }
    if (lo <= hi) {
      out.arrays[i].first_block = lo;
      out.arrays[i].sums.assign(hi - lo + 1, 0);
    }
    if (!ranges.empty()) {
      paths[i] = file_path(temp, arrays[i].name + ".bin");
      fds[i] = open_file(paths[i], O_WRONLY);
    }
  }

  const unsigned threads = io_threads(options.threads);
  // Per worker and array, the sums of the blocks; sums add up in any order.
  std::vector<std::vector<std::vector<std::uint64_t>>> sums(
      threads, std::vector<std::vector<std::uint64_t>>(n));
  progress_meter meter(options.progress, my_bytes);
  run_chunks(chunks, threads, meter,
             [&](unsigned worker, const io_chunk& c, worker_scratch& scratch) {
               const void* src = c.ptr;
               if (c.device >= 0) {
                 unsigned char* staging = scratch.staging_for(c.device);
                 copy_bytes(staging, c.ptr, c.bytes);
                 src = staging;
               }
               const std::uint64_t total = arrays[c.array].memory->size();
               const auto [first, last] = whole_words(c.offset, c.offset + c.bytes, total);
               if (first < last) {
                 std::vector<std::uint64_t>& mine = sums[worker][c.array];
                 if (mine.empty()) mine.assign(out.arrays[c.array].sums.size(), 0);
                 add_checksum_terms(static_cast<const char*>(src) + (first - c.offset), first,
                                    last - first, total, block_bytes,
                                    out.arrays[c.array].first_block, mine.data());
               }
               write_all(fds[c.array].get(), src, c.bytes, c.offset, paths[c.array]);
             });
  for (std::size_t i = 0; i < n; ++i) {
    if (!fds[i].valid()) continue;
    if (::fdatasync(fds[i].get()) != 0) {
      const int err = errno;
      WM_FAIL(system_error, paths[i] << ": fdatasync failed: " << errno_text(err));
    }
    for (unsigned w = 0; w < threads; ++w) {
      for (std::size_t k = 0; k < sums[w][i].size(); ++k) out.arrays[i].sums[k] += sums[w][i][k];
    }
  }
  meter.report();
  return out.encode();
}

stored_manifest combine_checksums(const std::vector<stored_array>& arrays,
                                  std::uint64_t block_bytes, const file_io_options& options,
                                  const std::vector<std::string>& payloads) {
  const std::size_t n = arrays.size();
  stored_manifest m;
  m.version = stored_format_version;
  m.metadata = options.metadata;
  m.arrays.resize(n);
  std::vector<std::vector<std::uint64_t>> sums(n);
  // Word index -> its bytes and which of them arrived.
  std::vector<std::map<std::uint64_t, std::pair<std::array<unsigned char, 8>, unsigned>>> words(n);
  for (std::size_t i = 0; i < n; ++i) {
    stored_manifest::array& a = m.arrays[i];
    a.name = arrays[i].name;
    a.file = a.name + ".bin";
    a.bytes = arrays[i].memory->size();
    a.block_bytes = block_bytes;
    sums[i].assign(block_count(a.bytes, block_bytes), 0);
  }
  for (std::size_t r = 0; r < payloads.size(); ++r) {
    const rank_checksums c = rank_checksums::decode(payloads[r]);
    WM_EXPECTS(c.arrays.size() == n,
               "rank " << r << " sent checksums of " << c.arrays.size() << " arrays, not " << n);
    for (std::size_t i = 0; i < n; ++i) {
      const rank_checksums::array& part = c.arrays[i];
      WM_EXPECTS(part.first_block + part.sums.size() <= sums[i].size(),
                 "rank " << r << " sent sums of blocks beyond the end of array '" << arrays[i].name
                         << "'");
      for (std::size_t k = 0; k < part.sums.size(); ++k)
        sums[i][part.first_block + k] += part.sums[k];
      for (const rank_checksums::fragment& f : part.fragments) {
        const std::uint64_t pos = f.offset % 8;
        WM_EXPECTS(
            pos + f.bytes.size() <= 8 && f.offset + f.bytes.size() <= m.arrays[i].bytes,
            "rank " << r << " sent a malformed fragment of array '" << arrays[i].name << "'");
        auto& word = words[i][f.offset / 8];
        for (std::size_t b = 0; b < f.bytes.size(); ++b) {
          word.first[pos + b] = static_cast<unsigned char>(f.bytes[b]);
          word.second |= 1u << (pos + b);
        }
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    stored_manifest::array& a = m.arrays[i];
    for (auto& [index, word] : words[i]) {
      const std::uint64_t valid = std::min<std::uint64_t>(8, a.bytes - index * 8);
      WM_EXPECTS(word.second == (1u << valid) - 1,
                 "array '" << a.name << "': the ranks' parts leave bytes of word " << index
                           << " uncovered");
      sums[i][index * 8 / block_bytes] += checksum_term(load_le64(word.first.data()), index);
    }
    a.block_checksums.resize(sums[i].size());
    for (std::size_t b = 0; b < sums[i].size(); ++b) {
      const std::uint64_t length = std::min(block_bytes, a.bytes - b * block_bytes);
      a.block_checksums[b] = finish_block_checksum(sums[i][b], length);
    }
  }
  return m;
}

void commit_store(const stored_manifest& m, const std::string& temp, const std::string& dir) {
  const std::string text = format_manifest(m);
  const std::string path = file_path(temp, manifest_file_name);
  {
    unique_fd fd = open_file(path, O_WRONLY | O_CREAT | O_EXCL);
    write_all(fd.get(), text.data(), text.size(), 0, path);
    sync_file(fd.get(), path);
    if (::close(fd.release()) != 0 && errno != EINTR) {
      const int err = errno;
      WM_FAIL(system_error, path << ": close failed: " << errno_text(err));
    }
  }
  sync_directory(temp);
  const std::string old = swap_into_place(temp, dir);
  // The swap is made durable before the old store goes, so that a crash never finds the old
  // store, half removed, back under `dir`.
  const fs::path parent = fs::path(dir).parent_path();
  try {
    sync_directory(parent.empty() ? "." : parent.string());
  } catch (...) {
    if (!old.empty()) remove_tree(old);
    throw;
  }
  if (!old.empty()) remove_tree(old);
}

}  // namespace wholememory::detail
