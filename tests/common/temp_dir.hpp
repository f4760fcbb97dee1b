/*
 * A fresh directory under the system's temporary directory (mkdtemp), removed with everything
 * in it when the object goes away; for tests that write datasets and checkpoints.
 */
#pragma once

#include <stdlib.h>

#include <cerrno>

#include <filesystem>
#include <string>
#include <system_error>

namespace wholestore_test {

struct temp_dir {
  std::filesystem::path path;
  /// `prefix` names the test in the directory's name.
  explicit temp_dir(const std::string& prefix = "wholestore_test") {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + ".XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw std::system_error(errno, std::generic_category(), "mkdtemp " + tmpl);
    }
    path = tmpl;
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
};

}  // namespace wholestore_test
