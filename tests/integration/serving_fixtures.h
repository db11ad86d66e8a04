#pragma once
// What the tests of oml-index, oml-search and oml-serve share: a gallery and queries from the
// Fashion-MNIST subset, a small model with its predict config, and readers.
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "oml/data/csv.h"
#include "oml/models/conv_net.h"
#include "pipeline_fixtures.h"
#include "support/support.h"

namespace oml::test {

namespace fs = std::filesystem;

/// `count` rows of the subset from row `first`, as a dataframe with absolute paths.
inline fs::path subset_rows(const fs::path& dir, const std::string& name, std::size_t first,
                            std::size_t count) {
  const auto records = oml::data::parse_csv(read_file(fashion_mnist_subset() / "df.csv"), "df.csv");
  const auto& header = records.front().fields;
  const auto column = [&](const std::string& key) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), key) - header.begin());
  };
  std::ostringstream out;
  out << "label,path,split,is_query,is_gallery\n";
  for (std::size_t r = 1 + first; r < records.size() && r < 1 + first + count; ++r) {
    const auto& f = records[r].fields;
    out << f[column("label")] << ',' << (fashion_mnist_subset() / f[column("path")]).string()
        << ",validation,True,True\n";
  }
  write_file(dir / name, out.str());
  return dir / name;
}

/// A model file and the predict config that names it.
struct Model {
  fs::path weights;
  fs::path config;
};

/// A conv net with seeded random weights and a predict config naming it (and `backend`).
inline Model model(const fs::path& dir, const std::string& backend = "{name: exact}") {
  torch::manual_seed(17);
  oml::models::ConvNetOptions options;
  options.channels = {8, 16};
  options.feat_dim = 16;
  const oml::models::ConvNet net(options);
  Model m{dir / "model.pth", dir / "predict.yaml"};
  write_state_dict_file(m.weights, *net);
  write_file(m.config,
             "num_threads: 1\nnum_workers: 0\nbatch_size_inference: 64\nweights: " + m.weights.string() +
                 "\ntransforms_predict: {name: norm}\n"
                 "extractor: {name: conv_net, args: {channels: [8, 16], feat_dim: 16}}\n"
                 "retrieval_backend: " +
                 backend + "\n");
  return m;
}

/// oml-index build of `gallery` (a dataframe) through `m` into `out`.
inline CommandResult build_index(const Model& m, const fs::path& gallery, const fs::path& out,
                                 const std::string& extra = "") {
  return run_oml("oml-index", "build --config " + quote(m.config.string()) +
                                  " --set dataset_root=" + quote(gallery.parent_path().string()) +
                                  " --set dataframe_name=" + quote(gallery.filename().string()) + " --out " +
                                  quote(out.string()) + " " + extra);
}

/// A CSV file's records (the header first).
inline std::vector<std::vector<std::string>> csv_rows(const fs::path& file) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : oml::data::parse_csv(read_file(file), file.string())) rows.push_back(r.fields);
  return rows;
}

}  // namespace oml::test
