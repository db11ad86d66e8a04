#pragma once
// The commands over saved galleries (docs/serving.md):
//   oml-index build     — a gallery (images through a model, or embeddings) -> an index folder
//   oml-index add       — items appended, with new ids
//   oml-index remove    — items removed by id
//   oml-index compact   — the logged changes written into a new version
//   oml-index calibrate — the open-set threshold for a target false match rate
//   oml-index info      — what an index folder holds
//   oml-search          — queries (images, a dataframe, or embeddings) against an index folder
// Each runs in one process; the index folder's format is index_folder.h.

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gallery/change_log.h"
#include "gallery/index_folder.h"
#include "oml/common/distance_kind.h"
#include "oml/retrieval/gallery_index.h"
#include "shell/cli.h"

namespace oml::pipelines {

/// An index folder's current version with its backend and index, ready to search.
/// Its embeddings and index are in the engines' space of the config's `retrieval_backend.distance`
/// (oml/retrieval/distance_space.h: unit rows for cosine); search() and add() take raw embeddings
/// and search() answers in the distance's units, as validation does.
/// The version's logged changes (change_log.h) are applied: `version.items` and `index` are the
/// gallery as it is now, `version.embeddings` the version's own rows.
struct LoadedIndex {
  IndexVersion version;
  std::shared_ptr<const retrieval::RetrievalBackend> backend;  ///< from the folder's config
  std::unique_ptr<retrieval::GalleryIndex> index;
  DistanceKind distance = DistanceKind::euclidean;  ///< the config's retrieval_backend.distance
  int64_t log_bytes = 0;    ///< the version's change log up to its last whole record (0: none)
  int64_t log_records = 0;  ///< changes in it

  /// The index's top-k of raw query embeddings, distances in `distance`'s units.
  retrieval::RetrievalResults search(retrieval::ItemSet queries, const retrieval::KnnOptions& options) const;
  /// Appends raw embeddings (GalleryIndex::add in the index's space).
  void add(retrieval::ItemSet rows);
};

/// Reads the index folder `dir` (index_folder.h) and loads its index with the backend of its
/// config (plugins it names are loaded). The embeddings stay memory-mapped, or with `into_memory`
/// are read into memory (a server searching them over and over).
LoadedIndex load_index(const cli::Invocation& invocation, const std::filesystem::path& dir,
                       bool into_memory = false);

/// What a change writes as the next version: the loaded one's contents over its (changed) index.
IndexContents next_contents(const LoadedIndex& loaded);

/// The writer of `loaded`'s change log (its folder held with an IndexWriteLock).
std::unique_ptr<ChangeLogWriter> open_change_log(const LoadedIndex& loaded);

/// Writes `loaded` (its index and items as they are now) as the folder's next version, whose
/// change log starts empty; `loaded` then describes that version.
void compact(LoadedIndex& loaded);

/// compaction_due() for `loaded` with a log of `log_bytes`.
bool compaction_due(const LoadedIndex& loaded, int64_t log_bytes,
                    int64_t min_bytes = kDefaultCompactMinBytes);

/// The config the index's gallery was embedded with, its model file checked against the
/// manifest's SHA-256 (DataError when gone or changed), with `overrides` (key=value) applied.
config::RunConfig index_model_config(const cli::Invocation& invocation, const IndexVersion& index,
                                     std::vector<std::string> overrides);

int index_build(const cli::Invocation& invocation);
int index_add(const cli::Invocation& invocation);
int index_remove(const cli::Invocation& invocation);
int index_calibrate(const cli::Invocation& invocation);
int index_compact(const cli::Invocation& invocation);
int index_info(const cli::Invocation& invocation);
int search_index(const cli::Invocation& invocation);

}  // namespace oml::pipelines
