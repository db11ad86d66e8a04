// nmi and ami (docs/metrics.md#nmi-and-ami, PML's AccuracyCalculator "NMI" and "AMI"): the query
// embeddings clustered by Faiss's k-means into as many clusters as they have labels, compared
// with the labels; over all queries and over each category's. Without Faiss they are refused
// when the config is read (exit 2).
#include <torch/torch.h>

#include <set>

#include "builtin_metrics.h"
#include "oml/common/logging.h"
#include "oml/config/argument_error.h"
#include "oml/metrics/clustering.h"

namespace oml::metrics::builtin {

namespace {

using LabelAgreement = double (*)(const std::vector<int64_t>& labels, const std::vector<int64_t>& clusters);

class ClusteringMetric final : public Metric {
 public:
  ClusteringMetric(std::string name, LabelAgreement agreement)
      : name_(std::move(name)), agreement_(agreement) {}

  std::vector<std::string> names() const override { return {name_}; }

  MetricValues compute(const MetricInputs& inputs) const override {
    MetricValues values;
    for (const auto& [group, queries] : queries_by_group(inputs)) {
      std::vector<int64_t> rows;
      std::vector<int64_t> labels;
      for (const int64_t q : queries) {
        rows.push_back(inputs.query_rows[q]);
        labels.push_back(inputs.set.labels[inputs.query_rows[q]]);
      }
      const auto num_labels = static_cast<int64_t>(std::set<int64_t>(labels.begin(), labels.end()).size());
      const at::Tensor embeddings = inputs.set.embeddings.index_select(0, torch::tensor(rows, torch::kLong));
      values.values[group + "/" + name_] = agreement_(labels, kmeans_clusters(embeddings, num_labels));
    }
    return values;
  }

 private:
  std::string name_;
  LabelAgreement agreement_;
};

// The switch `key` (PML: `alias`), refused in a build without Faiss.
bool read_clustering_switch(config::ArgsReader& args, const std::string& key, const std::string& alias) {
  const bool on = read_switch(args, key, alias);
  args.check([&] {
    config::check_argument(!on || kmeans_available(), "metric '" + key + "'", key,
                           "clusters with Faiss's k-means, and this oml-cpp was built without Faiss; install "
                           "libfaiss-dev (scripts/setup.sh) and rebuild");
  });
  return on;
}

std::shared_ptr<Metric> clustering_metric(const std::string& name, bool on, LabelAgreement agreement) {
  if (!on) return nullptr;
  return std::make_shared<ClusteringMetric>(name, agreement);
}

}  // namespace

bool parse_nmi(config::ArgsReader& args) { return read_clustering_switch(args, "nmi", "NMI"); }

std::shared_ptr<Metric> build_nmi(const bool& on, const NoContext&) {
  return clustering_metric("nmi", on, normalized_mutual_info);
}

bool parse_ami(config::ArgsReader& args) { return read_clustering_switch(args, "ami", "AMI"); }

std::shared_ptr<Metric> build_ami(const bool& on, const NoContext&) {
  return clustering_metric("ami", on, adjusted_mutual_info);
}

}  // namespace oml::metrics::builtin
