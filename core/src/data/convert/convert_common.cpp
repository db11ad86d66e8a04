#include "convert_common.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "../../common/raw_io.h"
#include "oml/common/error.h"
#include "oml/common/paths.h"
#include "oml/common/strings.h"
#include "oml/data/csv.h"
#include "oml/io/atomic_file.h"

namespace oml::data::convert {

std::vector<TextLine> read_text_table(const fs::path& path, int skip, const std::string& what) {
  std::ifstream in(path);
  OML_CHECK(in.good(), DataError, "cannot open ", path.string(), ": expected ", what);
  std::vector<TextLine> out;
  std::string text;
  int64_t number = 0;
  while (std::getline(in, text)) {
    ++number;
    if (number <= skip) continue;
    std::istringstream tokens(text);
    TextLine line{number, {}};
    for (std::string token; tokens >> token;) line.tokens.push_back(token);
    if (!line.tokens.empty()) out.push_back(std::move(line));
  }
  return out;
}

void expect_tokens(const fs::path& file, const TextLine& line, std::size_t n, const std::string& format) {
  OML_CHECK(line.tokens.size() >= n, DataError, file.string(), ":", line.line, ": expected ", n, " fields (",
            format, "), got ", line.tokens.size());
}

namespace {
// An image path of an index file: a file inside the dataset's folder (not the folder itself).
bool stays_inside(const std::string& relative) { return !relative.empty() && stays_inside_folder(relative); }
}  // namespace

std::string checked_image_path(const fs::path& file, int64_t line, const std::string& path) {
  OML_CHECK(stays_inside(path), DataError, file.string(), ":", line, ": image path '", path,
            "' is not a path inside the dataset's folder (absolute, empty or with a '..' part)");
  return path;
}

int64_t token_int(const fs::path& file, const TextLine& line, std::size_t i, const std::string& field) {
  const std::string& token = line.tokens.at(i);
  std::size_t used = 0;
  try {
    const long long value = std::stoll(token, &used);
    if (used == token.size()) return value;
  } catch (const std::exception&) {
  }
  throw DataError(file.string() + ":" + std::to_string(line.line) + ": field '" + field + "': got '" + token +
                  "', expected an integer");
}

double token_double(const fs::path& file, const TextLine& line, std::size_t i, const std::string& field) {
  const std::string& token = line.tokens.at(i);
  std::size_t used = 0;
  try {
    const double value = std::stod(token, &used);
    if (used == token.size()) return value;
  } catch (const std::exception&) {
  }
  throw DataError(file.string() + ":" + std::to_string(line.line) + ": field '" + field + "': got '" + token +
                  "', expected a number");
}

fs::path locate_root(const fs::path& src, const std::string& marker, const std::string& subfolder) {
  std::error_code ec;
  OML_CHECK(fs::is_directory(src, ec), DataError, "--src ", src.string(), " is not a folder");
  if (fs::exists(src / marker, ec)) return src;
  if (!subfolder.empty() && fs::exists(src / subfolder / marker, ec)) return src / subfolder;
  throw DataError("--src " + src.string() + " does not hold " + marker +
                  (subfolder.empty() ? "" : " (nor " + subfolder + "/" + marker + ")") +
                  "; point --src at the unpacked dataset");
}

void apply_limit(std::vector<Row>& rows, int64_t limit) {
  if (limit < 0) return;
  std::vector<Row> kept;
  int64_t train = 0, validation = 0;
  for (auto& row : rows) {
    int64_t& count = row.train ? train : validation;
    if (count < limit) {
      ++count;
      kept.push_back(std::move(row));
    }
  }
  std::set<int64_t> gallery;
  for (const auto& row : kept) {
    if (!row.train && row.is_gallery) gallery.insert(row.label);
  }
  rows.clear();
  for (auto& row : kept) {
    if (row.train || row.is_gallery || gallery.count(row.label)) rows.push_back(std::move(row));
  }
}

void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& fn,
                  const ProgressCallback& on_progress) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = static_cast<int>(std::min<int64_t>(threads, std::max<int64_t>(1, n)));
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  std::mutex progress_mutex;
  int64_t done = 0;
  auto work = [&] {
    for (int64_t i = next++; i < n && !failed; i = next++) {
      try {
        fn(i);
        if (on_progress) {
          // Serialised: the callback draws on the terminal and need not be thread-safe.
          std::lock_guard<std::mutex> lock(progress_mutex);
          on_progress(++done, n);
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  if (on_progress) on_progress(0, n);  // starts the clock before the first item
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& thread : pool) thread.join();
  if (error) std::rethrow_exception(error);
}

namespace {

/// The entries under `folder` as '/'-separated paths relative to it, sorted: every file (and
/// link, and anything else that is not a folder), and every folder that holds none of them.
std::vector<std::string> entries_under(const fs::path& folder) {
  std::vector<std::string> files, folders;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string relative = it->path().lexically_relative(folder).generic_string();
    (it->is_directory(ec) && !it->is_symlink(ec) ? folders : files).push_back(relative);
  }
  OML_CHECK(!ec, DataError, "cannot list ", folder.string(), ": ", ec.message());
  std::vector<std::string> out = files;
  for (const auto& dir : folders) {
    const std::string prefix = dir + "/";
    const bool holds_one = std::any_of(files.begin(), files.end(), [&](const std::string& f) {
      return f.compare(0, prefix.size(), prefix) == 0;
    });
    if (!holds_one) out.push_back(dir + "/");
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// The entries an earlier conversion wrote into `dst`, from its marker: the lines after the first,
/// each an entry and, for a file, a tab and its io::entry_fingerprint when written. A marker
/// written before the listing was kept has none: its whole folder counts as the converter's.
std::map<std::string, std::string> converted_entries(const fs::path& dst) {
  std::ifstream in(dst / kConvertMarker);
  std::string line;
  std::getline(in, line);  // "written by oml-convert from ..."
  std::map<std::string, std::string> out;
  while (std::getline(in, line)) {
    const auto tab = line.find('\t');
    out[line.substr(0, tab)] = tab == std::string::npos ? std::string() : line.substr(tab + 1);
  }
  return out;
}

/// For a marker written before the listing was kept: the top-level entries its conversion wrote,
/// the dataframes and the first folder of every image path its df.csv lists ("images",
/// "bicycle_final", "car_ims", "img").
std::set<std::string> legacy_converted_tops(const fs::path& dst) {
  std::set<std::string> tops{"df.csv", "df_with_bboxes.csv", "images"};
  const std::optional<std::string> text = oml::detail::read_file((dst / "df.csv").string());
  if (!text) return tops;
  const std::vector<CsvRecord> records = parse_csv(*text, (dst / "df.csv").string());
  if (records.empty()) return tops;
  const auto& header = records.front().fields;
  const auto path = std::find(header.begin(), header.end(), "path");
  if (path == header.end()) return tops;
  const auto column = static_cast<std::size_t>(path - header.begin());
  for (std::size_t r = 1; r < records.size(); ++r) {
    if (column < records[r].fields.size()) {
      const std::string& p = records[r].fields[column];
      tops.insert(p.substr(0, p.find('/')));
    }
  }
  return tops;
}

/// Checks that replacing `dst` as a whole loses nothing a user wrote: `dst` is missing, empty,
/// or holds nothing but what the conversion its marker names wrote there.
void check_replaceable(const fs::path& dst, const fs::path& src) {
  std::error_code ec;
  if (!src.empty()) {
    const fs::path source = fs::weakly_canonical(fs::absolute(src), ec);
    const fs::path target = fs::weakly_canonical(dst, ec);
    OML_CHECK(!is_within_folder(target, source) && !is_within_folder(source, target), UsageError, "--dst ",
              dst.string(), " and the dataset it is converted from (", src.string(), ")",
              " overlap; the output replaces --dst as a whole, so it must be a folder outside --src "
              "that does not contain it either");
  }
  const fs::file_status status = fs::symlink_status(dst, ec);
  if (!fs::exists(status)) return;
  // A link would be replaced by the new folder, not the folder it points to.
  OML_CHECK(!fs::is_symlink(status), UsageError, "--dst ", dst.string(),
            " is a symbolic link; give the folder it points to, or a new one");
  OML_CHECK(fs::is_directory(status), UsageError, "--dst ", dst.string(), " exists and is not a folder");
  std::vector<std::string> foreign;
  const bool converted = fs::is_regular_file(fs::symlink_status(dst / kConvertMarker, ec));
  if (converted) {
    // Every entry there must be one the conversion wrote, as it wrote it (a df.csv edited since
    // is the user's now).
    const std::map<std::string, std::string> written = converted_entries(dst);
    const std::set<std::string> legacy_tops =
        written.empty() ? legacy_converted_tops(dst) : std::set<std::string>{};
    for (const auto& entry : entries_under(dst)) {
      if (entry == kConvertMarker) continue;
      if (written.empty()) {
        if (!legacy_tops.count(entry.substr(0, entry.find('/')))) foreign.push_back(entry);
        continue;
      }
      const auto listed = written.find(entry);
      const bool same = listed != written.end() &&
                        (listed->second.empty() || listed->second == io::entry_fingerprint(dst / entry));
      if (!same) foreign.push_back(entry);
    }
  } else {
    for (const auto& entry : fs::directory_iterator(dst, ec))
      foreign.push_back(entry.path().filename().string());
    std::sort(foreign.begin(), foreign.end());
  }
  if (foreign.empty()) return;
  const std::size_t shown = std::min<std::size_t>(foreign.size(), 3);
  throw UsageError(
      "--dst " + dst.string() + " holds files oml-convert did not write or that changed since (" +
      std::to_string(foreign.size()) +
      " entries: " + join(std::vector<std::string>(foreign.begin(), foreign.begin() + shown)) +
      (foreign.size() > shown ? ", ..." : "") + "); the output replaces --dst as a whole, so give a new or " +
      (converted ? "empty folder, or move those out of the earlier output"
                 : "empty folder (or an earlier output of oml-convert, which holds a " +
                       std::string(kConvertMarker) + " file)"));
}

}  // namespace

OutputFolder::OutputFolder(const ConvertOptions& options, const fs::path& source_root) : options_(options) {
  OML_CHECK(!options_.dst.empty(), UsageError, "--dst is required");
  fs::path dst = fs::absolute(options_.dst).lexically_normal();
  // "out/" names the folder "out" (its filename() is empty: the staging folder and the swap
  // would be inside it).
  if (!dst.has_filename() && dst.has_parent_path() && dst != dst.root_path()) dst = dst.parent_path();
  std::error_code ec;
  check_replaceable(dst, source_root.empty() ? options_.src : source_root);
  if (dst.has_parent_path()) {
    fs::create_directories(dst.parent_path(), ec);
    // The staging folders of conversions into this --dst that were killed.
    io::remove_stale_temporaries(dst.parent_path(), dst.filename().string());
  }
  staging_ = io::temporary_sibling(dst);
  pending_ = std::make_unique<io::PendingFile>(staging_);
  fs::create_directories(staging_, ec);
  OML_CHECK(!ec, RuntimeError, "cannot create ", staging_.string(), ": ", ec.message());
  options_.dst = dst;
}

OutputFolder::~OutputFolder() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(staging_, ec);
}

void OutputFolder::copy_files(const std::vector<std::pair<fs::path, std::string>>& files) const {
  parallel_for(
      static_cast<int64_t>(files.size()), options_.num_threads,
      [&](int64_t i) {
        const auto& [from, relative] = files[i];
        // The converters check their index files' paths (checked_image_path): nothing is ever
        // written outside the staging folder.
        OML_CHECK(stays_inside(relative), DataError, "image path '", relative, "' (from ", from.string(),
                  ") is not a path inside the dataset's folder");
        const fs::path to = staging_ / relative;
        std::error_code ec;
        OML_CHECK(fs::is_regular_file(from, ec), DataError, "image ", from.string(),
                  " is listed by the dataset's index files but does not exist");
        fs::create_directories(to.parent_path(), ec);
        fs::create_hard_link(from, to, ec);
        if (ec) {
          ec.clear();
          fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
          OML_CHECK(!ec, RuntimeError, "cannot copy ", from.string(), " to ", to.string(), ": ",
                    ec.message());
        }
      },
      options_.on_progress);
}

ConvertReport OutputFolder::commit(const std::vector<Row>& rows) {
  bool has_category = false, has_bbox = false;
  const bool texts = !rows.empty() && !rows.front().text.empty();
  for (const auto& row : rows) {
    has_category |= !row.category.empty();
    has_bbox |= row.bbox.has_value();
  }
  std::ostringstream csv;
  csv << "label," << (texts ? "text" : "path") << ",split,is_query,is_gallery"
      << (has_category ? ",category" : "") << (has_bbox ? ",x_1,x_2,y_1,y_2" : "") << "\n";
  ConvertReport report;
  std::set<int64_t> labels;
  for (const auto& row : rows) {
    csv << row.label << ',' << csv_escape(texts ? row.text : row.path) << ','
        << (row.train ? "train" : "validation") << ',';
    if (!row.train)
      csv << (row.is_query ? "True" : "False") << ',' << (row.is_gallery ? "True" : "False");
    else
      csv << ',';
    if (has_category) csv << ',' << csv_escape(row.category);
    if (has_bbox) {
      if (row.bbox)
        csv << ',' << row.bbox->x1 << ',' << row.bbox->x2 << ',' << row.bbox->y1 << ',' << row.bbox->y2;
      else
        csv << ",,,,";
    }
    csv << '\n';
    ++(row.train ? report.train_rows : report.validation_rows);
    labels.insert(row.label);
  }
  OML_CHECK(!rows.empty(), DataError, "--src ", options_.src.string(), " holds no items to convert");
  const fs::path df_path = staging_ / "df.csv";
  io::write_file_atomic(df_path, csv.str());
  // The converter's own output must pass every rule a user's dataframe must pass.
  DataframeOptions check;
  check.accept_text_dataframes = texts;
  Dataframe::read(df_path, check);
  // OML's copies of the datasets with boxes name that dataframe df_with_bboxes.csv and OML's
  // recipes ask for it by that name: the same file under both names.
  if (has_bbox) fs::create_hard_link(df_path, staging_ / "df_with_bboxes.csv");
  // The marker lists what this conversion wrote, so that converting into this folder again
  // replaces only that, and refuses when anything else has been put here since.
  std::string source = options_.src.string();
  std::replace(source.begin(), source.end(), '\n', ' ');  // the first line names it
  std::string marker =
      "written by oml-convert from " + source + "; oml-convert may replace these files as a whole:\n";
  for (const auto& entry : entries_under(staging_)) {
    marker += entry;
    if (entry.back() != '/') marker += "\t" + io::entry_fingerprint(staging_ / entry);
    marker += "\n";
  }
  io::write_file_atomic(staging_ / kConvertMarker, marker);
  io::replace_directory(staging_, options_.dst);
  committed_ = true;
  report.labels = static_cast<int64_t>(labels.size());
  report.dataframe = options_.dst / "df.csv";
  return report;
}

}  // namespace oml::data::convert
