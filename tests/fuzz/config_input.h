#pragma once
// A fuzzed command-line config: the YAML file and its `--set key=value` flags, kept together in
// one input (and one saved file) so that a failure reproduces with both.
//
// Encoding: "<number of flags>\n", then per flag "<length>\n<bytes>", then the YAML text.

#include <string>
#include <vector>

#include "fuzz/fuzz.h"

namespace oml::fuzz {

struct ConfigInput {
  std::string yaml;
  std::vector<std::string> overrides;  ///< "key.path=value" as given to --set
};

std::string encode(const ConfigInput& input);
/// Inverse of encode(); std::invalid_argument for text it did not write.
ConfigInput decode_config(const std::string& bytes);

/// The shipped Fashion-MNIST configs (configs/fashion_mnist/*.yaml), plus small configs with
/// anchors, aliases, merge keys and ${...} references, and some with --set flags.
std::vector<std::string> config_seeds();

/// YAML tokens for the byte-level mutations.
const std::vector<std::string>& yaml_dictionary();

/// Mutates the YAML text, the --set flags, or both. `keys` are dotted key paths to aim flags at.
std::string mutate_config(Mutator& mutator, const std::string& input, const std::vector<std::string>& corpus,
                          const std::vector<std::string>& keys);

/// Every dotted key path of the seeds' YAML ("sampler.args.n_labels", "metric_args.cmc_top_k.0").
std::vector<std::string> config_key_paths(const std::vector<std::string>& seeds);

/// The --set flags of an input, quoted for a shell, for failure messages.
std::string describe_config(const std::string& input);

}  // namespace oml::fuzz
