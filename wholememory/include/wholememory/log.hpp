/*
 * The library's diagnostics on stderr, one line each, with a level: what cleanup code could not
 * do (a failed free, close or unmap in a destructor), never the errors a caller gets as
 * exceptions.
 *
 * A line reads "wholestore[rank R] warning: <message>" (the rank from the launch environment,
 * RANK / OMPI_COMM_WORLD_RANK / PMI_RANK, when there is one; "wholestore warning: ..." without).
 * WHOLESTORE_LOG_LEVEL picks what is printed: `error`, `warn` (the default), `info`, `debug`,
 * or 0-3; any other value prints one warning saying so and keeps the default.  Each line is
 * written with one call, so lines of threads do not interleave.
 */
#pragma once

#include <optional>
#include <sstream>
#include <string>

namespace wholememory {

enum class log_level { error = 0, warn = 1, info = 2, debug = 3 };

/// "error", "warning", "info", "debug".
const char* log_level_name(log_level level);

/// A level from its name ("error", "warn" or "warning", "info", "debug") or number 0-3.
std::optional<log_level> parse_log_level(const std::string& text);

/// The current level: set_log_level's, else WHOLESTORE_LOG_LEVEL's (read once), else warn.
log_level current_log_level();

/// Overrides the level for this process (tests, embedding applications).
void set_log_level(log_level level);

/// Writes `message` as one line at `level` when the current level lets it through.
void log_line(log_level level, const std::string& message);

}  // namespace wholememory

/// Logs `msg` (streamed: "freed " << n << " bytes") at `level` (wholememory::log_level::warn,
/// ...), building the text only when it will be printed.
#define WM_LOG(level, msg)                                \
  do {                                                    \
    if ((level) <= ::wholememory::current_log_level()) {  \
      std::ostringstream wm_log_os_;                      \
      wm_log_os_ << msg;                                  \
      ::wholememory::log_line((level), wm_log_os_.str()); \
    }                                                     \
  } while (0)
