#include "oml/data/dataset.h"

#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/data/image.h"

namespace fs = std::filesystem;

namespace oml::data {

/// Encoded file bytes by dataset index. Holds at most `capacity` files: the first ones read stay
/// (no eviction), which keeps lookups lock-cheap and suits the repeated random passes of
/// training, where any fixed subset saves the same fraction of reads.
class ByteCache {
 public:
  explicit ByteCache(int64_t capacity) : capacity_(capacity) {}

  std::optional<std::shared_ptr<const std::string>> find(int64_t index) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto found = items_.find(index);
    if (found == items_.end()) return std::nullopt;
    return found->second;
  }

  void insert(int64_t index, std::shared_ptr<const std::string> bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (static_cast<int64_t>(items_.size()) < capacity_) items_.emplace(index, std::move(bytes));
  }

  int64_t capacity() const { return capacity_; }

 private:
  int64_t capacity_;
  mutable std::mutex mutex_;
  std::unordered_map<int64_t, std::shared_ptr<const std::string>> items_;
};

ItemInfo item_info(const DataSplit& split, int64_t index) {
  OML_ASSERT(index >= 0 && index < static_cast<int64_t>(split.size()), "dataset index ", index, " of ",
             split.size());
  ItemInfo info;
  info.index = index;
  if (split.has_labels()) info.label = split.labels[index];
  if (split.has_categories()) info.category = split.categories[index];
  if (split.has_sequences()) info.sequence = split.sequences[index];
  if (!split.is_query.empty()) {
    info.is_query = split.is_query[index];
    info.is_gallery = split.is_gallery[index];
  }
  return info;
}

at::Tensor Dataset::collate(const std::vector<at::Tensor>& items, const std::vector<int64_t>& indices) const {
  OML_ASSERT(!items.empty() && items.size() == indices.size(), items.size(), " items for ", indices.size(),
             " indices");
  for (std::size_t i = 1; i < items.size(); ++i) {
    OML_CHECK(items[i].sizes() == items[0].sizes(), DataError, "cannot batch items of different sizes: item ",
              indices[0], " is ", items[0].sizes(), " but item ", indices[i], " is ", items[i].sizes(),
              " (use a transform with a fixed output size, e.g. norm_resize)");
  }
  return torch::stack(items);
}

// ---- ImageDataset -----------------------------------------------------------------------------

ImageDataset::ImageDataset(DataSplit split, std::shared_ptr<const Transform> transform, ImageLimits limits)
    : split_(std::move(split)), transform_(std::move(transform)), limits_(std::move(limits)) {
  OML_CHECK(transform_ != nullptr, UsageError, "ImageDataset needs a transform");
  OML_CHECK(split_.paths.size() == split_.size(), DataError,
            "an image dataset needs a 'path' for every row (", split_.paths.size(), " paths for ",
            split_.size(), " rows)",
            split_.has_texts() ? "; these rows are texts (a text dataframe), which a text extractor such as "
                                 "hf_text_encoder reads"
                               : "");
}

ImageDataset::~ImageDataset() = default;

std::vector<std::string> files_under(const fs::path& folder, const std::vector<std::string>& extensions,
                                     const std::string& what) {
  std::error_code ec;
  OML_CHECK(fs::is_directory(folder, ec), DataError, "folder ", folder.string(), " (of ", what,
            ") does not exist");
  std::vector<std::string> paths;
  for (auto it =
           fs::recursive_directory_iterator(folder, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code entry_ec;
    const bool regular = it->is_regular_file(entry_ec);
    // A link that loops or points nowhere is named, not reported as a filesystem exception.
    OML_CHECK(!entry_ec || entry_ec == std::errc::no_such_file_or_directory, DataError, "cannot read ",
              it->path().string(), " (in ", what, " folder ", folder.string(), "): ", entry_ec.message());
    if (!regular) continue;
    std::string ext = it->path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (std::find(extensions.begin(), extensions.end(), ext) != extensions.end())
      paths.push_back(it->path().string());
  }
  OML_CHECK(!ec, DataError, "cannot list folder ", folder.string(), ": ", ec.message());
  OML_CHECK(!paths.empty(), DataError, "folder ", folder.string(), " holds no ", what, " (expected ",
            join(extensions, ", "), " files)");
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::shared_ptr<ImageDataset> ImageDataset::from_folder(const fs::path& folder,
                                                        std::shared_ptr<const Transform> transform,
                                                        ImageLimits limits) {
  DataSplit split;
  split.paths = files_under(folder, image_file_extensions(), "images");
  for (std::size_t i = 0; i < split.paths.size(); ++i) split.lines.push_back(static_cast<int64_t>(i) + 1);
  return std::make_shared<ImageDataset>(std::move(split), std::move(transform), std::move(limits));
}

ItemInfo ImageDataset::info(int64_t index) const { return item_info(split_, index); }

void ImageDataset::reserve_cache(int64_t max_items) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (max_items > 0 && (!cache_ || cache_->capacity() < max_items))
    cache_ = std::make_shared<ByteCache>(max_items);
}

std::string ImageDataset::read_bytes(int64_t index) const {
  std::shared_ptr<ByteCache> cache;
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    cache = cache_;
  }
  if (!cache) return read_file_bytes(split_.paths[index], max_image_file_bytes(limits_));
  if (auto hit = cache->find(index)) return **hit;
  auto bytes = std::make_shared<const std::string>(
      read_file_bytes(split_.paths[index], max_image_file_bytes(limits_)));
  cache->insert(index, bytes);
  return *bytes;
}

at::Tensor ImageDataset::load_image(int64_t index) const {
  OML_CHECK(index >= 0 && index < size(), UsageError, "dataset index ", index, " is out of range [0, ",
            size(), ")");
  const std::string& path = split_.paths[index];
  at::Tensor image = decode_image(read_bytes(index), path, limits_);
  if (split_.has_bboxes() && split_.bboxes[index]) image = crop_image(image, *split_.bboxes[index], path);
  return image;
}

at::Tensor ImageDataset::load(int64_t index, const RandomKey& key) const {
  at::Tensor image = load_image(index);
  try {
    return transform_->apply(image, key);
  } catch (const DataError& e) {  // about this image: named
    DataError named("image " + split_.paths[index] + ": " + e.what());
    for (const auto& line : e.context()) named.add_context(line);
    throw named;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // OpenCV / LibTorch errors inside a (plugin) transform
    throw DataError("transform " + transform_->describe() + " failed on image " + split_.paths[index] + ": " +
                    e.what());
  }
}

// ---- EmbeddingsDataset ------------------------------------------------------------------------

EmbeddingsDataset::EmbeddingsDataset(at::Tensor embeddings, DataSplit split, const std::string& source)
    : embeddings_(std::move(embeddings)), split_(std::move(split)) {
  OML_CHECK(embeddings_.defined() && embeddings_.dim() == 2, DataError, source,
            ": expected embeddings of shape [N, D], got ",
            embeddings_.defined() ? embeddings_.sizes() : c10::IntArrayRef{});
  OML_CHECK(embeddings_.size(0) == static_cast<int64_t>(split_.size()), DataError, source, " holds ",
            embeddings_.size(0), " embeddings but the dataframe has ", split_.size(),
            " rows for them; expected one embedding per row, in dataframe order");
  embeddings_ = embeddings_.to(torch::kFloat32).contiguous();
}

ItemInfo EmbeddingsDataset::info(int64_t index) const { return item_info(split_, index); }

at::Tensor EmbeddingsDataset::load(int64_t index, const RandomKey&) const {
  OML_CHECK(index >= 0 && index < size(), UsageError, "dataset index ", index, " is out of range [0, ",
            size(), ")");
  return embeddings_[index];
}

}  // namespace oml::data
