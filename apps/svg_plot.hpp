// A small SVG line chart for `wholestore train --plot`: one or two series against a shared x
// axis, each with its own y axis (left and right), drawn by hand (no dependency).
#pragma once

#include <string>
#include <vector>

namespace wholestore::apps {

struct plot_series {
  std::string name;       ///< legend and axis label
  std::string color;      ///< SVG color, e.g. "#1f77b4"
  std::vector<double> x;  ///< same length as y
  std::vector<double> y;
};

/// The SVG text of a chart titled `title` with `left` on the left axis and, when it has points,
/// `right` on the right axis; x is labelled `x_label`.
std::string svg_line_chart(const std::string& title, const std::string& x_label,
                           const plot_series& left, const plot_series& right);

/// Writes svg_line_chart to `path` through a temporary file renamed into place
/// (output_file.hpp); throws config_error when the file cannot be written.
void write_svg(const std::string& path, const std::string& svg);

}  // namespace wholestore::apps
