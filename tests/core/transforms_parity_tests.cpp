// OML's torchvision transform names against Python's torchvision itself (Debian's
// python3-torchvision and PIL, installed by `scripts/setup.sh --with-tests`): photo-like JPEG and
// PNG images written by PIL are pre-processed by both pipelines, and the pixels and the embeddings
// of a fixed-weight resnet18 compared (docs/data.md#pixel-parity-with-omls-python-pipelines has the
// figures this test prints).
#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "oml/config/document.h"
#include "oml/config/reader.h"
#include "oml/data/image.h"
#include "oml/data/transform.h"
#include "oml/io/torch_file.h"
#include "oml/models/resnet.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace transforms_parity_tests {

using oml::test::max_abs_diff;

namespace {

std::shared_ptr<oml::data::Transform> make_transform(const std::string& yaml) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string(yaml, "t.yaml");
  return oml::registries().transforms.create(oml::config::parse_component(doc.root(), "transform"));
}

// The images, torchvision's tensors and the reference embeddings (read-only).
const std::filesystem::path& reference() {
  return oml::test::reference_export("transforms_reference.py", "export");
}

std::vector<std::string> reference_images() {
  std::ifstream in(reference() / "images.txt");
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) names.push_back(line);
  }
  REQUIRE(names.size() >= 8);
  return names;
}

at::Tensor read_image(const std::string& file) {
  const std::string path = (reference() / file).string();
  return oml::data::decode_image(oml::data::read_file_bytes(path), path);
}

std::string stem(const std::string& file) { return file.substr(0, file.rfind('.')); }

}  // namespace

TEST_CASE("OML's torchvision transform names give torchvision's tensors on JPEG and PNG images",
          "[data][transforms][pytorch]") {
  struct Case {
    std::string reference;  // the pipeline's name in transforms_reference.py
    std::string yaml;       // ours
    double min_std;         // one grey level after normalisation is 1 / (255 min_std)
  };
  const double imagenet = 0.224, clip = 0.26130258;
  const std::vector<Case> cases = {
      {"norm_torch", "{name: norm_torch}", imagenet},
      {"norm_resize_torch", "{name: norm_resize_torch, args: {im_size: 224}}", imagenet},
      {"norm_resize_torch", "{name: vits16_dino}", imagenet},
      {"norm_resize_torch_96", "{name: norm_resize_torch, args: {im_size: 96}}", imagenet},
      {"norm_resize_hypvit_torch", "{name: norm_resize_hypvit_torch}", imagenet},
      {"norm_resize_hypvit_torch", "{name: vits16_sop}", imagenet},
      {"norm_resize_hypvit_torch", "{name: vitb14_dinov2}", imagenet},
      {"norm_resize_hypvit_torch_256_224",
       "{name: norm_resize_hypvit_torch, args: {im_size: 256, crop_size: 224}}", imagenet},
      {"norm_resize_hypvit_torch_256_224", "{name: resnet50_imagenet1k_v1}", imagenet},
      {"norm_resize_hypvit_torch_100_120",
       "{name: norm_resize_hypvit_torch, args: {im_size: 100, crop_size: 120}}", imagenet},
      {"unicom_transforms", "{name: unicom_transforms, args: {im_size: 224}}", clip},
      {"unicom_transforms", "{name: vitb16_unicom}", clip},
      // For comparison only (no bound): oml-cpp's own OpenCV-based transform of the same geometry.
      {"norm_resize_hypvit_torch_256_224",
       "{name: norm_resize_center_crop, args: {im_size: 256, crop_size: 224}}", 0},
  };
  const auto images = reference_images();
  std::cout << "pixel parity with torchvision (max |ours - torchvision| over " << images.size()
            << " images, in normalised units and in grey levels):\n";
  for (const auto& c : cases) {
    const auto transform = make_transform(c.yaml);
    double worst = 0;
    int64_t differing = 0, total = 0;
    for (const auto& file : images) {
      INFO(c.yaml << " on " << file);
      const auto ours = transform->apply(read_image(file), {});
      const auto theirs = oml::io::load_tensor(reference() / (c.reference + "__" + stem(file) + ".pt"));
      REQUIRE(ours.sizes() == theirs.sizes());
      const auto diff = (ours - theirs).abs();
      worst = std::max(worst, diff.max().item<double>());
      differing += (diff > 1e-5).sum().item<int64_t>();
      total += diff.numel();
    }
    const double grey = c.min_std > 0 ? 1.0 / (255.0 * c.min_std) : 1.0 / (255.0 * imagenet);
    std::cout << "  " << std::left << std::setw(96) << c.yaml << " max " << std::setprecision(3) << worst
              << " = " << worst / grey << " grey levels; values off by > 1e-5: " << differing << " of "
              << total << "\n";
    if (c.min_std > 0) {
      INFO(c.yaml);
      CHECK(worst <= grey + 1e-6);
    }
  }
}

TEST_CASE("A fixed-weight resnet18 gives the same embeddings through oml-cpp's and torchvision's pipelines",
          "[data][transforms][pytorch][models]") {
  const auto images = reference_images();
  const auto transform = make_transform("{name: resnet50_imagenet1k_v1}");
  std::vector<at::Tensor> batch;
  for (const auto& file : images) batch.push_back(transform->apply(read_image(file), {}));
  oml::models::ResNetOptions options;
  options.arch = "resnet18";
  options.weights = (reference() / "resnet18.pth").string();
  oml::models::ResNet model(options);
  model->eval();
  torch::NoGradGuard no_grad;
  const auto ours = model->forward(torch::stack(batch));
  const auto theirs = oml::io::load_tensor(reference() / "embeddings.pt");
  REQUIRE(ours.sizes() == theirs.sizes());
  const double scale = theirs.abs().max().item<double>();
  const double diff = max_abs_diff(ours, theirs);
  const double cosine = torch::nn::functional::cosine_similarity(ours, theirs).min().item<double>();
  std::cout << "resnet18 embeddings, oml-cpp vs torchvision pipeline: max abs diff " << diff
            << " (max |embedding| " << scale << "), min cosine " << std::setprecision(9) << cosine << "\n";
  CHECK(diff <= 1e-4 * std::max(1.0, scale));
  CHECK(cosine >= 0.99999);
}

}  // namespace transforms_parity_tests
