#include "gallery/gallery_service.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/common/failpoint.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/data/audio.h"
#include "oml/data/image.h"
#include "oml/data/text_dataset.h"
#include "oml/data/transform.h"
#include "oml/models/extractor.h"
#include "oml/retrieval/distance_space.h"
#include "runtime/pipeline_setup.h"
#include "runtime/run_context.h"

namespace oml::pipelines {

namespace {

// More channels than any recording format carries (7.1 is 8); a header claiming more is refused
// before decoding.
constexpr int64_t kMaxRequestChannels = 32;
// What an audio request holds of the decode budget, in units of --max-audio-mb (audio_item keeps
// the resampled audio within it too): the decoded samples, resample_audio's padded copy, its
// convolution's output and the contiguous copy of that; its filter comes on top.
constexpr int64_t kAudioWorkingCopies = 4;

// What a request gives to be embedded by an index of `inputs`.
const char* request_field(RowInput inputs) {
  switch (inputs) {
    case RowInput::texts:
      return "\"text\"";
    case RowInput::audio:
      return "\"audio\" (base64)";
    case RowInput::images:
      break;
  }
  return "\"image\" (base64, or the image as the body)";
}

}  // namespace

struct GalleryService::Query {
  at::Tensor embedding;  // [D]
  int64_t k = 10;
  std::optional<double> threshold;
};

GalleryService::GalleryService(const cli::Invocation& invocation, const std::filesystem::path& dir,
                               ServiceOptions options)
    : invocation_(invocation), dir_(dir), options_(options) {
  lock_ = std::make_unique<IndexWriteLock>(dir);  // no oml-index command changes it under the server
  loaded_ = load_index(invocation_, dir, /*into_memory=*/true);
  log_ = open_change_log(loaded_);
  dimension_ = loaded_.version.manifest.dimension;
  if (loaded_.version.manifest.has_model) {
    const config::RunConfig cfg = index_model_config(invocation_, loaded_.version, {});
    context_ = std::make_unique<RunContext>(start_run(cfg));
    extractor_ = build_extractor_with_weights(cfg, *context_);
    extractor_->eval();
    inputs_ = loaded_.version.manifest.inputs;
    if (inputs_ == RowInput::texts) {
      text_ = std::make_unique<RunInputs>(text_inputs(cfg, *extractor_, "requests", {}));
      text_options_ = std::make_unique<data::TextDatasetOptions>(text_dataset_options(*text_, "requests"));
      // Texts of any length batch together: the batch is padded to its longest.
      embedder_ = std::make_unique<MicroBatcher<at::Tensor, at::Tensor>>(
          [this](std::vector<at::Tensor>& tokens) { return embed_text_batch(tokens); }, options_.embed_batch);
    } else if (inputs_ == RowInput::audio) {
      const RunInputs audio = audio_inputs(cfg, *extractor_, "requests", {});
      audio_options_ = std::make_unique<data::AudioDatasetOptions>(
          audio_dataset_options(audio, "the request's \"audio\""));
      // Divided, not multiplied: a huge --max-audio-mb must not wrap the product past the check.
      const int64_t common_filter_bytes = data::common_rate_filter_bytes(audio_options_->sample_rate);
      OML_CHECK(options_.max_audio_bytes >= 4 && options_.decode_memory_bytes > common_filter_bytes &&
                    options_.max_audio_bytes <=
                        (options_.decode_memory_bytes - common_filter_bytes) / kAudioWorkingCopies,
                UsageError, "--decode-memory-mb (", options_.decode_memory_bytes / (1024 * 1024),
                " MiB) must hold ", kAudioWorkingCopies, " x --max-audio-mb (",
                options_.max_audio_bytes / (1024 * 1024), " MiB) and ", common_filter_bytes / (1024 * 1024),
                " MiB to resample a common rate to ", audio_options_->sample_rate,
                " Hz: an audio request's decode holds that much");
      decode_budget_ = std::make_unique<data::DecodeBudget>(options_.decode_memory_bytes);
      // Clips are cut to one length (audio.max_num_seconds); whole files batch with their equals.
      embedder_ = std::make_unique<MicroBatcher<at::Tensor, at::Tensor>>(
          [this](std::vector<at::Tensor>& clips) { return embed_batch(clips); }, options_.embed_batch,
          [](const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes(); });
    } else {
      const ParsedComponents& parsed = parsed_components(cfg);
      transform_ =
          build_transform(cfg, parsed.transforms_predict ? parsed.transforms_predict : parsed.transforms_val,
                          "transforms_predict");
      max_image_pixels_ = options_.max_image_pixels.value_or(cfg.max_image_pixels);
      decode_budget_ = std::make_unique<data::DecodeBudget>(options_.decode_memory_bytes);
      embedder_ = std::make_unique<MicroBatcher<at::Tensor, at::Tensor>>(
          [this](std::vector<at::Tensor>& images) { return embed_batch(images); }, options_.embed_batch,
          [](const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes(); });
    }
  }
  searcher_ = std::make_unique<MicroBatcher<std::shared_ptr<Query>, SearchAnswer>>(
      [this](std::vector<std::shared_ptr<Query>>& queries) { return search_batch(queries); },
      options_.search_batch);
  compactor_ = std::thread([this] { compact_when_due(); });
  if (compaction_due(loaded_, log_->bytes(), options_.compact_min_bytes))
    after_change();  // a log left long by oml-index
}

GalleryService::~GalleryService() {
  // The batchers first: their workers call into the members below. A compaction under way is
  // finished (a killed one would be as safe, but a stop should leave the folder tidy).
  searcher_.reset();
  embedder_.reset();
  {
    const std::lock_guard<std::mutex> lock(compaction_mutex_);
    stopping_ = true;
  }
  compaction_changed_.notify_all();
  if (compactor_.joinable()) compactor_.join();
}

void GalleryService::after_change() {
  if (!compaction_due(loaded_, log_->bytes(), options_.compact_min_bytes)) return;
  {
    const std::lock_guard<std::mutex> lock(compaction_mutex_);
    compaction_due_ = true;
  }
  compaction_changed_.notify_all();
}

void GalleryService::compact_when_due() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(compaction_mutex_);
      compaction_changed_.wait(lock, [&] { return compaction_due_ || stopping_; });
      if (stopping_) return;
      compaction_due_ = false;
      compacting_ = true;
    }
    try {
      const std::shared_lock<std::shared_mutex> lock(index_mutex_);
      if (compaction_due(loaded_, log_->bytes(), options_.compact_min_bytes)) {
        log::info("oml-serve: " + std::to_string(loaded_.log_records) + " logged changes (" +
                  std::to_string(log_->bytes()) + " bytes): writing the gallery as a new version");
        compact(loaded_);
        log_ = open_change_log(loaded_);
      }
    } catch (const std::exception& e) {
      // The folder still holds the previous version and its log, which changes keep appending to.
      log::warn(std::string("oml-serve: compacting the index failed (changes are still logged): ") +
                e.what());
    }
    {
      const std::lock_guard<std::mutex> lock(compaction_mutex_);
      compacting_ = false;
    }
    compaction_changed_.notify_all();
  }
}

void GalleryService::wait_for_compaction() {
  std::unique_lock<std::mutex> lock(compaction_mutex_);
  compaction_changed_.wait(lock, [&] { return (!compaction_due_ && !compacting_) || stopping_; });
}

void GalleryService::reload() {
  try {
    loaded_ = load_index(invocation_, dir_, /*into_memory=*/true);
    log_ = open_change_log(loaded_);
  } catch (const std::exception& e) {
    log::warn(std::string("oml-serve: reading the index again after a failed change failed: ") + e.what());
  }
}

bool GalleryService::has_model() const { return extractor_ != nullptr; }

int64_t GalleryService::size() const {
  const std::shared_lock<std::shared_mutex> lock(index_mutex_);
  return loaded_.index->size();
}

std::string GalleryService::describe() const {
  const std::shared_lock<std::shared_mutex> lock(index_mutex_);
  return loaded_.index->describe();
}

std::vector<at::Tensor> GalleryService::forward(const at::Tensor& batch) {
  const torch::NoGradGuard no_grad;
  at::Tensor embeddings;
  {
    const AutocastGuard autocast(context_->precision, context_->device);
    embeddings = extractor_->forward(batch.to(context_->device));
  }
  embeddings = embeddings.to(torch::kCPU).to(torch::kFloat).contiguous();
  std::vector<at::Tensor> out;
  for (int64_t i = 0; i < embeddings.size(0); ++i) out.push_back(embeddings[i].clone());
  return out;
}

std::vector<at::Tensor> GalleryService::embed_batch(std::vector<at::Tensor>& images) {
  return forward(torch::stack(images));
}

std::vector<at::Tensor> GalleryService::embed_text_batch(std::vector<at::Tensor>& tokens) {
  std::vector<int64_t> indices(tokens.size());
  for (std::size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
  return forward(data::pad_text_items(tokens, indices, *text_options_));
}

void GalleryService::require_model_for(RowInput given, const std::string& what) const {
  OML_CHECK(extractor_ != nullptr, UsageError, dir_.string(),
            " was built from embeddings, without a model: send embeddings, not ", what);
  OML_CHECK(inputs_ == given, UsageError, dir_.string(), " holds ", inputs_name(inputs_),
            ", embedded by a model that reads them: send ", request_field(inputs_), " or \"embedding\", not ",
            what);
}

at::Tensor GalleryService::embed_text(const std::string& text) {
  require_model_for(RowInput::texts, "\"text\"");
  if (static_cast<int64_t>(text.size()) > options_.max_text_bytes) {
    throw TextTooLong("the text has " + std::to_string(text.size()) +
                      " bytes, more than --max-text-kb allows (" + std::to_string(options_.max_text_bytes) +
                      ")");
  }
  OML_CHECK(!trim(text).empty(), DataError, "\"text\" is empty or blank: there is nothing to embed");
  const at::Tensor tokens =
      data::encode_text(*text_->tokenizer, text, *text_options_, "the request's \"text\"");
  return embedder_->submit(tokens);
}

at::Tensor GalleryService::embed_audio(const std::string& audio_bytes) {
  require_model_for(RowInput::audio, "\"audio\"");
  data::AudioDecodeLimits limits;
  limits.max_samples = options_.max_audio_bytes / 4;
  limits.max_channels = kMaxRequestChannels;
  limits.setting = "--max-audio-mb";
  const std::string what = "the request's \"audio\"";
  // The header says what resampling will cost before anything is decoded: a rate whose gcd with
  // the model's is small needs a filter of gigabytes.
  const data::AudioHeader header = data::read_audio_header(audio_bytes, what, limits);
  const int64_t filter_bytes = data::resample_filter_bytes(header.sample_rate, audio_options_->sample_rate);
  // The constructor checked that the copies fit the budget with room for any common rate's filter.
  const int64_t clip_bytes = kAudioWorkingCopies * options_.max_audio_bytes;
  if (filter_bytes > decode_budget_->capacity() - clip_bytes) {
    throw data::AudioTooLong(::oml::detail::concat(
        what, ": resampling from ", header.sample_rate, " Hz to ", audio_options_->sample_rate,
        " Hz needs a filter of about ", filter_bytes / (1024 * 1024),
        " MiB, which with the clip is more than the ", decode_budget_->capacity() / (1024 * 1024),
        " MiB of --decode-memory-mb: send audio at a common rate (8, 16, 22.05, 44.1 or 48 kHz)"));
  }
  at::Tensor clip;
  {
    const data::DecodeBudget::Hold hold =
        decode_budget_->reserve(clip_bytes + filter_bytes, what, "--decode-memory-mb");
    clip = data::audio_item(data::decode_audio(audio_bytes, what, limits), *audio_options_, 0, what, limits);
  }
  return embedder_->submit(clip);
}

at::Tensor GalleryService::embed(const std::string& image_bytes) {
  require_model_for(RowInput::images, "an image");
  const std::string what = "(the request's)";
  const data::ImageHeader header = data::read_image_header(image_bytes, what);
  data::ImageLimits limits;
  limits.max_pixels = max_image_pixels_;
  limits.setting = options_.max_image_pixels ? "--max-image-pixels" : "the index config's max_image_pixels";
  data::check_pixel_limit(header, limits, what);
  // Held through the decode and the transform, which may make a float copy of the full image
  // (3 channels x 4 bytes per pixel) before it resizes.
  const int64_t working_bytes =
      header.decode_bytes() + std::min<int64_t>(header.pixels(), INT64_MAX / 16) * 12;
  const data::DecodeBudget::Hold hold =
      decode_budget_->reserve(working_bytes, what, "--decode-memory-mb budget");
  const at::Tensor image = data::decode_image(image_bytes, what, limits);
  at::Tensor input;
  try {
    input = transform_->apply(image, data::RandomKey{});
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DataError("transform " + transform_->describe() + " failed on the request's image: " + e.what());
  }
  return embedder_->submit(input);
}

SearchAnswer GalleryService::search(const at::Tensor& embedding, int64_t k, std::optional<double> threshold) {
  OML_CHECK(k >= 1 && k <= options_.max_k, UsageError, "k must be in [1, ", options_.max_k, "], got ", k);
  OML_CHECK(embedding.dim() == 1 && embedding.size(0) == dimension_, DataError, "the embedding has ",
            embedding.numel(), " values, the index holds embeddings of dimension ", dimension_);
  const at::Tensor e = embedding.to(torch::kFloat).contiguous();
  OML_CHECK(at::isfinite(e).all().item<bool>(), DataError, "the embedding contains NaN or infinity");
  if (threshold && *threshold < 0) {  // as oml-search's --threshold: only -q.g (dot) is negative
    const std::shared_lock<std::shared_mutex> lock(index_mutex_);
    OML_CHECK(loaded_.distance == DistanceKind::dot, UsageError,
              "threshold must be a distance >= 0 (or null for none), got ", *threshold);
  }
  auto query = std::make_shared<Query>();
  query->embedding = e;
  query->k = k;
  query->threshold = threshold;
  return searcher_->submit(query);
}

std::vector<SearchAnswer> GalleryService::search_batch(std::vector<std::shared_ptr<Query>>& queries) {
  failpoint("serve:search");
  retrieval::ItemSet set;
  std::vector<at::Tensor> rows;
  int64_t k = 1;
  for (std::size_t i = 0; i < queries.size(); ++i) {
    rows.push_back(queries[i]->embedding);
    set.ids.push_back(-1 - static_cast<int64_t>(i));  // not gallery items: nothing is ignored
    set.labels.push_back(-1);
    k = std::max(k, queries[i]->k);
  }
  set.embeddings = torch::stack(rows).contiguous();
  retrieval::KnnOptions options;
  options.top_k = k;
  const std::shared_lock<std::shared_mutex> lock(index_mutex_);
  const retrieval::RetrievalResults found = loaded_.search(std::move(set), options);
  const IndexedItems& items = loaded_.version.items;
  const nlohmann::json& calibration = loaded_.version.manifest.calibration;
  std::vector<SearchAnswer> out(queries.size());
  for (std::size_t q = 0; q < queries.size(); ++q) {
    SearchAnswer& answer = out[q];
    if (queries[q]->threshold) {
      if (!std::isnan(*queries[q]->threshold)) answer.threshold = queries[q]->threshold;
    } else if (calibration.is_object()) {
      answer.threshold = calibration.at("threshold").get<double>();
    }
    const auto qi = static_cast<int64_t>(q);
    for (int64_t i = 0; i < std::min(found.size(qi), queries[q]->k); ++i) {
      const float d = found.distances[found.begin(qi) + i];
      if (answer.threshold && d > *answer.threshold) break;
      const auto g = static_cast<std::size_t>(found.retrieved[found.begin(qi) + i]);
      answer.neighbours.push_back(
          Neighbour{items.ids[g], items.paths[g], items.texts[g], items.labels[g], items.categories[g], d});
    }
  }
  return out;
}

std::vector<int64_t> GalleryService::add(const std::vector<NewItem>& new_items) {
  OML_CHECK(!new_items.empty(), UsageError, "no items to add");
  std::vector<at::Tensor> rows;
  IndexedItems records;
  for (const NewItem& item : new_items) {
    OML_CHECK(item.embedding.dim() == 1 && item.embedding.size(0) == dimension_, DataError,
              "an item's embedding has ", item.embedding.numel(),
              " values, the index holds embeddings of dimension ", dimension_);
    rows.push_back(item.embedding.to(torch::kFloat));
    records.paths.push_back(item.path);
    records.texts.push_back(item.text);
    records.labels.push_back(item.label);
    records.categories.push_back(item.category);
  }
  const std::unique_lock<std::shared_mutex> lock(index_mutex_);
  IndexManifest& manifest = loaded_.version.manifest;
  for (std::size_t i = 0; i < new_items.size(); ++i) {
    records.ids.push_back(manifest.next_id + static_cast<int64_t>(i));
  }
  retrieval::ItemSet added = records.item_set(torch::stack(rows).contiguous());
  retrieval::validate_item_set(added, "added items");
  // Logged as the index holds them (unit rows under cosine), then applied in memory.
  added = retrieval::to_engine_space(std::move(added), loaded_.distance);
  log_->append_add(records, added.embeddings);
  try {
    loaded_.index->add(added);
    loaded_.version.items.append(records);
    manifest.next_id += static_cast<int64_t>(new_items.size());
  } catch (...) {
    reload();  // the log has the change: the folder as read again serves it
    throw;
  }
  after_change();
  return records.ids;
}

bool GalleryService::remove(int64_t id) {
  const std::unique_lock<std::shared_mutex> lock(index_mutex_);
  IndexedItems& items = loaded_.version.items;
  const auto found = std::find(items.ids.begin(), items.ids.end(), id);
  if (found == items.ids.end()) return false;
  const int64_t position = found - items.ids.begin();
  log_->append_remove({id});
  try {
    loaded_.index->remove({position});
    items.remove({position});
  } catch (...) {
    reload();
    throw;
  }
  after_change();
  return true;
}

}  // namespace oml::pipelines
