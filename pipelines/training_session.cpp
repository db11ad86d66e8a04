#include "training_session.h"

#include <torch/torch.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "embedding.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "oml/data/dataframe.h"
#include "oml/data/loader.h"
#include "oml/data/sampler.h"
#include "oml/ddp/ddp_sampler_wrapper.h"
#include "oml/distributed/gradient_sync.h"
#include "oml/distributed/process_group.h"
#include "oml/io/checkpoint.h"
#include "oml/io/state_dict.h"
#include "oml/metrics/embedding_metrics.h"
#include "oml/optim/resume.h"
#include "oml/optim/scheduler.h"
#include "oml/registry/registries.h"
#include "oml/samplers/builtin_samplers.h"
#include "run_context.h"
#include "run_dir.h"
#include "run_recorder.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

std::shared_ptr<optim::Scheduler> build_scheduler(const config::RunConfig& config,
                                                  torch::optim::Optimizer& optimizer, int64_t batches_total) {
  if (!config.scheduling.scheduler) return nullptr;
  const bool per_step = config.scheduling.scheduler_interval == "step";
  optim::SchedulerContext context;
  context.optimizer = &optimizer;
  context.total_steps =
      (per_step ? batches_total : config.max_epochs) / config.scheduling.scheduler_frequency;
  return registries().schedulers.create(*config.scheduling.scheduler, context);
}

int64_t total_training_steps(const config::RunConfig& config, int64_t steps_per_epoch) {
  const int64_t all_epochs = steps_per_epoch * config.max_epochs;
  return config.max_steps ? std::min(*config.max_steps, all_epochs) : all_epochs;
}

std::shared_ptr<const data::Sampler> build_train_sampler(const config::RunConfig& config,
                                                         const data::Dataframe& dataframe,
                                                         const RunContext& context) {
  const data::SamplerContext sampler_context = sampler_context_for(config, dataframe);
  std::shared_ptr<const data::Sampler> sampler = samplers::build_sampler(config.sampler, sampler_context);
  ddp::DdpSamplerOptions options;
  options.shuffle_between_ranks = config.ddp.shuffle_between_ranks;
  options.pad_to_world_size = config.ddp.pad_to_world_size;
  return ddp::wrap_for_world(sampler, options, context.rank(), context.world_size(), config.seed);
}

std::vector<std::pair<std::string, at::Tensor>> parameters_for_sync(const torch::nn::Module& module,
                                                                    const std::string& prefix) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : module.named_parameters(/*recurse=*/true))
    out.emplace_back(prefix + item.key(), item.value());
  return out;
}

distributed::GradientSyncOptions gradient_sync_options(const config::RunConfig& config) {
  distributed::GradientSyncOptions options;
  options.bucket_mb = config.ddp.bucket_mb;
  options.check_params_every = config.ddp.check_params_every;
  return options;
}

data::LoaderOptions training_loader_options(const config::RunConfig& config, int64_t epoch) {
  data::LoaderOptions options;
  options.num_workers = static_cast<int>(config.num_workers);
  options.seed = static_cast<uint64_t>(config.seed);
  options.epoch = epoch;
  return options;
}

std::string epoch_label(int64_t epoch, int64_t max_epochs) {
  return "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(max_epochs);
}

double samples_per_second(int64_t samples, std::chrono::steady_clock::time_point& since) {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - since).count();
  since = now;
  return seconds > 0 ? static_cast<double>(samples) / seconds : 0.0;
}

std::string step_status(double loss, double lr, double samples_per_s) {
  char status[96];
  std::snprintf(status, sizeof(status), "loss %.4f lr %.2e %.0f img/s", loss, lr, samples_per_s);
  return status;
}

namespace {

bool improves(const std::optional<double>& best, double value, bool maximise) {
  if (!std::isfinite(value)) return false;
  if (!best) return true;
  return maximise ? value > *best : value < *best;
}

std::string best_key(const config::RunConfig& config) { return "best/" + config.metric_for_checkpointing; }

}  // namespace

TrainingSession::TrainingSession(const cli::Invocation& invocation, const config::Document& document,
                                 const config::RunConfig& config, const RunContext& context,
                                 TrainedParts parts, bool has_validation,
                                 const std::vector<std::string>& overall_keys)
    : config_(config),
      context_(context),
      parts_(std::move(parts)),
      resolved_yaml_(document.dump()),
      has_validation_(has_validation) {
  OML_ASSERT(parts_.model && parts_.optimizer, "a training session needs a model and an optimizer");
  if (has_validation_) check_checkpoint_metric(config_, overall_keys);
  if (parts_.scheduler && parts_.scheduler->requires_metric()) {
    if (!has_validation_) {
      config_.scheduling.scheduler->node.fail(
          "this scheduler monitors a validation metric, but the dataframe has no validation rows");
    }
    check_monitor_metric(config_, overall_keys);
  }

  std::string resumed_path;
  if (invocation.vars.count("resume")) {
    resumed_path = invocation.vars["resume"].as<std::string>();
    const io::Checkpoint resumed = io::load_checkpoint(resumed_path);
    if (!resumed.resume) {
      throw DataError("checkpoint '" + resumed_path +
                      "' has no resume state (it was not written by oml-train); "
                      "resume from a run's checkpoints/last.ckpt");
    }
    io::load_state_dict(*parts_.model, resumed.state_dict, resumed_path);
    if (parts_.criterion)
      io::load_state_dict(*parts_.criterion, resumed.resume->criterion, resumed_path + " (criterion)");
    optim::load_optimizer_state(*parts_.optimizer, resumed.resume->optimizer);
    if (parts_.scheduler) parts_.scheduler->load_state(resumed.resume->scheduler);
    optim::load_rng_state(resumed.resume->rng);
    start_ = {resumed.resume->sampler_epoch, resumed.resume->sampler_batch, resumed.step};
    // last.ckpt carries the best value so far, so a resumed run keeps selecting correctly.
    if (auto it = resumed.metrics.find(best_key(config_)); it != resumed.metrics.end()) best_ = it->second;
    log::info("resuming from " + resumed_path + " at epoch " + std::to_string(start_.epoch) + ", batch " +
              std::to_string(start_.batch) + " (step " + std::to_string(start_.step) + ")");
  }
  step_ = start_.step;

  paths_ = prepare_run_directory(config_, context_, resumed_path);
  if (context_.is_main()) {
    RunDir(paths_.root.parent_path(), paths_.root.filename().string()).write_config(resolved_yaml_);
    log::info("run directory: " + paths_.root.string());
  }
  recorder_ = std::make_unique<RunRecorder>(config_, context_, paths_.root, has_validation_);
}

TrainingSession::~TrainingSession() = default;

double TrainingSession::mean_finite_loss(const at::Tensor& loss, int64_t epoch) const {
  // Every rank learns the global mean loss (for the log) and whether any rank diverged.
  at::Tensor value = loss.detach().to(torch::kCPU).to(torch::kDouble).reshape({1});
  context_.group->all_reduce(value);
  const double mean = value.item<double>() / static_cast<double>(context_.world_size());
  if (std::isfinite(mean)) return mean;
  const std::string where = "epoch " + std::to_string(epoch + 1) + ", step " + std::to_string(step_ + 1);
  const fs::path last = paths_.checkpoints / "last.ckpt";
  throw RuntimeError("the loss became " + std::string(std::isnan(mean) ? "NaN" : "infinite") + " at " +
                     where + "; training stopped before applying that step. " +
                     (fs::exists(last) ? "The last good checkpoint is " + last.string()
                                       : std::string("No checkpoint was written yet")) +
                     "; lower the learning rate or check the data");
}

void TrainingSession::optimizer_stepped() {
  ++step_;
  const auto& scheduling = config_.scheduling;
  if (parts_.scheduler && scheduling.scheduler_interval == "step" &&
      step_ % scheduling.scheduler_frequency == 0) {
    parts_.scheduler->step();
  }
}

double TrainingSession::lr() const { return parts_.optimizer->param_groups().at(0).options().get_lr(); }

void TrainingSession::log_step(int64_t epoch, nlohmann::json record) {
  if (!context_.is_main()) return;
  record["epoch"] = epoch;
  record["step"] = step_;
  record["lr"] = lr();
  recorder_->train_step(record);
}

void TrainingSession::save(const std::string& name, int64_t next_epoch, int64_t next_batch,
                           const std::map<std::string, double>& metrics) const {
  if (!context_.is_main()) return;
  io::Checkpoint checkpoint;
  checkpoint.state_dict = io::state_dict(*parts_.model);
  checkpoint.config = resolved_yaml_;
  checkpoint.epoch = next_epoch;
  checkpoint.step = step_;
  checkpoint.metrics = metrics;
  io::ResumeState resume;
  resume.optimizer = optim::save_optimizer_state(*parts_.optimizer);
  resume.scheduler = parts_.scheduler
                         ? parts_.scheduler->state()
                         : c10::IValue(c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get()));
  if (parts_.criterion) resume.criterion = io::state_dict(*parts_.criterion);
  resume.sampler_epoch = next_epoch;
  resume.sampler_batch = next_batch;
  resume.rng = optim::save_rng_state();
  checkpoint.resume = std::move(resume);
  io::save_checkpoint(paths_.checkpoints / name, checkpoint);
}

void TrainingSession::end_epoch(int64_t epoch, int64_t batches_done, int64_t batches_in_epoch, bool stopping,
                                const data::DataSplit& validation_split,
                                const std::function<metrics::EmbeddingMetricsResult()>& validate) {
  const bool epoch_done = batches_done >= batches_in_epoch;
  const int64_t next_epoch = epoch_done ? epoch + 1 : epoch;
  const int64_t next_batch = epoch_done ? 0 : batches_done;
  const auto& scheduling = config_.scheduling;
  const bool per_step = scheduling.scheduler_interval == "step";

  const bool last_epoch = epoch + 1 == config_.max_epochs || stopping;
  if (has_validation_ && ((epoch + 1) % config_.valid_period == 0 || last_epoch)) {
    const metrics::EmbeddingMetricsResult computed = validate();
    // Metrics are computed once (rank 0); every rank needs them to agree on "best".
    const std::string json = context_.is_main() ? nlohmann::json(computed.metrics).dump() : std::string();
    last_metrics_ = nlohmann::json::parse(context_.from_rank0(json)).get<std::map<std::string, double>>();
    const std::string& key = config_.metric_for_checkpointing;
    if (!last_metrics_.count(key)) {
      std::vector<std::string> keys;
      for (const auto& kv : last_metrics_) keys.push_back(kv.first);
      config_.source["metric_for_checkpointing"].fail("'" + key +
                                                      "' is not among the computed metrics: " + join(keys));
    }
    recorder_->validation(epoch, step_, computed, validation_split);
    if (context_.is_main())
      print_metrics_table(last_metrics_, "validation after epoch " + std::to_string(epoch + 1) + ":");
    if (parts_.scheduler && !per_step && parts_.scheduler->requires_metric()) {
      // reduce_on_plateau steps with the monitored value at validation epochs.
      parts_.scheduler->step(last_metrics_.at(scheduling.monitor_metric));
    }
    const double value = last_metrics_.at(key);
    if (improves(best_, value, config_.mode_for_checkpointing == "max")) {
      best_ = value;
      best_metrics_ = last_metrics_;
      save("best.ckpt", next_epoch, next_batch, last_metrics_);
    }
  }
  if (parts_.scheduler && !per_step && !parts_.scheduler->requires_metric() &&
      (epoch + 1) % scheduling.scheduler_frequency == 0) {
    parts_.scheduler->step();
  }
  std::map<std::string, double> carried = last_metrics_;
  if (best_) carried[best_key(config_)] = *best_;
  save("last.ckpt", next_epoch, next_batch, carried);
  context_.group->barrier();
}

void TrainingSession::finish() {
  recorder_->finish();
  if (!context_.is_main()) return;
  if (!best_metrics_.empty()) {
    print_metrics_table(best_metrics_, "best checkpoint (" + config_.metric_for_checkpointing +
                                           "): " + (paths_.checkpoints / "best.ckpt").string());
  }
  log::info("training finished after " + std::to_string(step_) + " steps; run directory " +
            paths_.root.string());
  log::info("run report: " + (paths_.root / "report.html").string());
}

}  // namespace oml::pipelines
