// --report files (report.hpp).
#include "report.hpp"

#include "output_file.hpp"
#include "version.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace wholestore::apps {

void check_report_file(const std::string& path) {
  auto refuse = [&](const std::string& why) {
    throw config_error("--report " + path + ": " + why + "; nothing was run");
  };
  if (path.empty()) refuse("empty file name");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) refuse("is a directory");
    if (::access(path.c_str(), W_OK) != 0)
      refuse(std::string("cannot be written (") + std::strerror(errno) + ")");
    return;
  }
  const std::size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  if (::stat(dir.c_str(), &st) != 0) {
    refuse("its directory " + dir + " does not exist (" + std::strerror(errno) + ")");
  }
  if (!S_ISDIR(st.st_mode)) refuse(dir + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    refuse("cannot create a file in " + dir + " (" + std::strerror(errno) + ")");
  }
}

void write_report(const std::string& path, const std::string& body, const config* cfg) {
  std::ostringstream report;
  report << body << version_yaml();
  if (cfg != nullptr) {
    report << "config:\n";
    std::istringstream lines(cfg->to_yaml());
    for (std::string line; std::getline(lines, line);) report << "  " << line << "\n";
  }
  write_output_file(path, "--report", report.str());
}

}  // namespace wholestore::apps
