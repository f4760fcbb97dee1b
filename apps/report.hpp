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
/// `config:`.  Throws config_error when the file cannot be written.
void write_report(const std::string& path, const std::string& body, const config* cfg);

}  // namespace wholestore::apps
