// write_output_file (output_file.hpp): a temporary file beside the destination, renamed over it.
#include "output_file.hpp"

#include "config.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace wholestore::apps {

namespace {

[[noreturn]] void refuse(const std::string& what, const std::string& path, int err) {
  throw config_error(what + ": cannot write " + path + ": " + std::strerror(err) +
                     " (no partial file was left; a previous file of that name is unchanged)");
}

// Writes through `f` (which owns its descriptor) and closes it; returns 0 or the first errno.
int fill_and_close(std::FILE* f, const std::function<void(std::FILE*)>& fill, bool sync) {
  try {
    fill(f);
  } catch (...) {
    std::fclose(f);
    throw;
  }
  int err = 0;
  if (std::ferror(f) != 0) err = errno != 0 ? errno : EIO;
  if (err == 0 && std::fflush(f) != 0) err = errno;
  // Flushed to the disk before the rename: after a crash the name holds the old or the new file,
  // never an empty one.
  if (err == 0 && sync && ::fsync(::fileno(f)) != 0) err = errno;
  if (std::fclose(f) != 0 && err == 0) err = errno;
  return err;
}

}  // namespace

void write_output_file(const std::string& path, const std::string& what,
                       const std::function<void(std::FILE*)>& fill) {
  if (path.empty()) throw config_error(what + ": empty file name");
  std::string dest = path;
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {
    // A device or a FIFO: there is nothing to keep, and no file to rename over it.
    errno = 0;
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) refuse(what, path, errno);
    errno = 0;
    const int err = fill_and_close(f, fill, false);
    if (err != 0) throw config_error(what + ": cannot write " + path + ": " + std::strerror(err));
    return;
  }
  if (exists) {  // a link to a regular file: replace the file, keep the link
    char* real = ::realpath(path.c_str(), nullptr);
    if (real != nullptr) {
      dest = real;
      std::free(real);
    }
  }
  const std::size_t slash = dest.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : dest.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? dest : dest.substr(slash + 1);
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = dir + "." + name + ".tmp-" + std::to_string(::getpid()) + "-" +
          std::to_string(counter.fetch_add(1));
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt >= 100)) refuse(what, path, errno);
  }
  struct tmp_guard {  // removes the temporary file on every way out but the rename
    const std::string& tmp;
    bool keep = false;
    ~tmp_guard() {
      if (!keep) ::unlink(tmp.c_str());
    }
  } guard{tmp};
  if (exists) ::fchmod(fd, st.st_mode & 07777);
  std::FILE* f = ::fdopen(fd, "wb");
  if (f == nullptr) {
    const int err = errno;
    ::close(fd);
    refuse(what, path, err);
  }
  errno = 0;
  const int err = fill_and_close(f, fill, true);
  if (err != 0) refuse(what, path, err);
  if (std::rename(tmp.c_str(), dest.c_str()) != 0) refuse(what, path, errno);
  guard.keep = true;
}

void write_output_file(const std::string& path, const std::string& what,
                       const std::string& contents) {
  write_output_file(path, what, [&](std::FILE* f) {
    if (!contents.empty()) std::fwrite(contents.data(), 1, contents.size(), f);
  });
}

}  // namespace wholestore::apps
