// The on-disk format of a store: the block checksum, and writing and strictly parsing the
// manifest (file_format.hpp describes both).
#include "file_format.hpp"

#include <wholememory/error.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace wholememory::detail {

namespace {

// Sum of the terms of `words` whole words from `p`, the first being word `first_word`.
std::uint64_t sum_words(const unsigned char* p, std::uint64_t first_word, std::uint64_t words) {
  std::uint64_t sum = 0;
  std::uint64_t key = first_word * checksum_word_key + checksum_word_offset;
  for (std::uint64_t i = 0; i < words; ++i) {
    sum += fmix64(load_le64(p + 8 * i) ^ key);
    key += checksum_word_key;
  }
  return sum;
}

}  // namespace

void add_checksum_terms(const void* data, std::uint64_t offset, std::uint64_t bytes,
                        std::uint64_t total, std::uint64_t block_bytes, std::uint64_t first_block,
                        std::uint64_t* sums) {
  const auto* p = static_cast<const unsigned char*>(data);
  const std::uint64_t end = offset + bytes;
  std::uint64_t at = offset;
  while (at < end) {
    const std::uint64_t block = at / block_bytes;
    const std::uint64_t stop = std::min(end, (block + 1) * block_bytes);
    const std::uint64_t whole = (stop - at) / 8;
    std::uint64_t sum = sum_words(p + (at - offset), at / 8, whole);
    const std::uint64_t rest = (stop - at) % 8;
    if (rest != 0) {  // the array's short last word
      WM_EXPECTS(stop == total, "checksum range [" << offset << ", " << end
                                                   << ") ends inside a word before the end "
                                                   << total << " of the array");
      unsigned char last[8] = {};
      std::memcpy(last, p + (stop - rest - offset), rest);
      sum += checksum_term(load_le64(last), (stop - rest) / 8);
    }
    sums[block - first_block] += sum;
    at = stop;
  }
}

std::uint64_t checksum_of(const void* data, std::size_t bytes) {
  std::uint64_t sum = 0;
  if (bytes > 0) add_checksum_terms(data, 0, bytes, bytes, bytes, 0, &sum);
  return finish_block_checksum(sum, bytes);
}

bool is_plain_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string hex64(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string format_manifest(const stored_manifest& m) {
  std::ostringstream os;
  os << manifest_magic_line << "\n"
     << "format_version: " << m.version << "\n"
     << "arrays: " << m.arrays.size() << "\n";
  for (std::size_t i = 0; i < m.arrays.size(); ++i) {
    const stored_manifest::array& a = m.arrays[i];
    const std::string key = "array." + std::to_string(i);
    os << key << ".name: " << a.name << "\n"
       << key << ".file: " << a.file << "\n"
       << key << ".bytes: " << a.bytes << "\n"
       << key << ".block_bytes: " << a.block_bytes << "\n"
       << key << ".block_checksums:";
    for (std::uint64_t c : a.block_checksums) os << " " << hex64(c);
    os << "\n";
  }
  for (const auto& [key, value] : m.metadata) {
    os << "metadata." << key << ":" << (value.empty() ? "" : " ") << value << "\n";
  }
  std::string text = os.str();
  text += "manifest_checksum: " + hex64(checksum_of(text.data(), text.size())) + "\n";
  return text;
}

namespace {

struct manifest_line {
  std::string value;
  int line = 0;
};

// Strict number parsing for the manifest's fields.
class manifest_reader {
 public:
  explicit manifest_reader(const std::string& path) : path_(path) {}

  std::string at(int line) const { return path_ + ":" + std::to_string(line); }

  std::uint64_t to_u64(const manifest_line& l, const std::string& key) const {
    const std::string& s = l.value;
    bool ok = !s.empty() && s.size() <= 20 && (s.size() == 1 || s[0] != '0');
    for (char c : s) ok = ok && c >= '0' && c <= '9';
    errno = 0;
    const unsigned long long v = ok ? std::strtoull(s.c_str(), nullptr, 10) : 0;
    WM_EXPECTS(ok && errno == 0, at(l.line) << ": " << key << " '" << s
                                            << "' is not an unsigned 64-bit decimal number");
    return v;
  }

  std::uint64_t to_hex64(const std::string& s, int line, const std::string& key) const {
    bool ok = s.size() == 18 && s[0] == '0' && s[1] == 'x';
    for (std::size_t i = 2; ok && i < s.size(); ++i) {
      const char c = s[i];
      ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    }
    WM_EXPECTS(ok, at(line) << ": " << key << ": '" << s
                            << "' is not 0x followed by 16 lowercase hex digits");
    return std::strtoull(s.c_str() + 2, nullptr, 16);
  }

 private:
  std::string path_;
};

// Splits "key: value" (or "key:" for an empty value); the key is a plain name.
std::pair<std::string, std::string> split_line(const std::string& line, const std::string& where) {
  const std::size_t colon = line.find(':');
  const bool ok = colon != std::string::npos && colon > 0 &&
                  (colon + 1 == line.size() || line[colon + 1] == ' ') &&
                  is_plain_name(line.substr(0, colon));
  WM_EXPECTS(ok,
             where << ": expected 'key: value' with a key of [A-Za-z0-9_.-], got '" << line << "'");
  return {line.substr(0, colon), colon + 1 == line.size() ? "" : line.substr(colon + 2)};
}

// "array.<i>.<field>": the index (decimal, no leading zeros) and the field; false otherwise.
bool split_array_key(const std::string& key, std::uint64_t* index, std::string* field) {
  static const std::string prefix = "array.";
  if (key.compare(0, prefix.size(), prefix) != 0) return false;
  const std::size_t dot = key.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size() || dot - prefix.size() > 9) return false;
  const std::string digits = key.substr(prefix.size(), dot - prefix.size());
  for (char c : digits)
    if (c < '0' || c > '9') return false;
  if (digits.size() > 1 && digits[0] == '0') return false;
  *index = std::stoull(digits);
  *field = key.substr(dot + 1);
  return true;
}

}  // namespace

parsed_manifest parse_manifest(const std::string& path, const std::string& text) {
  manifest_reader r(path);
  WM_EXPECTS(!text.empty(), path << ": the manifest is empty (a truncated store?)");
  WM_EXPECTS(text.back() == '\n',
             path << ": truncated: the last line of the manifest has no line end");
  std::vector<std::string> lines;
  std::vector<std::size_t> starts;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = text.find('\n', at);
    starts.push_back(at);
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  const int n = static_cast<int>(lines.size());
  WM_EXPECTS(lines[0] == manifest_magic_line, r.at(1)
                                                  << ": not a wholememory store manifest: "
                                                  << "the first line is '" << lines[0]
                                                  << "', expected '" << manifest_magic_line << "'");
  // The checksum line comes first: a truncated or edited manifest is reported as such, not as
  // whatever field the damage happened to hit.
  const std::string checksum_prefix = "manifest_checksum: ";
  WM_EXPECTS(n >= 2 && lines.back().compare(0, checksum_prefix.size(), checksum_prefix) == 0,
             r.at(n) << ": truncated or incomplete: a manifest ends with its manifest_checksum "
                        "line, the last line is '"
                     << lines.back() << "'");
  parsed_manifest result;
  result.checksum = r.to_hex64(lines.back().substr(checksum_prefix.size()), n, "manifest_checksum");
  const std::uint64_t actual = checksum_of(text.data(), starts.back());
  WM_EXPECTS(actual == result.checksum, r.at(n) << ": manifest_checksum " << hex64(result.checksum)
                                                << " does not match the manifest's contents ("
                                                << hex64(actual)
                                                << "): it was truncated, edited or corrupted");

  stored_manifest& m = result.manifest;
  {
    WM_EXPECTS(n >= 3, r.at(2) << ": missing format_version");
    auto [key, value] = split_line(lines[1], r.at(2));
    WM_EXPECTS(key == "format_version",
               r.at(2) << ": expected format_version as the first key, got '" << key << "'");
    const std::uint64_t version = r.to_u64({value, 2}, key);
    WM_EXPECTS(version == static_cast<std::uint64_t>(stored_format_version),
               r.at(2) << ": format_version " << version
                       << " is not supported (this build reads version " << stored_format_version
                       << ")");
    m.version = stored_format_version;
  }

  std::map<std::string, manifest_line> entries;
  for (int i = 2; i + 1 < n; ++i) {
    auto [key, value] = split_line(lines[i], r.at(i + 1));
    auto it = entries.find(key);
    WM_EXPECTS(it == entries.end(),
               r.at(i + 1) << ": key '" << key << "' repeats line " << it->second.line);
    entries[key] = manifest_line{value, i + 1};
  }

  auto count_it = entries.find("arrays");
  WM_EXPECTS(count_it != entries.end(), path << ": missing the key 'arrays'");
  const std::uint64_t count = r.to_u64(count_it->second, "arrays");
  WM_EXPECTS(count <= entries.size(), r.at(count_it->second.line)
                                          << ": arrays is " << count << " but the manifest has "
                                          << entries.size() << " entries in all");
  m.arrays.resize(count);
  std::vector<std::map<std::string, manifest_line>> fields(count);
  for (const auto& [key, line] : entries) {
    if (key == "arrays") continue;
    static const std::string meta = "metadata.";
    if (key.compare(0, meta.size(), meta) == 0 && key.size() > meta.size()) {
      m.metadata[key.substr(meta.size())] = line.value;
      continue;
    }
    std::uint64_t index = 0;
    std::string field;
    WM_EXPECTS(split_array_key(key, &index, &field), r.at(line.line)
                                                         << ": unknown key '" << key << "'");
    WM_EXPECTS(index < count, r.at(line.line) << ": " << key << " is beyond the " << count
                                              << " arrays the manifest declares");
    WM_EXPECTS(field == "name" || field == "file" || field == "bytes" || field == "block_bytes" ||
                   field == "block_checksums",
               r.at(line.line) << ": unknown key '" << key << "'");
    fields[index][field] = line;
  }

  std::map<std::string, int> names, files;
  for (std::uint64_t i = 0; i < count; ++i) {
    const std::string key = "array." + std::to_string(i);
    auto get = [&](const char* field) -> const manifest_line& {
      auto it = fields[i].find(field);
      WM_EXPECTS(it != fields[i].end(),
                 path << ": missing the key '" << key << "." << field << "'");
      return it->second;
    };
    stored_manifest::array& a = m.arrays[i];
    const manifest_line& name = get("name");
    a.name = name.value;
    WM_EXPECTS(is_plain_name(a.name) && a.name.size() <= max_array_name_length,
               r.at(name.line) << ": array name '" << a.name
                               << "' is not [A-Za-z0-9_.-]+ of at most " << max_array_name_length
                               << " characters");
    WM_EXPECTS(names.emplace(a.name, name.line).second,
               r.at(name.line) << ": array name '" << a.name << "' repeats line " << names[a.name]);
    const manifest_line& file = get("file");
    a.file = file.value;
    WM_EXPECTS(
        is_plain_name(a.file) && a.file != "." && a.file != ".." && a.file != manifest_file_name,
        r.at(file.line) << ": file '" << a.file
                        << "' is not a plain file name inside the store directory");
    WM_EXPECTS(files.emplace(a.file, file.line).second,
               r.at(file.line) << ": file '" << a.file << "' repeats line " << files[a.file]);
    a.bytes = r.to_u64(get("bytes"), key + ".bytes");
    const manifest_line& block = get("block_bytes");
    a.block_bytes = r.to_u64(block, key + ".block_bytes");
    WM_EXPECTS(a.block_bytes > 0 && a.block_bytes % 8 == 0,
               r.at(block.line) << ": " << key << ".block_bytes " << a.block_bytes
                                << " is not a positive multiple of 8");
    const manifest_line& sums = get("block_checksums");
    const std::uint64_t expected = block_count(a.bytes, a.block_bytes);
    if (!sums.value.empty()) {
      std::size_t at = 0;
      while (true) {
        const std::size_t space = sums.value.find(' ', at);
        const std::string token = sums.value.substr(at, space - at);
        WM_EXPECTS(a.block_checksums.size() < expected,
                   r.at(sums.line) << ": " << key << ".block_checksums has more than the "
                                   << expected << " checksums of " << a.bytes << " bytes in "
                                   << a.block_bytes << "-byte blocks");
        a.block_checksums.push_back(r.to_hex64(token, sums.line, key + ".block_checksums"));
        if (space == std::string::npos) break;
        at = space + 1;
      }
    }
    WM_EXPECTS(a.block_checksums.size() == expected,
               r.at(sums.line) << ": " << key << ".block_checksums has " << a.block_checksums.size()
                               << " checksums, expected " << expected << " (" << a.bytes
                               << " bytes in " << a.block_bytes << "-byte blocks)");
  }
  return result;
}

parsed_manifest read_manifest_at(int dir_fd, const std::string& dir) {
  const std::string path = dir + "/" + manifest_file_name;
  const int raw = ::openat(dir_fd, manifest_file_name, O_RDONLY | O_CLOEXEC);
  if (raw < 0) {
    const int err = errno;
    WM_FAIL(logic_error, path << ": cannot open the manifest (" << errno_text(err)
                              << "): not a wholememory store, or an incomplete one");
  }
  unique_fd fd(raw);
  std::string text;
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      WM_FAIL(system_error, path << ": read failed: " << errno_text(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  return parse_manifest(path, text);
}

parsed_manifest read_manifest_file(const std::string& dir) {
  return read_manifest_at(open_store_directory(dir).get(), dir);
}

unique_fd open_store_directory(const std::string& dir) {
  const int raw = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (raw < 0) {
    const int err = errno;
    WM_FAIL(logic_error, dir << ": cannot open the store directory (" << errno_text(err) << ")");
  }
  return unique_fd(raw);
}

}  // namespace wholememory::detail

namespace wholememory {

stored_manifest read_stored_manifest(const std::string& dir) {
  return detail::read_manifest_file(dir).manifest;
}

}  // namespace wholememory
