// The steps of load (file_load.hpp): checking the manifest and the files, the verify pass and
// the copy pass over this rank's parts.
#include "file_load.hpp"

#include "file_format.hpp"

#include <wholememory/device.hpp>
#include <wholememory/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <sstream>

namespace wholememory::detail {

namespace {

// Finds the requested arrays in the manifest and opens their files in the directory `dir_fd`,
// checking the sizes of what was opened.
void match_manifest(const std::vector<loaded_array>& arrays, const std::string& dir, int dir_fd,
                    const stored_manifest& m, load_plan& plan) {
  for (const loaded_array& a : arrays) {
    auto it = std::find_if(m.arrays.begin(), m.arrays.end(),
                           [&](const stored_manifest::array& e) { return e.name == a.name; });
    if (it == m.arrays.end()) {
      std::ostringstream held;
      for (std::size_t i = 0; i < m.arrays.size(); ++i) held << (i ? ", " : "") << m.arrays[i].name;
      WM_FAIL(logic_error, dir << ": the store holds no array '" << a.name << "' (it holds "
                               << (m.arrays.empty() ? "none" : held.str()) << ")");
    }
    WM_EXPECTS(it->bytes == a.memory->size(),
               "array '" << a.name << "': the store holds " << it->bytes
                         << " bytes, the destination has " << a.memory->size() << " bytes");
    const std::string path = file_path(dir, it->file);
    const int raw = ::openat(dir_fd, it->file.c_str(), O_RDONLY | O_CLOEXEC);
    if (raw < 0) {
      const int err = errno;
      WM_FAIL(logic_error,
              path << ": the file of array '" << a.name << "' cannot be read: " << errno_text(err));
    }
    unique_fd fd(raw);
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) {
      const int err = errno;
      WM_FAIL(system_error, path << ": fstat failed: " << errno_text(err));
    }
    WM_EXPECTS(S_ISREG(st.st_mode), path << ": is not a regular file");
    const auto size = static_cast<std::uint64_t>(st.st_size);
    WM_EXPECTS(size == it->bytes, path << ": " << (size < it->bytes ? "truncated" : "too long")
                                       << ": expected " << it->bytes << " bytes, found " << size);
    plan.entries.push_back(*it);
    plan.files.push_back(std::move(fd));
  }
}

// Block intervals [first, last] overlapping this rank's parts of one array, merged.
std::vector<std::pair<std::uint64_t, std::uint64_t>> own_blocks(
    const std::vector<owned_range>& ranges, std::uint64_t block_bytes) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> blocks;
  for (const owned_range& r : ranges) {
    const std::uint64_t first = r.offset / block_bytes;
    const std::uint64_t last = (r.offset + r.bytes - 1) / block_bytes;
    if (!blocks.empty() && first <= blocks.back().second + 1) {
      blocks.back().second = std::max(blocks.back().second, last);
    } else {
      blocks.emplace_back(first, last);
    }
  }
  return blocks;
}

}  // namespace

load_plan plan_load(const std::vector<loaded_array>& arrays, const std::string& dir) {
  load_plan plan;
  const unique_fd directory = open_store_directory(dir);
  const parsed_manifest parsed = read_manifest_at(directory.get(), dir);
  plan.manifest_checksum = parsed.checksum;
  match_manifest(arrays, dir, directory.get(), parsed.manifest, plan);
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const stored_manifest::array& e = plan.entries[i];
    plan.ranges.push_back(owned_ranges(*arrays[i].memory));
    for (const owned_range& r : plan.ranges.back()) plan.own_bytes += r.bytes;
    plan.blocks.push_back(own_blocks(plan.ranges.back(), e.block_bytes));
    for (const auto& [first, last] : plan.blocks.back()) {
      plan.verify_bytes += std::min((last + 1) * e.block_bytes, e.bytes) - first * e.block_bytes;
    }
  }
  return plan;
}

void verify_own_blocks(const load_plan& plan, const std::string& dir, unsigned threads,
                       progress_meter& meter) {
  const std::size_t n = plan.entries.size();
  std::vector<io_chunk> chunks;
  std::vector<std::uint64_t> first_block(n, 0), span(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const stored_manifest::array& e = plan.entries[i];
    if (plan.blocks[i].empty()) continue;
    first_block[i] = plan.blocks[i].front().first;
    span[i] = plan.blocks[i].back().second - first_block[i] + 1;
    for (const auto& [first, last] : plan.blocks[i]) {
      const std::uint64_t begin = first * e.block_bytes;
      const std::uint64_t end = std::min((last + 1) * e.block_bytes, e.bytes);
      append_chunks(i, begin, end - begin, nullptr, -1, chunks);
    }
  }
  std::vector<std::vector<std::vector<std::uint64_t>>> sums(
      threads, std::vector<std::vector<std::uint64_t>>(n));
  run_chunks(
      chunks, threads, meter, [&](unsigned worker, const io_chunk& c, worker_scratch& scratch) {
        const stored_manifest::array& e = plan.entries[c.array];
        unsigned char* buffer = scratch.host_buffer();
        read_all(plan.files[c.array].get(), buffer, c.bytes, c.offset, file_path(dir, e.file));
        std::vector<std::uint64_t>& mine = sums[worker][c.array];
        if (mine.empty()) mine.assign(span[c.array], 0);
        add_checksum_terms(buffer, c.offset, c.bytes, e.bytes, e.block_bytes, first_block[c.array],
                           mine.data());
      });
  for (std::size_t i = 0; i < n; ++i) {
    const stored_manifest::array& e = plan.entries[i];
    std::vector<std::uint64_t> total(span[i], 0);
    for (unsigned w = 0; w < threads; ++w) {
      for (std::size_t k = 0; k < sums[w][i].size(); ++k) total[k] += sums[w][i][k];
    }
    std::uint64_t checked = 0, bad = 0, first_bad = 0, first_bad_actual = 0;
    for (const auto& [first, last] : plan.blocks[i]) {
      for (std::uint64_t b = first; b <= last; ++b) {
        const std::uint64_t length = std::min(e.block_bytes, e.bytes - b * e.block_bytes);
        const std::uint64_t actual = finish_block_checksum(total[b - first_block[i]], length);
        ++checked;
        if (actual != e.block_checksums[b] && bad++ == 0) {
          first_bad = b;
          first_bad_actual = actual;
        }
      }
    }
    if (bad > 0) {
      const std::uint64_t begin = first_bad * e.block_bytes;
      const std::uint64_t end = std::min(begin + e.block_bytes, e.bytes);
      WM_FAIL(logic_error, file_path(dir, e.file)
                               << ": block " << first_bad << " (bytes " << begin << " to " << end
                               << ") has checksum " << hex64(first_bad_actual)
                               << ", the manifest says " << hex64(e.block_checksums[first_bad])
                               << ": the file is corrupt or was modified (" << bad << " of the "
                               << checked << " blocks this rank checked differ)");
    }
  }
}

void read_own_parts(const load_plan& plan, const std::string& dir, unsigned threads,
                    progress_meter& meter) {
  std::vector<io_chunk> chunks;
  for (std::size_t i = 0; i < plan.entries.size(); ++i) {
    for (const owned_range& r : plan.ranges[i]) {
      append_chunks(i, r.offset, r.bytes, r.ptr, r.device, chunks);
    }
  }
  run_chunks(chunks, threads, meter, [&](unsigned, const io_chunk& c, worker_scratch& scratch) {
    const std::string path = file_path(dir, plan.entries[c.array].file);
    if (c.device >= 0) {
      unsigned char* staging = scratch.staging_for(c.device);
      read_all(plan.files[c.array].get(), staging, c.bytes, c.offset, path);
      copy_bytes(c.ptr, staging, c.bytes);
    } else {
      read_all(plan.files[c.array].get(), c.ptr, c.bytes, c.offset, path);
    }
  });
}

}  // namespace wholememory::detail
