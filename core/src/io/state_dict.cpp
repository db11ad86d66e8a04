#include "oml/io/state_dict.h"

#include <torch/torch.h>

#include <sstream>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/io/torch_file.h"

namespace oml::io {
namespace {

bool is_tensor_dict(const c10::IValue& value) {
  if (!value.isGenericDict()) return false;
  const auto dict = value.toGenericDict();
  if (dict.size() == 0) return false;
  for (const auto& kv : dict) {
    if (!kv.key().isString() || !kv.value().isTensor()) return false;
  }
  return true;
}

std::string shape(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

// Key prefixes that wrappers add: DataParallel/DDP (`module.`), Lightning and OML (`model.`),
// extractor wrappers (`extractor.`), and OML's Lightning checkpoint of a ResnetExtractor, whose
// torchvision network is its `model` (`model.model.`).
const std::vector<std::string> kPrefixes = {
    "",           "module.",          "model.",        "model.module.",
    "extractor.", "model.extractor.", "module.model.", "model.model."};

// The subset of `weights` under the prefix that matches the module's names best.
StateDict select_prefix(const StateDict& weights, const StateDict& expected) {
  StateDict best;
  std::size_t best_matches = 0;
  bool first = true;
  for (const auto& prefix : kPrefixes) {
    StateDict candidate;
    std::size_t matches = 0;
    for (const auto& kv : weights) {
      if (!starts_with(kv.first, prefix)) continue;
      const std::string name = kv.first.substr(prefix.size());
      matches += expected.count(name);
      candidate.emplace(name, kv.second);
    }
    if (first || matches > best_matches) {
      best = std::move(candidate);
      best_matches = matches;
      first = false;
    }
  }
  return best;
}

std::string listing(const std::vector<std::string>& names, std::size_t limit = 20) {
  std::vector<std::string> head(names.begin(), names.begin() + std::min(limit, names.size()));
  std::string out = join(head);
  if (names.size() > limit) out += ", ... (" + std::to_string(names.size()) + " in total)";
  return out;
}

}  // namespace

StateDict state_dict(const torch::nn::Module& module) {
  StateDict out;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) out.emplace(p.key(), p.value());
  for (const auto& b : module.named_buffers(/*recurse=*/true)) out.emplace(b.key(), b.value());
  return out;
}

StateDict find_state_dict(const c10::IValue& content, const std::string& source) {
  c10::IValue candidate = content;
  if (content.isGenericDict()) {
    const auto dict = content.toGenericDict();
    const auto found = dict.find(c10::IValue(std::string("state_dict")));
    if (found != dict.end()) candidate = found->value();
  }
  if (!is_tensor_dict(candidate) && candidate.isGenericDict()) {
    // Mostly tensors under names: a state dict with one entry of another kind, named (a sparse
    // tensor is read as the pieces it was saved from).
    std::size_t tensors = 0;
    std::string other;
    for (const auto& kv : candidate.toGenericDict()) {
      if (kv.key().isString() && kv.value().isTensor()) {
        ++tensors;
      } else if (other.empty() && kv.key().isString()) {
        other = "'" + kv.key().toStringRef() + "'";
      }
    }
    OML_CHECK(tensors == 0 || other.empty(), DataError, source, ": a state dict whose entry ", other,
              " is not a dense tensor (a sparse or quantized tensor? save it with .to_dense() or "
              ".dequantize())");
  }
  OML_CHECK(
      is_tensor_dict(candidate), DataError, source,
      ": expected a state dict (a dict of name -> tensor) or a dict with a 'state_dict' entry, found a ",
      content.tagKind());
  StateDict out;
  for (const auto& kv : candidate.toGenericDict()) out.emplace(kv.key().toStringRef(), kv.value().toTensor());
  return out;
}

StateDict select_backbone(const StateDict& weights, const std::string& trial_key, const std::string& source) {
  const std::string* best = nullptr;
  for (const auto& kv : weights) {
    if (!ends_with(kv.first, trial_key)) continue;
    const std::string prefix = kv.first.substr(0, kv.first.size() - trial_key.size());
    // `model.norm.bias` is a backbone's final norm; `blocks.0.xnorm.bias` is not.
    if (!prefix.empty() && prefix.back() != '.') continue;
    if (best == nullptr || kv.first.size() < best->size()) best = &kv.first;
  }
  if (best == nullptr) {
    std::vector<std::string> names;
    for (const auto& kv : weights) names.push_back(kv.first);
    DataError error(source + ": no backbone found: no key ends with '" + trial_key + "' (" +
                    std::to_string(weights.size()) + " keys)");
    error.add_context("its keys: " + listing(names, 8));
    throw error;
  }
  const std::string prefix = best->substr(0, best->size() - trial_key.size());
  StateDict out;
  for (const auto& kv : weights) {
    if (starts_with(kv.first, prefix)) out.emplace(kv.first.substr(prefix.size()), kv.second);
  }
  return out;
}

void load_state_dict(torch::nn::Module& module, StateDict weights, const std::string& source,
                     const LoadOptions& options) {
  StateDict expected = state_dict(module);
  StateDict chosen = select_prefix(weights, expected);
  if (const auto* legacy = dynamic_cast<const LegacyNames*>(&module))
    chosen = legacy->upgrade_names(std::move(chosen));
  for (auto it = chosen.begin(); it != chosen.end();) {
    bool ignored = false;
    for (const auto& prefix : options.ignore_prefixes) ignored = ignored || starts_with(it->first, prefix);
    it = ignored ? chosen.erase(it) : std::next(it);
  }
  std::vector<std::string> missing, unexpected, shapes, dtypes;
  const auto kind = [](const at::Tensor& t) {
    return t.is_floating_point() ? 0 : t.scalar_type() == at::kBool ? 1 : t.is_complex() ? 2 : 3;
  };
  for (const auto& kv : expected) {
    const auto found = chosen.find(kv.first);
    if (found == chosen.end()) {
      missing.push_back(kv.first);
    } else if (found->second.sizes() != kv.second.sizes()) {
      shapes.push_back(kv.first + " (file " + shape(found->second) + ", model " + shape(kv.second) + ")");
    } else if (kind(found->second) != kind(kv.second)) {
      // Floats convert to the model's float type; integers or booleans into a float weight (or
      // floats into a counter) would be converted into numbers that mean something else.
      dtypes.push_back(kv.first + " (file " + c10::toString(found->second.scalar_type()) + ", model " +
                       c10::toString(kv.second.scalar_type()) + ")");
    }
  }
  for (const auto& kv : chosen) {
    if (!expected.count(kv.first)) unexpected.push_back(kv.first);
  }
  if (!missing.empty() || !unexpected.empty() || !shapes.empty() || !dtypes.empty()) {
    DataError error(
        source + ": the weights do not fit the model (" + std::to_string(missing.size()) + " missing, " +
        std::to_string(unexpected.size()) + " unexpected, " + std::to_string(shapes.size()) +
        " with another shape" +
        (dtypes.empty() ? "" : ", " + std::to_string(dtypes.size()) + " of another kind of type") + ")");
    if (!missing.empty()) error.add_context("missing in the file: " + listing(missing));
    if (!unexpected.empty()) error.add_context("unexpected in the file: " + listing(unexpected));
    if (!shapes.empty()) error.add_context("shape differs: " + listing(shapes));
    if (!dtypes.empty())
      error.add_context("integer, boolean or float where the model has another: " + listing(dtypes));
    throw error;
  }
  torch::NoGradGuard no_grad;
  for (auto& kv : expected) {
    const auto& src = chosen.at(kv.first);
    kv.second.copy_(src.to(kv.second.device(), kv.second.scalar_type()));
  }
}

void load_weights(torch::nn::Module& module, const std::filesystem::path& path, const LoadOptions& options) {
  const auto content = read_torch_file(path);
  load_state_dict(module, find_state_dict(content, path.string()), path.string(), options);
}

}  // namespace oml::io
