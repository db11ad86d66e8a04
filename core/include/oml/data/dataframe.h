#pragma once
// The OML dataset dataframe (docs/contracts.md#dataframe): a CSV file with one row per image,
// or per text in a text dataframe (a `text` column in place of `path`, as OML's
// TextLabeledDataset reads it; docs/data.md#text-dataframes), or per audio segment in an audio
// dataframe (paths of audio files, and optionally where each segment starts, as OML's
// AudioLabeledDataset reads it; docs/data.md#audio-dataframes).
//
//   label,path,split,is_query,is_gallery[,category][,sequence][,x_1,x_2,y_1,y_2]
//   label,text,split,is_query,is_gallery[,category][,sequence]
//   label,path,split,is_query,is_gallery[,category][,sequence][,start_time]
//
// `Dataframe::read` applies every rule of docs/contracts.md#dataframe and fails with a DataError that
// names the file, the 1-based line, the column and the expected value. The result is split into
// the `train` and `validation` parts in file order; either may be empty (a validation-only
// dataframe for validation/prediction, a train-only one for training without validation).

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace oml::data {

/// A bounding box in pixels: left x_1, right x_2, top y_1, bottom y_2 (0 <= x_1 < x_2, ...).
struct BBox {
  int64_t x1 = 0, x2 = 0, y1 = 0, y2 = 0;
  bool operator==(const BBox& other) const {
    return x1 == other.x1 && x2 == other.x2 && y1 == other.y1 && y2 == other.y2;
  }
};

/// The rows of one split, column by column (every vector has size() entries unless noted).
struct DataSplit {
  std::vector<std::string> paths;  ///< absolute paths (dataset_root / path); may be empty
  /// The `text` column as written (not trimmed); empty without one. Read whenever the column is
  /// there (as OML checks it whenever it is there): every text non-blank and valid UTF-8.
  std::vector<std::string> texts;
  std::vector<int64_t> labels;              ///< train: remapped to 0..L-1; validation: as in the file
  std::vector<int64_t> original_labels;     ///< labels as written in the file
  std::vector<std::string> categories;      ///< empty when the dataframe has no `category` column
  std::vector<std::string> sequences;       ///< empty when the dataframe has no `sequence` column
  std::vector<bool> is_query;               ///< validation only (empty for train)
  std::vector<bool> is_gallery;             ///< validation only (empty for train)
  std::vector<std::optional<BBox>> bboxes;  ///< empty without bbox columns; nullopt = whole image
  std::vector<int64_t> lines;               ///< 1-based line of each row in the CSV file
  /// The `start_time` column in seconds (an empty cell: 0, as OML fills NaN); empty without the
  /// column. Read whenever the column is there: every value a finite number >= 0.
  std::vector<double> start_times;
  /// Category of each label (keys are `labels`' values); empty without a category column. A
  /// label seen with several categories keeps the first one (and read() warns).
  std::map<int64_t, std::string> label2category;

  std::size_t size() const { return lines.size(); }
  bool empty() const { return lines.empty(); }
  bool has_labels() const { return !labels.empty(); }
  bool has_paths() const { return !paths.empty(); }
  bool has_texts() const { return !texts.empty(); }
  bool has_categories() const { return !categories.empty(); }
  bool has_sequences() const { return !sequences.empty(); }
  bool has_bboxes() const { return !bboxes.empty(); }
  bool has_start_times() const { return !start_times.empty(); }
  /// Number of distinct labels.
  int64_t num_labels() const;
  /// OML's `label2category` as arcface takes it: for each label 0..num_labels()-1 the index of its
  /// category, categories numbered in sorted order (-1: a label without one); empty without a
  /// category column. Meant for the train split, whose labels are 0..L-1.
  std::vector<int64_t> label_category_indices() const;
  /// Keeps the first `rows` rows (every column; label2category of the labels left).
  void keep_first(std::size_t rows);
};

struct DataframeOptions {
  /// Root the `path` column is relative to; defaults to the CSV file's folder.
  std::optional<std::filesystem::path> dataset_root;
  /// `path` column required (false for dataframes that go with precomputed embeddings).
  bool require_paths = true;
  /// Where require_paths asks for `path`, a text dataframe — a `text` column and no `path`, OML's
  /// format for texts — is accepted instead: its rows name their texts.
  bool accept_text_dataframes = false;
  /// Check up front that every image file exists (rule 7).
  bool check_files = true;
  /// Warn about labels with several categories (rule 9; OML's `show_dataset_warnings`).
  bool warnings = true;
};

class Dataframe {
 public:
  /// Reads and validates `csv_path`. Throws DataError for every rule violation.
  static Dataframe read(const std::filesystem::path& csv_path, const DataframeOptions& options = {});
  /// Same for CSV text already in memory; `file` names it in messages, relative paths resolve
  /// against options.dataset_root (or the current folder).
  static Dataframe parse(const std::string& text, const std::string& file,
                         const DataframeOptions& options = {});

  const DataSplit& train() const { return train_; }
  const DataSplit& validation() const { return validation_; }
  const std::string& file() const { return file_; }
  /// The header's column names, in file order.
  const std::vector<std::string>& columns() const { return columns_; }
  bool has_column(const std::string& name) const;
  /// A text dataframe: a `text` column and no `path` (OML's format for texts).
  bool is_text_dataframe() const;
  /// Total number of rows.
  std::size_t size() const { return train_.size() + validation_.size(); }
  /// Keeps the validation split's first `rows` rows (limit_val_batches).
  void keep_first_validation_rows(std::size_t rows) { validation_.keep_first(rows); }
  /// A 64-bit digest (FNV-1a) of the rows as read, split by split and in order: paths (their
  /// last two parts: the root each machine resolved is not the data) or texts,
  /// labels, categories, sequences, query/gallery flags, boxes, start times. Equal dataframes give
  /// equal digests whatever their bytes (line endings, quoting, column order); for DDP ranks to
  /// compare what each machine read at the same path.
  uint64_t digest() const;

 private:
  std::string file_;
  std::vector<std::string> columns_;
  DataSplit train_;
  DataSplit validation_;
};

/// Column names of the format.
namespace columns {
inline constexpr const char* kLabel = "label";
inline constexpr const char* kPath = "path";
inline constexpr const char* kText = "text";
inline constexpr const char* kSplit = "split";
inline constexpr const char* kIsQuery = "is_query";
inline constexpr const char* kIsGallery = "is_gallery";
inline constexpr const char* kCategory = "category";
inline constexpr const char* kSequence = "sequence";
inline constexpr const char* kStartTime = "start_time";
}  // namespace columns

}  // namespace oml::data
