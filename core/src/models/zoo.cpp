#include "oml/models/zoo.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/config/argument_error.h"

namespace oml::models {
namespace {

namespace fs = std::filesystem;

const std::string kFacebook = "https://dl.fbaipublicfiles.com";
const std::string kOmlStorage = "https://oml.daloroserver.com/download/checkpoints";
const std::string kTorchvision = "https://download.pytorch.org/models";

std::vector<ZooEntry> make_entries() {
  std::vector<ZooEntry> out = {
      // DINO (MetaAI), ImageNet self-supervised.
      {"vits16_dino", "vit", "vits16", "vits16_dino.ckpt",
       kFacebook + "/dino/dino_deitsmall16_pretrain/dino_deitsmall16_pretrain.pth", "cf0f22", ""},
      {"vits8_dino", "vit", "vits8", "vits8_dino.ckpt",
       kFacebook + "/dino/dino_deitsmall8_pretrain/dino_deitsmall8_pretrain.pth", "230cd5", ""},
      {"vitb16_dino", "vit", "vitb16", "vitb16_dino.ckpt",
       kFacebook + "/dino/dino_vitbase16_pretrain/dino_vitbase16_pretrain.pth", "552daf", ""},
      {"vitb8_dino", "vit", "vitb8", "vitb8_dino.ckpt",
       kFacebook + "/dino/dino_vitbase8_pretrain/dino_vitbase8_pretrain.pth", "556550", ""},
      // DINOv2 (MetaAI), LVD-142M.
      {"vits14_dinov2", "vit", "vits14", "dinov2_vits14.ckpt",
       kFacebook + "/dinov2/dinov2_vits14/dinov2_vits14_pretrain.pth", "2e405c", ""},
      {"vits14_reg_dinov2", "vit", "vits14_reg", "dinov2_vits14_reg4.ckpt",
       kFacebook + "/dinov2/dinov2_vits14/dinov2_vits14_reg4_pretrain.pth", "2a50c5", ""},
      {"vitb14_dinov2", "vit", "vitb14", "dinov2_vitb14.ckpt",
       kFacebook + "/dinov2/dinov2_vitb14/dinov2_vitb14_pretrain.pth", "8635e7", ""},
      {"vitb14_reg_dinov2", "vit", "vitb14_reg", "dinov2_vitb14_reg4.ckpt",
       kFacebook + "/dinov2/dinov2_vitb14/dinov2_vitb14_reg4_pretrain.pth", "13d13c", ""},
      {"vitl14_dinov2", "vit", "vitl14", "dinov2_vitl14.ckpt",
       kFacebook + "/dinov2/dinov2_vitl14/dinov2_vitl14_pretrain.pth", "19a02c", ""},
      {"vitl14_reg_dinov2", "vit", "vitl14_reg", "dinov2_vitl14_reg4.ckpt",
       kFacebook + "/dinov2/dinov2_vitl14/dinov2_vitl14_reg4_pretrain.pth", "8b6364", ""},
      // OML's fine-tuned checkpoints (Lightning .ckpt files).
      {"vits16_inshop", "vit", "vits16", "vits16_inshop.ckpt",
       kOmlStorage + "/inshop/vits16_inshop_a76b85.ckpt", "a76b85", ""},
      {"vits16_sop", "vit", "vits16", "vits16_sop.ckpt", kOmlStorage + "/sop/vits16_sop_21e743.ckpt",
       "21e743", ""},
      {"vits16_cub", "vit", "vits16", "vits16_cub.ckpt", kOmlStorage + "/cub/vits16_cub.ckpt", "e82633", ""},
      {"vits16_cars", "vit", "vits16", "vits16_cars.ckpt", kOmlStorage + "/cars/vits16_cars.ckpt", "9f1e59",
       ""},
      // OML's ExtractorWithMLP.pretrained_models: vits16 (normalise_features false) + MLP [384].
      {"vits16_224_mlp_384_inshop", "extractor_with_mlp", "vits16 + mlp_features [384]",
       "vits16_224_mlp_384_inshop.ckpt", kOmlStorage + "/inshop/vits16_224_mlp_384_inshop.ckpt", "35244966",
       "use extractor: {name: vit, args: {arch: vits16}} and mlp_features: [384]"},
  };
  // CLIP's image towers (OML's ViTCLIPExtractor.pretrained_models): OpenAI's TorchScript archives
  // and Sber's ruCLIP state dicts (whole models: the loader takes their `visual.` part).
  const std::string openai = "https://openaipublic.azureedge.net/clip/models";
  const std::string sber = "https://huggingface.co/sberbank-ai";
  for (const auto& [arch, file, hash] : std::vector<std::array<std::string, 3>>{
           {"vitb16_224", "5806e77cd80f8b59890b7e101eabd078d9fb84e6937f9e85e4ecb61988df416f/ViT-B-16.pt",
            "44c3d804ecac03d9545ac1a3adbca3a6"},
           {"vitb32_224", "40d365715913c9da98579312b702a82c18be219cc2a73407c4526f58eba950af/ViT-B-32.pt",
            "3ba34e387b24dfe590eeb1ae6a8a122b"},
           {"vitl14_224", "b8cca3fd41ae0c99ba7e8951adf17d267cdb84cd88be6f7c2e0eca1737a03836/ViT-L-14.pt",
            "096db1af569b284eb76b3881534822d9"}}) {
    out.push_back(
        {"openai_" + arch, "vit_clip", arch, "openai_" + arch + ".ckpt", openai + "/" + file, hash, ""});
  }
  for (const auto& [arch, repo, hash] : std::vector<std::array<std::string, 3>>{
           {"vitb16_224", "ruclip-vit-base-patch16-224", "7882e07674d78c674e33cb892a68bbfc"},
           {"vitb32_224", "ruclip-vit-base-patch32-224", "e2c4dab46a3cfa608bdd762973e90d32"},
           {"vitl14_224", "ruclip-vit-large-patch14-224", "9b4a1cd25d15bad4ffd2ba6e34b8a67c"}}) {
    out.push_back({"sber_" + arch, "vit_clip", arch, "sber_" + arch + ".ckpt",
                   sber + "/" + repo + "/resolve/main/pytorch_model.bin", hash, ""});
  }
  // UNICOM (DeepGlint), OML's ViTUnicomExtractor: the zoo names are the arch names; float16 state
  // dicts that OML keeps under their own file names (it checks their sha256, not an md5).
  const std::string deepglint = "https://github.com/deepglint/unicom/releases/download";
  for (const auto& [arch, release, file] : std::vector<std::array<std::string, 3>>{
           {"vitb32_unicom", "b32", "FP16-ViT-B-32.pt"},
           {"vitb16_unicom", "b16", "FP16-ViT-B-16.pt"},
           {"vitl14_unicom", "l14", "FP16-ViT-L-14.pt"},
           {"vitl14_336px_unicom", "l14_336px", "FP16-ViT-L-14-336px.pt"}}) {
    out.push_back({arch, "vit_unicom", arch, file, deepglint + "/" + release + "/" + file, "", ""});
  }
  // TaoRuijie's ECAPA-TDNN (OML's ECAPATDNNExtractor.pretrained_models): his training script's
  // state dict (`speaker_encoder.*`, `speaker_loss.weight`), which ecapa_tdnn.cpp reads as OML does.
  out.push_back({"ecapa_tdnn_taoruijie", "ecapa_tdnn", "ecapa_tdnn_taoruijie", "ecapa_tdnn_taoruijie.pth",
                 "https://github.com/TaoRuijie/ECAPA-TDNN/raw/refs/heads/main/exps/pretrain.model",
                 "2bbc0ea09a41217eaff16b676ecb63d7", ""});
  // MoCo v2's ResNet-50 (OML's ResnetExtractor.pretrained_models): a MoCo training checkpoint,
  // whose query encoder the resnet extractor takes (resnet.cpp).
  out.push_back(
      {"resnet50_moco_v2", "resnet", "resnet50_projector", "moco_v2_800ep_pretrain.pth.tar",
       "https://dl.fbaipublicfiles.com/moco/moco_checkpoints/moco_v2_800ep/moco_v2_800ep_pretrain.pth.tar",
       "a04e12f8", ""});
  // torchvision's ImageNet classifiers (OML fetches them through torchvision; the file name
  // carries torchvision's own hash prefix).
  for (const auto& [arch, file] :
       std::vector<std::pair<std::string, std::string>>{{"resnet18", "resnet18-f37072fd.pth"},
                                                        {"resnet34", "resnet34-b627a593.pth"},
                                                        {"resnet50", "resnet50-0676ba61.pth"},
                                                        {"resnet101", "resnet101-63fe2227.pth"},
                                                        {"resnet152", "resnet152-394f9c45.pth"}}) {
    out.push_back({arch + "_imagenet1k_v1", "resnet", arch, file, kTorchvision + "/" + file, "", ""});
  }
  return out;
}

std::mutex& dir_mutex() {
  static std::mutex m;
  return m;
}

fs::path& configured_dir() {
  static fs::path dir;
  return dir;
}

fs::path default_weights_dir() {
  if (const char* env = std::getenv("OML_WEIGHTS_DIR"); env != nullptr && *env != '\0') return env;
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return fs::path(home) / ".cache" / "oml";
  }
  return fs::path(".cache") / "oml";
}

}  // namespace

const std::vector<ZooEntry>& zoo_entries() {
  static const std::vector<ZooEntry> entries = make_entries();
  return entries;
}

std::optional<ZooEntry> find_zoo_entry(const std::string& name) {
  for (const auto& entry : zoo_entries()) {
    if (entry.name == name) return entry;
  }
  return std::nullopt;
}

fs::path weights_dir() {
  std::lock_guard<std::mutex> lock(dir_mutex());
  return configured_dir().empty() ? default_weights_dir() : configured_dir();
}

void set_weights_dir(const fs::path& dir) {
  std::lock_guard<std::mutex> lock(dir_mutex());
  const std::string text = dir.string();
  const char* home = std::getenv("HOME");
  // `weights_dir: ~/models` as a shell would read it.
  if (home != nullptr && (text == "~" || starts_with(text, "~/"))) {
    configured_dir() = fs::path(home) / text.substr(text == "~" ? 1 : 2);
  } else {
    configured_dir() = dir;
  }
}

void check_zoo_weights(const std::string& weights, const std::string& extractor, const std::string& arch) {
  const auto entry = find_zoo_entry(weights);
  if (!entry) return;
  const std::string who = "extractor '" + extractor + "'";
  config::check_argument(entry->extractor == extractor, who, "weights", "weights '", weights,
                         "' are for extractor '", entry->extractor, "', not '", extractor, "'");
  config::check_argument(entry->arch == arch, who, "weights", "weights '", weights, "' are for arch ",
                         entry->arch, ", but arch is ", arch, "; ",
                         entry->fits.empty() ? "set arch: " + entry->arch : entry->fits);
}

std::string resolve_weights(const std::string& weights, const std::string& extractor,
                            const std::string& arch) {
  if (weights.empty()) return weights;
  const auto entry = find_zoo_entry(weights);
  if (!entry) {
    // A path; a bare word that names no file is most likely a misspelt zoo name.
    if (weights.find('/') == std::string::npos && !fs::exists(weights)) {
      std::vector<std::string> names;
      for (const auto& e : zoo_entries()) {
        if (e.extractor == extractor) names.push_back(e.name);
      }
      throw DataError("weights '" + weights + "': no such file, and not a zoo name for " + extractor +
                      did_you_mean(weights, names) + " (zoo names: " + join(names) + ")");
    }
    return weights;  // the loader reports a missing file with its name
  }
  check_zoo_weights(weights, extractor, arch);
  const fs::path dir = weights_dir();
  std::vector<fs::path> candidates = {dir / entry->file, dir / "torch" / "checkpoints" / entry->file};
  // The download's own name, unless other entries' downloads share it (Sber's are all
  // pytorch_model.bin): then it could be another arch's file.
  const auto url_file = [](const ZooEntry& e) { return e.url.substr(e.url.rfind('/') + 1); };
  const auto same_name = std::count_if(zoo_entries().begin(), zoo_entries().end(),
                                       [&](const ZooEntry& e) { return url_file(e) == url_file(*entry); });
  if (same_name == 1) candidates.push_back(dir / url_file(*entry));
  for (const fs::path& candidate : candidates) {
    if (fs::is_regular_file(candidate)) return candidate.string();
  }
  DataError error("weights '" + weights + "': file " + (dir / entry->file).string() +
                  " not found (oml-cpp never downloads; the weights folder is the config's weights_dir, "
                  "else $OML_WEIGHTS_DIR, else ~/.cache/oml)");
  error.add_context("download it from " + entry->url + ", e.g. curl -L -o " + (dir / entry->file).string() +
                    " " + entry->url);
  if (!entry->md5.empty()) error.add_context("OML checks that its md5 starts with " + entry->md5);
  throw error;
}

}  // namespace oml::models
