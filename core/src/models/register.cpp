#include "oml/models/register.h"

#include <torch/torch.h>

#include "oml/common/strings.h"
#include "oml/config/args_reader.h"
#include "oml/io/state_dict.h"
#include "oml/models/conv_net.h"
#include "oml/models/ecapa_tdnn.h"
#include "oml/models/extractor_with_mlp.h"
#include "oml/models/pairwise_model.h"
#include "oml/models/resnet.h"
#include "oml/models/text_encoder.h"
#include "oml/models/vit.h"
#include "oml/models/vit_clip.h"
#include "oml/models/vit_unicom.h"
#include "oml/models/zoo.h"
#include "oml/registry/registries.h"

namespace oml::models {
namespace {

using ParsedExtractor = decltype(Registries::extractors)::Parsed;

// What extractor_with_mlp's zoo entries call its arch: "vits16 + mlp_features [384]".
std::string mlp_arch(const ParsedExtractor& backbone, const std::vector<int64_t>& features) {
  std::string arch = "an unnamed backbone";
  if (const auto* vit = std::any_cast<ViTOptions>(&backbone.options)) arch = vit->arch;
  if (const auto* resnet = std::any_cast<ResNetOptions>(&backbone.options)) arch = resnet->arch;
  if (const auto* clip = std::any_cast<ViTClipOptions>(&backbone.options)) arch = clip->arch;
  if (const auto* unicom = std::any_cast<ViTUnicomOptions>(&backbone.options)) arch = unicom->arch;
  std::vector<std::string> sizes;
  for (const int64_t f : features) sizes.push_back(std::to_string(f));
  return arch + " + mlp_features [" + join(sizes) + "]";
}

// Weights of a whole pairwise model, loaded after construction.
void maybe_load(torch::nn::Module& module, const std::string& weights) {
  if (!weights.empty()) io::load_weights(module, weights);
}

struct MlpArgs {
  ParsedExtractor backbone;
  ExtractorWithMLPOptions mlp;
};

struct LinearSiameseArgs {
  int64_t feat_dim = 0;
  bool identity_init = true;
  std::string weights;
};

struct SiameseArgs {
  ParsedExtractor extractor;
  std::vector<int64_t> mlp_hidden_dims;  ///< concat_siamese only
  bool use_tta_swap = false;             ///< concat_siamese only
  std::string weights;
};

}  // namespace

void register_builtin_models(Registries& reg) {
  reg.extractors.add(
      "resnet", config::checked_parse<ResNetOptions>([](config::ArgsReader& r, ResNetOptions& o) {
        r.optional("arch", o.arch).optional("gem_p", o.gem_p).optional("remove_fc", o.remove_fc);
        r.optional("normalise_features", o.normalise_features).optional("num_classes", o.num_classes);
        r.optional("weights", o.weights);
      }),
      [](const ResNetOptions& o, const NoContext&) -> std::shared_ptr<Extractor> { return ResNet(o).ptr(); },
      "torchvision-compatible ResNet (resnet18..152, OML's resnet50_projector), optional GeM pooling");
  reg.extractors.add(
      "vit", config::checked_parse<ViTOptions>([](config::ArgsReader& r, ViTOptions& o) {
        r.optional("arch", o.arch).optional("weights", o.weights);
        r.optional("normalise_features", o.normalise_features).optional("use_multi_scale", o.use_multi_scale);
      }),
      [](const ViTOptions& o, const NoContext&) -> std::shared_ptr<Extractor> { return ViT(o).ptr(); },
      "DINO / DINOv2 vision transformer as OML's ViTExtractor (vits16, vits14_reg, ...); OML's zoo weights");
  reg.extractors.add(
      "vit_clip", config::checked_parse<ViTClipOptions>([](config::ArgsReader& r, ViTClipOptions& o) {
        r.required("arch", o.arch).optional("weights", o.weights);
        r.optional("normalise_features", o.normalise_features);
      }),
      [](const ViTClipOptions& o, const NoContext&) -> std::shared_ptr<Extractor> {
        return ViTClip(o).ptr();
      },
      "CLIP's image tower as OML's ViTCLIPExtractor (vitb16_224, vitb32_224, vitl14_224, vitl14_336); "
      "OpenAI's and Sber's zoo weights");
  reg.extractors.add(
      "vit_unicom", config::checked_parse<ViTUnicomOptions>([](config::ArgsReader& r, ViTUnicomOptions& o) {
        r.required("arch", o.arch).optional("weights", o.weights);
        r.required("normalise_features", o.normalise_features)
            .optional("use_gradient_ckpt", o.use_gradient_ckpt);
      }),
      [](const ViTUnicomOptions& o, const NoContext&) -> std::shared_ptr<Extractor> {
        return ViTUnicom(o).ptr();
      },
      "UNICOM's vision transformer as OML's ViTUnicomExtractor (vitb32_unicom, ..., vitl14_336px_unicom); "
      "UNICOM's zoo weights");
  reg.extractors.add(
      "hf_text_encoder",
      config::checked_parse<TextEncoderOptions>([](config::ArgsReader& r, TextEncoderOptions& o) {
        r.required("model_dir", o.model_dir).optional("pooling", o.pooling);
        r.optional("normalise_features", o.normalise_features).optional("weights", o.weights);
      }),
      [](const TextEncoderOptions& o, const NoContext&) -> std::shared_ptr<Extractor> {
        return TextEncoder(o).ptr();
      },
      "BERT / RoBERTa / XLM-RoBERTa / CamemBERT / DistilBERT text encoder from a Hugging Face model folder "
      "(transformers' BertModel ...); cls, mean, max or pooler pooling; takes packed tokens");
  reg.extractors.add(
      "ecapa_tdnn", config::checked_parse<ECAPATDNNOptions>([](config::ArgsReader& r, ECAPATDNNOptions& o) {
        r.required("arch", o.arch).optional("weights", o.weights);
        r.optional("normalise_features", o.normalise_features);
      }),
      [](const ECAPATDNNOptions& o, const NoContext&) -> std::shared_ptr<Extractor> {
        return ECAPATDNN(o).ptr();
      },
      "ECAPA-TDNN speaker embeddings as OML's ECAPATDNNExtractor (ecapa_tdnn_taoruijie); takes 16 kHz "
      "waveforms [B, 1, N]; TaoRuijie's zoo weights");
  reg.extractors.add(
      "conv_net", config::checked_parse<ConvNetOptions>([](config::ArgsReader& r, ConvNetOptions& o) {
        r.optional("in_channels", o.in_channels)
            .optional("channels", o.channels)
            .optional("feat_dim", o.feat_dim);
        r.optional("gem_p", o.gem_p).optional("normalise_features", o.normalise_features);
        r.optional("weights", o.weights);
      }),
      [](const ConvNetOptions& o, const NoContext&) -> std::shared_ptr<Extractor> {
        return ConvNet(o).ptr();
      },
      "small conv net for 28-64 px images");
  reg.extractors.add(
      "extractor_with_mlp",
      [](config::ArgsReader& r) {
        MlpArgs a;
        a.backbone = r.nested(registries().extractors, "extractor");
        r.optional("mlp_features", a.mlp.mlp_features).optional("train_backbone", a.mlp.train_backbone);
        r.optional("freeze_n_epochs", a.mlp.freeze_n_epochs)
            .optional("normalise_features", a.mlp.normalise_features);
        r.optional("weights", a.mlp.weights);
        r.check([&] {
          check_options(a.mlp);
          // The zoo entry names the backbone's arch: judged once the backbone parsed.
          if (a.backbone.ok()) {
            check_zoo_weights(a.mlp.weights, "extractor_with_mlp", mlp_arch(a.backbone, a.mlp.mlp_features));
          }
        });
        return a;
      },
      [](MlpArgs a, const NoContext&) -> std::shared_ptr<Extractor> {
        a.mlp.weights =
            resolve_weights(a.mlp.weights, "extractor_with_mlp", mlp_arch(a.backbone, a.mlp.mlp_features));
        return ExtractorWithMLP(registries().extractors.build(a.backbone), a.mlp).ptr();
      },
      "extractor + MLP projection; backbone trainable, frozen, or frozen for the first epochs");

  reg.pairwise_models.add(
      "linear_siamese",
      [](config::ArgsReader& r) {
        LinearSiameseArgs a;
        r.required("feat_dim", a.feat_dim)
            .optional("identity_init", a.identity_init)
            .optional("weights", a.weights);
        r.check([&] { LinearSiameseImpl::check(a.feat_dim); });
        return a;
      },
      [](const LinearSiameseArgs& a, const NoContext&) -> std::shared_ptr<PairwiseModel> {
        auto model = LinearSiamese(a.feat_dim, a.identity_init).ptr();
        maybe_load(*model, a.weights);
        return model;
      },
      "||P x1 - P x2|| + b on embeddings");
  reg.pairwise_models.add(
      "trivial_distance_siamese",
      [](config::ArgsReader& r) {
        SiameseArgs a;
        a.extractor = r.nested(registries().extractors, "extractor");
        r.optional("weights", a.weights);
        return a;
      },
      [](const SiameseArgs& a, const NoContext&) -> std::shared_ptr<PairwiseModel> {
        auto model = TrivialDistanceSiamese(registries().extractors.build(a.extractor)).ptr();
        maybe_load(*model, a.weights);
        return model;
      },
      "||E(x1) - E(x2)|| + b on images");
  reg.pairwise_models.add(
      "concat_siamese",
      [](config::ArgsReader& r) {
        SiameseArgs a;
        a.extractor = r.nested(registries().extractors, "extractor");
        r.optional("mlp_hidden_dims", a.mlp_hidden_dims)
            .optional("use_tta_swap", "use_tta", a.use_tta_swap)
            .optional("weights", a.weights);
        r.check([&] { ConcatSiameseImpl::check(a.mlp_hidden_dims); });
        return a;
      },
      [](const SiameseArgs& a, const NoContext&) -> std::shared_ptr<PairwiseModel> {
        auto model =
            ConcatSiamese(registries().extractors.build(a.extractor), a.mlp_hidden_dims, a.use_tta_swap)
                .ptr();
        maybe_load(*model, a.weights);
        return model;
      },
      "images stacked along the height -> extractor -> MLP -> logit");
}

}  // namespace oml::models
