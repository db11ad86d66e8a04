// Example third-party plugin: `frequency_balance`, a P x K batch sampler that draws labels with
// probability proportional to (number of items of the label) ^ power.
//
//   plugins: [/path/to/libfrequency_sampler.so]
//   sampler: {name: frequency_balance, args: {n_labels: 8, n_instances: 4, power: 0.5}}
//
// power = 0 draws labels uniformly (like `balance`, but labels may repeat between batches),
// power = 1 draws them as often as drawing items uniformly would, and values in between (the
// default 0.5) soften the imbalance of long-tailed datasets without ignoring it. Negative
// powers favour rare labels.
//
// Like every component it comes in two phases (oml/registry/registry.h): a parse that reads and
// checks its args with no data at hand (so `oml-train` reports its mistakes with every other
// mistake of the config before any work), and a build that makes the sampler from the options
// and the data. Everything it uses comes from the installed oml-cpp headers: the sampler
// contract (oml/data/sampler.h), the portable generator (oml/data/sampler_rng.h), the args
// reader (oml/config/args_reader.h), argument errors that point at the key
// (oml/config/argument_error.h) and the plugin entry point (oml/registry/plugin.h).
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "oml/common/error.h"
#include "oml/config/args_reader.h"
#include "oml/config/argument_error.h"
#include "oml/data/sampler.h"
#include "oml/data/sampler_rng.h"
#include "oml/registry/plugin.h"

namespace example {

constexpr const char* kWhat = "sampler 'frequency_balance'";  // names the sampler in messages

struct FrequencyBalanceOptions {
  int64_t n_labels = 0;     ///< P: distinct labels per batch; 1 < P <= L
  int64_t n_instances = 0;  ///< K: items per label; K > 1
  double power = 0.5;       ///< label weight = count ^ power
  /// Batches per epoch; default L // P.
  std::optional<int64_t> epoch_size;
};

// What the args alone can tell; the parse runs it. Errors name their key, and the registry
// points them at the key in the config (file:line:column).
void check_options(const FrequencyBalanceOptions& options) {
  if (options.n_labels <= 1) {
    oml::config::fail_argument(kWhat, "n_labels", "n_labels must be > 1, got ", options.n_labels);
  }
  if (options.n_instances <= 1) {
    oml::config::fail_argument(kWhat, "n_instances", "n_instances must be > 1, got ", options.n_instances);
  }
  if (options.epoch_size && *options.epoch_size < 1) {
    oml::config::fail_argument(kWhat, "epoch_size", "epoch_size must be >= 1, got ", *options.epoch_size);
  }
}

class FrequencyBalanceSampler final : public oml::data::BatchSampler {
 public:
  FrequencyBalanceSampler(const oml::data::SamplerContext& context, const FrequencyBalanceOptions& options)
      : options_(options), seed_(context.seed) {
    OML_CHECK(!context.labels.empty(), DataError, "sampler 'frequency_balance': ", context.source,
              " has no rows to sample");
    // Rows of each label (labels are remapped to 0..L-1 by the pipeline).
    for (std::size_t row = 0; row < context.labels.size(); ++row) {
      const int64_t label = context.labels[row];
      OML_CHECK(label >= 0, DataError, "sampler 'frequency_balance': labels must be remapped to 0..L-1, got ",
                label);
      if (static_cast<std::size_t>(label) >= rows_.size()) rows_.resize(label + 1);
      rows_[label].push_back(static_cast<int64_t>(row));
    }
    for (std::size_t label = 0; label < rows_.size(); ++label) {
      OML_CHECK(rows_[label].size() >= 2, DataError, "sampler 'frequency_balance': label ",
                context.label_value(label), " has ", rows_[label].size(), " items in ", context.source,
                ", but every label needs at least 2");
    }
    const auto n_labels_total = static_cast<int64_t>(rows_.size());
    check_options(options);  // for callers that build it from code
    // An argument that does not fit the data: a DataError, pointed at the key like a parse error.
    if (options.n_labels > n_labels_total) {
      oml::config::fail_fit(kWhat, "n_labels", "n_labels must satisfy 1 < n_labels <= ", n_labels_total,
                            " (the labels of ", context.source, "), got ", options.n_labels);
    }
    epoch_size_ = options.epoch_size.value_or(n_labels_total / options.n_labels);

    double total = 0;
    for (const auto& rows : rows_) {
      total += std::pow(static_cast<double>(rows.size()), options.power);
      cumulative_.push_back(total);
    }
  }

  std::string name() const override { return "frequency_balance"; }
  int64_t size() const override { return epoch_size_; }
  int64_t batch_size() const override { return options_.n_labels * options_.n_instances; }

  std::vector<oml::data::Batch> batches(int64_t epoch) const override {
    oml::data::SamplerRng rng(seed_, epoch);  // the epoch depends on (seed, epoch) only
    std::vector<oml::data::Batch> out;
    for (int64_t b = 0; b < epoch_size_; ++b) {
      oml::data::Batch batch;
      for (int64_t label : draw_labels(rng)) {
        const auto items = rng.smart_sample(rows_[label], options_.n_instances);
        batch.insert(batch.end(), items.begin(), items.end());
      }
      out.push_back(std::move(batch));
    }
    return out;
  }

 private:
  // P distinct labels, each draw proportional to the weights of the labels not drawn yet.
  // Rejection on the cumulative weights costs O(P log L) per batch; when heavy weights make
  // rejections pile up, the exact O(L * P) draw takes over.
  std::vector<int64_t> draw_labels(oml::data::SamplerRng& rng) const {
    const auto p = static_cast<std::size_t>(options_.n_labels);
    std::vector<int64_t> labels;
    for (std::size_t attempts = 0; labels.size() < p && attempts < 64 * p; ++attempts) {
      const double target = rng.unit() * cumulative_.back();
      auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), target);
      if (it == cumulative_.end()) --it;
      const int64_t label = it - cumulative_.begin();
      if (std::find(labels.begin(), labels.end(), label) == labels.end()) labels.push_back(label);
    }
    if (labels.size() < p) {
      std::vector<double> weights;
      for (std::size_t l = 0; l < cumulative_.size(); ++l)
        weights.push_back(cumulative_[l] - (l ? cumulative_[l - 1] : 0));
      labels.clear();
      for (std::size_t label : rng.choose_weighted_distinct(weights, p))
        labels.push_back(static_cast<int64_t>(label));
    }
    return labels;
  }

  FrequencyBalanceOptions options_;
  int64_t seed_;
  int64_t epoch_size_ = 0;
  std::vector<std::vector<int64_t>> rows_;
  std::vector<double> cumulative_;
};

// Phase 1: args -> options. Pure: no data, nothing opened. Each problem is collected and reading
// goes on; keys never read are reported as unknown after it returns.
FrequencyBalanceOptions parse_frequency_balance(oml::config::ArgsReader& reader) {
  FrequencyBalanceOptions options;
  reader.required("n_labels", options.n_labels)
      .required("n_instances", options.n_instances)
      .optional("power", options.power)
      .optional("epoch_size", options.epoch_size);
  reader.check([&] { check_options(options); });
  return options;
}

// Phase 2: options + the data -> the sampler.
std::shared_ptr<oml::data::Sampler> build_frequency_balance(const FrequencyBalanceOptions& options,
                                                            const oml::data::SamplerContext& context) {
  return std::make_shared<FrequencyBalanceSampler>(context, options);
}

void register_components(oml::Registries& registries) {
  registries.samplers.add("frequency_balance", parse_frequency_balance, build_frequency_balance,
                          "P x K batches, labels drawn with probability ~ count^power; args: n_labels, "
                          "n_instances, power=0.5, epoch_size=L//P");
}

}  // namespace example

OML_PLUGIN("frequency_sampler", "1.0.0", example::register_components)
