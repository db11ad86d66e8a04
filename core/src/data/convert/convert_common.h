#pragma once
// Pieces shared by the converters (internal to oml_core): the rows they produce, reading the
// official whitespace-separated index files, and writing the output folder atomically.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oml/data/convert.h"
#include "oml/data/dataframe.h"
#include "oml/io/pending_files.h"

namespace oml::data::convert {

namespace fs = std::filesystem;

/// One output row; `path` is relative to the output folder. A text dataset's rows have a `text`
/// and no path (docs/data.md#text-dataframes).
struct Row {
  int64_t label = 0;
  std::string path;
  std::string text;
  bool train = true;
  bool is_query = false;
  bool is_gallery = false;
  std::string category;
  std::optional<BBox> bbox;
};

/// A line of a whitespace-separated index file.
struct TextLine {
  int64_t line = 0;  ///< 1-based
  std::vector<std::string> tokens;
};

/// Reads `path` (DataError when missing, naming the dataset layout `what` expects), skipping the
/// first `skip` lines and blank lines.
std::vector<TextLine> read_text_table(const fs::path& path, int skip, const std::string& what);

/// Token `i` of `line` as an integer / a number; DataError naming file, line and field otherwise.
int64_t token_int(const fs::path& file, const TextLine& line, std::size_t i, const std::string& field);
double token_double(const fs::path& file, const TextLine& line, std::size_t i, const std::string& field);
/// `path` as an index file lists an image (relative to the dataset's folder), or a DataError
/// naming `file` and `line` when it could name a file outside that folder: an absolute path, or
/// one with a ".." part (the copy into --dst would write outside it).
std::string checked_image_path(const fs::path& file, int64_t line, const std::string& path);
/// DataError unless `line` has at least `n` tokens.
void expect_tokens(const fs::path& file, const TextLine& line, std::size_t n, const std::string& format);

/// `src` itself when it holds `marker`, else `src/<subfolder>` when that does (users point --src
/// at either the archive's top folder or its parent). DataError naming the marker otherwise.
fs::path locate_root(const fs::path& src, const std::string& marker, const std::string& subfolder);

/// Keeps at most `limit` rows per split (in order), then drops validation queries whose label
/// lost all its gallery rows. limit < 0 keeps everything.
void apply_limit(std::vector<Row>& rows, int64_t limit);

/// Runs fn(0..n-1) on `threads` threads (0 = hardware); the first exception is re-thrown.
void parallel_for(int64_t n, int threads, const std::function<void(int64_t)>& fn,
                  const ProgressCallback& on_progress = {});

/// The file every converter output holds: how oml-convert recognises a folder it may replace.
inline constexpr const char* kConvertMarker = ".oml-convert";

/// Builds the output aside (`dst.tmp-...`) and swaps it in on commit(); the destructor removes a
/// folder that was never committed. `dst` must be missing, empty or an earlier converter output
/// (it holds kConvertMarker), and neither equal to the folder the converter reads
/// (`source_root`, default `src`; locate_root's result when --src may be the archive's parent)
/// nor inside it or around it: replacing --dst as a whole must never take anything a user put
/// there (UsageError otherwise).
class OutputFolder {
 public:
  explicit OutputFolder(const ConvertOptions& options, const fs::path& source_root = {});
  ~OutputFolder();
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;

  /// Where files go before commit().
  const fs::path& staging() const { return staging_; }

  /// Hard-links (or copies, across file systems) `files[i].first` (absolute source) to
  /// staging / files[i].second, in parallel. A missing source is a DataError naming it.
  void copy_files(const std::vector<std::pair<fs::path, std::string>>& files) const;

  /// Writes df.csv (a `text` column in place of `path` when the rows are texts), checks it with the dataframe
  /// reader (every rule of docs/contracts.md#dataframe), swaps the folder into place and returns the summary.
  ConvertReport commit(const std::vector<Row>& rows);

 private:
  ConvertOptions options_;
  fs::path staging_;
  std::unique_ptr<io::PendingFile> pending_;  // the staging folder, until it is swapped in
  bool committed_ = false;
};

/// The converters (one per file).
ConvertReport convert_fashion_mnist(const ConvertOptions& options);
ConvertReport convert_image_folder(const ConvertOptions& options);
ConvertReport convert_cub(const ConvertOptions& options);
ConvertReport convert_sop(const ConvertOptions& options);
ConvertReport convert_cars(const ConvertOptions& options);
ConvertReport convert_inshop(const ConvertOptions& options);
ConvertReport convert_debian_descriptions(const ConvertOptions& options);

}  // namespace oml::data::convert
