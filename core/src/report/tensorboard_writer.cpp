#include "oml/report/tensorboard_writer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/io/atomic_file.h"
#include "oml/report/tfrecord.h"
#include "tensorboard_event.pb.h"

namespace oml::report {

namespace fs = std::filesystem;

namespace {

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof(buffer) - 1) != 0 || buffer[0] == '\0') return "localhost";
  return buffer;
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const fs::path& dir, std::optional<int64_t> resumed_at_step) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  OML_CHECK(!ec, RuntimeError, "cannot create the TensorBoard folder '", dir.string(), "': ", ec.message());
  if (resumed_at_step) {
    // A resume killed while it rewrote an event file left its temporary; TensorBoard would read
    // it as one more event file (its name holds "tfevents").
    for (const fs::path& earlier : find_event_files(dir)) {
      const int removed = io::remove_stale_temporaries(dir, earlier.filename().string());
      if (removed > 0)
        log::info("removed " + std::to_string(removed) + " unfinished copy of " + earlier.string());
    }
    for (const fs::path& earlier : find_event_files(dir)) {
      try {
        drop_events_after(earlier, *resumed_at_step);
      } catch (const Error& e) {
        log::warn("TensorBoard file '" + earlier.string() + "' was left as it is (" + e.what() +
                  "); the restart marker of the new file still hides its later events");
      }
    }
  }
  const auto seconds = static_cast<int64_t>(wall_time_now());
  path_ = dir / ("events.out.tfevents." + std::to_string(seconds) + "." + host_name());
  // A second writer in the same second (a resumed run) must not truncate the first one's file.
  for (int n = 1; fs::exists(path_); ++n) {
    path_ = dir /
            ("events.out.tfevents." + std::to_string(seconds) + "." + host_name() + "." + std::to_string(n));
  }
  out_.open(path_, std::ios::binary | std::ios::trunc);
  OML_CHECK(out_, RuntimeError, "cannot create the TensorBoard event file '", path_.string(), "'");
  tb::Event version;
  version.set_wall_time(wall_time_now());
  version.set_file_version("brain.Event:2");
  write_event(version.SerializeAsString());
  if (resumed_at_step) {
    // For readers of the files as the killed process left them (copied elsewhere, or a
    // TensorBoard that had loaded them already): hide its events from the next step on.
    tb::Event restart;
    restart.set_wall_time(wall_time_now());
    restart.set_step(*resumed_at_step + 1);
    restart.mutable_session_log()->set_status(tb::SessionLog::START);
    write_event(restart.SerializeAsString());
  }
}

void TensorBoardWriter::log_scalar(const std::string& tag, double value, int64_t step) {
  tb::Event event;
  event.set_wall_time(wall_time_now());
  event.set_step(step);
  tb::SummaryValue* entry = event.mutable_summary()->add_value();
  entry->set_tag(tag);
  entry->set_simple_value(static_cast<float>(value));
  write_event(event.SerializeAsString());
}

void TensorBoardWriter::log_image(const std::string& tag, const EncodedImage& image, int64_t step) {
  tb::Event event;
  event.set_wall_time(wall_time_now());
  event.set_step(step);
  tb::SummaryValue* entry = event.mutable_summary()->add_value();
  entry->set_tag(tag);
  tb::SummaryImage* picture = entry->mutable_image();
  picture->set_height(image.height);
  picture->set_width(image.width);
  picture->set_colorspace(image.channels);
  picture->set_encoded_image_string(image.png);
  write_event(event.SerializeAsString());
}

void TensorBoardWriter::write_event(const std::string& serialized_event) {
  out_ << frame_record(serialized_event);
  out_.flush();
  OML_CHECK(out_, RuntimeError, "writing the TensorBoard event file '", path_.string(),
            "' failed (disk full?)");
}

std::vector<LoggedEvent> read_event_file(const fs::path& path) {
  std::vector<LoggedEvent> out;
  const std::vector<std::string> records = read_records(path);
  for (std::size_t i = 0; i < records.size(); ++i) {
    tb::Event event;
    OML_CHECK(event.ParseFromString(records[i]), DataError, path.string(), ": record ", i,
              " is not a TensorBoard Event");
    LoggedEvent base;
    base.wall_time = event.wall_time();
    base.step = event.step();
    if (event.what_case() == tb::Event::kFileVersion) {
      base.file_version = event.file_version();
      out.push_back(base);
      continue;
    }
    if (event.what_case() == tb::Event::kSessionLog) {
      base.session_start = event.session_log().status() == tb::SessionLog::START;
      out.push_back(base);
      continue;
    }
    if (event.what_case() != tb::Event::kSummary) continue;
    for (const tb::SummaryValue& value : event.summary().value()) {
      LoggedEvent logged = base;
      logged.tag = value.tag();
      if (value.value_case() == tb::SummaryValue::kSimpleValue) logged.scalar = value.simple_value();
      if (value.value_case() == tb::SummaryValue::kImage) {
        EncodedImage image;
        image.height = value.image().height();
        image.width = value.image().width();
        image.channels = value.image().colorspace();
        image.png = value.image().encoded_image_string();
        logged.image = std::move(image);
      }
      out.push_back(std::move(logged));
    }
  }
  return out;
}

int drop_events_after(const fs::path& path, int64_t step) {
  std::string kept;
  int dropped = 0;
  for (const std::string& record : read_records(path)) {  // a record cut by the kill is dropped too
    tb::Event event;
    if (event.ParseFromString(record) && event.step() > step) {
      ++dropped;
    } else {
      kept += frame_record(record);
    }
  }
  if (dropped > 0) io::write_file_atomic(path, kept);
  return dropped;
}

std::vector<fs::path> find_event_files(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    // Not the temporaries of a rewrite ("<event file>.tmp-<pid>-<n>"): they are no event file.
    if (name.rfind("events.out.tfevents.", 0) == 0 && name.find(".tmp-") == std::string::npos)
      files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace oml::report
