#include "runtime/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "oml/common/error.h"

namespace oml::pipelines {

namespace {
ProgressMode& default_mode() {
  static ProgressMode mode = ProgressMode::automatic;
  return mode;
}

ProgressMode resolve(ProgressMode mode) {
  if (mode == ProgressMode::automatic) mode = default_mode();
  if (mode == ProgressMode::automatic)
    mode = ::isatty(STDERR_FILENO) ? ProgressMode::bar : ProgressMode::lines;
  return mode;
}
}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--:--";
  const long total = static_cast<long>(seconds + 0.5);
  char buffer[32];
  if (total >= 3600) {
    std::snprintf(buffer, sizeof(buffer), "%ld:%02ld:%02ld", total / 3600, (total / 60) % 60, total % 60);
  } else {
    std::snprintf(buffer, sizeof(buffer), "%02ld:%02ld", total / 60, total % 60);
  }
  return buffer;
}

void Progress::set_default_mode(ProgressMode mode) { default_mode() = mode; }

ProgressMode parse_progress_mode(const std::string& text) {
  if (text == "auto") return ProgressMode::automatic;
  if (text == "bar") return ProgressMode::bar;
  if (text == "lines") return ProgressMode::lines;
  if (text == "quiet") return ProgressMode::quiet;
  throw UsageError("--progress: expected auto, bar, lines or quiet, got '" + text + "'");
}

ProgressCallback progress_callback(const std::string& label, const std::string& unit) {
  struct State {
    std::unique_ptr<Progress> bar;
    int64_t done = 0;
  };
  auto state = std::make_shared<State>();
  return [state, label, unit](int64_t done, int64_t total) {
    if (!state->bar || done < state->done) {
      state->bar = std::make_unique<Progress>(label, total, unit);
      state->done = 0;
    }
    state->bar->advance(done - state->done);
    state->done = done;
    if (total > 0 && done >= total) state->bar->finish();
  };
}

Progress::Progress(std::string label, int64_t total, std::string unit, ProgressMode mode)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      mode_(resolve(mode)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  if (!finished_) finish(status_);
}

void Progress::advance(int64_t steps, const std::string& status) {
  done_ += steps;
  if (!status.empty()) status_ = status;
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_draw_).count();
  // A bar redraws a few times a second; plain lines every 10 s so logs stay readable.
  const double period = mode_ == ProgressMode::bar ? 0.2 : 10.0;
  if (since >= period) {
    last_draw_ = now;
    draw(false);
  }
}

void Progress::finish(const std::string& status) {
  if (finished_) return;
  finished_ = true;
  if (!status.empty()) status_ = status;
  draw(true);
}

void Progress::draw(bool final_line) {
  if (mode_ == ProgressMode::quiet) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  const double eta = rate > 0 && total_ > 0 ? static_cast<double>(total_ - done_) / rate : NAN;
  std::ostringstream line;
  line << label_ << " ";
  if (mode_ == ProgressMode::bar && total_ > 0) {
    const int width = 24;
    const int filled = static_cast<int>(width * std::min<double>(1.0, static_cast<double>(done_) / total_));
    line << "[" << std::string(filled, '#') << std::string(width - filled, '.') << "] ";
  }
  line << done_;
  if (total_ > 0) line << "/" << total_;
  char rate_text[32];
  std::snprintf(rate_text, sizeof(rate_text), "%.1f", rate);
  line << " " << unit_ << " " << rate_text << " " << unit_ << "/s " << format_duration(elapsed);
  if (!final_line && total_ > 0) line << " eta " << format_duration(eta);
  if (!status_.empty()) line << " " << status_;
  if (mode_ == ProgressMode::bar) {
    std::cerr << "\r\033[K" << line.str() << (final_line ? "\n" : "") << std::flush;
  } else {
    std::cerr << line.str() << "\n" << std::flush;
  }
}

}  // namespace oml::pipelines
