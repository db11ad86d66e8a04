#pragma once
// Datasets: what a Loader draws items from.
//
// - ImageDataset: images listed by a DataSplit (labelled train split, query/gallery validation
//   split, or an unlabelled list/folder for prediction), decoded with OpenCV, cropped to their
//   bounding box, then transformed. Metadata (labels, categories, sequences, query/gallery flags)
//   comes from the split and is available without decoding anything.
// - EmbeddingsDataset: rows of a precomputed embeddings tensor [N, D] with a split's metadata, so
//   metrics and pairwise training can run without images.
// - TextDataset (oml/data/text_dataset.h): the texts of a text dataframe, tokenized for a text
//   extractor and padded per batch.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oml/data/dataframe.h"
#include "oml/data/image.h"
#include "oml/data/transform.h"

namespace oml::data {

class ByteCache;

/// Metadata of one item (no pixels).
struct ItemInfo {
  int64_t index = 0;     ///< dataset index (row of the split)
  int64_t label = -1;    ///< -1 for unlabelled items
  std::string category;  ///< "" without a category column
  std::string sequence;  ///< "" without a sequence column
  bool is_query = false;
  bool is_gallery = false;
};

/// Contract: size() and info() are cheap and never fail for 0 <= index < size(); load() and
/// collate() may be called concurrently from several threads and must be deterministic for a
/// given (index, RandomKey) and items; their errors are oml::Error subclasses naming the
/// offending file (and row).
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual ItemInfo info(int64_t index) const = 0;
  /// The item's tensor: an image [3, H, W] (after the transform), an embedding [D], or a text's
  /// tokens [2 | 3, n] (TextDataset).
  virtual at::Tensor load(int64_t index, const RandomKey& key) const = 0;
  /// One batch of load()'s items (items[i] is dataset index indices[i]) as the model's input
  /// tensor (LoadedBatch::images). This default stacks them into [B, ...] and throws DataError
  /// when their sizes differ (naming two of the indices); TextDataset pads its texts instead.
  virtual at::Tensor collate(const std::vector<at::Tensor>& items, const std::vector<int64_t>& indices) const;
  /// The split describing every item (labels, categories, query/gallery flags, paths).
  virtual const DataSplit& meta() const = 0;
  /// Keeps up to `max_items` encoded files in memory, shared by every loader over this dataset
  /// (so later epochs skip disk reads). No-op for datasets without files.
  virtual void reserve_cache(int64_t max_items) const {}
};

/// Every regular file under `folder` (recursively, following linked folders) whose extension is
/// one of `extensions` (lowercase, with the dot; compared without regard to case), in sorted path
/// order. DataError naming the folder when it does not exist, cannot be listed, or holds no such
/// file; `what` names the files in that message ("images", "audio files").
std::vector<std::string> files_under(const std::filesystem::path& folder,
                                     const std::vector<std::string>& extensions, const std::string& what);

class ImageDataset : public Dataset {
 public:
  /// Items are the rows of `split` (paths required). `transform` must not be null. Every image
  /// is decoded within `limits` (decode_image).
  ImageDataset(DataSplit split, std::shared_ptr<const Transform> transform, ImageLimits limits = {});
  ~ImageDataset() override;

  /// Unlabelled set: every image under `folder` (recursively; .jpg, .jpeg, .png, .bmp, any case)
  /// in sorted path order. Throws DataError when the folder has no images.
  static std::shared_ptr<ImageDataset> from_folder(const std::filesystem::path& folder,
                                                   std::shared_ptr<const Transform> transform,
                                                   ImageLimits limits = {});

  int64_t size() const override { return static_cast<int64_t>(split_.size()); }
  ItemInfo info(int64_t index) const override;
  at::Tensor load(int64_t index, const RandomKey& key) const override;
  const DataSplit& meta() const override { return split_; }
  void reserve_cache(int64_t max_items) const override;

  /// Decoded and cropped RGB uint8 [H, W, 3] image, before the transform.
  at::Tensor load_image(int64_t index) const;

 private:
  std::string read_bytes(int64_t index) const;

  DataSplit split_;
  std::shared_ptr<const Transform> transform_;
  ImageLimits limits_;
  mutable std::mutex cache_mutex_;
  mutable std::shared_ptr<ByteCache> cache_;  // a memo of file bytes: logically const
};

class EmbeddingsDataset : public Dataset {
 public:
  /// `embeddings` is a float tensor [N, D] with N == split.size() (DataError otherwise; `source`
  /// names the tensor file in messages).
  EmbeddingsDataset(at::Tensor embeddings, DataSplit split, const std::string& source = "embeddings");

  int64_t size() const override { return static_cast<int64_t>(split_.size()); }
  ItemInfo info(int64_t index) const override;
  at::Tensor load(int64_t index, const RandomKey& key) const override;
  const DataSplit& meta() const override { return split_; }
  const at::Tensor& embeddings() const { return embeddings_; }

 private:
  at::Tensor embeddings_;
  DataSplit split_;
};

/// Metadata of row `index` of `split` (shared by the datasets above).
ItemInfo item_info(const DataSplit& split, int64_t index);

}  // namespace oml::data
