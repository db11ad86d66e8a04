// Per-image cost of the transforms on one decoded 500x375 photo-like image (no decoding), one
// thread: milliseconds of CPU time per image, so the figure stays meaningful on a busy machine.
// Python's torchvision on the same image: bench/transforms_python.py (docs/benchmarks.md).
// Usage: bench_transforms [--images N]
#include <torch/torch.h>

#include <cstring>
#include <ctime>
#include <iomanip>
#include <iostream>

#include "benchmark.h"
#include "oml/config/document.h"
#include "oml/config/reader.h"
#include "oml/data/transform.h"
#include "oml/registry/registries.h"
#include "shell/components.h"

namespace transforms_benchmark {

namespace {

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// Smooth gradients, stripes and noise: resampling cost does not depend on content, but keep it
// photo-like anyway.
at::Tensor photo(int64_t height, int64_t width) {
  auto y = torch::arange(height, torch::kFloat32).view({height, 1});
  auto x = torch::arange(width, torch::kFloat32).view({1, width});
  auto r = 128 + 100 * torch::sin(x / 9 + y / 23);
  auto g = 255 * x / width + 0 * y;
  auto b = 255 * (1 - y / height) * (0.5 + 0.5 * torch::cos((x + y) / 31));
  torch::manual_seed(0);
  auto img = torch::stack({r, g, b}, 2) + 12 * torch::randn({height, width, 3});
  return img.clamp(0, 255).to(torch::kUInt8).contiguous();
}

}  // namespace

OML_BENCHMARK(transforms) {
  int images = 300;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--images") == 0) images = std::atoi(argv[i + 1]);
  }
  torch::set_num_threads(1);
  oml::cli::register_builtins();
  const auto image = photo(375, 500);
  const std::vector<std::string> specs = {
      "{name: norm_resize, args: {im_size: 224}}",
      "{name: norm_resize_center_crop, args: {im_size: 256, crop_size: 224}}",
      "{name: augs, args: {im_size: 224}}",
      "{name: norm_resize_torch, args: {im_size: 224}}",
      "{name: norm_resize_hypvit_torch, args: {im_size: 256, crop_size: 224}}",
      "{name: augs_torch, args: {im_size: 224}}",
      "{name: augs_hypvit_torch, args: {im_size: 224}}",
      "{name: norm_resize_albu, args: {im_size: 224}}",
      "{name: augs_albu, args: {im_size: 224}}",
  };
  std::cout << "transform on a 500x375 RGB image, 1 thread, " << images << " images\n";
  for (const auto& spec : specs) {
    const auto doc = oml::config::Document::from_string(spec, "bench");
    const auto t = oml::registries().transforms.create(oml::config::parse_component(doc.root(), "transform"));
    for (int i = 0; i < 10; ++i) t->apply(image, {0, 0, i});  // warm-up
    const double start = cpu_seconds();
    for (int i = 0; i < images; ++i) t->apply(image, {1, 0, i});
    const double ms = (cpu_seconds() - start) / images * 1e3;
    std::cout << "  " << std::left << std::setw(72) << spec << std::fixed << std::setprecision(2) << ms
              << " ms CPU per image\n";
  }
  return 0;
}

}  // namespace transforms_benchmark
