#pragma once
// What the tests of text runs share: a text dataframe of 12 labels whose texts differ in length
// (so batches pad), the configs of a run over the tiny BERT of tests/support/text_fixtures.h, and
// the folder holding them. Nothing is downloaded.
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "integration/pipeline_fixtures.h"
#include "support/support.h"
#include "support/text_fixtures.h"

namespace oml::test {

inline const std::vector<std::string> kAdjectives = {"red", "blue",  "green", "small", "large",  "old",
                                                     "new", "quiet", "fast",  "slow",  "bright", "dark"};

// `words` joined by spaces. Appended one by one: GCC 12 warns falsely about "literal" + string.
inline std::string sentence(std::initializer_list<std::string_view> words) {
  std::string out;
  for (const std::string_view word : words) {
    if (!out.empty()) out += ' ';
    out += word;
  }
  return out;
}

// The text of label `label`'s item `item`: its topic word (one per label) among others, in texts of
// 3 to 11 tokens, so that every batch pads some of its texts. No two texts are the same.
inline std::string text_of(int label, int item) {
  const auto& words = tiny_text_words();  // the 12 topics come first
  const std::string topic = words[static_cast<std::size_t>(label)];
  const std::string other = words[static_cast<std::size_t>((label + 5) % 12)];
  const std::string first = kAdjectives[static_cast<std::size_t>((label + item) % 12)];
  const std::string second = kAdjectives[static_cast<std::size_t>((label + 3 * item + 1) % 12)];
  switch (item) {
    case 0:
      return sentence({"The", topic});
    case 1:
      return sentence({"a", first, topic + "s"});
    case 2:
      return sentence({"the", topic, "is very", second});
    default:
      return sentence({"A", first, "and", second, topic, "near the", other});
  }
}

// Labels 0-7 train (4 texts each), labels 8-11 validation (3 texts each, every one a query and a
// gallery item).
inline void write_text_dataframe(const fs::path& dir) {
  std::string csv = "label,text,split,is_query,is_gallery\n";
  for (int label = 0; label < 8; ++label) {
    for (int item = 0; item < 4; ++item) {
      csv += std::to_string(label);
      csv += ',';
      csv += text_of(label, item);
      csv += ",train,,\n";
    }
  }
  for (int label = 8; label < 12; ++label) {
    for (int item = 0; item < 3; ++item) {
      csv += std::to_string(label);
      csv += ',';
      csv += text_of(label, item);
      csv += ",validation,True,True\n";
    }
  }
  write_file(dir / "df.csv", csv);
}

inline const char* const kMetricArgs = "metric_args: {cmc_top_k: [1, 3], map_top_k: [3]}\n";

inline std::string text_train_config(const TempDir& dir) {
  return "pipeline: extractor\nseed: 3\nnum_threads: 1\nnum_workers: 1\n"
         "dataset_root: " +
         (dir / "data").string() + "\nlogs_root: " + (dir / "logs").string() +
         "\nrun_name: run\n"
         "sampler: {name: balance, args: {n_labels: 4, n_instances: 2, epoch_size: 3}}\n"
         "extractor: {name: hf_text_encoder, args: {model_dir: " +
         (dir / "model").string() +
         ", pooling: mean}}\n"
         "criterion: {name: triplet_with_miner, args: {margin: 0.2, miner: {name: hard_triplets}}}\n"
         "optimizer: {name: adam, args: {lr: 0.001}}\n"
         "max_epochs: 2\nvalid_period: 1\nbs_val: 5\n" +
         kMetricArgs;
}

// `weights` empty: the model folder's own (random) weights.
inline std::string text_validate_config(const TempDir& dir, const fs::path& weights) {
  return "dataset_root: " + (dir / "data").string() + "\nlogs_root: " + (dir / "logs").string() +
         "\nrun_name: validation\nnum_threads: 1\nnum_workers: 1\nbs_val: 5\n" +
         (weights.empty() ? std::string() : "weights: " + weights.string() + "\n") +
         "extractor: {name: hf_text_encoder, args: {model_dir: " + (dir / "model").string() +
         ", pooling: mean}}\n" + kMetricArgs;
}

// A folder with the tiny model, the text dataframe and both configs.
inline void write_text_run(const TempDir& dir) {
  write_tiny_text_model(dir / "model");
  write_text_dataframe(dir / "data");
  write_file(dir / "train.yaml", text_train_config(dir));
}

}  // namespace oml::test
