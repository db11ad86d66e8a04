// OML's zoo, end to end, as a user holds it: OML's fine-tuned SOP model (a Lightning checkpoint of
// OML's ExtractorModule, random weights of the real shape) in the weights folder, named
// `vits16_sop` in `extractor.args.weights` or in the top-level `weights:` of oml-predict and
// oml-validate, gives the embeddings OML's ViTExtractor gives in Python
// (tests/python/vit_zoo_reference.py: the same network, OML's checkpoint handling, torchvision's
// norm_resize_hypvit_torch on PIL images); fine-tuned from it in bf16 by oml-train, the result
// loads back into the Python model and still gives oml-predict's embeddings.
#include <torch/torch.h>

#include "oml/io/torch_file.h"
#include "pipeline_fixtures.h"

namespace vit_zoo_tests {

using Catch::Matchers::Contains;
using oml::test::quote;
using oml::test::run_oml;
using oml::test::TempDir;
using oml::test::write_file;
namespace fs = std::filesystem;

namespace {

void python(const std::string& args) {
  const std::string script = oml::test::source_path("tests/python/vit_zoo_reference.py");
  const auto r = oml::test::run(oml::test::python() + " " + quote(script) + " " + args);
  INFO("python3 vit_zoo_reference.py " << args << " failed (is python3-torchvision installed? "
                                       << "scripts/setup.sh --with-tests)\nstdout: " << r.out
                                       << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
}

// oml-predict's embeddings of dir/images with `weights_yaml` (lines of the config naming the
// weights), at OML's SOP validation transform.
at::Tensor predict(const TempDir& dir, const std::string& name, const std::string& weights_yaml) {
  const fs::path config = dir / (name + ".yaml");
  write_file(config, "data_dir: " + (dir / "images").string() + "\nsave_dir: " + (dir / name).string() +
                         "\nweights_dir: " + (dir / "zoo").string() +
                         "\nnum_workers: 1\nnum_threads: 2\nbatch_size_inference: 4\n"
                         "transforms_predict: {name: norm_resize_hypvit_torch, args: {im_size: 224, "
                         "crop_size: 224}}\n" +
                         weights_yaml);
  const auto r = run_oml("oml-predict", "--config " + quote(config.string()) + " --progress quiet");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return oml::io::load_tensor(dir / name / "embeddings.pt");
}

// The zoo folder, the images and Python's embeddings of them, made once per process: Catch runs
// the test case's body once per SECTION, and the two Python calls take ~9 s.
const TempDir& zoo_export() {
  return oml::test::filled_once([](const TempDir& dir) {
    python("zoo " + quote(dir.path().string()));
    python("embed " + quote((dir / "zoo" / "vits16_sop.ckpt").string()) + " " +
           quote((dir / "images").string()) + " " + quote((dir / "python_zoo.pt").string()));
  });
}

}  // namespace

TEST_CASE(
    "OML's vits16_sop.ckpt from the weights folder gives OML's embeddings, fine-tunes in bf16 "
    "and goes back to Python",
    "[integration][vit][zoo][pytorch]") {
  const TempDir& dir = zoo_export();
  const auto expected = oml::io::load_tensor(dir / "python_zoo.pt");
  REQUIRE(expected.sizes() == torch::IntArrayRef({4, 384}));

  SECTION("by name in the extractor's args and in the top-level weights") {
    const auto in_args = predict(dir, "in_args",
                                 "extractor: {name: vit, args: {arch: vits16, normalise_features: true, "
                                 "weights: vits16_sop}}\n");
    CHECK(oml::test::max_abs_diff(in_args, expected) <= 1e-4);
    const auto top_level =
        predict(dir, "top_level",
                "weights: vits16_sop\n"
                "extractor: {name: vit, args: {arch: vits16, normalise_features: true}}\n");
    CHECK(oml::test::max_abs_diff(top_level, expected) <= 1e-4);

    // oml-validate takes the name the same way (at 64 px: the subset's images are 28 px).
    const auto v = run_oml(
        "oml-validate",
        "--config " + quote(oml::test::source_path("configs/sop/validate_extractor.yaml")) +
            " --set dataset_root=" + quote(oml::test::fashion_mnist_subset().string()) +
            " --set weights_dir=" + quote((dir / "zoo").string()) + " --set extractor.args.weights=null" +
            " --set weights=vits16_sop --set transforms_val.args.im_size=64 --set "
            "transforms_val.args.crop_size=64" +
            " --set num_workers=1 --set bs_val=64 --set logs_root=" + quote((dir / "validation").string()) +
            " --progress quiet");
    INFO(v.err);
    CHECK(v.exit_code == 0);
    CHECK_THAT(v.err, Contains("vits16_sop"));
    CHECK_THAT(v.out + v.err, Contains("cmc/1"));
  }

  SECTION("fine-tuned from it in bf16, back in Python") {
    const auto train = run_oml(
        "oml-train", "--config " + quote(oml::test::source_path("configs/fashion_mnist/train_vit.yaml")) +
                         " --set dataset_root=" + quote(oml::test::fashion_mnist_subset().string()) +
                         " --set weights_dir=" + quote((dir / "zoo").string()) +
                         " --set extractor.args.weights=vits16_sop --set precision=bf16" +
                         " --set logs_root=" + quote((dir / "logs").string()) +
                         " --set run_name=tuned --set max_epochs=1 --set valid_period=1" +
                         " --set sampler.args.epoch_size=2 --set cache_size=0 --progress quiet");
    INFO(train.err);
    REQUIRE(train.exit_code == 0);
    const fs::path tuned = dir / "logs" / "tuned" / "checkpoints" / "last.ckpt";
    REQUIRE(fs::exists(tuned));
    const auto ours = predict(dir, "tuned",
                              "weights: " + tuned.string() +
                                  "\nextractor: {name: vit, args: {arch: vits16, "
                                  "normalise_features: true}}\n");
    CHECK(oml::test::max_abs_diff(ours, expected) > 1e-3);  // training changed the model
    python("embed " + quote(tuned.string()) + " " + quote((dir / "images").string()) + " " +
           quote((dir / "python_tuned.pt").string()));
    CHECK(oml::test::max_abs_diff(ours, oml::io::load_tensor(dir / "python_tuned.pt")) <= 1e-4);
  }
}

}  // namespace vit_zoo_tests
