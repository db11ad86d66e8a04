#pragma once
// An index folder: a gallery saved for searching (docs/serving.md#the-index-folder), written by
// `oml-index`, read by `oml-search`.
//
//   <dir>/CURRENT          the name of the current version ("v000003"), replaced atomically
//   <dir>/v000003/         one version, never changed once CURRENT names it:
//       manifest.json      format, versions, the backend and its search parameters, the model's
//                          identity, the calibration
//       config.yaml        the resolved config the gallery was embedded with (model, transforms,
//                          retrieval_backend)
//       embeddings.npy     float32 [N, D], row i = item i (memory-mapped when read)
//       items.csv          id,path,label,category per row, in the rows' order (id,text,... for a
//                          text index: manifest `inputs: texts`; audio: `inputs: audio`)
//       faiss.index        the backend's own index (Faiss write_index), for the kinds that have one
//
//   <dir>/v000003.changes  the changes made since (change_log.h), appended record by record
//
// Adding and removing items appends to the current version's change log (change_log.h). A new
// version — `oml-index calibrate`, `oml-index compact`, or a log grown past compaction_due() —
// is written beside the current one, then CURRENT is renamed over: a killed command leaves the
// previous version current and whole (its leftovers are removed by the next change). The
// superseded version and its log are removed once the new one is current. Changes hold
// <dir>/.lock (flock): one writer at a time.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <nlohmann/json.hpp>

#include "oml/io/lock_file.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/knn.h"
#include "runtime/row_input.h"

namespace oml::retrieval {
class GalleryIndex;
}  // namespace oml::retrieval

namespace oml::pipelines {

/// items.csv's (and the search outputs') column of what an item is: "path", or "text".
const char* item_column(RowInput inputs);
/// The manifest's name of `inputs`: "images", "texts" or "audio".
const char* inputs_name(RowInput inputs);

/// The gallery items' records (items.csv), one per embedding row.
struct IndexedItems {
  std::vector<int64_t> ids;        ///< stable ids: assigned at build (0..N-1) and by add
  std::vector<std::string> paths;  ///< image or audio paths ("" for an item given as an embedding)
  std::vector<std::string> texts;  ///< a text index's texts ("" elsewhere)
  std::vector<std::optional<int64_t>> labels;  ///< nullopt: unlabelled
  std::vector<std::string> categories;         ///< "" : none

  std::size_t size() const { return ids.size(); }
  /// Sizes every record column but `ids` to `n` rows (new rows empty, unlabelled).
  void resize_records(std::size_t n);
  /// Item i's path, or its text in a text index.
  const std::string& source(std::size_t i, RowInput inputs) const;
  void append(const IndexedItems& more);
  /// Keeps the rows not in `removed` (ascending positions).
  void remove(const std::vector<int64_t>& removed);
  /// The rows as a retrieval ItemSet over `embeddings` (labels -1 where unlabelled).
  retrieval::ItemSet item_set(const at::Tensor& embeddings) const;
};

/// manifest.json.
struct IndexManifest {
  /// The newest format read: 2 is a text or audio index (`inputs: texts` with items.csv's `text`
  /// column, `inputs: audio`); image indexes are still written as 1.
  static constexpr int kFormatVersion = 2;
  int64_t items = 0;
  int64_t dimension = 0;
  int64_t next_id = 0;                               ///< the id the next added item gets
  std::string backend;                               ///< the backend as described when written
  std::map<std::string, int64_t> search_parameters;  ///< GalleryIndex::search_parameters()
  int64_t tuned_for_k = 0;                           ///< the k target_recall chose them for (0: not tuned)
  std::optional<retrieval::RecallEstimate> tuned;    ///< the recall reached at build
  bool index_file = false;                           ///< faiss.index is present
  bool has_model = false;              ///< built from images, texts or audio through the config's extractor
  RowInput inputs = RowInput::images;  ///< what the items and the model's inputs are
  std::string weights;                 ///< its `weights:` file, absolute ("": the extractor's own)
  std::string weights_sha256;          ///< its SHA-256 when built
  /// The files the model and its tokenizer are read from (a text model's folder:
  /// TextInputSpec::model_files), absolute path -> SHA-256 when built.
  std::map<std::string, std::string> model_files;
  nlohmann::json calibration;  ///< null, or the open-set threshold (docs/serving.md#calibration)
  std::string created;         ///< UTC time of this version
  std::string oml_cpp_version;
  std::string libtorch_version;

  nlohmann::json to_json() const;
  static IndexManifest from_json(const nlohmann::json& json, const std::string& file);
};

/// One version of an index folder, read.
struct IndexVersion {
  std::filesystem::path dir;      ///< the index folder
  std::filesystem::path version;  ///< its current version's folder
  IndexManifest manifest;
  IndexedItems items;
  at::Tensor embeddings;  ///< [N, D] float32, memory-mapped
  std::string config_yaml;

  /// faiss.index in the version, or empty when it has none.
  std::filesystem::path index_file() const;
};

/// The name of the version CURRENT names now ("v000003"); DataError as read_index_folder's.
std::string current_version(const std::filesystem::path& dir);

/// Reads the current version of the index folder `dir`. DataError naming the file when `dir` is
/// not an index folder or a file of it is malformed.
IndexVersion read_index_folder(const std::filesystem::path& dir);

/// What a new version holds.
struct IndexContents {
  IndexManifest manifest;  ///< items, dimension, backend, search parameters are filled from `index`
  IndexedItems items;
  std::string config_yaml;
  const retrieval::GalleryIndex* index = nullptr;
};

/// An exclusive hold on an index folder while it is changed (flock on <dir>/.lock); a second
/// writer gets a UsageError at once instead of waiting. The folder must be an index folder
/// (DataError otherwise, before `.lock` is created in it) unless `new_folder` (oml-index build,
/// before its first version). A `.lock` that is a symbolic link or not a file is a UsageError
/// (io::LockFile).
class IndexWriteLock {
 public:
  explicit IndexWriteLock(const std::filesystem::path& dir, bool new_folder = false);

 private:
  io::LockFile lock_;
};

/// UsageError when `dir` exists and is not empty: an index is never written over anything.
void check_new_index_folder(const std::filesystem::path& dir);

/// Creates the index folder `dir` (check_new_index_folder first) with `contents` as its first
/// version.
void create_index_folder(const std::filesystem::path& dir, IndexContents contents);

/// Writes `contents` as the next version of the index folder `dir` (which the caller holds with
/// an IndexWriteLock), makes it current, removes the one it replaces (with its change log) and
/// what killed writers left behind. Returns the new version's name ("v000004").
std::string write_next_version(const std::filesystem::path& dir, IndexContents contents);

/// The number of a version folder ("<dir>/v000003" -> 3).
int64_t version_number_of(const std::filesystem::path& version_folder);

}  // namespace oml::pipelines
