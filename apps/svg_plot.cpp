// svg_line_chart (svg_plot.hpp): axes with five ticks, a polyline and dots per series, a legend.
#include "svg_plot.hpp"

#include "output_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace wholestore::apps {

namespace {

constexpr double width = 640, height = 400, left_m = 70, right_m = 70, top_m = 40, bottom_m = 50;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else
      out += c;
  }
  return out;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

struct range {
  double lo, hi;
};

range range_of(const std::vector<double>& v) {
  if (v.empty()) return {0, 1};
  double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
  if (!(hi > lo)) {
    const double pad = std::fabs(lo) > 0 ? std::fabs(lo) * 0.05 : 0.5;
    lo -= pad;
    hi += pad;
  }
  return {lo, hi};
}

}  // namespace

std::string svg_line_chart(const std::string& title, const std::string& x_label,
                           const plot_series& left, const plot_series& right) {
  std::vector<double> xs = left.x;
  xs.insert(xs.end(), right.x.begin(), right.x.end());
  const range rx = range_of(xs);
  const double pw = width - left_m - right_m, ph = height - top_m - bottom_m;
  auto px = [&](double x) { return left_m + (x - rx.lo) / (rx.hi - rx.lo) * pw; };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
    << escape(title) << "</text>\n"
    << "<rect x=\"" << left_m << "\" y=\"" << top_m << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#444\"/>\n";
  for (int i = 0; i <= 4; ++i) {  // x ticks
    const double x = rx.lo + (rx.hi - rx.lo) * i / 4;
    o << "<text x=\"" << px(x) << "\" y=\"" << top_m + ph + 18 << "\" text-anchor=\"middle\">"
      << num(x) << "</text>\n";
  }
  o << "<text x=\"" << left_m + pw / 2 << "\" y=\"" << height - 10 << "\" text-anchor=\"middle\">"
    << escape(x_label) << "</text>\n";
  auto draw = [&](const plot_series& s, bool on_left) {
    if (s.y.empty()) return;
    const range ry = range_of(s.y);
    auto py = [&](double y) { return top_m + ph - (y - ry.lo) / (ry.hi - ry.lo) * ph; };
    const double ax = on_left ? left_m : left_m + pw;
    for (int i = 0; i <= 4; ++i) {
      const double y = ry.lo + (ry.hi - ry.lo) * i / 4;
      o << "<text x=\"" << (on_left ? ax - 6 : ax + 6) << "\" y=\"" << py(y) + 4
        << "\" text-anchor=\"" << (on_left ? "end" : "start") << "\" fill=\"" << s.color << "\">"
        << num(y) << "</text>\n";
    }
    o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"2\" points=\"";
    for (std::size_t i = 0; i < s.y.size(); ++i) o << px(s.x[i]) << "," << py(s.y[i]) << " ";
    o << "\"/>\n";
    for (std::size_t i = 0; i < s.y.size(); ++i)
      o << "<circle cx=\"" << px(s.x[i]) << "\" cy=\"" << py(s.y[i]) << "\" r=\"3\" fill=\""
        << s.color << "\"/>\n";
    const double lx = on_left ? left_m + 10 : left_m + pw - 150;
    o << "<line x1=\"" << lx << "\" y1=\"" << top_m + 14 << "\" x2=\"" << lx + 20 << "\" y2=\""
      << top_m + 14 << "\" stroke=\"" << s.color << "\" stroke-width=\"2\"/>\n"
      << "<text x=\"" << lx + 26 << "\" y=\"" << top_m + 18 << "\" fill=\"" << s.color << "\">"
      << escape(s.name) << (on_left ? " (left axis)" : " (right axis)") << "</text>\n";
  };
  draw(left, true);
  draw(right, false);
  o << "</svg>\n";
  return o.str();
}

void write_svg(const std::string& path, const std::string& svg) {
  write_output_file(path, "--plot", svg);
}

}  // namespace wholestore::apps
