// oml-train, pipeline: pairwise — trains a pairwise re-ranker over a frozen extractor
// (docs/pairwise.md): the extractor's embeddings of both splits (computed once, cached) -> P x K
// batches from the sampler -> pairs mined on the cached embeddings (hard or all) -> the pairwise
// model scores each pair from images or embeddings -> binary cross-entropy (target 1 = different
// labels); validation re-ranks the extractor's results with the model and reports metrics before
// and after. The loop itself is the Trainer's (trainer.h).
#include <torch/torch.h>

#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/loader.h"
#include "oml/losses/criterion.h"
#include "oml/losses/miners.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/models/pairwise_model.h"
#include "oml/optim/resume.h"
#include "oml/report/profiler.h"
#include "runtime/embedding.h"
#include "runtime/pairwise_setup.h"
#include "runtime/pipeline_setup.h"
#include "runtime/run_context.h"
#include "training/extractor_pipelines.h"
#include "training/trainer.h"

namespace oml::pipelines {

int train_pairwise(const config::Document& document, const config::RunConfig& cfg,
                   const TrainRequest& request) {
  RunContext ctx = start_run(cfg);
  torch::manual_seed(static_cast<uint64_t>(cfg.seed));

  const data::Dataframe dataframe = read_training_dataframe(cfg);
  check_same_dataframe(ctx, dataframe);  // machines given different files at one path
  const data::DataSplit& train_split = dataframe.train();
  const bool has_validation = !dataframe.validation().empty();
  // Everything the config can get wrong is checked before the embedding pass, which takes
  // hours on large datasets: the extractor's weights, the postprocessor, the model, the
  // sampler, the optimizer, the metric args and the checkpoint metric (the Trainer's constructor).
  require_trained_extractor(cfg);
  const metrics::MetricTable& metric_table = configured_metrics(cfg);
  if (has_validation) check_pairwise_postprocessor(cfg);

  auto model = build_pairwise_model(cfg, ctx);
  // OML's freeze_n_epochs here freezes the pairwise model's own backbone (not the retrieval
  // extractor, which is frozen throughout): only its head trains in the first epochs.
  if (cfg.freeze_n_epochs != 0 && !model->freezable()) {
    cfg.source["freeze_n_epochs"].fail("pairwise model '" + cfg.pairwise_model->name +
                                       "' has no backbone to freeze; freeze_n_epochs needs concat_siamese "
                                       "(its extractor is frozen during the first freeze_n_epochs epochs)");
  }
  const auto sampler = build_train_sampler(cfg, dataframe);
  losses::PairsMiner miner(cfg.hard_pairs_mining);
  auto optimizer = build_optimizer(cfg, *model, nullptr);

  TrainerOptions options;
  options.resume_from = request.resume_from;
  options.has_validation = has_validation;
  options.metric_keys = metric_table.overall_keys();
  options.loss_name = "loss";  // OML's pairwise module logs its loss as "loss"
  Trainer trainer(document, cfg, ctx, {model.get(), "pairwise_model", nullptr, optimizer.get(), sampler},
                  std::move(options));

  // ---- the frozen extractor's embeddings (the cache is shared by every run over them) -------
  // Building the extractor draws random initial weights; keep training's random stream where
  // the Trainer left it (a resumed run restores it), whether the cache was hit or not.
  const at::Tensor rng = optim::save_rng_state();
  const at::Tensor train_embeddings = extractor_embeddings(cfg, ctx, train_split, "train");
  at::Tensor val_embeddings;
  if (has_validation) val_embeddings = extractor_embeddings(cfg, ctx, dataframe.validation(), "validation");
  optim::load_rng_state(rng);

  // ---- what the model reads -------------------------------------------------------------------
  const ParsedComponents& parsed = parsed_components(cfg);
  auto train_inputs = pairwise_inputs(cfg, *model, train_split, train_embeddings, parsed.transforms_train,
                                      "transforms_train");
  train_inputs->reserve_cache(cfg.cache_size);
  std::shared_ptr<const data::Dataset> val_inputs;
  if (has_validation) {
    // OML's train_postprocessor.py validates with transforms_extraction; transforms_val wins here
    // when given.
    const bool own = parsed.transforms_val.has_value() || !parsed.transforms_extraction.has_value();
    val_inputs = pairwise_inputs(cfg, *model, dataframe.validation(), val_embeddings,
                                 own ? parsed.transforms_val : parsed.transforms_extraction,
                                 own ? "transforms_val" : "transforms_extraction");
  }

  // ---- the pipeline's share of the loop ------------------------------------------------------
  TrainingHooks hooks;
  if (cfg.freeze_n_epochs != 0)
    hooks.on_epoch_start = [&](int64_t epoch) { model->set_backbone_frozen(epoch < cfg.freeze_n_epochs); };
  hooks.capture_problem =
      "the pairwise pipeline mines each batch's pairs on the host, and a replay would reuse the captured "
      "batch's pairs";
  hooks.step = [&](const data::LoadedBatch& batch) {
    // Pairs come from the extractor's embeddings: hard pairs are the ones it gets wrong.
    const losses::PairSet pairs = [&] {
      const report::TraceRange range(report::phase::loss);  // the miner, part of the loss
      return miner.mine(train_embeddings.index_select(0, batch.indices), batch.labels);
    }();
    at::Tensor logits;
    {
      const report::TraceRange range(report::phase::forward);
      // Non-blocking copies: from the loader's pageable memory CUDA stages them at once, without
      // waiting for the device (a blocking copy would wait for every step queued before).
      const at::Tensor inputs = batch.images.to(ctx.device, /*non_blocking=*/true);
      logits = model->forward(inputs.index_select(0, pairs.ids1.to(ctx.device, /*non_blocking=*/true)),
                              inputs.index_select(0, pairs.ids2.to(ctx.device, /*non_blocking=*/true)));
    }
    const report::TraceRange range(report::phase::loss);
    const at::Tensor targets = pairs.is_negative.to(ctx.device, /*non_blocking=*/true);
    losses::LossOutput out;
    // float32 whatever the precision (autocast keeps this op in float32 on CUDA, not on the CPU).
    out.loss = torch::binary_cross_entropy_with_logits(logits.to(torch::kFloat), targets.to(torch::kFloat));
    out.logs["pairs"] = torch::scalar_tensor(static_cast<double>(pairs.ids1.size(0)), torch::kDouble);
    out.logs["pair_accuracy"] = ((logits.detach() > 0).to(torch::kFloat) == targets).to(torch::kFloat).mean();
    return out;
  };
  std::map<std::string, double> before_reranking;  // the frozen extractor's metrics, computed once
  hooks.validation_split = &dataframe.validation();
  hooks.validate = [&]() -> metrics::EmbeddingMetricsResult {
    if (!ctx.is_main()) return {};
    return pairwise_validation_metrics(cfg, ctx, metric_table, *model, val_inputs, val_embeddings,
                                       dataframe.validation(), before_reranking);
  };
  trainer.fit(train_inputs, hooks);
  return 0;
}

}  // namespace oml::pipelines
