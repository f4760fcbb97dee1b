// --report files (report.hpp).
#include "report.hpp"

#include "output_file.hpp"
#include "version.hpp"

#include <yaml-cpp/yaml.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace wholestore::apps {

namespace {

// Whether YAML reads `text`, written plain, as something other than this string: empty, a null
// or boolean word (YAML 1.1 spellings too, which PyYAML keeps), or a number (decimal, hex,
// octal, 1_000, 1:20, .inf, .nan).  Erring towards quotes costs nothing: a quoted string reads
// the same.
bool plain_reads_as_other_type(const std::string& text) {
  if (text.empty() || text == "=" || text == "<<") return true;
  std::string lower;
  for (char c : text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* word : {"~", "null", "true", "false", "yes", "no", "on", "off", "y", "n"})
    if (lower == word) return true;
  const char first = text[0];
  if (std::isdigit(static_cast<unsigned char>(first)) || first == '+' || first == '-' ||
      first == '.')
    return text.find_first_not_of("0123456789abcdefABCDEFxXoO_+-.:inINaA") == std::string::npos;
  return false;
}

void emit_row(YAML::Emitter& out, const report_row& row, bool one_line) {
  if (one_line) out << YAML::Flow;
  out << YAML::BeginMap;
  for (const auto& [key, value] : row) {
    out << YAML::Key << key << YAML::Value;
    value.emit(out);
  }
  out << YAML::EndMap;
}

}  // namespace

void emit_text(YAML::Emitter& out, const std::string& text) {
  if (plain_reads_as_other_type(text)) out << YAML::DoubleQuoted;
  out << text;
}

report_value report_value::quoted(std::string text) {
  report_value v(std::move(text));
  v.kind_ = kind::quoted_text;
  return v;
}

void report_value::emit(YAML::Emitter& out) const {
  switch (kind_) {
    case kind::text:
      emit_text(out, text_);
      break;
    case kind::quoted_text:
      out << YAML::DoubleQuoted << text_;
      break;
    case kind::signed_integer:
      out << static_cast<long long>(signed_);
      break;
    case kind::unsigned_integer:
      out << static_cast<unsigned long long>(unsigned_);
      break;
    case kind::number:
      out << number_;  // .nan, .inf and -.inf for the values that are not finite
      break;
    case kind::boolean:
      out << boolean_;
      break;
  }
}

report_body::report_body(const std::string& command) { add("command", command); }

report_body& report_body::precision(int digits) {
  digits_ = digits;
  return *this;
}

report_body& report_body::add(const std::string& key, report_value value) {
  entries_.push_back({key, shape::value, {report_row{{key, std::move(value)}}}});
  return *this;
}

report_body& report_body::add_mapping(const std::string& key, report_row entries) {
  entries_.push_back({key, shape::mapping, {std::move(entries)}});
  return *this;
}

report_body& report_body::add_rows(const std::string& key, std::vector<report_row> rows) {
  entries_.push_back({key, shape::rows, std::move(rows)});
  return *this;
}

void report_body::emit(YAML::Emitter& out) const {
  out.SetDoublePrecision(static_cast<std::size_t>(digits_));
  for (const entry& e : entries_) {
    out << YAML::Key << e.key << YAML::Value;
    switch (e.what) {
      case shape::value:
        e.rows[0][0].second.emit(out);
        break;
      case shape::mapping:
        emit_row(out, e.rows[0], false);
        break;
      case shape::rows:
        // An empty list on the key's line, `[]`, rather than on a line of its own.
        if (e.rows.empty()) out << YAML::Flow;
        out << YAML::BeginSeq;
        for (const report_row& row : e.rows) emit_row(out, row, true);
        out << YAML::EndSeq;
        break;
    }
  }
}

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

void write_report(const std::string& path, const report_body& body, const config* cfg) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  body.emit(out);
  emit_version(out);
  if (cfg != nullptr) {
    out << YAML::Key << "config" << YAML::Value;
    cfg->emit_yaml(out);
  }
  out << YAML::EndMap;
  if (!out.good()) throw config_error("--report: cannot write " + path + ": " + out.GetLastError());
  write_output_file(path, "--report", std::string(out.c_str()) + "\n");
}

}  // namespace wholestore::apps
