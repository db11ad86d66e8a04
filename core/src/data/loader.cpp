#include "oml/data/loader.h"

#include <string>
#include <system_error>

#include <torch/torch.h>

#include <algorithm>

#include "oml/common/error.h"
#include "oml/data/dataset.h"

namespace oml::data {

Loader::Loader(std::shared_ptr<const Dataset> dataset, std::vector<std::vector<int64_t>> batches,
               LoaderOptions options)
    : dataset_(std::move(dataset)), batches_(std::move(batches)), options_(options) {
  OML_CHECK(dataset_ != nullptr, UsageError, "Loader needs a dataset");
  OML_CHECK(options_.num_workers >= 0 && options_.num_workers <= kMaxLoaderWorkers, UsageError,
            "num_workers must be in [0, ", kMaxLoaderWorkers, "], got ", options_.num_workers);
  OML_CHECK(options_.prefetch >= 1, UsageError, "prefetch must be >= 1, got ", options_.prefetch);
  OML_CHECK(options_.cache_size >= 0, UsageError, "cache_size must be >= 0, got ", options_.cache_size);
  const int64_t n = dataset_->size();
  for (std::size_t b = 0; b < batches_.size(); ++b) {
    OML_CHECK(!batches_[b].empty(), UsageError, "batch ", b, " given to the loader is empty");
    for (int64_t index : batches_[b]) {
      OML_CHECK(index >= 0 && index < n, UsageError, "batch ", b, " holds dataset index ", index,
                ", outside the dataset's range [0, ", n, ")");
    }
  }
  if (options_.cache_size > 0) {
    // The cache belongs to the dataset so that it outlives this epoch's loader.
    dataset_->reserve_cache(options_.cache_size);
  }
  try {
    for (int w = 0; w < options_.num_workers; ++w) workers_.emplace_back([this] { worker_loop(); });
  } catch (const std::system_error& e) {
    // The destructor does not run for a constructor that throws: join what was started here,
    // or the joinable threads would terminate the process.
    const std::size_t started = workers_.size();
    stop();
    throw RuntimeError("could not start loader thread " + std::to_string(started + 1) + " of " +
                       std::to_string(options_.num_workers) + ": " + e.what() + "; lower num_workers");
  }
}

Loader::~Loader() { stop(); }

void Loader::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  space_.notify_all();
  ready_.notify_all();
  for (auto& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  workers_.clear();
}

LoadedBatch Loader::load_batch(int64_t position) const {
  const auto& indices = batches_.at(position);
  std::vector<at::Tensor> items;
  items.reserve(indices.size());
  LoadedBatch batch;
  batch.position = position;
  auto labels = torch::empty({static_cast<int64_t>(indices.size())}, torch::kInt64);
  auto* label_data = labels.data_ptr<int64_t>();
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const int64_t index = indices[i];
    items.push_back(dataset_->load(index, RandomKey{options_.seed, options_.epoch, index}));
    const ItemInfo info = dataset_->info(index);
    label_data[i] = info.label;
    batch.categories.push_back(info.category);
  }
  batch.images = dataset_->collate(items, indices);
  batch.labels = labels;
  batch.indices = torch::tensor(indices, torch::kInt64);
  if (options_.pin_memory) {
    // A copy into the host allocator's cached page-locked blocks: the DMA transfer then needs no
    // staging, and the worker pays it rather than the training thread.
    batch.images = batch.images.pin_memory();
    batch.labels = batch.labels.pin_memory();
  }
  return batch;
}

void Loader::worker_loop() {
  const int64_t window = static_cast<int64_t>(std::max(1, options_.num_workers)) * options_.prefetch;
  const int64_t total = num_batches();
  for (;;) {
    int64_t position;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      space_.wait(lock, [&] {
        return stopping_ || next_to_claim_ >= total || next_to_claim_ < next_to_return_ + window;
      });
      if (stopping_ || next_to_claim_ >= total) return;
      position = next_to_claim_++;
    }
    Slot slot;
    try {
      slot.batch = load_batch(position);
    } catch (const Error&) {
      slot.error = std::current_exception();
    } catch (const std::exception& e) {
      slot.error = std::make_exception_ptr(
          RuntimeError("loading batch " + std::to_string(position) + " failed: " + std::string(e.what())));
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.emplace(position, std::move(slot));
    }
    ready_.notify_all();
  }
}

std::optional<LoadedBatch> Loader::next() {
  if (next_to_return_ >= num_batches()) return std::nullopt;
  if (options_.num_workers == 0) {
    const int64_t position = next_to_return_++;
    try {
      return load_batch(position);
    } catch (const Error&) {
      next_to_return_ = num_batches();
      throw;
    } catch (const std::exception& e) {
      next_to_return_ = num_batches();
      throw RuntimeError("loading batch " + std::to_string(position) + " failed: " + std::string(e.what()));
    }
  }

  Slot slot;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return stopping_ || done_.count(next_to_return_) > 0; });
    OML_CHECK(!stopping_, UsageError, "Loader::next() called while the loader is being destroyed");
    auto found = done_.find(next_to_return_);
    slot = std::move(found->second);
    done_.erase(found);
    ++next_to_return_;
  }
  space_.notify_all();
  if (slot.error) {
    // Later batches are abandoned: stop the workers before handing the error to the caller.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      next_to_return_ = num_batches();
    }
    stop();
    std::rethrow_exception(slot.error);
  }
  return std::move(slot.batch);
}

}  // namespace oml::data
