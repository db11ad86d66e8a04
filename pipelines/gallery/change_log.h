#pragma once
// An index folder's log of changes since its current version (docs/serving.md#the-index-folder):
// what `oml-index add / remove` and oml-serve's POST /items / DELETE /items/{id} write, so that a
// change costs what it changes — its own records, not a rewrite of the gallery.
//
//   <dir>/v000003.changes   the changes made since v000003 was written (absent: none)
//
// The file is a header (the magic "OMLCHG01" and the version's number, u64 little-endian), then
// records, each `u32 length | u32 CRC-32 of the payload | payload`, appended and fsync'd before
// the change is acknowledged. A payload is one change:
//   add:    u8 1 | u64 count | u64 dimension | count x (i64 id | f32[dimension] row as the index
//           searches it | u32 length + path | u8 has label | i64 label | u32 length + category)
//   remove: u8 2 | u64 count | count x i64 id
//   add with texts (a text index's items): u8 3 | as add, with `u32 length + text` after each path
// Readers apply the records on top of the version (ChangeSummary): added rows are appended in log
// order, removed ids dropped — which is what applying them one by one gives, since ids are never
// reused and a removal keeps the order of the rest. A record cut short at the end of the file
// (the process was killed while appending it, so it was never acknowledged) is ignored, and cut
// off by the next writer; a damaged record before the end is a DataError naming the file and
// the byte.
//
// Compaction writes the changed gallery as the next version (index_folder.h:
// write_next_version), whose log starts empty; the superseded version's log goes with it.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "gallery/index_folder.h"

namespace oml::pipelines {

/// Every change a log holds, in the form readers apply.
struct ChangeSummary {
  IndexedItems added;                ///< the added items' records, in log order
  at::Tensor added_rows;             ///< [A, D] float32 rows of the added items (undefined: none)
  std::vector<int64_t> removed_ids;  ///< removed ids (of the version's items or of added ones)
  int64_t records = 0;               ///< changes in the log
  int64_t valid_bytes = 0;           ///< the log's length up to its last whole record (0: no log)
  int64_t file_bytes = 0;            ///< the log's length on disk (more: a record cut short)
};

/// The log of the version `version_name` ("v000003") of the index folder `dir`.
std::filesystem::path change_log_path(const std::filesystem::path& dir, const std::string& version_name);

/// Reads the log at `file` (an empty summary when there is none). `version_number` and
/// `dimension` are the version's: a log of another version or dimension, a damaged record before
/// the end, an id added twice or removed before it was added are a DataError naming the file.
ChangeSummary read_change_log(const std::filesystem::path& file, int64_t version_number, int64_t dimension,
                              const IndexedItems& version_items);

/// Appends changes to a version's log. Held by a writer that holds the folder's IndexWriteLock.
class ChangeLogWriter {
 public:
  /// Opens (creating it with its header when absent) the log `file` of version `version_number`,
  /// whose records end at `valid_bytes` (read_change_log): a record cut short past it is cut off.
  ChangeLogWriter(std::filesystem::path file, int64_t version_number, int64_t valid_bytes);
  ~ChangeLogWriter();
  ChangeLogWriter(const ChangeLogWriter&) = delete;
  ChangeLogWriter& operator=(const ChangeLogWriter&) = delete;

  /// Appends and syncs one record of added items: `rows` [n, D] float32 as the index searches
  /// them, `items` their records with their ids. RuntimeError when the disk refuses.
  void append_add(const IndexedItems& items, const at::Tensor& rows);
  /// Appends and syncs one record of removed ids.
  void append_remove(const std::vector<int64_t>& ids);

  /// The log's length: its header and every record written.
  int64_t bytes() const { return bytes_; }
  const std::filesystem::path& file() const { return file_; }

 private:
  void append(const std::string& payload);

  std::filesystem::path file_;
  int fd_ = -1;
  int64_t bytes_ = 0;
};

/// The smallest log compaction_due() folds by default.
constexpr int64_t kDefaultCompactMinBytes = int64_t{16} * 1024 * 1024;

/// True when a log of `log_bytes` should be folded into a new version of a gallery of
/// `gallery_bytes` (its embeddings): once it holds half as many bytes, and at least `min_bytes` —
/// so that rewrites cost O(1) per byte changed, and opening an index replays a bounded log.
bool compaction_due(int64_t log_bytes, int64_t gallery_bytes, int64_t min_bytes = kDefaultCompactMinBytes);

}  // namespace oml::pipelines
