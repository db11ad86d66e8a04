#pragma once
// Embedding a dataset with an extractor on every rank: each rank embeds its share (sequential
// sampler wrapped for the world, padded), the shares are merged with the Accumulator
// (duplicates from padding dropped, rows sorted by dataset index), so every rank ends up with
// the embeddings of the whole dataset in dataset order — the same as one process.

#include <memory>
#include <string>

#include "oml/config/run_config.h"
#include "oml/metrics/embedding_metrics.h"

namespace oml::data {
class Dataset;
struct DataSplit;
}  // namespace oml::data
namespace oml::models {
class Extractor;
}  // namespace oml::models

namespace oml::pipelines {

struct RunContext;

struct EmbedOptions {
  int64_t batch_size = 128;
  int64_t num_workers = 2;
  int64_t seed = 0;
  std::string label = "embedding";  ///< progress bar label
  std::string unit = "img";         ///< what the progress bar counts ("text" for texts)
};

/// The config's workers and seed with `batch_size`, labelled `label` in progress bars.
EmbedOptions embed_options(const config::RunConfig& config, int64_t batch_size, const std::string& label);

/// [N, D] float32 on the CPU, row i = dataset item i. Collective under DDP.
at::Tensor embed_dataset(models::Extractor& extractor, const std::shared_ptr<const data::Dataset>& dataset,
                         const RunContext& context, const EmbedOptions& options);

/// The validation rows of `split` with their embeddings, ready for compute_embedding_metrics.
metrics::EmbeddingSet embedding_set(const at::Tensor& embeddings, const data::DataSplit& split);

/// Under DDP, says once (rank 0) how validation shares the k-NN between the ranks
/// (docs/ddp.md#the-k-nn-split-over-the-ranks); nothing in a single process.
void log_knn_split(const RunContext& context, const metrics::MetricTable& table,
                   const retrieval::RetrievalBackend& backend);

/// Prints "key  value" rows, OVERALL first, to stdout.
void print_metrics_table(const std::map<std::string, double>& metrics, const std::string& title);

}  // namespace oml::pipelines
