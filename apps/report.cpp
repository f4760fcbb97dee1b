// --report files (report.hpp).
#include "report.hpp"

#include "version.hpp"

#include <fstream>
#include <sstream>

namespace wholestore::apps {

void write_report(const std::string& path, const std::string& body, const config* cfg) {
  std::ofstream report(path);
  report << body << version_yaml();
  if (cfg != nullptr) {
    report << "config:\n";
    std::istringstream lines(cfg->to_yaml());
    for (std::string line; std::getline(lines, line);) report << "  " << line << "\n";
  }
  report.flush();
  if (!report) throw config_error(path + ": cannot write the report");
}

}  // namespace wholestore::apps
