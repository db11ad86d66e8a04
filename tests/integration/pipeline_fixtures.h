#pragma once
// What the pipeline integration tests share: small training/validation configs over the
// Fashion-MNIST subset (fashion_mnist_subset() in support.h), and readers for run directories.
#include <torch/torch.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/support.h"

namespace oml::test {

namespace fs = std::filesystem;

// A small, fast training config over the subset (constant lr, so a resumed run can be compared
// step by step with an uninterrupted one).
inline std::string train_config(const fs::path& logs, const std::string& extra = "") {
  return "pipeline: extractor\nseed: 3\nnum_threads: 1\nnum_workers: 1\n"
         "dataset_root: " +
         fashion_mnist_subset().string() + "\nlogs_root: " + logs.string() +
         "\nrun_name: run\n"
         "transforms_train: {name: norm}\ntransforms_val: {name: norm}\n"
         "sampler: {name: balance, args: {n_labels: 5, n_instances: 4, epoch_size: 3}}\n"
         "extractor: {name: conv_net, args: {channels: [8, 16, 16], feat_dim: 16}}\n"
         "criterion: {name: triplet_with_miner, args: {margin: 0.2, miner: {name: hard_triplets}}}\n"
         "optimizer: {name: adam, args: {lr: 0.001}}\n"
         "max_epochs: 2\nvalid_period: 1\nbs_val: 64\n"
         "metric_args: {cmc_top_k: [1, 5], precision_top_k: [5], map_top_k: [5]}\n" +
         extra;
}

inline std::string validate_config(const fs::path& logs, const fs::path& weights) {
  return "dataset_root: " + fashion_mnist_subset().string() + "\nlogs_root: " + logs.string() +
         "\nrun_name: validation\n"
         "num_threads: 1\nnum_workers: 1\nbs_val: 64\nweights: " +
         weights.string() +
         "\n"
         "transforms_val: {name: norm}\n"
         "extractor: {name: conv_net, args: {channels: [8, 16, 16], feat_dim: 16}}\n"
         "metric_args: {cmc_top_k: [1, 5], precision_top_k: [5], map_top_k: [5]}\n";
}

inline std::vector<nlohmann::json> read_jsonl(const fs::path& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// A TCP port nobody listens on right now (bound and released), for a hand-made rendezvous.
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

inline nlohmann::json read_json(const fs::path& path) {
  return nlohmann::json::parse(oml::test::read_file(path));
}

// A metrics.json as oml-validate writes it: metric name -> value.
inline std::map<std::string, double> metrics_json(const fs::path& path) {
  return read_json(path).get<std::map<std::string, double>>();
}

// The metrics.jsonl record whose checkpoint metric is the best (what best.ckpt holds).
inline std::map<std::string, double> best_metrics(const fs::path& run) {
  std::map<std::string, double> best;
  for (const auto& record : read_jsonl(run / "metrics.jsonl")) {
    const auto metrics = record.at("metrics").get<std::map<std::string, double>>();
    if (best.empty() || metrics.at("OVERALL/cmc/1") > best.at("OVERALL/cmc/1")) best = metrics;
  }
  return best;
}

// The same metrics to 1e-6, except nmi / ami to 0.02: their k-means is discontinuous in the
// embeddings, which differ in the last bits between one process's threads and two ranks' (with
// Debian's OpenBLAS / oneDNN), and one point changing cluster moves them by a few 1e-3.
inline void check_same_metrics(const std::map<std::string, double>& a,
                               const std::map<std::string, double>& b) {
  REQUIRE_FALSE(a.empty());
  for (const auto& kv : a) {
    INFO(kv.first);
    REQUIRE(b.count(kv.first) == 1);
    const bool clustering = kv.first.size() > 4 && (kv.first.compare(kv.first.size() - 4, 4, "/nmi") == 0 ||
                                                    kv.first.compare(kv.first.size() - 4, 4, "/ami") == 0);
    CHECK(b.at(kv.first) == Approx(kv.second).margin(clustering ? 0.02 : 1e-6));
  }
}

/// Two runs' train.jsonl agree step by step: the same number of steps, the same `key` (such as
/// "step" or "pairs") and the same loss — what a resumed run must show against an uninterrupted one.
inline void check_same_training_log(const fs::path& a, const fs::path& b, const std::string& key) {
  const auto first = read_jsonl(a);
  const auto second = read_jsonl(b);
  REQUIRE(first.size() == second.size());
  for (std::size_t i = 0; i < first.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(second[i].at(key) == first[i].at(key));
    CHECK(second[i].at("loss").get<double>() == Approx(first[i].at("loss").get<double>()).epsilon(1e-6));
  }
}

}  // namespace oml::test
