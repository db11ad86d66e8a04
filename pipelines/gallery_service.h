#pragma once
// What oml-serve answers, without HTTP: a loaded index folder and its model, searched and
// changed by many threads at once (docs/serving.md#the-http-api).
//
// Concurrent requests are batched (micro_batcher.h): images into one forward pass, queries into
// one search. Searches share the index; add() and remove() take it alone and persist the change
// as the folder's next version before they return (the server holds the folder's write lock for
// its lifetime, so no oml-index command changes it meanwhile).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "gallery_commands.h"
#include "micro_batcher.h"

namespace oml::data {
class Transform;
}  // namespace oml::data
namespace oml::models {
class Extractor;
}  // namespace oml::models

namespace oml::pipelines {

struct RunContext;

/// One neighbour of a query.
struct Neighbour {
  int64_t id = 0;
  std::string path;
  std::optional<int64_t> label;
  std::string category;
  float distance = 0.0F;
};

/// A query's answer: its neighbours within the threshold, nearest first.
struct SearchAnswer {
  std::vector<Neighbour> neighbours;
  std::optional<double> threshold;  ///< the one applied (none: every neighbour)
  bool known() const { return !neighbours.empty(); }
};

/// A new gallery item: its embedding (from add_items' caller, or embed()) and its record.
struct NewItem {
  at::Tensor embedding;  ///< [D] float32
  std::string path;
  std::optional<int64_t> label;
  std::string category;
};

struct ServiceOptions {
  BatchLimits embed_batch{32, std::chrono::microseconds(0)};
  BatchLimits search_batch{32, std::chrono::microseconds(0)};
  int64_t max_k = 1000;  ///< the largest k a request may ask for
};

class GalleryService {
 public:
  /// Loads the index folder `dir` and, when it was built through a model, that model.
  GalleryService(const cli::Invocation& invocation, const std::filesystem::path& dir, ServiceOptions options);
  ~GalleryService();

  /// [D] float32 embedding of an encoded image (JPEG, PNG, ...). DataError when the bytes are not
  /// an image; UsageError when the index has no model.
  at::Tensor embed(const std::string& image_bytes);
  /// The top `k` of `embedding` ([D]; DataError for another size or non-finite values), cut at
  /// `threshold` — nullopt: the calibrated one if any; NaN: none (a distance may be negative:
  /// -q.g under `distance: dot`; UsageError for a negative one under the other distances).
  SearchAnswer search(const at::Tensor& embedding, int64_t k, std::optional<double> threshold);
  /// Appends the items with new ids (returned), persisted before it returns.
  std::vector<int64_t> add(const std::vector<NewItem>& items);
  /// Removes the item `id`, persisted; false when there is no such item.
  bool remove(int64_t id);

  int64_t size() const;
  int64_t dimension() const { return dimension_; }
  bool has_model() const;
  std::string describe() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  struct Query;
  std::vector<SearchAnswer> search_batch(std::vector<std::shared_ptr<Query>>& queries);  // one search call
  std::vector<at::Tensor> embed_batch(std::vector<at::Tensor>& images);
  /// Writes `contents` as the folder's next version; on failure reloads the version on disk.
  void persist(const IndexContents& contents);

  cli::Invocation invocation_;
  std::filesystem::path dir_;
  ServiceOptions options_;
  std::unique_ptr<IndexWriteLock> lock_;
  LoadedIndex loaded_;
  int64_t dimension_ = 0;
  mutable std::shared_mutex index_mutex_;  // searches share it; add/remove take it alone
  std::shared_ptr<models::Extractor> extractor_;
  std::shared_ptr<const data::Transform> transform_;
  std::unique_ptr<RunContext> context_;
  std::unique_ptr<MicroBatcher<at::Tensor, at::Tensor>> embedder_;
  std::unique_ptr<MicroBatcher<std::shared_ptr<Query>, SearchAnswer>> searcher_;
};

}  // namespace oml::pipelines
