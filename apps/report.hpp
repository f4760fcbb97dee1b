/*
 * --report files: the YAML a command writes on rank 0 after a run, so that a figure comes with
 * what produced it.
 *
 * A command collects its figures in a report_body, key by key in the order they are to appear;
 * write_report writes them with yaml-cpp's emitter, then the `version:` block and the effective
 * config.  Any text (a path holding ": ", "#", a quote, a newline or non-ASCII letters) therefore
 * reads back as the same string, and a text that YAML would read as another type ("true", "12",
 * "null", "") is quoted.
 */
#pragma once

#include "config.hpp"

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace YAML {
class Emitter;
}

namespace wholestore::apps {

/// Writes `text` as a YAML scalar that reads back as this string: plain where that reads as a
/// string, else double-quoted (yaml-cpp escapes what needs it).
void emit_text(YAML::Emitter& out, const std::string& text);

/// One value of a report: a text, an integer, a number or a boolean.
class report_value {
 public:
  report_value(const char* text) : report_value(std::string(text)) {}
  report_value(std::string text) : kind_(kind::text), text_(std::move(text)) {}
  report_value(bool value) : kind_(kind::boolean), boolean_(value) {}
  report_value(double value) : kind_(kind::number), number_(value) {}
  template <typename T,
            std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  report_value(T value) {
    if constexpr (std::is_signed_v<T>) {
      kind_ = kind::signed_integer;
      signed_ = value;
    } else {
      kind_ = kind::unsigned_integer;
      unsigned_ = value;
    }
  }
  /// A text written in double quotes whatever it holds (keys whose readers expect quotes).
  static report_value quoted(std::string text);

  /// Writes the value (numbers with the emitter's precision).
  void emit(YAML::Emitter& out) const;

 private:
  enum class kind { text, quoted_text, signed_integer, unsigned_integer, number, boolean };
  kind kind_ = kind::text;
  std::string text_;
  std::int64_t signed_ = 0;
  std::uint64_t unsigned_ = 0;
  double number_ = 0;
  bool boolean_ = false;
};

/// A mapping written on one line, `{op: gather, ms: 1.5}`: one case or epoch of a report.
using report_row = std::vector<std::pair<std::string, report_value>>;

/// The figures of a --report file, in the order they were added, starting with `command: NAME`.
class report_body {
 public:
  explicit report_body(const std::string& command);
  /// Significant digits of the numbers (6 unless set).
  report_body& precision(int digits);
  /// `key: value`.
  report_body& add(const std::string& key, report_value value);
  /// `key:` with the mapping `entries` below it, one per line.
  report_body& add_mapping(const std::string& key, report_row entries);
  /// `key:` with a list of rows below it, one per line; `key: []` when there is none.
  report_body& add_rows(const std::string& key, std::vector<report_row> rows);

  /// Writes the keys into the mapping `out` has open, and sets its precision of numbers.
  void emit(YAML::Emitter& out) const;

 private:
  enum class shape { value, mapping, rows };
  struct entry {
    std::string key;
    shape what;
    std::vector<report_row> rows;  // value: one row of one pair; mapping: one row
  };
  int digits_ = 6;
  std::vector<entry> entries_;
};

/// Writes `path`: `body`, the `version:` block (version.hpp) and, when `cfg` is given, the
/// effective config under `config:`, through a temporary file renamed into place
/// (output_file.hpp).  Throws config_error when the file cannot be written; a previous file of
/// that name is then kept.
void write_report(const std::string& path, const report_body& body, const config* cfg);

/// Checks before a run that `path` can be written: not a directory, and either a writable
/// file or a new name in a writable directory.  Creates nothing.  Throws config_error naming
/// the path and why, so that a typo costs nothing rather than the whole run.
void check_report_file(const std::string& path);

}  // namespace wholestore::apps
