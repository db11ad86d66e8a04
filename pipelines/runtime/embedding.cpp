#include "runtime/embedding.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <numeric>

#include "oml/common/autocast.h"
#include "oml/common/logging.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/device_copy.h"
#include "oml/data/loader.h"
#include "oml/data/sampler.h"
#include "oml/data/text_dataset.h"
#include "oml/ddp/ddp_sampler_wrapper.h"
#include "oml/distributed/sync_dicts.h"
#include "oml/models/extractor.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/sharded_knn.h"
#include "oml/samplers/index_samplers.h"
#include "runtime/progress.h"
#include "runtime/run_context.h"

namespace oml::pipelines {

EmbedOptions embed_options(const config::RunConfig& config, int64_t batch_size, const std::string& label) {
  EmbedOptions options;
  options.batch_size = batch_size;
  options.num_workers = config.num_workers;
  options.seed = config.seed;
  options.label = label;
  return options;
}

namespace {

// The items in a given order, the same every epoch: texts to embed, longest first.
class OrderedSampler final : public data::IndexSampler {
 public:
  OrderedSampler(std::vector<int64_t> order, int64_t batch_size)
      : order_(std::move(order)), batch_size_(batch_size) {}
  std::string name() const override { return "length order"; }
  int64_t size() const override { return static_cast<int64_t>(order_.size()); }
  int64_t batch_size() const override { return batch_size_; }
  bool drop_last() const override { return false; }
  std::vector<int64_t> indices(int64_t) const override { return order_; }

 private:
  std::vector<int64_t> order_;
  int64_t batch_size_;
};

// The order a dataset is embedded in: a text dataset's items by their number of tokens, longest
// first (ties in dataset order), so that each batch, padded to its longest text, pads little —
// sentence-transformers' encode() sorts likewise; images in dataset order. The embeddings come
// back in dataset order either way (the Accumulator sorts them by index).
std::shared_ptr<data::IndexSampler> embedding_order(const data::Dataset& dataset, int64_t batch_size,
                                                    const data::SamplerContext& context) {
  const auto* texts = dynamic_cast<const data::TextDataset*>(&dataset);
  samplers::IndexSamplerOptions sequential;
  sequential.batch_size = batch_size;
  if (texts == nullptr) return std::make_shared<samplers::SequentialSampler>(context, sequential);
  const int64_t n = texts->size();
  std::vector<int64_t> tokens(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[static_cast<std::size_t>(i)] = texts->token_count(i);
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return tokens[static_cast<std::size_t>(a)] > tokens[static_cast<std::size_t>(b)];
  });
  samplers::check_options(sequential, "sequential");
  return std::make_shared<OrderedSampler>(std::move(order), batch_size);
}

}  // namespace

at::Tensor embed_dataset(models::Extractor& extractor, const std::shared_ptr<const data::Dataset>& dataset,
                         const RunContext& context, const EmbedOptions& options) {
  const int64_t n = dataset->size();
  data::SamplerContext sampler_context;
  sampler_context.labels.assign(static_cast<std::size_t>(n), 0);  // sequential only needs the count
  sampler_context.seed = options.seed;
  sampler_context.source = "the dataset to embed";
  // No shuffle, padded: every rank runs the same steps; one rank embeds the items in order.
  const ddp::DDPSamplerWrapper share(embedding_order(*dataset, options.batch_size, sampler_context),
                                     ddp::DdpSamplerOptions{}, context.rank(), context.world_size(),
                                     options.seed);

  data::LoaderOptions loader_options;
  loader_options.num_workers = static_cast<int>(options.num_workers);
  loader_options.seed = static_cast<uint64_t>(options.seed);
  loader_options.pin_memory = context.device.is_cuda();
  data::Loader loader(dataset, share.batches(0), loader_options);
  const data::DeviceCopier copier(context.device);

  const bool was_training = extractor.is_training();
  extractor.eval();
  torch::NoGradGuard no_grad;
  distributed::Accumulator accumulator("indices");
  // This rank's share of the items (ceil(n / world) with padding).
  const int64_t world = context.world_size();
  Progress progress(options.label, (n + world - 1) / world, options.unit);
  while (auto batch = loader.next()) {
    copier.to_device(*batch);
    at::Tensor embeddings;
    {
      // Validation and prediction compute as training does; what is collected (and written) is
      // float32 whatever the precision.
      const AutocastGuard autocast(context.precision, context.device);
      embeddings = extractor.forward(batch->images);
    }
    embeddings = embeddings.to(torch::kCPU).to(torch::kFloat);
    accumulator.update({{"embeddings", embeddings}, {"indices", batch->indices}});
    progress.advance(batch->indices.size(0));
  }
  progress.finish();
  extractor.train(was_training);

  const distributed::SyncDict merged = accumulator.sync(*context.group);
  const at::Tensor& indices = std::get<at::Tensor>(merged.at("indices"));
  // The ranks read the same dataframe (check_same_dataframe); a merge of another size means a
  // rank embedded other rows, which must not become metrics.
  OML_CHECK(indices.size(0) == n, DistributedError, "the ranks' embeddings merged into ", indices.size(0),
            " rows for a dataset of ", n, ": the ranks did not embed the same rows");
  return std::get<at::Tensor>(merged.at("embeddings"));
}

metrics::EmbeddingSet embedding_set(const at::Tensor& embeddings, const data::DataSplit& split) {
  metrics::EmbeddingSet set;
  set.embeddings = embeddings;
  set.labels = split.labels;
  set.is_query.assign(split.is_query.begin(), split.is_query.end());
  set.is_gallery.assign(split.is_gallery.begin(), split.is_gallery.end());
  set.categories = split.categories;
  set.sequences = split.sequences;
  return set;
}

void log_knn_split(const RunContext& context, const metrics::MetricTable& table,
                   const retrieval::RetrievalBackend& backend) {
  if (context.world_size() <= 1 || !context.is_main()) return;
  const std::string ranks = std::to_string(context.world_size()) + " ranks";
  const std::string split =
      "validation k-NN split over " + ranks + " by " + retrieval::axis_name(retrieval::kDefaultShardAxis);
  const int threads = at::get_num_threads();
  if (table.needs_pair_pass()) {
    log::info("validation k-NN not split over the " + ranks +
              ": fnmr@fmr needs every pair in one pass, so rank 0 computes the metrics alone");
  } else if (backend.exact()) {
    log::info(split + " (exact; the metrics of one process)");
  } else if (backend.deterministic_build(threads)) {
    log::info(split + ": every rank builds its own " + backend.name() +
              " index over the whole gallery (the same index: the lists of one process)");
  } else {
    log::info(split + ": every rank builds its own " + backend.name() +
              " index over the whole gallery; built by " + std::to_string(threads) +
              " threads, the indexes differ slightly between ranks as between two runs (num_threads: 1 makes "
              "them identical)");
  }
}

void print_metrics_table(const std::map<std::string, double>& metrics, const std::string& title) {
  std::size_t width = 6;
  for (const auto& kv : metrics) width = std::max(width, kv.first.size());
  std::cout << title << "\n";
  auto row = [&](const std::string& key, double value) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.4f", value);
    std::cout << "  " << key << std::string(width - key.size() + 2, ' ') << text << "\n";
  };
  for (const auto& kv : metrics) {
    if (kv.first.rfind("OVERALL/", 0) == 0) row(kv.first, kv.second);
  }
  for (const auto& kv : metrics) {
    if (kv.first.rfind("OVERALL/", 0) != 0) row(kv.first, kv.second);
  }
  std::cout << std::flush;
}

}  // namespace oml::pipelines
