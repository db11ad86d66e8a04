// oml-train, pipeline: extractor — an extractor and a metric-learning loss trained on P x K
// batches; the loop itself is the Trainer's (trainer.h).
#include <torch/torch.h>

#include <optional>

#include "oml/common/logging.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/loader.h"
#include "oml/losses/criterion.h"
#include "oml/losses/gathered_loss.h"
#include "oml/losses/host_labels.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/models/extractor.h"
#include "oml/registry/registries.h"
#include "oml/report/profiler.h"
#include "runtime/embedding.h"
#include "runtime/pipeline_setup.h"
#include "runtime/progress.h"
#include "runtime/run_context.h"
#include "runtime/run_inputs.h"
#include "training/extractor_pipelines.h"
#include "training/trainer.h"

namespace oml::pipelines {

int train_extractor(const config::Document& document, const config::RunConfig& cfg,
                    const TrainRequest& request) {
  RunContext ctx = start_run(cfg);
  torch::manual_seed(static_cast<uint64_t>(cfg.seed));
  // Configured once, when the config was loaded: every validation computes these metrics.
  const metrics::MetricTable& metric_table = configured_metrics(cfg);
  const ParsedComponents& parsed = parsed_components(cfg);

  // ---- data --------------------------------------------------------------------------------
  const data::Dataframe dataframe = read_training_dataframe(cfg);
  check_same_dataframe(ctx, dataframe);  // machines given different files at one path
  const data::DataSplit& train_split = dataframe.train();
  const bool has_validation = !dataframe.validation().empty();
  const auto sampler = build_train_sampler(cfg, dataframe);

  // ---- model, then the datasets of what it reads (images or texts) --------------------------
  // Top-level `weights:` (a checkpoint to start a new run from) is loaded over the extractor's
  // own, as oml-validate and oml-predict load it.
  auto extractor = build_extractor_with_weights(cfg, ctx);
  const RunInputs inputs =
      run_inputs(cfg, *extractor, dataframe, {"transforms_train", "transforms_val", "log_images"});
  const std::shared_ptr<data::Dataset> train_dataset =
      run_dataset(cfg, inputs, dataframe, train_split, parsed.transforms_train, "transforms_train");
  train_dataset->reserve_cache(cfg.cache_size);
  std::shared_ptr<data::Dataset> val_dataset;
  if (has_validation) {
    val_dataset =
        run_dataset(cfg, inputs, dataframe, dataframe.validation(), parsed.transforms_val, "transforms_val");
  }

  // ---- loss, optimizer ----------------------------------------------------------------------
  const models::BackboneFreezing freezing = backbone_freezing(cfg, *extractor);
  losses::CriterionContext criterion_context;
  criterion_context.embedding_size = extractor->feat_dim();
  criterion_context.num_classes = train_split.num_labels();
  criterion_context.label_categories = train_split.label_category_indices();
  auto criterion =
      registries().losses.build(require_component(cfg, parsed.criterion, "criterion"), criterion_context);
  criterion->to(ctx.device);
  auto optimizer = build_optimizer(cfg, *extractor, criterion.get());

  TrainerOptions options;
  options.resume_from = request.resume_from;
  options.has_validation = has_validation;
  options.metric_keys = metric_table.overall_keys();
  options.loss_name = losses::training_loss_name(*criterion);
  options.item_unit = inputs.unit();
  Trainer trainer(document, cfg, ctx,
                  {extractor.get(), "extractor", criterion.get(), optimizer.get(), sampler},
                  std::move(options));

  // ---- the pipeline's share of the loop ------------------------------------------------------
  TrainingHooks hooks;
  // ddp.gather_embeddings_for_loss: the loss sees every rank's rows of the step (one process's
  // batch of all of them); otherwise this rank's batch only.
  const bool gather = cfg.ddp.gather_embeddings_for_loss && ctx.world_size() > 1;
  if (gather) {
    log::info("ddp.gather_embeddings_for_loss: every rank's loss sees the embeddings and labels of all " +
              std::to_string(ctx.world_size()) + " ranks' batches of the step");
  }
  // For a device, the label checks that read values run here, on the sampler's labels in host
  // memory: there they would make every step wait for it (Criterion::check_labels). On the CPU
  // forward() runs them itself, so they run once either way.
  hooks.check = [&](const data::LoadedBatch& batch) {
    if (!ctx.device.is_cpu()) losses::check_labels_on_host(*criterion, batch.labels);
  };
  // The step reads the batch's images and labels only, so a CUDA graph's replay that copies the
  // next batch's into them is that batch's step (loss and miner permitting: a capture that
  // synchronises fails, and training continues eagerly).
  hooks.capture_problem =
      gather ? "ddp.gather_embeddings_for_loss gathers every rank's embeddings in the step" : "";
  hooks.step = [&](const data::LoadedBatch& batch) {
    // The Trainer's DeviceCopier has put the images on the device already (a no-op here); the
    // labels come from the loader's page-locked memory on a GPU, so their copy does not wait.
    torch::Tensor embeddings;
    {
      const report::TraceRange range(report::phase::forward);
      embeddings = extractor->forward(batch.images.to(ctx.device, /*non_blocking=*/true));
    }
    const report::TraceRange range(report::phase::loss);
    const torch::Tensor labels = batch.labels.to(ctx.device, /*non_blocking=*/true);
    if (gather) return losses::loss_over_all_ranks(*criterion, *ctx.group, embeddings, labels);
    // The miners that list triplets on the host take the loader's labels instead of reading
    // `labels` back. A CUDA graph's step has its labels on the device only: nothing to declare.
    std::optional<losses::HostLabels> host_copy;
    if (batch.labels.device().is_cpu()) host_copy.emplace(labels, batch.labels);
    return criterion->forward(embeddings, labels);
  };
  if (freezing.any()) {
    hooks.on_epoch_start = [&](int64_t epoch) { extractor->set_backbone_frozen(freezing.frozen_in(epoch)); };
  }
  hooks.validation_split = &dataframe.validation();
  const auto retrieval_backend = build_retrieval_backend(cfg);
  EmbedOptions validation_embedding = embed_options(cfg, cfg.bs_val, "validation");
  validation_embedding.unit = inputs.unit();
  hooks.validate = [&]() -> metrics::EmbeddingMetricsResult {
    const at::Tensor embeddings = embed_dataset(*extractor, val_dataset, ctx, validation_embedding);
    metrics::EmbeddingMetricsOptions metric_options;
    metric_options.metrics = metric_table;
    use_retrieval_backend(cfg, *retrieval_backend, metric_options);
    metric_options.on_progress = progress_callback("k-NN", "query");
    metric_options.group = ctx.group.get();  // every rank holds every row: they split the k-NN
    auto result =
        metrics::compute_embedding_metrics(embedding_set(embeddings, dataframe.validation()), metric_options);
    if (!ctx.is_main()) return {};  // the Trainer takes rank 0's metrics
    return result;
  };
  if (has_validation) log_knn_split(ctx, metric_table, *retrieval_backend);
  trainer.fit(train_dataset, hooks);
  return 0;
}

}  // namespace oml::pipelines
