#include "oml/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace oml::report {

namespace {

const char* const kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string number(double value) {
  char buffer[32];
  const double magnitude = std::fabs(value);
  if (value == 0) return "0";
  if (magnitude >= 1e5 || magnitude < 1e-3) {
    std::snprintf(buffer, sizeof(buffer), "%.2g", value);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%.4g", value);
  }
  return buffer;
}

// Averages consecutive points so that a 100k-step run still draws quickly.
ChartSeries thin_out(const ChartSeries& in, std::size_t max_points) {
  ChartSeries out;
  out.name = in.name;
  std::vector<std::pair<double, double>> finite;
  for (std::size_t i = 0; i < in.x.size() && i < in.y.size(); ++i) {
    if (std::isfinite(in.x[i]) && std::isfinite(in.y[i])) finite.emplace_back(in.x[i], in.y[i]);
  }
  const std::size_t per_bucket =
      std::max<std::size_t>(1, (finite.size() + max_points - 1) / std::max<std::size_t>(1, max_points));
  for (std::size_t start = 0; start < finite.size(); start += per_bucket) {
    const std::size_t end = std::min(finite.size(), start + per_bucket);
    double sx = 0, sy = 0;
    for (std::size_t i = start; i < end; ++i) {
      sx += finite[i].first;
      sy += finite[i].second;
    }
    out.x.push_back(sx / static_cast<double>(end - start));
    out.y.push_back(sy / static_cast<double>(end - start));
  }
  return out;
}

}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double low, double high, int count) {
  if (!std::isfinite(low) || !std::isfinite(high)) return {};
  // A range of a few ulps (values equal but for rounding) is flat: one tick. A step that small
  // would also make the multiples below indistinguishable (i + 1 == i beyond 2^53).
  const double scale = std::max(std::fabs(low), std::fabs(high));
  if (!(high - low > scale * 1e-9)) return {low};
  if (!std::isfinite(high - low)) return {low, high};  // e.g. -1e308 .. 1e308
  count = std::max(1, count);
  const double raw = (high - low) / count;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double factor : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = factor * power;
    if (step >= raw) break;
  }
  const double first = std::ceil(low / step - 1e-9);
  if (!(step > 0) || !std::isfinite(step) || !std::isfinite(first)) return {low, high};  // denormals
  std::vector<double> ticks;
  // Multiples of the step, not a running sum, so rounding errors do not accumulate; at most
  // count + 2 of them (the step is at least the range / count), bounded again for safety.
  for (int n = 0; n < 2 * count + 2; ++n) {
    const double i = first + n;
    if (i * step > high + step * 1e-9) break;
    ticks.push_back(i == 0 ? 0.0 : i * step);
  }
  return ticks;
}

std::string svg_line_chart(const std::vector<ChartSeries>& input, const ChartOptions& options) {
  std::vector<ChartSeries> series;
  for (const auto& s : input) {
    ChartSeries thin = thin_out(s, options.max_points);
    if (!thin.x.empty()) series.push_back(std::move(thin));
  }
  const int width = options.width, height = options.height;
  const double left = 58, right = 12, top = 28, bottom = 40;
  const double legend_height = series.size() > 1 ? 16.0 * static_cast<double>((series.size() + 2) / 3) : 0.0;
  const double plot_w = width - left - right;
  const double plot_h = height - top - bottom - legend_height;

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"" << width << "\" height=\""
      << height << "\" viewBox=\"0 0 " << width << " " << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">";
  svg << "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>";
  svg << "<text x=\"" << width / 2
      << "\" y=\"17\" text-anchor=\"middle\" font-size=\"13\" font-weight=\"bold\">"
      << escape_html(options.title) << "</text>";
  if (series.empty()) {
    svg << "<text x=\"" << width / 2 << "\" y=\"" << height / 2
        << "\" text-anchor=\"middle\" fill=\"#888\">no data</text></svg>";
    return svg.str();
  }

  // The range of the finite values (NaN and Inf points cannot be placed on an axis).
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min, y_min = x_min, y_max = -x_min;
  for (const auto& s : series) {
    for (double v : s.x) {
      if (std::isfinite(v)) x_min = std::min(x_min, v), x_max = std::max(x_max, v);
    }
    for (double v : s.y) {
      if (std::isfinite(v)) y_min = std::min(y_min, v), y_max = std::max(y_max, v);
    }
  }
  if (x_min > x_max) x_min = x_max = 0;
  if (y_min > y_max) y_min = y_max = 0;
  // A flat series, a single point or values equal but for rounding still need a visible range.
  const auto flat = [](double low, double high) {
    return !(high - low > std::max(std::fabs(low), std::fabs(high)) * 1e-9);
  };
  if (flat(x_min, x_max)) x_min -= 0.5, x_max += 0.5;
  if (flat(y_min, y_max)) {
    const double pad = std::max(1e-6, std::fabs(y_min) * 0.05);
    y_min -= pad, y_max += pad;
  }
  const std::vector<double> y_ticks = nice_ticks(y_min, y_max);
  const std::vector<double> x_ticks = nice_ticks(x_min, x_max, 6);
  auto px = [&](double x) { return left + (x - x_min) / (x_max - x_min) * plot_w; };
  auto py = [&](double y) { return top + plot_h - (y - y_min) / (y_max - y_min) * plot_h; };

  svg << "<g stroke=\"#e5e5e5\">";
  for (double t : y_ticks)
    svg << "<line x1=\"" << left << "\" x2=\"" << left + plot_w << "\" y1=\"" << py(t) << "\" y2=\"" << py(t)
        << "\"/>";
  svg << "</g><g fill=\"#444\">";
  for (double t : y_ticks) {
    svg << "<text x=\"" << left - 5 << "\" y=\"" << py(t) + 4 << "\" text-anchor=\"end\">" << number(t)
        << "</text>";
  }
  for (double t : x_ticks) {
    svg << "<text x=\"" << px(t) << "\" y=\"" << top + plot_h + 15 << "\" text-anchor=\"middle\">"
        << number(t) << "</text>";
  }
  svg << "<text x=\"" << left + plot_w / 2 << "\" y=\"" << top + plot_h + 30 << "\" text-anchor=\"middle\">"
      << escape_html(options.x_label) << "</text></g>";
  svg << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << plot_w << "\" height=\"" << plot_h
      << "\" fill=\"none\" stroke=\"#999\"/>";

  for (std::size_t s = 0; s < series.size(); ++s) {
    const char* colour = kPalette[s % (sizeof(kPalette) / sizeof(kPalette[0]))];
    svg << "<polyline class=\"series\" fill=\"none\" stroke-width=\"1.6\" stroke=\"" << colour
        << "\" points=\"";
    for (std::size_t i = 0; i < series[s].x.size(); ++i)
      svg << px(series[s].x[i]) << "," << py(series[s].y[i]) << " ";
    svg << "\"><title>" << escape_html(series[s].name) << "</title></polyline>";
    if (series[s].x.size() <= 60) {
      for (std::size_t i = 0; i < series[s].x.size(); ++i) {
        svg << "<circle r=\"2.5\" fill=\"" << colour << "\" cx=\"" << px(series[s].x[i]) << "\" cy=\""
            << py(series[s].y[i]) << "\"><title>" << escape_html(series[s].name) << ": "
            << number(series[s].y[i]) << "</title></circle>";
      }
    }
    if (series.size() > 1) {
      const double lx = left + static_cast<double>(s % 3) * (plot_w / 3);
      const double ly = height - legend_height + 12 + 16.0 * static_cast<double>(s / 3) - 4;
      svg << "<rect x=\"" << lx << "\" y=\"" << ly - 8 << "\" width=\"12\" height=\"4\" fill=\"" << colour
          << "\"/>";
      svg << "<text x=\"" << lx + 16 << "\" y=\"" << ly - 3 << "\">" << escape_html(series[s].name)
          << "</text>";
    }
  }
  svg << "</svg>";
  return svg.str();
}

}  // namespace oml::report
