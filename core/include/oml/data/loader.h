#pragma once
// The loader (docs/data.md#datasets-and-the-loader): worker threads load and transform the items of the given
// batches into a bounded queue; the consumer receives the batches in exactly the given order,
// whatever the number of workers.
//
//   Loader loader(dataset, sampler_batches, {.num_workers = 2, .seed = 7, .epoch = e});
//   while (auto batch = loader.next()) train_step(batch->images, batch->labels);
//
// An error while loading (a corrupt image, ...) is re-thrown by next() at the batch that needed
// the item, naming the file; destroying the loader early (early stop, exceptions) stops and joins
// the workers without deadlock.

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "oml/config/options.h"

namespace oml::data {

class Dataset;

/// More loader threads than this is a mistake, not a configuration: each holds batches in memory.
/// The config checks `num_workers:` against the same bound.
constexpr int kMaxLoaderWorkers = config::kMaxLoaderWorkers;

struct LoaderOptions {
  int num_workers = 2;  ///< 0 loads in the consumer's thread; at most kMaxLoaderWorkers
  int prefetch = 2;     ///< batches ready ahead of the consumer, per worker
  uint64_t seed = 0;    ///< with `epoch` and the dataset index: the items' augmentation key
  int64_t epoch = 0;
  int64_t cache_size = 0;  ///< encoded files kept in memory by the dataset (0 = none)
  /// The workers put each batch's tensors in page-locked memory (LibTorch's CUDA host allocator,
  /// as torch's DataLoader(pin_memory=True)), so that their copies to a GPU are asynchronous
  /// (DeviceCopier). Only for a run on a CUDA device, whose placement has loaded LibTorch's CUDA
  /// half: without it pinning is a LibTorch error at the first batch.
  bool pin_memory = false;
};

struct LoadedBatch {
  /// The model's input, as the dataset collates it: images [B, 3, H, W] float, embeddings [B, D],
  /// or a text batch's packed tokens [B, 2 | 3, L] int64 (TextDataset).
  at::Tensor images;
  at::Tensor labels;                    ///< [B] int64 (-1 for unlabelled items)
  at::Tensor indices;                   ///< [B] int64 dataset indices
  std::vector<std::string> categories;  ///< one per item ("" without a category column)
  int64_t position = 0;                 ///< which batch of the epoch (0-based)
};

class Loader {
 public:
  /// `batches` lists dataset indices (each in [0, dataset->size()), checked here: UsageError).
  Loader(std::shared_ptr<const Dataset> dataset, std::vector<std::vector<int64_t>> batches,
         LoaderOptions options = {});
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// The next batch in order, or nullopt after the last one. Re-throws a worker's error.
  std::optional<LoadedBatch> next();
  int64_t num_batches() const { return static_cast<int64_t>(batches_.size()); }

  /// Builds batch `position` in the calling thread (what workers run).
  LoadedBatch load_batch(int64_t position) const;

 private:
  struct Slot {
    std::optional<LoadedBatch> batch;
    std::exception_ptr error;
  };

  void worker_loop();
  void stop();

  std::shared_ptr<const Dataset> dataset_;
  std::vector<std::vector<int64_t>> batches_;
  LoaderOptions options_;

  std::mutex mutex_;
  std::condition_variable ready_;  // consumer waits for its slot
  std::condition_variable space_;  // workers wait for room in the window
  std::map<int64_t, Slot> done_;   // finished batches not yet consumed
  int64_t next_to_claim_ = 0;      // next batch a worker takes
  int64_t next_to_return_ = 0;     // next batch next() returns
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace oml::data
