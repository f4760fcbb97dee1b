#include <wholememory/log.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace wholememory {

namespace {

constexpr int level_unset = -1;
std::atomic<int> level_override{level_unset};

log_level level_from_environment() {
  static const log_level level = [] {
    const char* text = std::getenv("WHOLESTORE_LOG_LEVEL");
    if (text == nullptr || *text == '\0') return log_level::warn;
    if (auto parsed = parse_log_level(text)) return *parsed;
    std::fprintf(stderr,
                 "wholestore warning: WHOLESTORE_LOG_LEVEL='%s' is not error, warn, info, debug "
                 "or 0-3; using warn\n",
                 text);
    return log_level::warn;
  }();
  return level;
}

std::string line_prefix() {
  for (const char* name : {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}) {
    const char* rank = std::getenv(name);
    if (rank != nullptr && *rank != '\0') return std::string("wholestore[rank ") + rank + "] ";
  }
  return "wholestore ";
}

}  // namespace

const char* log_level_name(log_level level) {
  switch (level) {
    case log_level::error:
      return "error";
    case log_level::warn:
      return "warning";
    case log_level::info:
      return "info";
    case log_level::debug:
      return "debug";
  }
  return "unknown";
}

std::optional<log_level> parse_log_level(const std::string& text) {
  if (text == "error" || text == "0") return log_level::error;
  if (text == "warn" || text == "warning" || text == "1") return log_level::warn;
  if (text == "info" || text == "2") return log_level::info;
  if (text == "debug" || text == "3") return log_level::debug;
  return std::nullopt;
}

log_level current_log_level() {
  const int set = level_override.load(std::memory_order_relaxed);
  return set == level_unset ? level_from_environment() : static_cast<log_level>(set);
}

void set_log_level(log_level level) {
  level_override.store(static_cast<int>(level), std::memory_order_relaxed);
}

void log_line(log_level level, const std::string& message) {
  if (level > current_log_level()) return;
  const std::string line = line_prefix() + log_level_name(level) + ": " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace wholememory
