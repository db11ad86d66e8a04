#pragma once
// The parts the pairwise pipelines (train_pairwise, validate_pairwise) share: the frozen
// extractor's cached embeddings, the pairwise model and what it reads (images or embeddings),
// and validation as metrics before and after re-ranking (docs/pairwise.md).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "oml/config/run_config.h"
#include "oml/metrics/embedding_metrics.h"

namespace at {
class Tensor;
}  // namespace at
namespace oml::data {
class Dataset;
struct DataSplit;
}  // namespace oml::data
namespace oml::models {
class PairwiseModel;
}  // namespace oml::models
namespace oml::retrieval {
class Postprocessor;
}  // namespace oml::retrieval

namespace oml::pipelines {

struct RunContext;

/// The frozen extractor's embeddings [N, D] of `split`, from the embeddings cache or computed
/// (with transforms_extraction, or transforms_val when that is unset). `split_name` names the
/// cache file. Collective.
at::Tensor extractor_embeddings(const config::RunConfig& config, const RunContext& context,
                                const data::DataSplit& split, const std::string& split_name);

/// The config's `pairwise_model`, on the context's device.
std::shared_ptr<models::PairwiseModel> build_pairwise_model(const config::RunConfig& config,
                                                            const RunContext& context);

/// What the model reads for the rows of `split`: images through `transform_slot` when it takes
/// images, the rows of `embeddings` otherwise.
std::shared_ptr<const data::Dataset> pairwise_inputs(
    const config::RunConfig& config, const models::PairwiseModel& model, const data::DataSplit& split,
    const at::Tensor& embeddings, const std::optional<config::ComponentSpec>& transform_slot,
    const std::string& transform_key);

/// A pairwise pipeline over an untrained extractor is almost always a forgotten `weights:`:
/// throws ConfigError unless `weights` or the extractor's `args.weights` is set.
void require_trained_extractor(const config::RunConfig& config);

/// Builds the config's `postprocessor` once with a scorer that is never called, so that bad
/// args (an unknown name, `top_n: 1`) fail before the embeddings are computed and before any
/// training, not at the first validation. Throws ConfigError naming the key.
void check_pairwise_postprocessor(const config::RunConfig& config);

/// What the pairwise model reads for one side of a pair: the input of row `row` (an image through
/// its transform, or an embedding), on the CPU.
using PairInput = std::function<at::Tensor(int64_t row)>;

/// The config's `postprocessor` (normally `pairwise_reranker`) scoring each (query, gallery) pair
/// of the results it processes with `model`: the query's input is query_input(query id), the
/// gallery item's gallery_input(gallery id) (RetrievalResults::query_ids / gallery_ids); with
/// OML's use_fp16 under half-precision autocast (float16 on CUDA, bfloat16 on the CPU). `model`
/// must outlive it and be in eval mode while it runs. ConfigError naming the key for bad args.
std::shared_ptr<retrieval::Postprocessor> pairwise_postprocessor(const config::RunConfig& config,
                                                                 const RunContext& context,
                                                                 models::PairwiseModel& model,
                                                                 PairInput query_input,
                                                                 PairInput gallery_input);

/// The metrics of `table` on the validation split re-ranked by the config's postprocessor
/// (normally `pairwise_reranker`) using `model` on `inputs` (standard keys), plus the
/// extractor's own metrics under "before_reranking/..." (computed once and passed back in
/// `before` when it is non-empty). Runs on one rank.
metrics::EmbeddingMetricsResult pairwise_validation_metrics(
    const config::RunConfig& config, const RunContext& context, const metrics::MetricTable& table,
    models::PairwiseModel& model, const std::shared_ptr<const data::Dataset>& inputs,
    const at::Tensor& embeddings, const data::DataSplit& split, std::map<std::string, double>& before);

/// The prefix of the extractor's own metrics in pairwise validation.
inline const std::string kBeforeRerankingPrefix = "before_reranking/";

}  // namespace oml::pipelines
