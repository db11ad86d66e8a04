#pragma once
// Line charts as inline SVG text, for self-contained HTML reports (no scripts, no external
// files): axes with rounded ticks, one coloured polyline per series, a legend.

#include <string>
#include <vector>

namespace oml::report {

struct ChartSeries {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;  ///< same length as x; non-finite values are skipped
};

struct ChartOptions {
  std::string title;
  std::string x_label;
  int width = 560;
  int height = 300;
  std::size_t max_points = 1000;  ///< longer series are averaged into this many points
};

/// `<svg ...>...</svg>`. Series without finite points are left out; with none at all the chart
/// says "no data".
std::string svg_line_chart(const std::vector<ChartSeries>& series, const ChartOptions& options);

/// "&lt;" etc. for text placed in HTML or SVG.
std::string escape_html(const std::string& text);

/// Tick positions covering [low, high]: about `count` round values (1, 2, 2.5, 5 x 10^n steps).
std::vector<double> nice_ticks(double low, double high, int count = 5);

}  // namespace oml::report
