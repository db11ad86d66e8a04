// Loader throughput (images/s) for the two paths of docs/benchmarks.md:
//   1. Fashion-MNIST: 28x28 grayscale PNGs -> `norm` -> [3, 28, 28]
//   2. generated 500x375 JPEGs -> each of --transforms at 224 -> [3, 224, 224]
// with 1 and 2 workers (--workers).
//
//   bench_loader [--fmnist DIR_WITH_IDX | --fmnist none] [--images N] [--workers 1,2]
//                [--transforms norm_resize,augs] [--keep-jpegs DIR]
//
// --transforms takes the names of the registry (OML's too: augs_torch, augs_albu, ...), each
// with im_size 224. --keep-jpegs writes the JPEGs and a df.csv of OML's columns into DIR (a new
// folder) and keeps them, for bench/loader_python.py to load the same files with OML 4.0 and
// torch's DataLoader.
#include <torch/torch.h>

#include <chrono>
#include <cstring>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "benchmark.h"
#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "oml/config/reader.h"
#include "oml/data/convert.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/image.h"
#include "oml/data/loader.h"
#include "oml/data/transform.h"
#include "oml/io/atomic_file.h"
#include "oml/registry/registries.h"
#include "shell/components.h"

namespace loader_benchmark {

namespace fs = std::filesystem;
using namespace oml::data;

namespace {

std::shared_ptr<Transform> transform(const std::string& yaml) {
  const auto doc = oml::config::Document::from_string(yaml, "bench");
  return oml::registries().transforms.create(oml::config::parse_component(doc.root(), "transform"));
}

std::vector<std::vector<int64_t>> batches_of(int64_t n, int64_t batch_size) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t start = 0; start < n; start += batch_size) {
    std::vector<int64_t> batch;
    for (int64_t i = start; i < std::min(n, start + batch_size); ++i) batch.push_back((i * 7919) % n);
    out.push_back(batch);
  }
  return out;
}

struct Throughput {
  double wall;  ///< images per wall-clock second
  double cpu;   ///< images per CPU-second of the whole process (robust to a busy machine)
};

// One pass after a warm-up pass (which fills the OS file cache).
Throughput measure(const std::shared_ptr<Dataset>& dataset, int workers, int64_t batch_size) {
  LoaderOptions options;
  options.num_workers = workers;
  options.seed = 1;
  const auto batches = batches_of(dataset->size(), batch_size);
  {
    Loader warm(dataset, batches, options);
    while (warm.next()) {
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const std::clock_t cpu_start = std::clock();
  int64_t images = 0;
  {
    Loader loader(dataset, batches, options);
    while (auto batch = loader.next()) images += batch->images.size(0);
  }
  const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {images / wall, images / cpu};
}

void report(const std::string& path, const std::string& transform_name,
            const std::shared_ptr<Dataset>& dataset, int64_t batch_size,
            const std::vector<int>& worker_counts) {
  for (int workers : worker_counts) {
    const Throughput t = measure(dataset, workers, batch_size);
    std::cout << "| " << path << " | " << transform_name << " | " << batch_size << " | " << workers << " | "
              << std::fixed << std::setprecision(0) << t.wall << " | " << t.cpu << " |" << std::endl;
  }
}

}  // namespace

OML_BENCHMARK(loader) {
  std::string fmnist = "/usr/share/datasets/fashion-mnist";
  int64_t n_jpeg = 400;
  std::vector<int> worker_counts{1, 2};
  std::vector<std::string> transforms{"norm_resize", "augs"};
  fs::path keep;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--fmnist")) fmnist = argv[i + 1];
    if (!std::strcmp(argv[i], "--images")) n_jpeg = std::stoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--transforms")) transforms = oml::split(argv[i + 1], ',');
    if (!std::strcmp(argv[i], "--keep-jpegs")) keep = argv[i + 1];
    if (!std::strcmp(argv[i], "--workers")) {
      worker_counts.clear();
      for (const auto& w : oml::split(argv[i + 1], ',')) worker_counts.push_back(std::stoi(w));
    }
  }
  if (!keep.empty() && fs::exists(keep)) {
    std::cerr << "bench_loader: --keep-jpegs " << keep << " exists; give a new folder" << std::endl;
    return 2;
  }
  oml::cli::register_builtins();
  torch::set_num_threads(1);
  const fs::path work = oml::io::temporary_sibling(fs::temp_directory_path() / "oml-bench-loader");
  fs::create_directories(work);

  std::cout << "| path | transform | batch | workers | images/s | images per CPU-second "
               "|\n|---|---|---|---|---|---|"
            << std::endl;
  // 1. Fashion-MNIST PNGs (the first 10,000 train images).
  if (fmnist != "none") {
    ConvertOptions convert;
    convert.src = fmnist;
    convert.dst = work / "fmnist";
    convert.limit = 10000;
    convert_dataset("fashion-mnist", convert);
    const auto df = Dataframe::read(work / "fmnist" / "df.csv");
    report("Fashion-MNIST 28x28 PNG", "norm",
           std::make_shared<ImageDataset>(df.train(), transform("name: norm")), 256, worker_counts);
  }

  // 2. Generated 500x375 JPEGs (smooth gradients plus noise, ~quality 90 camera-like files).
  const fs::path jpeg_dir = keep.empty() ? work / "jpeg" : keep;
  DataSplit split;
  std::string df_csv = "label,path,split,is_query,is_gallery\n";
  for (int64_t i = 0; i < n_jpeg; ++i) {
    const auto y = torch::linspace(0, 1, 375).view({375, 1, 1});
    const auto x = torch::linspace(0, 1, 500).view({1, 500, 1});
    const auto colour = torch::rand({1, 1, 3});
    auto image =
        (y * 120 + x * 100 + colour * 35 + torch::rand({375, 500, 3}) * 40).clamp(0, 255).to(torch::kUInt8);
    const fs::path path = jpeg_dir / (std::to_string(i) + ".jpg");
    fs::create_directories(path.parent_path());
    oml::io::write_file_atomic(path, encode_image(image, path.string(), 90));
    split.paths.push_back(path.string());
    split.lines.push_back(i + 2);
    df_csv += std::to_string(i % 10) + "," + path.filename().string() + ",train,,\n";
  }
  if (!keep.empty()) oml::io::write_file_atomic(keep / "df.csv", df_csv);
  for (const auto& name : transforms) {
    report("500x375 JPEG", name + " 224",
           std::make_shared<ImageDataset>(split, transform("{name: " + name + ", args: {im_size: 224}}")), 32,
           worker_counts);
  }
  fs::remove_all(work);
  return 0;
}

}  // namespace loader_benchmark
