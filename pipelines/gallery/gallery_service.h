#pragma once
// What oml-serve answers, without HTTP: a loaded index folder and its model, searched and
// changed by many threads at once (docs/serving.md#the-http-api).
//
// Concurrent requests are batched (micro_batcher.h): images into one forward pass, queries into
// one search. Searches share the index; add() and remove() take it alone and append the change to
// the folder's change log (change_log.h, synced) before they return — so a change writes what it
// changes, not the gallery. When the log has grown past compaction_due(), a background thread
// writes the gallery as the folder's next version while searches go on (changes wait for it). The
// server holds the folder's write lock for its lifetime, so no oml-index command changes it
// meanwhile.

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include <ATen/core/Tensor.h>

#include "gallery/gallery_commands.h"
#include "gallery/micro_batcher.h"
#include "oml/common/error.h"
#include "runtime/run_inputs.h"

namespace oml::data {
class DecodeBudget;
class Transform;
}  // namespace oml::data
namespace oml::models {
class Extractor;
}  // namespace oml::models

namespace oml::pipelines {

struct RunContext;

/// A text over ServiceOptions::max_text_bytes (oml-serve answers 413).
struct TextTooLong : UsageError {
  using UsageError::UsageError;
};

/// One neighbour of a query.
struct Neighbour {
  int64_t id = 0;
  std::string path;
  std::string text;  ///< a text index's item
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
  std::string text;  ///< a text index's item (what embed_text() embedded, or a record)
  std::optional<int64_t> label;
  std::string category;
};

struct ServiceOptions {
  BatchLimits embed_batch{32, std::chrono::microseconds(0)};
  BatchLimits search_batch{32, std::chrono::microseconds(0)};
  int64_t max_k = 1000;  ///< the largest k a request may ask for
  /// Images of more pixels are refused before decoding; nullopt: the index config's
  /// max_image_pixels (0: no limit).
  std::optional<int64_t> max_image_pixels;
  /// What concurrent embed() calls may hold together while they decode and transform images
  /// (data::DecodeBudget): a request waits for its share; one larger than all of it is refused.
  int64_t decode_memory_bytes = int64_t{2048} * 1024 * 1024;
  /// Longer texts (UTF-8 bytes) are refused before tokenizing (TextTooLong): a model reads 512
  /// tokens at most, and tokenizing costs with the length.
  int64_t max_text_bytes = 64 * 1024;
  /// Audio that decodes to more bytes of float32 samples (all channels) is refused as soon as the
  /// decoder passes them (data::AudioTooLong): a small compressed file may hold hours. 16 MiB is
  /// 87 s of 48 kHz mono; items are cut to the index config's audio.max_num_seconds anyway. The
  /// resampled audio is held to it too (a clip at 1 Hz is 16,000 times larger at 16 kHz). Each
  /// audio request holds 4x this much of the decode budget while it decodes and resamples, and
  /// its resampling filter's size (data::resample_filter_bytes).
  int64_t max_audio_bytes = int64_t{16} * 1024 * 1024;
  /// The change log is written into a new version once it holds this much and half the
  /// gallery's bytes (compaction_due()).
  int64_t compact_min_bytes = kDefaultCompactMinBytes;
};

class GalleryService {
 public:
  /// Loads the index folder `dir` and, when it was built through a model, that model.
  GalleryService(const cli::Invocation& invocation, const std::filesystem::path& dir, ServiceOptions options);
  ~GalleryService();

  /// [D] float32 embedding of an encoded image (JPEG, PNG, ...). data::ImageTooLarge for an image
  /// over the pixel limit or the decode budget (read from its header, before decoding), DataError
  /// when the bytes are not an image; UsageError when the index has no model. Decoding and the
  /// transform hold the image's share of the decode budget (waiting for it when others hold it).
  at::Tensor embed(const std::string& image_bytes);
  /// [D] float32 embedding of a text, tokenized with the index model's tokenizer and batched with
  /// other requests' texts (padded to the longest). TextTooLong over max_text_bytes; DataError
  /// for an empty or blank text or one that is not UTF-8; UsageError when the index holds images
  /// or has no model.
  at::Tensor embed_text(const std::string& text);
  /// [D] float32 embedding of an encoded audio file (WAV, FLAC, OGG, MP3, ...): decoded, downmixed,
  /// resampled and cut as the index's dataset was (data::audio_item from its start), batched with
  /// other requests' clips of the same length. data::AudioTooLong over max_audio_bytes, decoded
  /// or resampled, or when the resampling filter does not fit the decode budget (a rate such as
  /// 4001 Hz, read from the header before decoding); DataError when the bytes are not audio; UsageError when
  /// the index holds images or texts or has no model.
  at::Tensor embed_audio(const std::string& audio_bytes);
  /// The top `k` of `embedding` ([D]; DataError for another size or non-finite values), cut at
  /// `threshold` — nullopt: the calibrated one if any; NaN: none (a distance may be negative:
  /// -q.g under `distance: dot`; UsageError for a negative one under the other distances).
  SearchAnswer search(const at::Tensor& embedding, int64_t k, std::optional<double> threshold);
  /// Appends the items with new ids (returned), logged and synced before it returns.
  std::vector<int64_t> add(const std::vector<NewItem>& items);
  /// Removes the item `id`, logged and synced before it returns; false when there is no such item.
  bool remove(int64_t id);
  /// Waits until no compaction is running or due (tests, benchmarks).
  void wait_for_compaction();

  int64_t size() const;
  int64_t dimension() const { return dimension_; }
  int64_t max_k() const { return options_.max_k; }
  bool has_model() const;
  /// What the index's items are (and its model reads): images, texts or audio.
  RowInput inputs() const { return inputs_; }
  std::string describe() const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  struct Query;
  /// UsageError unless the index has a model and its items are `given` (a request sent `what`).
  void require_model_for(RowInput given, const std::string& what) const;
  std::vector<SearchAnswer> search_batch(std::vector<std::shared_ptr<Query>>& queries);  // one search call
  std::vector<at::Tensor> embed_batch(std::vector<at::Tensor>& images);
  std::vector<at::Tensor> embed_text_batch(std::vector<at::Tensor>& tokens);  // padded to the longest
  /// One forward pass of `batch` ([B, ...] model inputs): B float32 [D] embeddings on the CPU.
  std::vector<at::Tensor> forward(const at::Tensor& batch);
  /// After a change (under the exclusive lock): wakes the compactor when the log is due.
  void after_change();
  /// The compactor thread: writes the next version whenever one is due, until stopped.
  void compact_when_due();
  /// After a failed change: the folder as it is on disk, served again.
  void reload();

  cli::Invocation invocation_;
  std::filesystem::path dir_;
  ServiceOptions options_;
  std::unique_ptr<IndexWriteLock> lock_;
  LoadedIndex loaded_;
  int64_t dimension_ = 0;
  // Searches share it; add/remove take it alone. The compactor holds it shared while it writes,
  // which keeps changes (the only users of log_ and the version's name) out.
  mutable std::shared_mutex index_mutex_;
  std::unique_ptr<ChangeLogWriter> log_;
  std::mutex compaction_mutex_;  // guards the two flags below
  std::condition_variable compaction_changed_;
  bool compaction_due_ = false;
  bool compacting_ = false;
  bool stopping_ = false;
  std::thread compactor_;
  std::shared_ptr<models::Extractor> extractor_;
  std::shared_ptr<const data::Transform> transform_;
  RowInput inputs_ = RowInput::images;
  std::unique_ptr<RunInputs> text_;                           // a text index's tokenizer
  std::unique_ptr<data::TextDatasetOptions> text_options_;    // and how its tokens are packed
  std::unique_ptr<data::AudioDatasetOptions> audio_options_;  // an audio index's cutting
  int64_t max_image_pixels_ = 0;
  std::unique_ptr<data::DecodeBudget> decode_budget_;
  std::unique_ptr<RunContext> context_;
  std::unique_ptr<MicroBatcher<at::Tensor, at::Tensor>> embedder_;
  std::unique_ptr<MicroBatcher<std::shared_ptr<Query>, SearchAnswer>> searcher_;
};

}  // namespace oml::pipelines
