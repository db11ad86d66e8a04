#pragma once
// Named tensors of a module (parameters + buffers) and loading them from files with a report of
// every mismatch.

#include <ATen/core/ivalue.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace oml::io {

/// name -> tensor, names as PyTorch spells them (`layer1.0.bn1.running_mean`).
using StateDict = std::map<std::string, at::Tensor>;

/// Parameters and buffers of `module` (the tensors themselves, not copies).
StateDict state_dict(const torch::nn::Module& module);

/// The state dict inside an unpickled file: the value itself when it is a dict of tensors, or
/// its `state_dict` entry (oml-cpp checkpoints, Lightning checkpoints). DataError otherwise.
StateDict find_state_dict(const c10::IValue& content, const std::string& source);

/// The backbone inside a weights file, found as OML finds it (`find_prefix_in_state_dict`): the
/// prefix is what precedes `trial_key` in the shortest key that ends with it (e.g. `model.model.`
/// before `norm.bias` in an OML .ckpt, "" in a published DINO file). Entries under the prefix are
/// returned without it; the rest (criterion, heads) is dropped. DataError naming `source` and
/// listing a few of its keys when no key ends with `trial_key`.
StateDict select_backbone(const StateDict& weights, const std::string& trial_key, const std::string& source);

/// A module whose names changed implements this so that files written with its old names still
/// load (PyTorch's modules do the same in `_load_from_state_dict`): load_state_dict passes the
/// file's names, after the wrapper prefix is removed, through upgrade_names() before matching.
class LegacyNames {
 public:
  virtual ~LegacyNames() = default;
  virtual StateDict upgrade_names(StateDict weights) const = 0;
};

struct LoadOptions {
  /// Names starting with one of these are dropped from the file before matching
  /// (e.g. "fc." when loading a classifier into a resnet without fc).
  std::vector<std::string> ignore_prefixes;
};

/// Copies `weights` into `module` strictly: every module tensor must be present with the same
/// shape and no file tensor may be left over. A key prefix shared by the file's names
/// (`module.`, `model.`, `model.module.`, `extractor.`) is stripped when that makes the names
/// match. On mismatch throws DataError naming `source` and listing missing and unexpected
/// names and shape differences. A module that is LegacyNames renames old names first.
void load_state_dict(torch::nn::Module& module, StateDict weights, const std::string& source,
                     const LoadOptions& options = {});

/// read_torch_file + find_state_dict + load_state_dict.
void load_weights(torch::nn::Module& module, const std::filesystem::path& path,
                  const LoadOptions& options = {});

}  // namespace oml::io
