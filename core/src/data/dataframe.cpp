#include "oml/data/dataframe.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <unordered_map>

#include "../common/raw_io.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/data/csv.h"

namespace fs = std::filesystem;

namespace oml::data {

int64_t DataSplit::num_labels() const {
  return static_cast<int64_t>(std::set<int64_t>(labels.begin(), labels.end()).size());
}

std::vector<int64_t> DataSplit::label_category_indices() const {
  if (label2category.empty()) return {};
  std::map<std::string, int64_t> numbers;  // sorted, as OML's sorted(set(label2category.values()))
  for (const auto& entry : label2category) numbers.emplace(entry.second, 0);
  int64_t next = 0;
  for (auto& entry : numbers) entry.second = next++;
  std::vector<int64_t> out(static_cast<std::size_t>(num_labels()), -1);
  for (const auto& [label, category] : label2category) {
    if (label >= 0 && label < static_cast<int64_t>(out.size()))
      out[static_cast<std::size_t>(label)] = numbers.at(category);
  }
  return out;
}

void DataSplit::keep_first(std::size_t rows) {
  if (rows >= size()) return;
  const auto cut = [rows](auto& column) {
    if (column.size() > rows) column.resize(rows);
  };
  cut(paths);
  cut(texts);
  cut(labels);
  cut(original_labels);
  cut(categories);
  cut(sequences);
  cut(is_query);
  cut(is_gallery);
  cut(bboxes);
  cut(start_times);
  cut(lines);
  const std::set<int64_t> kept(labels.begin(), labels.end());
  for (auto it = label2category.begin(); it != label2category.end();) {
    it = kept.count(it->first) ? std::next(it) : label2category.erase(it);
  }
}

namespace {

constexpr std::size_t kMaxListed = 20;  // missing files / offending rows listed in one message
const char* const kBBoxColumns[] = {"x_1", "x_2", "y_1", "y_2"};

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// Integers; integral decimals such as "12.0" are accepted because pandas writes integer columns
// holding empty cells as floats.
std::optional<int64_t> parse_integer(const std::string& raw) {
  const std::string text = trim(raw);
  if (text.empty()) return std::nullopt;
  // Decimal only: stod also reads hex ("0x5" as 5, "0x1p2" as 4), which pandas would not.
  if (text.find_first_not_of("0123456789+-.eE") != std::string::npos) return std::nullopt;
  std::size_t used = 0;
  try {
    const long long value = std::stoll(text, &used);
    if (used == text.size()) return value;
    const double real = std::stod(text, &used);
    if (used == text.size() && std::isfinite(real) && std::floor(real) == real && std::fabs(real) < 9e15) {
      return static_cast<int64_t>(real);
    }
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::optional<bool> parse_bool(const std::string& raw) {
  const std::string text = lower(trim(raw));
  if (text == "true") return true;
  if (text == "false") return false;
  // pandas writes a flag column holding a NaN as floats: 1.0, 0.0 (or 1.00 from elsewhere).
  const std::optional<int64_t> number = parse_integer(text);
  if (number == 1) return true;
  if (number == 0) return false;
  return std::nullopt;
}

// A cell as a message shows it: control bytes escaped (a NUL ended the message: what() is a C
// string) and at most 100 bytes of it (a 100 MB cell was a 100 MB message).
std::string shown(const std::string& value, std::size_t limit = 100) {
  std::string out;
  for (std::size_t i = 0; i < value.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(value[i]);
    if (c >= 0x20 && c != 0x7f) {
      out += value[i];
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", c);
      out += escaped;
    }
  }
  if (value.size() > limit) out += "... (" + std::to_string(value.size()) + " bytes)";
  return out;
}

// Locates the row's cells by column name and builds messages "file:line: column 'c': ...".
class RowReader {
 public:
  RowReader(const std::string& file, const std::map<std::string, std::size_t>& index)
      : file_(file), index_(index) {}

  void set(const CsvRecord* record) { record_ = record; }
  bool has(const std::string& column) const { return index_.count(column) > 0; }
  std::string cell(const std::string& column) const { return trim(raw(column)); }
  /// The cell as written (texts keep their spaces).
  const std::string& raw(const std::string& column) const { return record_->fields.at(index_.at(column)); }

  [[noreturn]] void fail(const std::string& column, const std::string& value,
                         const std::string& expected) const {
    fail_with(column, "got '" + shown(value) + "', expected " + expected);
  }
  /// "file:line: column 'c': message".
  [[noreturn]] void fail_with(const std::string& column, const std::string& message) const {
    throw DataError(file_ + ":" + std::to_string(record_->line) + ": column '" + column + "': " + message);
  }

 private:
  const std::string& file_;
  const std::map<std::string, std::size_t>& index_;
  const CsvRecord* record_ = nullptr;
};

std::map<std::string, std::size_t> index_header(const CsvRecord& header, const std::string& file,
                                                const DataframeOptions& options) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < header.fields.size(); ++i) {
    const std::string name = trim(header.fields[i]);
    OML_CHECK(index.emplace(name, i).second, DataError, file, ":", header.line, ": column '", name,
              "' appears twice in the header");
  }
  // Rule 1: required columns; a text dataframe names its rows' texts instead of their images
  // where the caller accepts one.
  std::vector<std::string> required{columns::kLabel, columns::kSplit, columns::kIsQuery, columns::kIsGallery};
  const bool text_dataframe = index.count(columns::kText) > 0 && index.count(columns::kPath) == 0;
  if (options.require_paths && !(options.accept_text_dataframes && text_dataframe))
    required.insert(required.begin() + 1, columns::kPath);
  std::vector<std::string> missing;
  for (const auto& name : required) {
    if (!index.count(name)) missing.push_back(name);
  }
  if (!missing.empty()) {
    std::vector<std::string> present;
    for (const auto& kv : index) present.push_back(kv.first);
    std::string hint;
    for (const auto& name : missing) hint += did_you_mean(name, present);
    throw DataError(file + ":" + std::to_string(header.line) + ": missing required column(s) " +
                    join(missing) + hint + "; the header has: " + shown(join(present), 2000) +
                    "; expected at least: " + join(required));
  }
  // Rule 8 (columns): the four bbox columns come together or not at all.
  std::vector<std::string> bbox_present, bbox_missing;
  for (const char* name : kBBoxColumns) (index.count(name) ? bbox_present : bbox_missing).push_back(name);
  OML_CHECK(bbox_present.empty() || bbox_missing.empty(), DataError, file, ":", header.line,
            ": bounding boxes need all four columns x_1, x_2, y_1, y_2; found ", join(bbox_present),
            " but not ", join(bbox_missing));
  return index;
}

void remap_train_labels(DataSplit& split) {
  std::vector<int64_t> sorted(split.original_labels);
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::unordered_map<int64_t, int64_t> to_new;
  for (std::size_t i = 0; i < sorted.size(); ++i) to_new[sorted[i]] = static_cast<int64_t>(i);
  split.labels.clear();
  for (int64_t label : split.original_labels) split.labels.push_back(to_new[label]);
}

// Rule 9: a label with several categories is a warning; the first category wins.
void build_label2category(DataSplit& split, const std::string& file, const char* split_name, bool warn) {
  if (!split.has_categories()) return;
  std::set<int64_t> warned;
  for (std::size_t i = 0; i < split.size(); ++i) {
    const auto inserted = split.label2category.emplace(split.labels[i], split.categories[i]);
    if (warn && !inserted.second && inserted.first->second != split.categories[i] &&
        warned.insert(split.original_labels[i]).second) {
      log::warn(file + ":" + std::to_string(split.lines[i]) + ": " + split_name + " label " +
                std::to_string(split.original_labels[i]) + " has several categories ('" +
                inserted.first->second + "', '" + split.categories[i] + "'); using '" +
                inserted.first->second + "'");
    }
  }
}

// Rule 10: a text is not blank (OML: every text has a length) and is UTF-8 (the tokenizer's input).
std::string checked_text(const RowReader& row) {
  const std::string& text = row.raw(columns::kText);
  if (trim(text).empty()) {
    row.fail_with(columns::kText,
                  "got '" + text + "', expected a text (an empty or blank cell has nothing to embed)");
  }
  if (!is_valid_utf8(text)) {
    row.fail_with(columns::kText, "the text is not valid UTF-8 (save the dataframe as UTF-8); got '" +
                                      valid_utf8(text.substr(0, 60)) + (text.size() > 60 ? "...'" : "'"));
  }
  return text;
}

// Rule 11: an audio segment's start in seconds (OML's `start_time`, a float column whose empty cells it
// fills with 0.0): a number from 0 to 1e9 (~31 years; the bound keeps start_time * sample_rate
// an exact frame count). Where it lies within the file is checked on loading, when the file's
// length is known (AudioDataset).
double checked_start_time(const RowReader& row) {
  constexpr double kMaxStartSeconds = 1e9;
  const std::string cell = row.cell(columns::kStartTime);
  if (cell.empty()) return 0.0;
  std::size_t used = 0;
  double value = -1.0;
  try {
    value = std::stod(cell, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != cell.size() || !std::isfinite(value) || value < 0.0 || value > kMaxStartSeconds) {
    row.fail(columns::kStartTime, cell, "a start in seconds (a number from 0 to 1e9) or an empty cell (0)");
  }
  return value;
}

// Rule 6: every query label occurs among the gallery labels.
void check_queries_have_gallery(const DataSplit& split, const std::string& file) {
  std::set<int64_t> gallery;
  for (std::size_t i = 0; i < split.size(); ++i) {
    if (split.is_gallery[i]) gallery.insert(split.labels[i]);
  }
  std::vector<std::string> offending;
  std::size_t total = 0;
  for (std::size_t i = 0; i < split.size(); ++i) {
    if (split.is_query[i] && !gallery.count(split.labels[i])) {
      if (++total <= kMaxListed) {
        offending.push_back("line " + std::to_string(split.lines[i]) + " (label " +
                            std::to_string(split.labels[i]) + ")");
      }
    }
  }
  OML_CHECK(total == 0, DataError, file, ": ", total,
            " query row(s) have a label that no gallery row has (every query needs at least one gallery item "
            "with its label): ",
            join(offending), total > kMaxListed ? ", ..." : "");
}

// Rule 7: every image exists; all missing files are counted before failing.
void check_files_exist(const std::vector<DataSplit*>& splits, const std::string& file) {
  std::vector<std::string> missing;
  std::size_t total = 0;
  for (const DataSplit* split : splits) {
    for (std::size_t i = 0; i < split->paths.size(); ++i) {
      std::error_code ec;
      const fs::file_status status = fs::status(split->paths[i], ec);
      if (!fs::is_regular_file(status)) {
        // What is there instead, when something is: a folder or a device is no image file either.
        const char* what = !fs::exists(status)        ? ""
                           : fs::is_directory(status) ? " (a folder)"
                                                      : " (not a regular file: a device, pipe or socket)";
        if (++total <= kMaxListed)
          missing.push_back("line " + std::to_string(split->lines[i]) + ": " + split->paths[i] + what);
      }
    }
  }
  if (total == 0) return;
  DataError error(file + ": " + std::to_string(total) + " image file(s) do not exist or are not files" +
                  (total > kMaxListed ? " (the first " + std::to_string(kMaxListed) + " are listed)" : "") +
                  "; paths are relative to the dataset root");
  for (const auto& line : missing) error.add_context("  " + line);
  throw error;
}

}  // namespace

namespace {

// FNV-1a, 64 bits: fast, and enough to tell two machines' dataframes apart (not a defence
// against anyone crafting a collision).
class Fnv1a {
 public:
  void bytes(const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) value_ = (value_ ^ p[i]) * 0x100000001b3ULL;
  }
  void text(const std::string& s) {
    number(static_cast<int64_t>(s.size()));  // the length first: "ab"+"c" is not "a"+"bc"
    bytes(s.data(), s.size());
  }
  template <typename T>
  void number(T v) {
    bytes(&v, sizeof(v));
  }
  uint64_t value() const { return value_; }

 private:
  uint64_t value_ = 0xcbf29ce484222325ULL;
};

void add_split(Fnv1a& h, const DataSplit& split) {
  h.number(static_cast<int64_t>(split.size()));
  // A path's last two parts: the absolute paths hold dataset_root as each machine resolved it
  // (a relative root differs with the folder each was started in), which is not the data.
  for (const auto& p : split.paths) {
    const std::size_t last = p.find_last_of('/');
    const std::size_t before =
        last == std::string::npos || last == 0 ? std::string::npos : p.find_last_of('/', last - 1);
    h.text(before == std::string::npos ? p : p.substr(before + 1));
  }
  for (const auto& t : split.texts) h.text(t);
  for (const int64_t l : split.original_labels) h.number(l);
  for (const auto& c : split.categories) h.text(c);
  for (const auto& q : split.sequences) h.text(q);
  for (const bool q : split.is_query) h.number(static_cast<char>(q));
  for (const bool g : split.is_gallery) h.number(static_cast<char>(g));
  for (const auto& box : split.bboxes) {
    h.number(static_cast<char>(box.has_value()));
    if (box) {
      for (const int64_t v : {box->x1, box->y1, box->x2, box->y2}) h.number(v);
    }
  }
  for (const double t : split.start_times) h.number(t);
}

}  // namespace

uint64_t Dataframe::digest() const {
  Fnv1a h;
  add_split(h, train_);
  add_split(h, validation_);
  return h.value();
}

bool Dataframe::has_column(const std::string& name) const {
  return std::find(columns_.begin(), columns_.end(), name) != columns_.end();
}

bool Dataframe::is_text_dataframe() const {
  return has_column(columns::kText) && !has_column(columns::kPath);
}

Dataframe Dataframe::read(const fs::path& csv_path, const DataframeOptions& options) {
  std::error_code ec;
  OML_CHECK(!fs::is_directory(csv_path, ec), DataError, "the dataframe ", csv_path.string(),
            " is a folder; expected a CSV file (e.g. ", (csv_path / "df.csv").string(), ")");
  OML_CHECK(!fs::exists(csv_path, ec) || fs::is_regular_file(csv_path, ec), DataError, "the dataframe ",
            csv_path.string(), " is not a regular file (a device or pipe); expected a CSV file");
  const std::optional<std::string> text = oml::detail::read_file(csv_path.string());
  OML_CHECK(text.has_value(), DataError, "cannot open the dataframe ", csv_path.string(),
            fs::exists(csv_path) ? " (permission denied?)" : " (no such file)");
  // Excel's "Unicode Text" and some exports write UTF-16, whose every other byte is a NUL.
  OML_CHECK(text->compare(0, 2, "\xFF\xFE") != 0 && text->compare(0, 2, "\xFE\xFF") != 0, DataError,
            "the dataframe ", csv_path.string(),
            " is UTF-16 text (it starts with a UTF-16 byte order mark); ", "save it as a UTF-8 CSV");
  DataframeOptions resolved = options;
  if (!resolved.dataset_root) resolved.dataset_root = csv_path.parent_path();
  return parse(*text, csv_path.string(), resolved);
}

Dataframe Dataframe::parse(const std::string& text, const std::string& file,
                           const DataframeOptions& options) {
  const std::vector<CsvRecord> records = parse_csv(text, file);
  OML_CHECK(!records.empty(), DataError, file,
            ": the dataframe is empty; expected a header line with the columns ",
            "label, path, split, is_query, is_gallery and one row per image");
  const auto index = index_header(records[0], file, options);
  OML_CHECK(records.size() > 1, DataError, file, ": the dataframe has a header but no rows");

  const bool has_paths = index.count(columns::kPath) > 0;
  const bool has_texts = index.count(columns::kText) > 0;
  const bool has_categories = index.count(columns::kCategory) > 0;
  const bool has_sequences = index.count(columns::kSequence) > 0;
  const bool has_bboxes = index.count("x_1") > 0;
  const bool has_start_times = index.count(columns::kStartTime) > 0;
  const fs::path root = fs::absolute(options.dataset_root.value_or(fs::current_path()));

  Dataframe df;
  df.file_ = file;
  for (const std::string& name : records[0].fields) df.columns_.push_back(trim(name));
  RowReader row(file, index);
  for (std::size_t r = 1; r < records.size(); ++r) {
    const CsvRecord& record = records[r];
    OML_CHECK(record.fields.size() == records[0].fields.size(), DataError, file, ":", record.line,
              ": the row has ", record.fields.size(), " fields, expected ", records[0].fields.size(),
              " (one per header column)");
    row.set(&record);

    // Rule 2: split values.
    const std::string split_name = row.cell(columns::kSplit);
    const bool is_train = split_name == "train";
    if (!is_train && split_name != "validation")
      row.fail(columns::kSplit, split_name, "'train' or 'validation'");
    DataSplit& split = is_train ? df.train_ : df.validation_;

    // Rule 5: integer labels.
    const std::string label_text = row.cell(columns::kLabel);
    const auto label = parse_integer(label_text);
    if (!label) row.fail(columns::kLabel, label_text, "an integer");
    split.original_labels.push_back(*label);
    if (!is_train) split.labels.push_back(*label);

    const std::string query_text = row.cell(columns::kIsQuery);
    const std::string gallery_text = row.cell(columns::kIsGallery);
    if (is_train) {
      // Rule 3: train rows carry no query/gallery flags.
      if (!query_text.empty()) row.fail(columns::kIsQuery, query_text, "an empty cell on a train row");
      if (!gallery_text.empty()) row.fail(columns::kIsGallery, gallery_text, "an empty cell on a train row");
    } else {
      const auto is_query = parse_bool(query_text);
      const auto is_gallery = parse_bool(gallery_text);
      const char* bool_like = "True/False/1/0 on a validation row";
      if (!is_query) row.fail(columns::kIsQuery, query_text, bool_like);
      if (!is_gallery) row.fail(columns::kIsGallery, gallery_text, bool_like);
      // Rule 4: every validation row is a query, a gallery item, or both.
      OML_CHECK(
          *is_query || *is_gallery, DataError, file, ":", record.line,
          ": columns 'is_query' and 'is_gallery' are both false; a validation row must be a query, a gallery "
          "item, or both");
      split.is_query.push_back(*is_query);
      split.is_gallery.push_back(*is_gallery);
    }

    if (has_paths) {
      const std::string path = row.cell(columns::kPath);
      if (path.empty() && options.require_paths) row.fail(columns::kPath, path, "an image path");
      split.paths.push_back(fs::path(path).is_absolute() ? path : (root / path).lexically_normal().string());
    }
    if (has_texts) split.texts.push_back(checked_text(row));
    if (has_categories) split.categories.push_back(row.cell(columns::kCategory));
    if (has_sequences) split.sequences.push_back(row.cell(columns::kSequence));
    if (has_start_times) split.start_times.push_back(checked_start_time(row));

    // Rule 8 (rows): four empty cells, or four integers with 0 <= x_1 < x_2 and 0 <= y_1 < y_2.
    if (has_bboxes) {
      int64_t values[4] = {0, 0, 0, 0};
      int empty = 0;
      for (int c = 0; c < 4; ++c) {
        const std::string cell = row.cell(kBBoxColumns[c]);
        if (cell.empty()) {
          ++empty;
          continue;
        }
        const auto value = parse_integer(cell);
        if (!value) row.fail(kBBoxColumns[c], cell, "an integer pixel coordinate or an empty cell");
        values[c] = *value;
      }
      if (empty == 4) {
        split.bboxes.emplace_back(std::nullopt);
      } else {
        OML_CHECK(empty == 0, DataError, file, ":", record.line,
                  ": columns x_1, x_2, y_1, y_2: a box needs all four values or none (", 4 - empty,
                  " of 4 given)");
        const BBox box{values[0], values[1], values[2], values[3]};
        OML_CHECK(box.x1 >= 0 && box.y1 >= 0, DataError, file, ":", record.line,
                  ": columns x_1, y_1: got x_1=", box.x1, ", y_1=", box.y1, ", expected values >= 0");
        OML_CHECK(box.x1 < box.x2, DataError, file, ":", record.line, ": columns x_1, x_2: got x_1=", box.x1,
                  ", x_2=", box.x2, ", expected x_1 < x_2");
        OML_CHECK(box.y1 < box.y2, DataError, file, ":", record.line, ": columns y_1, y_2: got y_1=", box.y1,
                  ", y_2=", box.y2, ", expected y_1 < y_2");
        split.bboxes.emplace_back(box);
      }
    }
    split.lines.push_back(record.line);
  }

  remap_train_labels(df.train_);
  build_label2category(df.train_, file, "train", options.warnings);
  build_label2category(df.validation_, file, "validation", options.warnings);
  if (!df.validation_.empty()) check_queries_have_gallery(df.validation_, file);
  if (has_paths && options.check_files) check_files_exist({&df.train_, &df.validation_}, file);
  return df;
}

}  // namespace oml::data
