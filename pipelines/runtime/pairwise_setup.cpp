#include "runtime/pairwise_setup.h"

#include <torch/torch.h>

#include "oml/common/autocast.h"
#include "oml/common/error.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/models/extractor.h"
#include "oml/models/pairwise_model.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/postprocessor.h"
#include "runtime/embedding.h"
#include "runtime/embedding_cache.h"
#include "runtime/pipeline_setup.h"
#include "runtime/run_context.h"
#include "runtime/run_inputs.h"

namespace oml::pipelines {

void require_trained_extractor(const config::RunConfig& config) {
  const config::ComponentSpec spec = require_component(config, config.extractor, "extractor");
  if (!config.weights.empty() || (spec.args.defined() && spec.args["weights"].defined())) return;
  spec.node.fail(
      "the pairwise pipelines re-rank the results of a trained extractor: set `weights:` to its "
      "checkpoint (e.g. the best.ckpt of an extractor run) or give the extractor `args.weights`");
}

namespace {

// Scores (query, gallery) pairs with the model: smaller = more alike (PairwiseModel::predict).
retrieval::PairScorer pair_scorer(models::PairwiseModel& model, PairInput query_input,
                                  PairInput gallery_input, const RunContext& context,
                                  config::Precision precision) {
  return [&model, query_input = std::move(query_input), gallery_input = std::move(gallery_input),
          device = context.device,
          precision](const std::vector<int64_t>& query_ids, const std::vector<int64_t>& gallery_ids) {
    auto stack = [&](const PairInput& input, const std::vector<int64_t>& ids) {
      std::vector<at::Tensor> items;
      items.reserve(ids.size());
      for (int64_t id : ids) items.push_back(input(id));
      return torch::stack(items).to(device);
    };
    torch::NoGradGuard no_grad;
    at::Tensor scores;
    {
      const AutocastGuard autocast(precision, device);
      scores = model.predict(stack(query_input, query_ids), stack(gallery_input, gallery_ids));
    }
    scores = scores.to(torch::kCPU).to(torch::kFloat).contiguous();
    return std::vector<float>(scores.data_ptr<float>(), scores.data_ptr<float>() + scores.numel());
  };
}

}  // namespace

at::Tensor extractor_embeddings(const config::RunConfig& config, const RunContext& context,
                                const data::DataSplit& split, const std::string& split_name) {
  require_trained_extractor(config);
  auto extractor = build_extractor_with_weights(config, context);
  require_image_extractor(config, *extractor, "the pairwise pipeline");
  const ParsedComponents& parsed = parsed_components(config);
  const auto& slot = parsed.transforms_extraction ? parsed.transforms_extraction : parsed.transforms_val;
  CachedEmbeddingsRequest request;
  request.config = &config;
  request.extractor = extractor.get();
  request.dataset = std::make_shared<data::ImageDataset>(
      split, build_transform(config, slot, "transforms_extraction"), image_limits(config));
  request.split_name = split_name;
  request.embed = embed_options(config, config.batch_size_inference, "embedding " + split_name);
  return cached_embeddings(request, context);
}

std::shared_ptr<models::PairwiseModel> build_pairwise_model(const config::RunConfig& config,
                                                            const RunContext& context) {
  auto model = registries().pairwise_models.build(
      require_component(config, parsed_components(config).pairwise_model, "pairwise_model"));
  place_model(*model, config, context);
  return model;
}

std::shared_ptr<const data::Dataset> pairwise_inputs(
    const config::RunConfig& config, const models::PairwiseModel& model, const data::DataSplit& split,
    const at::Tensor& embeddings, const std::optional<ParsedComponents::Transform>& transform_slot,
    const std::string& transform_key) {
  if (model.takes_images()) {
    return std::make_shared<data::ImageDataset>(split, build_transform(config, transform_slot, transform_key),
                                                image_limits(config));
  }
  return std::make_shared<data::EmbeddingsDataset>(embeddings, split, "the extractor's embeddings");
}

namespace {

std::shared_ptr<retrieval::Postprocessor> build_pairwise_postprocessor(const config::RunConfig& config,
                                                                       retrieval::PairScorer scorer,
                                                                       retrieval::PairScorer half_scorer = {},
                                                                       std::string half_precision = "") {
  retrieval::PostprocessorContext context;
  context.pairwise_scores = std::move(scorer);
  context.half_precision_scores = std::move(half_scorer);
  context.half_precision = std::move(half_precision);
  return registries().postprocessors.build(
      require_component(config, parsed_components(config).postprocessor, "postprocessor"), context);
}

}  // namespace

std::shared_ptr<retrieval::Postprocessor> pairwise_postprocessor(const config::RunConfig& config,
                                                                 const RunContext& context,
                                                                 models::PairwiseModel& model,
                                                                 PairInput query_input,
                                                                 PairInput gallery_input) {
  // OML's use_fp16: float16 autocast on CUDA; on the CPU the half precision autocast has is bfloat16.
  const bool cuda = context.device.is_cuda();
  return build_pairwise_postprocessor(
      config, pair_scorer(model, query_input, gallery_input, context, context.precision),
      pair_scorer(model, query_input, gallery_input, context,
                  cuda ? config::Precision::fp16 : config::Precision::bf16),
      cuda ? "float16" : "bfloat16");
}

void check_pairwise_postprocessor(const config::RunConfig& config) {
  build_pairwise_postprocessor(
      config, [](const std::vector<int64_t>&, const std::vector<int64_t>&) -> std::vector<float> {
        throw InternalError("check_pairwise_postprocessor: the check's scorer was called");
      });
}

metrics::EmbeddingMetricsResult pairwise_validation_metrics(
    const config::RunConfig& config, const RunContext& context, const metrics::MetricTable& table,
    models::PairwiseModel& model, const std::shared_ptr<const data::Dataset>& inputs,
    const at::Tensor& embeddings, const data::DataSplit& split, std::map<std::string, double>& before) {
  const auto seed = static_cast<uint64_t>(config.seed);
  // Queries and gallery items are rows of one split. Validation transforms are deterministic; the
  // key only makes the call well-defined.
  const PairInput input = [inputs, seed](int64_t row) {
    return inputs->load(row, data::RandomKey{seed, 0, row});
  };
  const auto postprocessor = pairwise_postprocessor(config, context, model, input, input);

  const metrics::EmbeddingSet set = embedding_set(embeddings, split);
  const auto backend = build_retrieval_backend(config);
  metrics::EmbeddingMetricsOptions options;
  options.metrics = table;
  use_retrieval_backend(config, *backend, options);
  if (before.empty()) {
    for (const auto& [key, value] : metrics::compute_embedding_metrics(set, options).metrics) {
      before[kBeforeRerankingPrefix + key] = value;
    }
  }
  const bool was_training = model.is_training();
  model.eval();
  options.postprocessor = postprocessor.get();
  metrics::EmbeddingMetricsResult out = metrics::compute_embedding_metrics(set, options);
  model.train(was_training);
  out.metrics.insert(before.begin(), before.end());
  return out;
}

}  // namespace oml::pipelines
