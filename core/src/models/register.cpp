#include "oml/models/register.h"

#include <torch/torch.h>

#include "oml/common/strings.h"
#include "oml/config/reader.h"
#include "oml/io/state_dict.h"
#include "oml/models/conv_net.h"
#include "oml/models/extractor_with_mlp.h"
#include "oml/models/pairwise_model.h"
#include "oml/models/resnet.h"
#include "oml/models/vit.h"
#include "oml/models/zoo.h"
#include "oml/registry/registries.h"

namespace oml::models {
namespace {

std::shared_ptr<Extractor> nested_extractor(config::MapReader& r, const std::string& owner) {
  const auto spec = config::parse_component(r.require("extractor"), owner + ".extractor");
  return registries().extractors.create(spec);
}

// What extractor_with_mlp's zoo entries call its arch: "vits16 + mlp_features [384]".
std::string mlp_arch(const Extractor& backbone, const std::vector<int64_t>& features) {
  std::string arch = "an unnamed backbone";
  if (const auto* vit = dynamic_cast<const ViTImpl*>(&backbone)) arch = vit->options().arch;
  if (const auto* resnet = dynamic_cast<const ResNetImpl*>(&backbone)) arch = resnet->options().arch;
  std::vector<std::string> sizes;
  for (const int64_t f : features) sizes.push_back(std::to_string(f));
  return arch + " + mlp_features [" + join(sizes) + "]";
}

// Weights of a whole pairwise model, loaded after construction.
void maybe_load(torch::nn::Module& module, const std::string& weights) {
  if (!weights.empty()) io::load_weights(module, weights);
}

}  // namespace

void register_builtin_models(Registries& reg) {
  reg.extractors.add(
      "resnet",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<Extractor> {
        ResNetOptions o;
        config::MapReader r(args, "extractor 'resnet' args");
        std::optional<double> gem_p;
        r.optional("arch", o.arch).optional("gem_p", gem_p).optional("remove_fc", o.remove_fc);
        r.optional("normalise_features", o.normalise_features).optional("num_classes", o.num_classes);
        r.optional("weights", o.weights);
        r.finish();
        o.gem_p = gem_p;
        return ResNet(o).ptr();
      },
      "torchvision-compatible ResNet (resnet18..152), optional GeM pooling");
  reg.extractors.add(
      "vit",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<Extractor> {
        ViTOptions o;
        config::MapReader r(args, "extractor 'vit' args");
        r.optional("arch", o.arch).optional("weights", o.weights);
        r.optional("normalise_features", o.normalise_features).optional("use_multi_scale", o.use_multi_scale);
        r.finish();
        return ViT(o).ptr();
      },
      "DINO / DINOv2 vision transformer as OML's ViTExtractor (vits16, vits14_reg, ...); OML's zoo weights");
  reg.extractors.add(
      "conv_net",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<Extractor> {
        ConvNetOptions o;
        config::MapReader r(args, "extractor 'conv_net' args");
        std::optional<double> gem_p;
        r.optional("in_channels", o.in_channels)
            .optional("channels", o.channels)
            .optional("feat_dim", o.feat_dim);
        r.optional("gem_p", gem_p)
            .optional("normalise_features", o.normalise_features)
            .optional("weights", o.weights);
        r.finish();
        o.gem_p = gem_p;
        return ConvNet(o).ptr();
      },
      "small conv net for 28-64 px images");
  reg.extractors.add(
      "extractor_with_mlp",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<Extractor> {
        ExtractorWithMLPOptions o;
        config::MapReader r(args, "extractor 'extractor_with_mlp' args");
        auto backbone = nested_extractor(r, "extractor_with_mlp");
        r.optional("mlp_features", o.mlp_features).optional("train_backbone", o.train_backbone);
        r.optional("freeze_n_epochs", o.freeze_n_epochs).optional("normalise_features", o.normalise_features);
        r.optional("weights", o.weights);
        r.finish();
        o.weights = resolve_weights(o.weights, "extractor_with_mlp", mlp_arch(*backbone, o.mlp_features));
        return ExtractorWithMLP(backbone, o).ptr();
      },
      "extractor + MLP projection; backbone trainable, frozen, or frozen for the first epochs");

  reg.pairwise_models.add(
      "linear_siamese",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<PairwiseModel> {
        int64_t feat_dim = 0;
        bool identity_init = true;
        std::string weights;
        config::MapReader r(args, "pairwise model 'linear_siamese' args");
        r.required("feat_dim", feat_dim)
            .optional("identity_init", identity_init)
            .optional("weights", weights);
        r.finish();
        auto model = LinearSiamese(feat_dim, identity_init).ptr();
        maybe_load(*model, weights);
        return model;
      },
      "||P x1 - P x2|| + b on embeddings");
  reg.pairwise_models.add(
      "trivial_distance_siamese",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<PairwiseModel> {
        std::string weights;
        config::MapReader r(args, "pairwise model 'trivial_distance_siamese' args");
        auto extractor = nested_extractor(r, "trivial_distance_siamese");
        r.optional("weights", weights);
        r.finish();
        auto model = TrivialDistanceSiamese(extractor).ptr();
        maybe_load(*model, weights);
        return model;
      },
      "||E(x1) - E(x2)|| + b on images");
  reg.pairwise_models.add(
      "concat_siamese",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<PairwiseModel> {
        std::vector<int64_t> hidden;
        bool tta = false;
        std::string weights;
        config::MapReader r(args, "pairwise model 'concat_siamese' args");
        auto extractor = nested_extractor(r, "concat_siamese");
        r.optional("mlp_hidden_dims", hidden)
            .optional("use_tta_swap", "use_tta", tta)
            .optional("weights", weights);
        r.finish();
        auto model = ConcatSiamese(extractor, hidden, tta).ptr();
        maybe_load(*model, weights);
        return model;
      },
      "images stacked along the height -> extractor -> MLP -> logit");
}

}  // namespace oml::models
