// oml-train, pipeline: pairwise — trains a pairwise re-ranker over a frozen extractor (SPEC §6):
// the extractor's embeddings of both splits (computed once, cached) -> P x K batches from the
// sampler -> pairs mined on the cached embeddings (hard or all) -> the pairwise model scores each
// pair from images or embeddings -> binary cross-entropy (target 1 = different labels) ->
// gradient sync -> optimizer; validation re-ranks the extractor's results with the model and
// reports metrics before and after.
#include <torch/torch.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "embedding.h"
#include "extractor_pipelines.h"
#include "oml/common/error.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/loader.h"
#include "oml/data/sampler.h"
#include "oml/distributed/gradient_sync.h"
#include "oml/distributed/process_group.h"
#include "oml/losses/miners.h"
#include "oml/models/pairwise_model.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/resume.h"
#include "oml/registry/registries.h"
#include "pairwise_setup.h"
#include "pipeline_setup.h"
#include "progress.h"
#include "run_context.h"
#include "training_session.h"

namespace oml::pipelines {

int train_pairwise(const cli::Invocation& invocation, const config::Document& document,
                   const config::RunConfig& cfg) {
  RunContext ctx = start_run(cfg);
  torch::manual_seed(static_cast<uint64_t>(cfg.seed));

  const data::Dataframe dataframe = read_run_dataframe(cfg, /*require_paths=*/true);
  const data::DataSplit& train_split = dataframe.train();
  if (train_split.empty()) {
    throw DataError(dataframe.file() + ": has no rows with split 'train'; training needs some");
  }
  const bool has_validation = !dataframe.validation().empty();
  // Everything the config can get wrong is checked before the embedding pass, which takes
  // hours on large datasets: the extractor's weights, the postprocessor, the model, the
  // sampler, the optimizer and the checkpoint metric (TrainingSession).
  require_trained_extractor(cfg);
  if (has_validation) check_pairwise_postprocessor(cfg);

  auto model = build_pairwise_model(cfg, ctx);
  const auto sampler = build_train_sampler(cfg, dataframe, ctx);
  const int64_t steps_per_epoch = data::batches_per_epoch(*sampler);
  losses::PairsMiner miner(cfg.hard_pairs_mining);

  optim::OptimizerContext optimizer_context;
  for (const auto& p : model->parameters()) optimizer_context.model_parameters.push_back(p);
  auto optimizer =
      registries().optimizers.create(require_component(cfg, cfg.optimizer, "optimizer"), optimizer_context);

  TrainedParts parts;
  parts.model = model.get();
  parts.optimizer = optimizer.get();
  parts.scheduler = build_scheduler(cfg, *optimizer, total_training_steps(cfg, steps_per_epoch));
  TrainingSession session(invocation, document, cfg, ctx, parts, has_validation,
                          overall_metric_keys(cfg.metric_args));

  distributed::GradientSync gradient_sync(ctx.group, parameters_for_sync(*model, "pairwise_model."),
                                          gradient_sync_options(cfg));
  distributed::NamedTensors buffers;
  for (const auto& b : model->named_buffers(true))
    buffers.emplace_back("pairwise_model." + b.key(), b.value());
  gradient_sync.broadcast_from_rank0(buffers);

  // ---- the frozen extractor's embeddings (the cache is shared by every run over them) -------
  // Building the extractor draws random initial weights; keep training's random stream where
  // the session left it (a resumed run restores it), whether the cache was hit or not.
  const at::Tensor rng = optim::save_rng_state();
  const at::Tensor train_embeddings = extractor_embeddings(cfg, ctx, train_split, "train");
  at::Tensor val_embeddings;
  if (has_validation) val_embeddings = extractor_embeddings(cfg, ctx, dataframe.validation(), "validation");
  optim::load_rng_state(rng);

  // ---- what the model reads -------------------------------------------------------------------
  auto train_inputs =
      pairwise_inputs(cfg, *model, train_split, train_embeddings, cfg.transforms_train, "transforms_train");
  train_inputs->reserve_cache(cfg.cache_size);
  std::shared_ptr<const data::Dataset> val_inputs;
  if (has_validation) {
    val_inputs = pairwise_inputs(cfg, *model, dataframe.validation(), val_embeddings, cfg.transforms_val,
                                 "transforms_val");
  }

  std::map<std::string, double> before_reranking;  // the frozen extractor's metrics, computed once
  auto validate = [&]() -> metrics::EmbeddingMetricsResult {
    if (!ctx.is_main()) return {};
    return pairwise_validation_metrics(cfg, ctx, *model, val_inputs, val_embeddings, dataframe.validation(),
                                       before_reranking);
  };

  bool stop = false;
  const int64_t world = ctx.world_size();
  // A run resumed from a checkpoint written at max_steps has nothing left to do.
  for (int64_t epoch = session.start().epoch; epoch < cfg.max_epochs && !stop && !session.reached_max_steps();
       ++epoch) {
    model->train();
    const int64_t first_batch = epoch == session.start().epoch ? session.start().batch : 0;
    data::Loader loader(train_inputs, data::remaining_batches(*sampler, {epoch, first_batch}),
                        training_loader_options(cfg, epoch));
    Progress progress(epoch_label(epoch, cfg.max_epochs), steps_per_epoch - first_batch, "step");
    int64_t batch_in_epoch = first_batch;
    auto step_start = std::chrono::steady_clock::now();
    while (auto batch = loader.next()) {
      // Pairs come from the extractor's embeddings: hard pairs are the ones it gets wrong.
      const losses::PairSet pairs =
          miner.mine(train_embeddings.index_select(0, batch->indices), batch->labels);
      const at::Tensor inputs = batch->images.to(ctx.device);
      const at::Tensor logits = model->forward(inputs.index_select(0, pairs.ids1.to(ctx.device)),
                                               inputs.index_select(0, pairs.ids2.to(ctx.device)));
      const at::Tensor targets = pairs.is_negative.to(ctx.device);
      const at::Tensor loss = torch::binary_cross_entropy_with_logits(logits, targets);
      const double mean_loss = session.mean_finite_loss(loss, epoch);

      optimizer->zero_grad();
      loss.backward();
      gradient_sync.finish();
      optimizer->step();
      session.optimizer_stepped();
      ++batch_in_epoch;

      const double accuracy =
          ((logits.detach() > 0).to(torch::kFloat) == targets).to(torch::kFloat).mean().item<double>();
      const double samples_per_s = samples_per_second(batch->indices.size(0) * world, step_start);
      session.log_step(epoch, {{"loss", mean_loss},
                               {"samples_per_s", samples_per_s},
                               {"pairs", pairs.ids1.size(0)},
                               {"pair_accuracy", accuracy}});
      progress.advance(1, step_status(mean_loss, session.lr(), samples_per_s));
      if (session.reached_max_steps()) {
        stop = true;
        break;
      }
    }
    progress.finish();
    if (world > 1) distributed::broadcast_from_rank0(*ctx.group, buffers);
    session.end_epoch(epoch, batch_in_epoch, steps_per_epoch, stop, dataframe.validation(), validate);
  }
  session.finish();
  return 0;
}

}  // namespace oml::pipelines
