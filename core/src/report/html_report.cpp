#include "oml/report/html_report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "../common/raw_io.h"
#include "oml/common/error.h"
#include "oml/io/atomic_file.h"
#include "oml/report/svg_chart.h"

namespace oml::report {

namespace fs = std::filesystem;

namespace {

std::vector<nlohmann::json> read_jsonl(const fs::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  if (!in) return out;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      // A run killed mid-write can leave a partial last line; anything else is corruption.
      if (in.peek() == std::char_traits<char>::eof()) break;
      throw DataError(path.string() + ":" + std::to_string(number) + ": not a JSON object (" + e.what() +
                      ")");
    }
  }
  return out;
}

std::string read_text(const fs::path& path) { return oml::detail::read_file(path.string()).value_or(""); }

std::string format_value(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.4f", value);
  return buffer;
}

/// "<category>/<metric>/<param>" -> {category, "metric/param"}; categories may contain '/'.
std::pair<std::string, std::string> split_metric_key(const std::string& key) {
  const std::size_t last = key.rfind('/');
  const std::size_t middle =
      last == std::string::npos || last == 0 ? std::string::npos : key.rfind('/', last - 1);
  if (middle == std::string::npos) return {"", key};
  return {key.substr(0, middle), key.substr(middle + 1)};
}

/// OVERALL first, then the others in name order.
std::vector<std::string> ordered_categories(const std::set<std::string>& categories) {
  std::vector<std::string> out;
  if (categories.count("OVERALL")) out.push_back("OVERALL");
  for (const auto& c : categories) {
    if (c != "OVERALL") out.push_back(c);
  }
  return out;
}

std::string train_section(const std::vector<nlohmann::json>& steps) {
  std::ostringstream html;
  html << "<h2 id=\"training\">Training</h2>";
  if (steps.empty()) {
    html << "<p class=\"empty\">train.jsonl has no steps yet.</p>";
    return html.str();
  }
  // Every numeric field besides the counters becomes a curve over steps, loss and lr first.
  std::vector<std::string> keys{"loss", "lr"};
  for (const auto& record : steps) {
    for (const auto& item : record.items()) {
      if (!item.value().is_number() || item.key() == "epoch" || item.key() == "step") continue;
      if (std::find(keys.begin(), keys.end(), item.key()) == keys.end()) keys.push_back(item.key());
    }
  }
  html << "<div class=\"charts\">";
  for (const auto& key : keys) {
    ChartSeries series{key, {}, {}};
    for (const auto& record : steps) {
      if (!record.contains(key) || !record[key].is_number() || !record.contains("step")) continue;
      series.x.push_back(record["step"].get<double>());
      series.y.push_back(record[key].get<double>());
    }
    if (series.x.empty()) continue;
    ChartOptions chart;
    chart.title = key;
    chart.x_label = "step";
    html << svg_line_chart({series}, chart);
  }
  html << "</div>";
  const auto& last = steps.back();
  html << "<p>" << steps.size() << " steps logged; last: epoch " << last.value("epoch", int64_t{0}) + 1
       << ", step " << last.value("step", int64_t{0}) << ", loss " << format_value(last.value("loss", NAN))
       << ".</p>";
  return html.str();
}

std::string metrics_section(const std::vector<nlohmann::json>& validations, const RunReportOptions& options) {
  std::ostringstream html;
  html << "<h2 id=\"metrics\">Validation metrics</h2>";
  if (validations.empty()) {
    html << "<p class=\"empty\">metrics.jsonl has no validations yet.</p>";
    return html.str();
  }
  // metric name -> category -> series over epochs.
  std::map<std::string, std::map<std::string, ChartSeries>> charts;
  std::set<std::string> categories;
  for (const auto& record : validations) {
    const double epoch = record.value("epoch", 0.0) + 1.0;
    // Bound to a name: iterating items() of the temporary itself would outlive it.
    const nlohmann::json metrics = record.value("metrics", nlohmann::json::object());
    for (const auto& item : metrics.items()) {
      if (!item.value().is_number()) continue;
      const auto [category, metric] = split_metric_key(item.key());
      categories.insert(category);
      ChartSeries& series = charts[metric][category];
      series.name = category;
      series.x.push_back(epoch);
      series.y.push_back(item.value().get<double>());
    }
  }
  const std::vector<std::string> order = ordered_categories(categories);
  html << "<div class=\"charts\">";
  for (const auto& [metric, by_category] : charts) {
    std::vector<ChartSeries> series;
    // Ten categories keep a chart readable; the table below has all of them.
    for (const auto& category : order) {
      if (by_category.count(category) && series.size() < 10) series.push_back(by_category.at(category));
    }
    ChartOptions chart;
    chart.title = metric;
    chart.x_label = "epoch";
    html << svg_line_chart(series, chart);
  }
  html << "</div>";

  // The record best.ckpt holds: the first strict improvement, as training selects it.
  const nlohmann::json* best = nullptr;
  double best_value = 0;
  for (const auto& record : validations) {
    const auto metrics = record.value("metrics", nlohmann::json::object());
    if (!metrics.contains(options.checkpoint_metric) || !metrics[options.checkpoint_metric].is_number())
      continue;
    const double value = metrics[options.checkpoint_metric].get<double>();
    if (!std::isfinite(value)) continue;
    if (best == nullptr || (options.maximise ? value > best_value : value < best_value)) {
      best = &record;
      best_value = value;
    }
  }
  html << "<h2 id=\"best\">Best checkpoint</h2>";
  if (best == nullptr) {
    html << "<p class=\"empty\">no validation has " << escape_html(options.checkpoint_metric) << " yet.</p>";
    return html.str();
  }
  html << "<p>By <code>" << escape_html(options.checkpoint_metric) << "</code> ("
       << (options.maximise ? "max" : "min") << "): " << format_value(best_value) << " after epoch "
       << best->value("epoch", int64_t{0}) + 1 << ", step " << best->value("step", int64_t{0}) << ".</p>";
  std::map<std::string, std::map<std::string, double>> table;  // category -> metric -> value
  std::vector<std::string> metric_names;
  for (const auto& item : (*best)["metrics"].items()) {
    if (!item.value().is_number()) continue;
    const auto [category, metric] = split_metric_key(item.key());
    table[category][metric] = item.value().get<double>();
    if (std::find(metric_names.begin(), metric_names.end(), metric) == metric_names.end())
      metric_names.push_back(metric);
  }
  html << "<table id=\"best-metrics\"><tr><th>category</th>";
  for (const auto& metric : metric_names) html << "<th>" << escape_html(metric) << "</th>";
  html << "</tr>";
  for (const auto& category : order) {
    if (!table.count(category)) continue;
    html << "<tr><td>" << escape_html(category) << "</td>";
    for (const auto& metric : metric_names) {
      const auto found = table[category].find(metric);
      html << "<td>" << (found == table[category].end() ? std::string("—") : format_value(found->second))
           << "</td>";
    }
    html << "</tr>";
  }
  html << "</table>";
  return html.str();
}

std::string grids_section(const fs::path& run_dir) {
  std::ostringstream html;
  html << "<h2 id=\"worst\">Worst queries</h2>";
  // The latest validation's folder (epoch_NNN sorts by name).
  std::vector<fs::path> folders;
  std::error_code ec;
  if (fs::is_directory(run_dir / "images", ec)) {
    for (const auto& entry : fs::directory_iterator(run_dir / "images")) {
      if (entry.is_directory() && entry.path().filename().string().rfind("epoch_", 0) == 0)
        folders.push_back(entry.path());
    }
  }
  if (folders.empty()) {
    html << "<p class=\"empty\">no retrieval grids (set <code>log_images: true</code> to draw the worst "
            "queries at each "
            "validation).</p>";
    return html.str();
  }
  std::sort(folders.begin(), folders.end());
  std::vector<fs::path> images;
  for (const auto& entry : fs::directory_iterator(folders.back())) {
    if (entry.path().extension() == ".png") images.push_back(entry.path());
  }
  std::sort(images.begin(), images.end());
  html << "<p>From " << escape_html(folders.back().filename().string())
       << ". Each row: the query (blue), its nearest gallery items (green: same label, red: different label; "
          "d = "
          "distance), then relevant items the top-k missed (amber).</p>";
  for (const auto& image : images) {
    html << "<figure><figcaption>" << escape_html(image.stem().string())
         << "</figcaption><img class=\"grid\" alt=\"" << escape_html(image.filename().string())
         << "\" src=\"data:image/png;base64," << base64(read_text(image)) << "\"></figure>";
  }
  return html.str();
}

std::string now_text() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  localtime_r(&now, &local);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M:%S", &local);
  return buffer;
}

}  // namespace

std::string base64(const std::string& bytes) {
  static const char* const kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t n = (static_cast<unsigned char>(bytes[i]) << 16) |
                       (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += kAlphabet[(n >> shift) & 63u];
  }
  if (i < bytes.size()) {
    uint32_t n = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[(n >> 18) & 63u];
    out += kAlphabet[(n >> 12) & 63u];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63u] : '=';
    out += '=';
  }
  return out;
}

fs::path grid_folder(const fs::path& run_dir, int64_t epoch_number) {
  char name[32];
  std::snprintf(name, sizeof(name), "epoch_%03lld", static_cast<long long>(epoch_number));
  return run_dir / "images" / name;
}

std::string render_run_report(const RunReportOptions& options) {
  const std::string title = options.title.empty() ? options.run_dir.filename().string() : options.title;
  const auto steps = read_jsonl(options.run_dir / "train.jsonl");
  const auto validations = read_jsonl(options.run_dir / "metrics.jsonl");
  const std::string config = read_text(options.run_dir / "config.yaml");

  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" << escape_html(title)
       << " — oml-cpp run report</title><style>"
          "body{font-family:sans-serif;margin:24px;color:#222;max-width:1240px}"
          "h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid "
          "#ddd;padding-bottom:4px;margin-top:28px}"
          ".charts{display:flex;flex-wrap:wrap;gap:12px}.chart{border:1px solid #eee}"
          "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px "
          "8px;text-align:right}"
          "td:first-child,th:first-child{text-align:left}.empty{color:#888}"
          "pre{background:#f6f6f6;padding:10px;font-size:12px;overflow:auto;max-height:480px}"
          "img.grid{max-width:100%;border:1px solid #eee}figure{margin:12px "
          "0}figcaption{font-size:13px;color:#555}"
          "nav a{margin-right:14px}"
          "</style></head><body>";
  html << "<h1>" << escape_html(title) << "</h1>";
  html << "<p>Run directory <code>" << escape_html(options.run_dir.string()) << "</code>; page written "
       << now_text() << " by oml-cpp.</p>";
  html << "<nav><a href=\"#training\">training</a><a href=\"#metrics\">metrics</a><a href=\"#best\">best "
          "checkpoint</a>"
          "<a href=\"#worst\">worst queries</a><a href=\"#config\">config</a></nav>";
  html << train_section(steps);
  html << metrics_section(validations, options);
  html << grids_section(options.run_dir);
  html << "<h2 id=\"config\">Resolved config</h2>";
  if (config.empty()) {
    html << "<p class=\"empty\">config.yaml is missing.</p>";
  } else {
    html << "<pre>" << escape_html(config) << "</pre>";
  }
  html << "</body></html>\n";
  return html.str();
}

fs::path write_run_report(const RunReportOptions& options) {
  const fs::path path = options.run_dir / "report.html";
  io::write_file_atomic(path, render_run_report(options));
  return path;
}

}  // namespace oml::report
