// oml-train, pipeline: extractor.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

#include "embedding.h"
#include "extractor_pipelines.h"
#include "oml/common/logging.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/loader.h"
#include "oml/data/sampler.h"
#include "oml/data/transform.h"
#include "oml/ddp/ddp_sampler_wrapper.h"
#include "oml/distributed/gradient_sync.h"
#include "oml/distributed/process_group.h"
#include "oml/io/checkpoint.h"
#include "oml/io/state_dict.h"
#include "oml/losses/criterion.h"
#include "oml/models/extractor.h"
#include "oml/models/extractor_with_mlp.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/resume.h"
#include "oml/optim/scheduler.h"
#include "oml/registry/registries.h"
#include "oml/samplers/builtin_samplers.h"
#include "pipeline_setup.h"
#include "progress.h"
#include "run_context.h"
#include "run_dir.h"

namespace oml::pipelines {

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

/// Every parameter of `module` (trainable or not: a frozen backbone may be unfrozen later), for
/// gradient synchronisation.
distributed::NamedTensors all_parameters(const torch::nn::Module& module, const std::string& prefix) {
  distributed::NamedTensors out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) out.emplace_back(prefix + item.key(), item.value());
  return out;
}

double current_lr(torch::optim::Optimizer& optimizer) {
  return optimizer.param_groups().at(0).options().get_lr();
}

/// Tracks the best value of the checkpoint metric.
class BestTracker {
 public:
  BestTracker(std::string key, bool maximise) : key_(std::move(key)), maximise_(maximise) {}
  bool improves(double value) const {
    if (!std::isfinite(value)) return false;
    if (!best_) return true;
    return maximise_ ? value > *best_ : value < *best_;
  }
  void update(double value) { best_ = value; }
  const std::string& key() const { return key_; }
  std::optional<double> best() const { return best_; }

 private:
  std::string key_;
  bool maximise_;
  std::optional<double> best_;
};

}  // namespace

int train_extractor(const cli::Invocation& invocation) {
  const config::Document document = invocation.load_document();
  const config::RunConfig cfg = invocation.load_config(document);
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
  data::SamplerContext sampler_context = sampler_context_for(cfg, dataframe);
  std::shared_ptr<const data::Sampler> sampler = samplers::build_sampler(cfg.sampler, sampler_context);
  ddp::DdpSamplerOptions ddp_options;
  ddp_options.shuffle_between_ranks = cfg.ddp.shuffle_between_ranks;
  ddp_options.pad_to_world_size = cfg.ddp.pad_to_world_size;
  sampler = ddp::wrap_for_world(sampler, ddp_options, ctx.rank(), ctx.world_size(), cfg.seed);
  const int64_t steps_per_epoch = data::batches_per_epoch(*sampler);

  // ---- model, loss, optimizer, scheduler ----------------------------------------------------
  auto extractor = build_extractor(cfg);
  extractor->to(ctx.device);
  if (cfg.freeze_n_epochs > 0 && !dynamic_cast<models::ExtractorWithMLPImpl*>(extractor.get())) {
    cfg.source["freeze_n_epochs"].fail(
        "freezing needs an extractor with a separate backbone: use extractor_with_mlp (its "
        "backbone is frozen during the first freeze_n_epochs epochs), not '" + cfg.extractor->name + "'");
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
  auto optimizer = registries().optimizers.create(require_component(cfg, cfg.optimizer, "optimizer"), optimizer_context);

  const int64_t total_batches = cfg.max_steps ? std::min(*cfg.max_steps, steps_per_epoch * cfg.max_epochs)
                                              : steps_per_epoch * cfg.max_epochs;
  const bool schedule_per_step = cfg.scheduling.scheduler_interval == "step";
  std::shared_ptr<optim::Scheduler> scheduler;
  if (cfg.scheduling.scheduler) {
    optim::SchedulerContext scheduler_context;
    scheduler_context.optimizer = optimizer.get();
    scheduler_context.total_steps = (schedule_per_step ? total_batches : cfg.max_epochs) / cfg.scheduling.scheduler_frequency;
    scheduler = registries().schedulers.create(*cfg.scheduling.scheduler, scheduler_context);
  }

  std::vector<std::string> expected_keys = overall_metric_keys(cfg.metric_args);
  if (has_validation) check_checkpoint_metric(cfg, expected_keys);
  if (scheduler && scheduler->requires_metric()) {
    if (!has_validation) {
      cfg.scheduling.scheduler->node.fail("this scheduler monitors a validation metric, but the dataframe has no validation rows");
    }
    check_monitor_metric(cfg, expected_keys);
  }

  // ---- resume -------------------------------------------------------------------------------
  int64_t start_epoch = 0, start_batch = 0, global_step = 0;
  std::optional<io::Checkpoint> resumed;
  if (invocation.vars.count("resume")) {
    const std::string path = invocation.vars["resume"].as<std::string>();
    resumed = io::load_checkpoint(path);
    if (!resumed->resume) {
      throw DataError("checkpoint '" + path + "' has no resume state (it was not written by oml-train); "
                      "resume from a run's checkpoints/last.ckpt");
    }
    io::load_state_dict(*extractor, resumed->state_dict, path);
    io::load_state_dict(*criterion, resumed->resume->criterion, path + " (criterion)");
    optim::load_optimizer_state(*optimizer, resumed->resume->optimizer);
    if (scheduler) scheduler->load_state(resumed->resume->scheduler);
    optim::load_rng_state(resumed->resume->rng);
    start_epoch = resumed->resume->sampler_epoch;
    start_batch = resumed->resume->sampler_batch;
    global_step = resumed->step;
    log::info("resuming from " + path + " at epoch " + std::to_string(start_epoch) + ", batch " +
              std::to_string(start_batch) + " (step " + std::to_string(global_step) + ")");
  }

  // ---- gradient synchronisation (a no-op in a single process) ------------------------------
  distributed::NamedTensors synced = all_parameters(*extractor, "extractor.");
  for (auto& p : all_parameters(*criterion, "criterion.")) synced.push_back(std::move(p));
  distributed::GradientSyncOptions sync_options;
  sync_options.bucket_mb = cfg.ddp.bucket_mb;
  sync_options.check_params_every = cfg.ddp.check_params_every;
  distributed::GradientSync gradient_sync(ctx.group, synced, sync_options);
  distributed::NamedTensors buffers;
  for (const auto& b : extractor->named_buffers(true)) buffers.emplace_back("extractor." + b.key(), b.value());
  gradient_sync.broadcast_from_rank0(buffers);

  // ---- run directory (rank 0 creates it; every rank knows its name) -------------------------
  const RunPaths paths = prepare_run_directory(cfg, ctx, resumed ? invocation.vars["resume"].as<std::string>() : "");
  std::optional<JsonlWriter> train_log, metrics_log;
  if (ctx.is_main()) {
    RunDir(paths.root.parent_path(), paths.root.filename().string()).write_config(document.dump());
    train_log.emplace(paths.root / "train.jsonl");
    if (has_validation) metrics_log.emplace(paths.root / "metrics.jsonl");
    log::info("run directory: " + paths.root.string());
  }

  BestTracker best(cfg.metric_for_checkpointing, cfg.mode_for_checkpointing == "max");
  const std::string best_key = "best/" + best.key();
  if (resumed && resumed->metrics.count(best_key)) {
    // last.ckpt carries the best value so far, so a resumed run keeps selecting correctly.
    best.update(resumed->metrics.at(best_key));
  }
  std::map<std::string, double> last_metrics;
  std::map<std::string, double> best_metrics;

  auto save = [&](const std::string& name, int64_t next_epoch, int64_t next_batch,
                  const std::map<std::string, double>& metrics) {
    if (!ctx.is_main()) return;
    io::Checkpoint checkpoint;
    checkpoint.state_dict = io::state_dict(*extractor);
    checkpoint.config = document.dump();
    checkpoint.epoch = next_epoch;
    checkpoint.step = global_step;
    checkpoint.metrics = metrics;
    io::ResumeState resume;
    resume.optimizer = optim::save_optimizer_state(*optimizer);
    resume.scheduler = scheduler ? scheduler->state() : c10::IValue(c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()));
    resume.criterion = io::state_dict(*criterion);
    resume.sampler_epoch = next_epoch;
    resume.sampler_batch = next_batch;
    resume.rng = optim::save_rng_state();
    checkpoint.resume = std::move(resume);
    io::save_checkpoint(paths.checkpoints / name, checkpoint);
  };

  // ---- the loop -----------------------------------------------------------------------------
  bool stop = false;
  const int64_t world = ctx.world_size();
  for (int64_t epoch = start_epoch; epoch < cfg.max_epochs && !stop; ++epoch) {
    if (auto* with_mlp = dynamic_cast<models::ExtractorWithMLPImpl*>(extractor.get()); with_mlp && cfg.freeze_n_epochs > 0) {
      with_mlp->set_backbone_frozen(epoch < cfg.freeze_n_epochs);
    }
    extractor->on_epoch_start(epoch);
    extractor->train();
    criterion->train();

    const int64_t first_batch = epoch == start_epoch ? start_batch : 0;
    std::vector<data::Batch> batches = data::remaining_batches(*sampler, {epoch, first_batch});
    data::LoaderOptions loader_options;
    loader_options.num_workers = static_cast<int>(cfg.num_workers);
    loader_options.seed = static_cast<uint64_t>(cfg.seed);
    loader_options.epoch = epoch;
    data::Loader loader(train_dataset, std::move(batches), loader_options);

    Progress progress("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(cfg.max_epochs),
                      steps_per_epoch - first_batch, "step");
    int64_t batch_in_epoch = first_batch;
    auto step_start = Clock::now();
    while (auto batch = loader.next()) {
      const at::Tensor images = batch->images.to(ctx.device);
      const at::Tensor labels = batch->labels.to(ctx.device);
      losses::LossOutput out = criterion->forward(extractor->forward(images), labels);

      // Every rank learns the global mean loss (for the log) and whether any rank diverged.
      at::Tensor loss_value = out.loss.detach().to(torch::kCPU).to(torch::kDouble).reshape({1});
      ctx.group->all_reduce(loss_value);
      const double mean_loss = loss_value.item<double>() / static_cast<double>(world);
      if (!std::isfinite(mean_loss)) {
        const std::string where = "epoch " + std::to_string(epoch + 1) + ", step " + std::to_string(global_step + 1);
        const fs::path last = paths.checkpoints / "last.ckpt";
        throw RuntimeError("the loss became " + std::string(std::isnan(mean_loss) ? "NaN" : "infinite") + " at " +
                           where + "; training stopped before applying that step. " +
                           (fs::exists(last) ? "The last good checkpoint is " + last.string()
                                             : std::string("No checkpoint was written yet")) +
                           "; lower the learning rate or check the data");
      }

      optimizer->zero_grad();
      out.loss.backward();
      gradient_sync.finish();
      optimizer->step();
      ++global_step;
      ++batch_in_epoch;
      if (scheduler && schedule_per_step && global_step % cfg.scheduling.scheduler_frequency == 0) scheduler->step();

      const double seconds = std::chrono::duration<double>(Clock::now() - step_start).count();
      step_start = Clock::now();
      const double samples_per_s = seconds > 0 ? static_cast<double>(batch->indices.size(0) * world) / seconds : 0.0;
      const double lr = current_lr(*optimizer);
      if (train_log) {
        nlohmann::json record{{"epoch", epoch}, {"step", global_step}, {"loss", mean_loss}, {"lr", lr},
                              {"samples_per_s", samples_per_s}};
        for (const auto& kv : out.logs) record[kv.first] = kv.second;
        train_log->write(record);
      }
      char status[96];
      std::snprintf(status, sizeof(status), "loss %.4f lr %.2e %.0f img/s", mean_loss, lr, samples_per_s);
      progress.advance(1, status);
      if (cfg.max_steps && global_step >= *cfg.max_steps) {
        stop = true;
        break;
      }
    }
    progress.finish();
    const bool epoch_done = batch_in_epoch >= steps_per_epoch;
    const int64_t next_epoch = epoch_done ? epoch + 1 : epoch;
    const int64_t next_batch = epoch_done ? 0 : batch_in_epoch;

    // Batch-norm statistics are updated locally on each rank; like PyTorch's DDP
    // (broadcast_buffers), rank 0's buffers are the model's, so every rank validates and
    // checkpoints the same model that a single process would load from best.ckpt.
    if (world > 1) distributed::broadcast_from_rank0(*ctx.group, buffers);

    // ---- validation ---------------------------------------------------------------------
    const bool last_epoch = epoch + 1 == cfg.max_epochs || stop;
    if (has_validation && ((epoch + 1) % cfg.valid_period == 0 || last_epoch)) {
      EmbedOptions embed_options;
      embed_options.batch_size = cfg.bs_val;
      embed_options.num_workers = cfg.num_workers;
      embed_options.seed = cfg.seed;
      embed_options.label = "validation";
      const at::Tensor embeddings = embed_dataset(*extractor, val_dataset, ctx, embed_options);
      std::string metrics_json;
      if (ctx.is_main()) {
        metrics::EmbeddingMetricsOptions metric_options;
        metric_options.args = cfg.metric_args;
        const auto result = metrics::compute_embedding_metrics(embedding_set(embeddings, dataframe.validation()), metric_options);
        metrics_json = nlohmann::json(result.metrics).dump();
      }
      // Metrics are computed once (rank 0); every rank needs them to agree on "best".
      last_metrics = nlohmann::json::parse(ctx.from_rank0(metrics_json)).get<std::map<std::string, double>>();
      if (!last_metrics.count(best.key())) {
        std::vector<std::string> keys;
        for (const auto& kv : last_metrics) keys.push_back(kv.first);
        cfg.source["metric_for_checkpointing"].fail("'" + best.key() + "' is not among the computed metrics: " +
                                                    join(keys));
      }
      if (metrics_log) {
        metrics_log->write(nlohmann::json{{"epoch", epoch}, {"step", global_step}, {"metrics", last_metrics}});
      }
      if (ctx.is_main()) print_metrics_table(last_metrics, "validation after epoch " + std::to_string(epoch + 1) + ":");
      const double value = last_metrics.at(best.key());
      if (scheduler && !schedule_per_step && scheduler->requires_metric()) {
        // reduce_on_plateau steps with the monitored value at validation epochs.
        scheduler->step(last_metrics.at(cfg.scheduling.monitor_metric));
      }
      if (best.improves(value)) {
        best.update(value);
        best_metrics = last_metrics;
        save("best.ckpt", next_epoch, next_batch, last_metrics);
      }
    }
    if (scheduler && !schedule_per_step && !scheduler->requires_metric() && (epoch + 1) % cfg.scheduling.scheduler_frequency == 0) {
      scheduler->step();
    }
    std::map<std::string, double> carried = last_metrics;
    if (best.best()) carried[best_key] = *best.best();
    save("last.ckpt", next_epoch, next_batch, carried);
    ctx.group->barrier();
  }

  if (ctx.is_main()) {
    if (!best_metrics.empty()) {
      print_metrics_table(best_metrics, "best checkpoint (" + best.key() + "): " + (paths.checkpoints / "best.ckpt").string());
    }
    log::info("training finished after " + std::to_string(global_step) + " steps; run directory " + paths.root.string());
  }
  return 0;
}

}  // namespace oml::pipelines
