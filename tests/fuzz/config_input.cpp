#include "fuzz/config_input.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <functional>
#include <set>
#include <stdexcept>

#include "support/support.h"

namespace oml::fuzz {

namespace {

// What --set values look like when they go wrong: YAML fragments, references, edge numbers.
const std::vector<std::string>& override_values() {
  static const std::vector<std::string> values{"",
                                               "~",
                                               "null",
                                               "true",
                                               "no",
                                               "[",
                                               "]",
                                               "{",
                                               "}",
                                               "[1, 2]",
                                               "[]",
                                               "{}",
                                               "{name: x}",
                                               "{name: balance, args: {n_labels: 2, n_instances: 2}}",
                                               "{name: norm}",
                                               "{name: adam, args: {lr: 0.1}}",
                                               "&a 3",
                                               "*a",
                                               "[&a x, *a]",
                                               "{a: &b {c: 1}, d: *b}",
                                               "{<<: {x: 1}}",
                                               "${max_epochs}",
                                               "${seed}",
                                               "${nope}",
                                               "${",
                                               "${}",
                                               "x${seed}y",
                                               "'${seed}'",
                                               "\"",
                                               "'",
                                               "- x",
                                               "a: b",
                                               ": ",
                                               "\t",
                                               "? x",
                                               "!!int 3",
                                               "!!str 3",
                                               "!!binary AAAA",
                                               "!tag x",
                                               "|\n  text",
                                               ">\n  text",
                                               "OVERALL/cmc/1",
                                               "OVERALL/map/5",
                                               "cpu",
                                               "cuda",
                                               "step",
                                               "epoch",
                                               "max",
                                               "min",
                                               "pairwise",
                                               "extractor",
                                               "/nonexistent",
                                               ".",
                                               "..",
                                               "a,b",
                                               "=",
                                               "==",
                                               "x=y"};
  return values;
}

// Keys that exist in no seed, or that walk into lists and values.
const std::vector<std::string>& unusual_keys() {
  static const std::vector<std::string> keys{"",
                                             ".",
                                             "a..b",
                                             "a.",
                                             ".a",
                                             "hydra",
                                             "defaults",
                                             "plugins",
                                             "0",
                                             "unknown",
                                             "sampler.args.n_labels.x",
                                             "metric_args.cmc_top_k.0",
                                             "metric_args.cmc_top_k.9",
                                             "extractor.args.channels.1",
                                             "extractor.args.channels.99",
                                             "scheduling.scheduler.args.warmup_steps",
                                             "scheduling.monitor_metric",
                                             "ddp.bucket_mb",
                                             "ddp.timeout_s",
                                             "ddp.check_params_every",
                                             "ddp.gradient_compression",
                                             "logger",
                                             "logger.name",
                                             "seed.x",
                                             "<<",
                                             "max_steps",
                                             "metric_args.fmr_vals",
                                             "metric_args.pcf_variance",
                                             " max_epochs ",
                                             "max_epochs\n",
                                             "sampler.name.0"};
  return keys;
}

void collect_paths(const YAML::Node& node, const std::string& prefix, std::set<std::string>& out) {
  if (node.IsMap()) {
    for (const auto& item : node) {
      if (!item.first.IsScalar()) continue;
      const std::string path = prefix.empty() ? item.first.Scalar() : prefix + "." + item.first.Scalar();
      out.insert(path);
      collect_paths(item.second, path, out);
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      const std::string path = prefix + "." + std::to_string(i);
      out.insert(path);
      collect_paths(node[i], path, out);
    }
  }
}

// Small configs whose features the shipped ones do not use: anchors and aliases, merge keys,
// ${...} references, other components.
const char* const kHandWrittenSeeds[] = {
    R"(pipeline: extractor
seed: 7
dataset_root: data/x
postfix: run-${seed}
transforms_train: &norm {name: norm}
transforms_val: *norm
sampler: {name: balance, args: &pk {n_labels: 4, n_instances: 4}}
extractor: {name: conv_net, args: {channels: [8, 16], feat_dim: 16}}
criterion: {name: triplet_with_miner, args: {margin: 0.2, miner: {name: hard_triplets}}}
optimizer: {name: sgd, args: {lr: 0.1, momentum: 0.9}}
scheduling:
  scheduler: {name: reduce_on_plateau, args: {factor: 0.5}}
  monitor_metric: ${metric_for_checkpointing}
max_epochs: 3
metric_args: {cmc_top_k: [1, 2], map_top_k: [2], fmr_vals: [0.1], pcf_variance: [0.5]}
metric_for_checkpointing: OVERALL/cmc/2
ddp: {shuffle_between_ranks: true, bucket_mb: 1.5}
)",
    R"(base: &base {name: adam, args: {lr: 0.01}}
)",
    R"(pipeline: extractor
dataset_root: data/y
sampler: &s
  name: category_balance
  args: {n_categories: 2, n_labels: 2, n_instances: 2}
extractor:
  name: conv_net
  args: &net {channels: [4], feat_dim: 8}
criterion: {name: arcface, args: {m: 0.3, s: 16}}
optimizer:
  <<: {name: adamw}
  args: {lr: 0.001, weight_decay: 0.01}
scheduling:
  scheduler: {name: cosine_annealing, args: {warmup_steps: 2, eta_min: 0.0}}
  scheduler_interval: epoch
  scheduler_frequency: 2
max_steps: 10
bs_train: 8
logger: {name: none}
)",
    R"(pipeline: pairwise
dataset_root: data/z
weights: w.ckpt
extractor: {name: conv_net, args: {channels: [4], feat_dim: 8}}
pairwise_model: {name: linear_siamese, args: {feat_dim: 8}}
postprocessor: {name: pairwise_reranker, args: {top_n: 3}}
optimizer: {name: rmsprop, args: {lr: 0.001}}
scheduling: {scheduler: {name: multi_step, args: {milestones: [1, 2], gamma: 0.5}}}
sampler: {name: distinct_category_balance, args: {n_categories: 1, n_labels: 2, n_instances: 2, epoch_size: 3}}
)",
};

}  // namespace

std::string encode(const ConfigInput& input) {
  std::string out = std::to_string(input.overrides.size()) + "\n";
  for (const auto& flag : input.overrides) out += std::to_string(flag.size()) + "\n" + flag;
  return out + input.yaml;
}

ConfigInput decode_config(const std::string& bytes) {
  std::size_t pos = 0;
  const auto number = [&]() {
    const std::size_t nl = bytes.find('\n', pos);
    if (nl == std::string::npos) throw std::invalid_argument("not a fuzz config input");
    const std::size_t value = std::stoul(bytes.substr(pos, nl - pos));
    pos = nl + 1;
    return value;
  };
  ConfigInput out;
  const std::size_t count = number();
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t size = number();
    if (pos + size > bytes.size()) throw std::invalid_argument("truncated fuzz config input");
    out.overrides.push_back(bytes.substr(pos, size));
    pos += size;
  }
  out.yaml = bytes.substr(pos);
  return out;
}

std::vector<std::string> config_seeds() {
  std::vector<std::string> yaml;
  for (const auto& entry : fs::directory_iterator(test::source_path("configs/fashion_mnist"))) {
    if (entry.path().extension() == ".yaml") yaml.push_back(test::read_file(entry.path()));
  }
  std::sort(yaml.begin(), yaml.end());  // directory order is not deterministic
  for (const char* text : kHandWrittenSeeds) yaml.emplace_back(text);
  std::vector<std::string> seeds;
  for (const auto& text : yaml) seeds.push_back(encode({text, {}}));
  seeds.push_back(
      encode({yaml.front(), {"max_epochs=2", "sampler.args.n_labels=4", "extractor.args.weights="}}));
  seeds.push_back(encode({yaml.back(), {"optimizer.args={lr: 0.5}", "metric_args.cmc_top_k=[1, 3]"}}));
  return seeds;
}

const std::vector<std::string>& yaml_dictionary() {
  static const std::vector<std::string> tokens{"&a ",
                                               "*a",
                                               "<<: *a",
                                               "<<: [*a, *b]",
                                               "&b ",
                                               "*b",
                                               "[",
                                               "]",
                                               "{",
                                               "}",
                                               "- ",
                                               ": ",
                                               ":",
                                               ",",
                                               "'",
                                               "\"",
                                               "\t",
                                               "~",
                                               "null",
                                               "#",
                                               "\n",
                                               "\n  ",
                                               "\n    ",
                                               "? ",
                                               "!!str ",
                                               "!!int ",
                                               "!!map ",
                                               "!!seq ",
                                               "!tag ",
                                               "|",
                                               ">",
                                               "%YAML 1.2\n",
                                               "---\n",
                                               "...\n",
                                               "${",
                                               "}",
                                               "${seed}",
                                               "${max_epochs}",
                                               "${a.b}",
                                               "${sampler.args}",
                                               "${metric_args.cmc_top_k.0}",
                                               "\\",
                                               "\\u0000",
                                               "\xEF\xBB\xBF",
                                               "\xC3\x28",
                                               "@",
                                               "`",
                                               "true",
                                               "false",
                                               "yes",
                                               "Off",
                                               "name: ",
                                               "args: ",
                                               "args: {",
                                               "{name: norm}",
                                               "plugins: [x.so]\n",
                                               "hydra: {}\n",
                                               "defaults: []\n",
                                               "999999999999999999999999",
                                               "1e999",
                                               "-9223372036854775809",
                                               ".nan",
                                               ".inf",
                                               "OVERALL/cmc/1",
                                               "OVERALL/",
                                               "cmc_top_k: [",
                                               "weights: "};
  return tokens;
}

std::vector<std::string> config_key_paths(const std::vector<std::string>& seeds) {
  std::set<std::string> paths;
  for (const auto& seed : seeds) {
    try {
      collect_paths(YAML::Load(decode_config(seed).yaml), "", paths);
    } catch (const YAML::Exception&) {
    }
  }
  std::vector<std::string> out(paths.begin(), paths.end());
  out.insert(out.end(), unusual_keys().begin(), unusual_keys().end());
  return out;
}

std::string mutate_config(Mutator& mutator, const std::string& input, const std::vector<std::string>& corpus,
                          const std::vector<std::string>& keys) {
  ConfigInput config = decode_config(input);
  const std::size_t what = mutator.below(10);
  if (what < 7) {  // the file
    const std::vector<std::string> partner{decode_config(mutator.pick(corpus)).yaml};
    config.yaml = mutator.mutate(config.yaml, partner);
  }
  if (what >= 6) {  // the flags (both for 6)
    auto& flags = config.overrides;
    const std::size_t op = mutator.below(5);
    if (op <= 2 || flags.empty()) {
      std::string key = mutator.pick(keys);
      if (mutator.chance(0.25)) key = mutator.mutate(key, keys);
      std::string value = mutator.pick(override_values());
      if (mutator.chance(0.3)) value = mutator.pick(interesting_numbers());
      if (mutator.chance(0.25)) value = mutator.mutate(value, override_values());
      flags.insert(flags.begin() + static_cast<std::ptrdiff_t>(mutator.below(flags.size() + 1)),
                   mutator.chance(0.97) ? key + "=" + value : key + value);
    } else if (op == 3) {
      flags.erase(flags.begin() + static_cast<std::ptrdiff_t>(mutator.below(flags.size())));
    } else {
      std::string& flag = flags[mutator.below(flags.size())];
      flag = mutator.mutate(flag, override_values());
    }
    if (flags.size() > 6) flags.resize(6);
  }
  return encode(config);
}

std::string describe_config(const std::string& input) {
  std::string out = "  --set flags:";
  for (const auto& flag : decode_config(input).overrides) out += " --set " + test::quote(flag);
  return out;
}

}  // namespace oml::fuzz
