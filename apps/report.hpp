/*
 * --report files: the YAML a command writes on rank 0 after a run, so that a figure comes with
 * what produced it.
 */
#pragma once

#include "config.hpp"

#include <string>

namespace wholestore::apps {

/// Writes `path`: `body` (the command's figures as YAML lines, starting with `command: NAME`),
/// the `version:` block (version.hpp) and, when `cfg` is given, the effective config under
/// `config:`, through a temporary file renamed into place (output_file.hpp).  Throws
/// config_error when the file cannot be written; a previous file of that name is then kept.
void write_report(const std::string& path, const std::string& body, const config* cfg);

/// Checks before a run that `path` can be written: not a directory, and either a writable
/// file or a new name in a writable directory.  Creates nothing.  Throws config_error naming
/// the path and why, so that a typo costs nothing rather than the whole run.
void check_report_file(const std::string& path);

}  // namespace wholestore::apps
