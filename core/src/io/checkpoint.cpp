#include "oml/io/checkpoint.h"

#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/io/torch_file.h"

namespace oml::io {
namespace {

using Dict = c10::impl::GenericDict;

Dict string_dict() { return Dict(c10::StringType::get(), c10::AnyType::get()); }

c10::IValue to_ivalue(const StateDict& state) {
  c10::Dict<std::string, at::Tensor> out;
  for (const auto& kv : state) out.insert(kv.first, kv.second.detach().cpu().contiguous());
  return out;
}

StateDict to_state_dict(const c10::IValue& value, const std::string& where) {
  OML_CHECK(value.isGenericDict(), DataError, where, ": expected a dict of tensors");
  StateDict out;
  for (const auto& kv : value.toGenericDict()) {
    OML_CHECK(kv.key().isString() && kv.value().isTensor(), DataError, where, ": expected a dict of tensors");
    out.emplace(kv.key().toStringRef(), kv.value().toTensor());
  }
  return out;
}

class DictView {
 public:
  DictView(const c10::IValue& value, std::string where) : where_(std::move(where)) {
    OML_CHECK(value.isGenericDict(), DataError, where_, ": expected a dict, found a ", value.tagKind());
    dict_ = value.toGenericDict();
  }
  bool has(const std::string& key) const { return dict_.contains(c10::IValue(key)); }
  c10::IValue get(const std::string& key) const {
    const auto found = dict_.find(c10::IValue(key));
    OML_CHECK(found != dict_.end(), DataError, where_, ": missing entry '", key, "'");
    return found->value();
  }
  int64_t integer(const std::string& key) const {
    const auto v = get(key);
    OML_CHECK(v.isInt(), DataError, where_, ": entry '", key, "' must be an integer, found a ", v.tagKind());
    return v.toInt();
  }
  at::Tensor tensor(const std::string& key) const {
    const auto v = get(key);
    OML_CHECK(v.isTensor(), DataError, where_, ": entry '", key, "' must be a tensor, found a ", v.tagKind());
    return v.toTensor();
  }
  const std::string& where() const { return where_; }

 private:
  Dict dict_{c10::AnyType::get(), c10::AnyType::get()};
  std::string where_;
};

bool is_checkpoint(const c10::IValue& content) {
  if (!content.isGenericDict()) return false;
  const auto dict = content.toGenericDict();
  const auto found = dict.find(c10::IValue(std::string("format")));
  return found != dict.end() && found->value().isString() &&
         found->value().toStringRef() == kCheckpointFormat;
}

}  // namespace

namespace {

c10::IValue checkpoint_value(const Checkpoint& checkpoint) {
  Dict out = string_dict();
  out.insert("format", std::string(kCheckpointFormat));
  out.insert("format_version", checkpoint.format_version);
  out.insert("state_dict", to_ivalue(checkpoint.state_dict));
  out.insert("config", checkpoint.config);
  out.insert("epoch", checkpoint.epoch);
  out.insert("step", checkpoint.step);
  c10::Dict<std::string, double> metrics;
  for (const auto& kv : checkpoint.metrics) metrics.insert(kv.first, kv.second);
  out.insert("metrics", metrics);
  if (checkpoint.resume) {
    const ResumeState& r = *checkpoint.resume;
    Dict resume = string_dict();
    if (r.optimizer.defined()) resume.insert("optimizer", r.optimizer.contiguous());
    resume.insert("scheduler", r.scheduler);
    resume.insert("criterion", to_ivalue(r.criterion));
    c10::Dict<std::string, int64_t> sampler;
    sampler.insert("epoch", r.sampler_epoch);
    sampler.insert("batch", r.sampler_batch);
    OML_ASSERT(r.sampler_consumed.has_value() == r.sampler_world_size.has_value(),
               "a sampler position needs both the items consumed and the world size");
    if (r.sampler_consumed) {
      sampler.insert("consumed", *r.sampler_consumed);
      sampler.insert("world_size", *r.sampler_world_size);
    }
    resume.insert("sampler", sampler);
    if (r.rng.defined()) resume.insert("rng", r.rng.contiguous());
    if (!r.grad_scaler.isNone()) resume.insert("grad_scaler", r.grad_scaler);
    if (!r.early_stopping.isNone()) resume.insert("early_stopping", r.early_stopping);
    if (!r.logger_run_id.empty()) resume.insert("logger_run_id", r.logger_run_id);
    if (r.training_time_s) resume.insert("training_time_s", *r.training_time_s);
    if (!r.best_k_models.empty()) {
      c10::Dict<std::string, double> best_k;
      for (const auto& [name, value] : r.best_k_models) best_k.insert(name, value);
      resume.insert("best_k_models", best_k);
    }
    out.insert("resume", resume);
  }
  return out;
}

}  // namespace

void save_checkpoint(const std::filesystem::path& path, const Checkpoint& checkpoint) {
  write_torch_file(path, checkpoint_value(checkpoint));
}

std::string checkpoint_bytes(const Checkpoint& checkpoint) {
  return torch_file_bytes(checkpoint_value(checkpoint));
}

Checkpoint load_checkpoint(const std::filesystem::path& path) {
  const std::string file = path.string();
  const auto content = read_torch_file(path);
  OML_CHECK(is_checkpoint(content), DataError, file,
            ": not an oml-cpp checkpoint (no format: ", kCheckpointFormat, ", found a ", content.tagKind(),
            "); plain PyTorch state dicts are accepted as model weights (`weights:`), not for resuming");
  DictView top(content, file);
  Checkpoint ckpt;
  ckpt.format_version = top.integer("format_version");
  OML_CHECK(ckpt.format_version >= 1 && ckpt.format_version <= kCheckpointVersion, DataError, file,
            ": checkpoint format_version ", ckpt.format_version, " is not supported by this build (reads 1..",
            kCheckpointVersion, "); use a newer oml-cpp");
  ckpt.state_dict = to_state_dict(top.get("state_dict"), file + ": state_dict");
  const auto config = top.get("config");
  OML_CHECK(config.isString(), DataError, file, ": entry 'config' must be a string");
  ckpt.config = config.toStringRef();
  ckpt.epoch = top.integer("epoch");
  ckpt.step = top.integer("step");
  const auto metrics = top.get("metrics");
  OML_CHECK(metrics.isGenericDict(), DataError, file, ": entry 'metrics' must be a dict");
  for (const auto& kv : metrics.toGenericDict()) {
    OML_CHECK(kv.key().isString() && (kv.value().isDouble() || kv.value().isInt()), DataError, file,
              ": entry 'metrics' must map names to numbers");
    ckpt.metrics[kv.key().toStringRef()] = kv.value().isDouble() ? kv.value().toDouble() : kv.value().toInt();
  }
  if (top.has("resume")) {
    DictView resume(top.get("resume"), file + ": resume");
    ResumeState r;
    if (resume.has("optimizer")) r.optimizer = resume.tensor("optimizer");
    r.scheduler = resume.get("scheduler");
    r.criterion = to_state_dict(resume.get("criterion"), file + ": resume.criterion");
    DictView sampler(resume.get("sampler"), file + ": resume.sampler");
    r.sampler_epoch = sampler.integer("epoch");
    r.sampler_batch = sampler.integer("batch");
    // Both or neither (earlier builds wrote neither); one alone is a damaged position.
    if (sampler.has("consumed") || sampler.has("world_size")) {
      r.sampler_consumed = sampler.integer("consumed");
      r.sampler_world_size = sampler.integer("world_size");
    }
    if (resume.has("rng")) r.rng = resume.tensor("rng");
    if (resume.has("grad_scaler")) r.grad_scaler = resume.get("grad_scaler");
    if (resume.has("early_stopping")) r.early_stopping = resume.get("early_stopping");
    if (resume.has("logger_run_id")) {
      const auto id = resume.get("logger_run_id");
      OML_CHECK(id.isString(), DataError, file, ": entry 'resume.logger_run_id' must be a string");
      r.logger_run_id = id.toStringRef();
    }
    if (resume.has("training_time_s")) {
      const auto seconds = resume.get("training_time_s");
      OML_CHECK(seconds.isDouble() && seconds.toDouble() >= 0, DataError, file,
                ": entry 'resume.training_time_s' must be a number of seconds >= 0");
      r.training_time_s = seconds.toDouble();
    }
    if (resume.has("best_k_models")) {
      const auto best_k = resume.get("best_k_models");
      OML_CHECK(best_k.isGenericDict(), DataError, file, ": entry 'resume.best_k_models' must be a dict");
      for (const auto& kv : best_k.toGenericDict()) {
        OML_CHECK(kv.key().isString() && kv.value().isDouble(), DataError, file,
                  ": entry 'resume.best_k_models' must map file names to numbers");
        // A name that leaves checkpoints/ (a damaged or crafted file) would make the run remove
        // files elsewhere when that checkpoint drops out of the top k.
        const std::string& name = kv.key().toStringRef();
        OML_CHECK(!name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos,
                  DataError, file, ": entry 'resume.best_k_models' names '", name,
                  "', which is not a file name of the run's checkpoints/ folder");
        r.best_k_models.emplace_back(name, kv.value().toDouble());
      }
    }
    ckpt.resume = std::move(r);
  }
  return ckpt;
}

}  // namespace oml::io
