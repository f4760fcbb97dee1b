// Datasets on disk, the writing side: arrays and manifest into a temporary directory beside
// the destination, swapped in whole.  See docs/dataset-format.md for the format.
#include <graph/dataset.hpp>

#include "dataset_files.hpp"

#include <wholememory/convert.hpp>
#include <wholememory/error.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)  // linux/fs.h; older C libraries do not declare it
#endif

namespace wholestore::graph {

namespace {

namespace fs = std::filesystem;
using detail::file_ptr;
using detail::hex64;
using detail::io_chunk_bytes;
using detail::join;
using detail::manifest_name;
using detail::open_file;
using wholememory::dtype;

// Writes one file of the dataset (inside the temporary directory, so under its final name) and
// takes the checksum over exactly the bytes written; commit() flushes it to the disk, so the
// swap never puts in place a directory whose files are still only in the page cache.
class file_writer {
 public:
  explicit file_writer(std::string path) : path_(std::move(path)), file_(open_file(path_, "wb")) {}
  file_writer(const file_writer&) = delete;
  file_writer& operator=(const file_writer&) = delete;

  void write(const void* data, std::size_t bytes) {
    if (bytes == 0) return;
    if (std::fwrite(data, 1, bytes, file_.get()) != bytes) {
      int err = errno;
      WM_FAIL(wholememory::system_error,
              path_ << ": write failed (" << wholememory::errno_text(err) << ")");
    }
    checksum_ = fnv1a64(data, bytes, checksum_);
    bytes_ += bytes;
  }

  void commit() {
    if (std::fflush(file_.get()) != 0 || ::fsync(::fileno(file_.get())) != 0) {
      int err = errno;
      WM_FAIL(wholememory::system_error,
              path_ << ": flush to disk failed (" << wholememory::errno_text(err) << ")");
    }
    std::FILE* f = file_.release();
    if (std::fclose(f) != 0) {
      int err = errno;
      WM_FAIL(wholememory::system_error,
              path_ << ": close failed (" << wholememory::errno_text(err) << ")");
    }
  }

  std::uint64_t checksum() const { return checksum_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  file_ptr file_;
  std::uint64_t checksum_ = detail::fnv_offset_basis;
  std::uint64_t bytes_ = 0;
};

// Writes `count` elements of Src converted to Dst, in chunks.
template <typename Dst, typename Src>
array_file write_array(const std::string& dir, const std::string& name, dtype type, const Src* src,
                       std::size_t count) {
  file_writer out(join(dir, name));
  if constexpr (std::is_same<Dst, Src>::value) {
    out.write(src, count * sizeof(Src));
  } else {
    const std::size_t chunk = io_chunk_bytes / sizeof(Dst);
    std::vector<Dst> buf(std::min(chunk, count));
    for (std::size_t done = 0; done < count; done += chunk) {
      std::size_t n = std::min(chunk, count - done);
      for (std::size_t i = 0; i < n; ++i) {
        if constexpr (std::is_integral<Dst>::value) {
          buf[i] = static_cast<Dst>(src[done + i]);
        } else {
          buf[i] = wholememory::convert_element<Dst>(src[done + i]);
        }
      }
      out.write(buf.data(), n * sizeof(Dst));
    }
  }
  out.commit();
  return array_file{name, type, count, out.bytes(), out.checksum()};
}

void put_array(std::ostream& os, const char* key, const array_file& a) {
  os << key << ".file: " << a.name << "\n"
     << key << ".dtype: " << wholememory::dtype_name(a.type) << "\n"
     << key << ".count: " << a.count << "\n"
     << key << ".bytes: " << a.bytes << "\n"
     << key << ".checksum: " << hex64(a.checksum) << "\n";
}

// ---- the destination: checked, built beside, swapped in ----

// Whether `name` is a file a dataset directory may hold: the manifest, an array, the ids, or
// the "<name>.tmp" of one (what writers before the directory swap left behind).
bool is_dataset_file(const std::string& name) {
  std::string stem = name;
  if (stem.size() > 4 && stem.compare(stem.size() - 4, 4, ".tmp") == 0) {
    stem.resize(stem.size() - 4);
  }
  if (stem == detail::manifest_name) return true;
  for (const char* f : detail::dataset_file_names) {
    if (stem == f) return true;
  }
  return false;
}

// Checks that `dir` may be replaced; returns whether it exists.  A symbolic link or a file
// is never replaced; a directory only when empty, holding dataset files only, or asked to.
bool check_destination(const fs::path& dir, bool overwrite) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) return false;
    WM_FAIL(wholememory::system_error,
            dir.string() << ": cannot stat (" << wholememory::errno_text(err) << ")");
  }
  WM_EXPECTS(!S_ISLNK(st.st_mode), dir.string() << ": is a symbolic link; refusing to replace "
                                                   "it (write to the directory it points to)");
  WM_EXPECTS(S_ISDIR(st.st_mode), dir.string() << ": exists and is not a directory; refusing "
                                                  "to replace it");
  if (overwrite) return true;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    WM_EXPECTS(is_dataset_file(name),
               dir.string() << ": exists and holds '" << name
                            << "', which is not a dataset file; refusing to replace the "
                               "directory (remove it, write elsewhere, or set overwrite)");
  }
  return true;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "host";
  std::string out(buf);
  std::replace(out.begin(), out.end(), '.', '_');
  return out;
}

// Temporary directories beside `dir`: ".<name>.writing-<host>-<pid>-<n>" while a dataset is
// built, the same name again for the previous dataset after the swap, until it is removed.
std::string temp_prefix(const fs::path& dir) {
  return "." + dir.filename().string() + ".writing-" + host_name() + "-";
}

// Removes the temporary directories beside `dir` that writers of this host left when they
// died (their pid is gone).  Others' are left alone: they may still be writing.
void remove_dead_writers_leftovers(const fs::path& dir) {
  const std::string prefix = temp_prefix(dir);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const long pid = std::strtol(name.c_str() + prefix.size(), nullptr, 10);
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    fs::remove_all(entry.path(), rm);
  }
}

void sync_directory(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: the data files themselves were synced
  ::fsync(fd);
  ::close(fd);
}

// A directory that is removed on destruction unless released.
class temp_directory {
 public:
  explicit temp_directory(const fs::path& dir) {
    static std::atomic<unsigned> counter{0};
    for (int attempt = 0;; ++attempt) {
      path_ = dir.parent_path() /
              (temp_prefix(dir) + std::to_string(::getpid()) + "-" + std::to_string(counter++));
      if (::mkdir(path_.c_str(), 0777) == 0) return;
      const int err = errno;
      if (err != EEXIST || attempt > 100) {
        WM_FAIL(wholememory::system_error, path_.string() << ": cannot create the temporary "
                                                             "directory of the dataset ("
                                                          << wholememory::errno_text(err) << ")");
      }
    }
  }
  temp_directory(const temp_directory&) = delete;
  temp_directory& operator=(const temp_directory&) = delete;
  ~temp_directory() {
    if (path_.empty()) return;
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Puts `temp` in place of `dir`; the previous `dir`, if any, ends up at `temp` (to be removed).
// With RENAME_EXCHANGE the swap is atomic; without it (some file systems) `dir` is missing for
// a moment between two renames, but never incomplete.
void swap_into_place(const fs::path& temp, const fs::path& dir, bool exists) {
  if (!exists) {
    if (::rename(temp.c_str(), dir.c_str()) == 0) return;
    const int err = errno;
    WM_FAIL(wholememory::system_error, "renaming " << temp.string() << " to " << dir.string()
                                                   << " failed (" << wholememory::errno_text(err)
                                                   << ")");
  }
  if (::syscall(SYS_renameat2, AT_FDCWD, temp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) ==
      0) {
    return;
  }
  const int err = errno;
  if (err != EINVAL && err != ENOSYS && err != EOPNOTSUPP) {
    WM_FAIL(wholememory::system_error, "exchanging " << temp.string() << " and " << dir.string()
                                                     << " failed (" << wholememory::errno_text(err)
                                                     << ")");
  }
  const fs::path aside = temp.string() + "-old";
  if (::rename(dir.c_str(), aside.c_str()) != 0) {
    const int err2 = errno;
    WM_FAIL(wholememory::system_error,
            "moving " << dir.string() << " aside failed (" << wholememory::errno_text(err2) << ")");
  }
  if (::rename(temp.c_str(), dir.c_str()) != 0) {
    const int err2 = errno;
    ::rename(aside.c_str(), dir.c_str());
    WM_FAIL(wholememory::system_error, "renaming " << temp.string() << " to " << dir.string()
                                                   << " failed (" << wholememory::errno_text(err2)
                                                   << ")");
  }
  ::rename(aside.c_str(), temp.c_str());  // where the caller removes the old dataset
}

// Writes the dataset's files into `dir` (a fresh, empty directory); returns the manifest.
manifest write_files(const std::string& dir, const host_csr& graph, dtype features_type);

}  // namespace

namespace {

fs::path destination_path(const std::string& dir) {
  WM_EXPECTS(!dir.empty(), "write_dataset: empty directory name");
  fs::path target = fs::absolute(dir).lexically_normal();
  if (target.filename().empty()) target = target.parent_path();  // "out/" is "out"
  return target;
}

void check_features_type(dtype features_type) {
  WM_EXPECTS(features_type == dtype::float32 || features_type == dtype::float16 ||
                 features_type == dtype::bfloat16,
             "write_dataset: features_type " << wholememory::dtype_name(features_type)
                                             << " is not float32, float16 or bfloat16");
}

}  // namespace

void check_dataset_destination(const std::string& dir, dtype features_type, bool overwrite) {
  check_features_type(features_type);
  const fs::path target = destination_path(dir);
  check_destination(target, overwrite);
  // write_dataset creates the missing parents: the nearest one that exists must take them.
  fs::path ancestor = target.parent_path();
  std::error_code ec;
  while (!ancestor.empty() && !fs::exists(ancestor, ec) && ancestor != ancestor.root_path()) {
    ancestor = ancestor.parent_path();
  }
  WM_EXPECTS(fs::is_directory(ancestor, ec),
             dir << ": cannot be created: " << ancestor.string() << " is not a directory");
  WM_EXPECTS(::access(ancestor.c_str(), W_OK | X_OK) == 0,
             dir << ": cannot be written: no write access to " << ancestor.string() << " ("
                 << wholememory::errno_text(errno) << ")");
}

manifest write_dataset(const std::string& dir, const host_csr& graph, dtype features_type,
                       bool overwrite) {
  detail::validate_csr(graph, "write_dataset " + dir);
  check_features_type(features_type);
  for (const std::string& id : graph.node_ids) {
    WM_EXPECTS(id.find_first_of("\r\n") == std::string::npos,
               "write_dataset " << dir << ": node id '" << id << "' contains a line break");
  }
  const fs::path target = destination_path(dir);
  const bool exists = check_destination(target, overwrite);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  WM_EXPECTS(!ec, target.parent_path().string()
                      << ": cannot create the parent directory (" << ec.message() << ")");
  remove_dead_writers_leftovers(target);

  // Built beside the destination (the same file system), flushed, then swapped in whole.
  temp_directory temp(target);
  manifest m = write_files(temp.path().string(), graph, features_type);
  if (exists) {
    // The replacement keeps the directory's permissions (a group-readable dataset stays so);
    // a new directory gets the process's default (0777 less the umask).
    struct stat st {};
    if (::stat(target.c_str(), &st) == 0) ::chmod(temp.path().c_str(), st.st_mode & 07777);
  }
  sync_directory(temp.path());
  swap_into_place(temp.path(), target, exists);
  sync_directory(target.parent_path());
  return m;  // ~temp_directory removes the previous dataset, now at its path
}

namespace {

manifest write_files(const std::string& dir, const host_csr& graph, dtype features_type) {
  manifest m;
  m.num_nodes = graph.num_nodes;
  m.num_edges = graph.num_edges();
  m.directed = graph.directed;
  m.direction = graph.direction;
  m.row_offsets = write_array<std::int64_t>(dir, "row_offsets.bin", dtype::int64,
                                            graph.row_offsets.data(), graph.row_offsets.size());
  if (graph.num_nodes < detail::int32_node_limit) {
    m.col_indices = write_array<std::int32_t>(dir, "col_indices.bin", dtype::int32,
                                              graph.col_indices.data(), graph.col_indices.size());
  } else {
    m.col_indices = write_array<std::int64_t>(dir, "col_indices.bin", dtype::int64,
                                              graph.col_indices.data(), graph.col_indices.size());
  }
  if (!graph.edge_weights.empty()) {
    m.edge_weights = write_array<float>(dir, "edge_weights.bin", dtype::float32,
                                        graph.edge_weights.data(), graph.edge_weights.size());
  }
  if (graph.feature_dim > 0) {
    m.feature_dim = graph.feature_dim;
    const float* f = graph.node_features.data();
    const std::size_t n = graph.node_features.size();
    const char* name = "node_features.bin";
    switch (features_type) {
      case dtype::float16:
        m.node_features = write_array<wholememory::half_t>(dir, name, features_type, f, n);
        break;
      case dtype::bfloat16:
        m.node_features = write_array<wholememory::bfloat16_t>(dir, name, features_type, f, n);
        break;
      default:
        m.node_features = write_array<float>(dir, name, features_type, f, n);
        break;
    }
  }
  if (!graph.node_labels.empty()) {
    m.num_classes = graph.num_classes;
    m.node_labels = write_array<std::int32_t>(dir, "node_labels.bin", dtype::int32,
                                              graph.node_labels.data(), graph.node_labels.size());
    m.node_split = write_array<std::uint8_t>(dir, "node_split.bin", dtype::uint8,
                                             graph.node_split.data(), graph.node_split.size());
  }
  if (!graph.node_ids.empty()) {
    m.node_ids_file = "node_ids.txt";
    file_writer out(join(dir, m.node_ids_file));
    std::string buf;
    std::uint64_t bytes = 0, checksum = detail::fnv_offset_basis;
    auto flush = [&] {
      out.write(buf.data(), buf.size());
      checksum = fnv1a64(buf.data(), buf.size(), checksum);
      bytes += buf.size();
      buf.clear();
    };
    for (const std::string& id : graph.node_ids) {
      buf += id;
      buf += '\n';
      if (buf.size() >= io_chunk_bytes) flush();
    }
    flush();
    out.commit();
    m.node_ids_bytes = bytes;
    m.node_ids_checksum = checksum;
  }

  std::ostringstream os;
  os << "# wholestore graph dataset; see docs/dataset-format.md\n"
     << "format_version: " << m.format_version << "\n"
     << "num_nodes: " << m.num_nodes << "\n"
     << "num_edges: " << m.num_edges << "\n"
     << "directed: " << (m.directed ? "true" : "false") << "\n"
     << "direction: " << edge_direction_name(m.direction) << "\n";
  put_array(os, "row_offsets", m.row_offsets);
  put_array(os, "col_indices", m.col_indices);
  if (m.edge_weights) put_array(os, "edge_weights", *m.edge_weights);
  if (m.node_features) {
    os << "feature_dim: " << m.feature_dim << "\n";
    put_array(os, "node_features", *m.node_features);
  }
  if (m.node_labels) {
    os << "num_classes: " << m.num_classes << "\n";
    put_array(os, "node_labels", *m.node_labels);
    put_array(os, "node_split", *m.node_split);
  }
  if (!m.node_ids_file.empty()) {
    os << "node_ids_file: " << m.node_ids_file << "\n"
       << "node_ids_bytes: " << *m.node_ids_bytes << "\n"
       << "node_ids_checksum: " << hex64(*m.node_ids_checksum) << "\n";
  }
  const std::string text = os.str();
  file_writer out(join(dir, manifest_name));
  out.write(text.data(), text.size());
  out.commit();
  return m;
}

}  // namespace

}  // namespace wholestore::graph
