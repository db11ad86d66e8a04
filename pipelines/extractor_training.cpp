// oml-train, pipeline: extractor.
#include <torch/torch.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "embedding.h"
#include "extractor_pipelines.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/loader.h"
#include "oml/data/sampler.h"
#include "oml/data/transform.h"
#include "oml/distributed/gradient_sync.h"
#include "oml/distributed/process_group.h"
#include "oml/losses/criterion.h"
#include "oml/models/extractor.h"
#include "oml/models/extractor_with_mlp.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/scheduler.h"
#include "oml/registry/registries.h"
#include "pipeline_setup.h"
#include "progress.h"
#include "run_context.h"
#include "training_session.h"

namespace oml::pipelines {

int train_extractor(const cli::Invocation& invocation, const config::Document& document,
                    const config::RunConfig& cfg) {
  RunContext ctx = start_run(cfg);
  torch::manual_seed(static_cast<uint64_t>(cfg.seed));

  // ---- data --------------------------------------------------------------------------------
  const data::Dataframe dataframe = read_run_dataframe(cfg, /*require_paths=*/true);
  const data::DataSplit& train_split = dataframe.train();
  if (train_split.empty()) {
    throw DataError(dataframe.file() + ": has no rows with split 'train'; training needs some");
  }
  const bool has_validation = !dataframe.validation().empty();
  auto train_transform = build_transform(cfg, cfg.transforms_train, "transforms_train");
  auto train_dataset = std::make_shared<data::ImageDataset>(train_split, train_transform);
  train_dataset->reserve_cache(cfg.cache_size);
  std::shared_ptr<data::ImageDataset> val_dataset;
  if (has_validation) {
    auto val_transform = build_transform(cfg, cfg.transforms_val, "transforms_val");
    val_dataset = std::make_shared<data::ImageDataset>(dataframe.validation(), val_transform);
  }

  // ---- sampler (whichever the config names; wrapped for the world) ------------------------
  const auto sampler = build_train_sampler(cfg, dataframe, ctx);
  const int64_t steps_per_epoch = data::batches_per_epoch(*sampler);

  // ---- model, loss, optimizer, scheduler ----------------------------------------------------
  auto extractor = build_extractor(cfg);
  extractor->to(ctx.device);
  if (cfg.freeze_n_epochs > 0 && !dynamic_cast<models::ExtractorWithMLPImpl*>(extractor.get())) {
    cfg.source["freeze_n_epochs"].fail(
        "freezing needs an extractor with a separate backbone: use extractor_with_mlp (its "
        "backbone is frozen during the first freeze_n_epochs epochs), not '" +
        cfg.extractor->name + "'");
  }
  const config::ComponentSpec criterion_spec = require_component(cfg, cfg.criterion, "criterion");
  losses::CriterionContext criterion_context;
  criterion_context.embedding_size = extractor->feat_dim();
  criterion_context.num_classes = train_split.num_labels();
  auto criterion = registries().losses.create(criterion_spec, criterion_context);
  criterion->to(ctx.device);

  optim::OptimizerContext optimizer_context;
  for (const auto& p : extractor->parameters()) optimizer_context.model_parameters.push_back(p);
  for (const auto& p : criterion->parameters()) optimizer_context.loss_parameters.push_back(p);
  auto optimizer =
      registries().optimizers.create(require_component(cfg, cfg.optimizer, "optimizer"), optimizer_context);

  TrainedParts parts;
  parts.model = extractor.get();
  parts.criterion = criterion.get();
  parts.optimizer = optimizer.get();
  parts.scheduler = build_scheduler(cfg, *optimizer, total_training_steps(cfg, steps_per_epoch));
  // Resumes (when asked) and creates the run directory.
  TrainingSession session(invocation, document, cfg, ctx, parts, has_validation,
                          overall_metric_keys(cfg.metric_args));

  // ---- gradient synchronisation (a no-op in a single process) ------------------------------
  distributed::NamedTensors synced = parameters_for_sync(*extractor, "extractor.");
  for (auto& p : parameters_for_sync(*criterion, "criterion.")) synced.push_back(std::move(p));
  distributed::GradientSync gradient_sync(ctx.group, synced, gradient_sync_options(cfg));
  distributed::NamedTensors buffers;
  for (const auto& b : extractor->named_buffers(true))
    buffers.emplace_back("extractor." + b.key(), b.value());
  gradient_sync.broadcast_from_rank0(buffers);

  auto validate = [&]() -> metrics::EmbeddingMetricsResult {
    EmbedOptions embed_options;
    embed_options.batch_size = cfg.bs_val;
    embed_options.num_workers = cfg.num_workers;
    embed_options.seed = cfg.seed;
    embed_options.label = "validation";
    const at::Tensor embeddings = embed_dataset(*extractor, val_dataset, ctx, embed_options);
    if (!ctx.is_main()) return {};
    metrics::EmbeddingMetricsOptions metric_options;
    metric_options.args = cfg.metric_args;
    metric_options.on_progress = progress_callback("k-NN", "query");
    return metrics::compute_embedding_metrics(embedding_set(embeddings, dataframe.validation()),
                                              metric_options);
  };

  // ---- the loop -----------------------------------------------------------------------------
  bool stop = false;
  const int64_t world = ctx.world_size();
  // A run resumed from a checkpoint written at max_steps has nothing left to do.
  for (int64_t epoch = session.start().epoch; epoch < cfg.max_epochs && !stop && !session.reached_max_steps();
       ++epoch) {
    if (auto* with_mlp = dynamic_cast<models::ExtractorWithMLPImpl*>(extractor.get());
        with_mlp && cfg.freeze_n_epochs > 0) {
      with_mlp->set_backbone_frozen(epoch < cfg.freeze_n_epochs);
    }
    extractor->on_epoch_start(epoch);
    extractor->train();
    criterion->train();

    const int64_t first_batch = epoch == session.start().epoch ? session.start().batch : 0;
    data::Loader loader(train_dataset, data::remaining_batches(*sampler, {epoch, first_batch}),
                        training_loader_options(cfg, epoch));
    Progress progress(epoch_label(epoch, cfg.max_epochs), steps_per_epoch - first_batch, "step");
    int64_t batch_in_epoch = first_batch;
    auto step_start = std::chrono::steady_clock::now();
    while (auto batch = loader.next()) {
      const at::Tensor images = batch->images.to(ctx.device);
      const at::Tensor labels = batch->labels.to(ctx.device);
      losses::LossOutput out = criterion->forward(extractor->forward(images), labels);
      const double mean_loss = session.mean_finite_loss(out.loss, epoch);

      optimizer->zero_grad();
      out.loss.backward();
      gradient_sync.finish();
      optimizer->step();
      session.optimizer_stepped();
      ++batch_in_epoch;

      const double samples_per_s = samples_per_second(batch->indices.size(0) * world, step_start);
      nlohmann::json record{{"loss", mean_loss}, {"samples_per_s", samples_per_s}};
      for (const auto& kv : out.logs) record[kv.first] = kv.second;
      session.log_step(epoch, record);
      progress.advance(1, step_status(mean_loss, session.lr(), samples_per_s));
      if (session.reached_max_steps()) {
        stop = true;
        break;
      }
    }
    progress.finish();

    // Batch-norm statistics are updated locally on each rank; like PyTorch's DDP
    // (broadcast_buffers), rank 0's buffers are the model's, so every rank validates and
    // checkpoints the same model that a single process would load from best.ckpt.
    if (world > 1) distributed::broadcast_from_rank0(*ctx.group, buffers);
    session.end_epoch(epoch, batch_in_epoch, steps_per_epoch, stop, dataframe.validation(), validate);
  }
  session.finish();
  return 0;
}

}  // namespace oml::pipelines
