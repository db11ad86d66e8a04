#include "oml/losses/register.h"

#include <torch/torch.h>

#include <optional>

#include "oml/config/args_reader.h"
#include "oml/losses/arcface.h"
#include "oml/losses/distance.h"
#include "oml/losses/margin_softmax_losses.h"
#include "oml/losses/miners.h"
#include "oml/losses/pair_losses.h"
#include "oml/losses/proxy_losses.h"
#include "oml/losses/surrogate_precision.h"
#include "oml/losses/triplet_loss.h"
#include "oml/registry/registries.h"

namespace oml::losses {
namespace {

using MinerRegistry = decltype(Registries::miners);
using ParsedMiner = MinerRegistry::Parsed;

// What a miner produces, for the message when a loss is given the wrong kind.
std::string produces(const Miner& miner) {
  if (dynamic_cast<const TripletMiner*>(&miner) != nullptr) return "triplets";
  if (dynamic_cast<const PairSelectionMiner*>(&miner) != nullptr) return "pairs for PML's pair losses";
  return "pairs for pairwise training";
}

// The nested `miner: {name, args}` (`fallback` when absent), which must be a `Kind` (`needs`
// says which in the message).
template <class Kind>
ParsedMiner miner_of_kind(config::ArgsReader& r, const std::string& fallback, const std::string& needs) {
  ParsedMiner parsed = r.nested(registries().miners, "miner", fallback);
  r.check([&] {
    if (!parsed.ok()) return;
    // Which kind of sets a miner produces is a property of the built object. A miner holds and
    // touches nothing until it mines (the contract in oml/losses/miner.h), so building one here
    // to look is still a pure parse; a build that fails anyway is reported by the loss's build.
    std::shared_ptr<Miner> miner;
    try {
      miner = registries().miners.build(parsed);
    } catch (const std::exception&) {
      return;
    }
    if (std::dynamic_pointer_cast<Kind>(miner)) return;
    const config::Node node = r.node()["miner"];
    throw ConfigError((node.defined() ? node.describe() + ": " : "") + r.component() + " needs " + needs +
                      ", but miner '" + parsed.spec.name + "' produces " + produces(*miner));
  });
  return parsed;
}

ParsedMiner triplet_miner(config::ArgsReader& r, const std::string& fallback) {
  return miner_of_kind<TripletMiner>(r, fallback, "a triplet miner");
}

// The optional `miner:` of PML's pair losses; none: every pair of the batch.
std::optional<ParsedMiner> pair_selection_miner(config::ArgsReader& r) {
  const config::Node node = r.node()["miner"];
  if (!node.defined() || node.is_null()) {
    r.known({"miner"});
    return std::nullopt;
  }
  return miner_of_kind<PairSelectionMiner>(r, "", "a miner that selects pairs (multi_similarity)");
}

std::shared_ptr<PairSelectionMiner> build_pair_selection_miner(const std::optional<ParsedMiner>& parsed) {
  if (!parsed) return nullptr;
  return std::dynamic_pointer_cast<PairSelectionMiner>(registries().miners.build(*parsed));
}

// A PML pair loss's args: its own (`read`), `distance`, `normalize_embeddings` and `miner`.
template <class Options>
struct PairLossArgs {
  Options loss;
  std::optional<ParsedMiner> miner;
};

template <class Options, class Read, class Check>
auto pair_loss_parse(Options defaults, Read read, Check check) {
  return [defaults, read, check](config::ArgsReader& r) {
    PairLossArgs<Options> a{defaults, std::nullopt};
    read(r, a.loss);
    read_distance(r, a.loss.distance);
    a.miner = pair_selection_miner(r);
    r.check([&] { check(a.loss); });
    return a;
  };
}

std::shared_ptr<TripletMiner> build_triplet_miner(const ParsedMiner& parsed) {
  return std::dynamic_pointer_cast<TripletMiner>(registries().miners.build(parsed));
}

// `n: 3` -> the 3 hardest ([1, 3]); `[a, b]` -> a-th..b-th hardest.
HardnessRange hardness(const config::Node& node, HardnessRange fallback) {
  if (!node.defined() || node.is_null()) return fallback;
  if (node.is_sequence()) {
    const auto v = node.as<std::vector<int64_t>>();
    if (v.size() != 2) node.fail("expected an integer n or a range [a, b]");
    return {v[0], v[1]};
  }
  return {1, node.as<int64_t>()};
}

// The build of a loss with class weights: num_classes and embedding_size left at 0 are the run's
// (the train labels, the extractor's size), as arcface's.
template <class Options>
Options with_run_sizes(Options o, const CriterionContext& ctx, const std::string& name) {
  if (o.embedding_size == 0) o.embedding_size = ctx.embedding_size;
  if (o.num_classes == 0) {
    o.num_classes = ctx.num_classes;
    config::check_fits(o.num_classes >= 2, "loss '" + name + "'", "num_classes", "the training set has ",
                       o.num_classes, " label(s); a loss with class proxies needs at least 2");
  }
  return o;
}

template <class Options>
void read_class_sizes(config::ArgsReader& r, Options& o) {
  r.optional("num_classes", o.num_classes).optional("embedding_size", o.embedding_size);
}

// The args of OML's arcface and mlp_arcface (mlp_features aside).
void read_arcface(config::ArgsReader& r, ArcFaceOptions& o) {
  r.optional("in_features", o.in_features).optional("num_classes", o.num_classes).optional("m", o.m);
  r.optional("s", o.s).optional("smoothing_epsilon", o.smoothing_epsilon).optional("reduction", o.reduction);
}

// arcface and mlp_arcface: in_features and num_classes left at 0 are the run's; the train
// labels' categories (OML's runtime `label2category`) always are.
ArcFaceOptions with_run_sizes(ArcFaceOptions o, const CriterionContext& ctx, const std::string& name) {
  if (o.in_features == 0) o.in_features = ctx.embedding_size;
  if (o.num_classes == 0) {
    o.num_classes = ctx.num_classes;
    config::check_fits(o.num_classes >= 2, "loss '" + name + "'", "num_classes", "the training set has ",
                       o.num_classes, " label(s); a classification loss needs at least 2");
  }
  o.label_categories = ctx.label_categories;
  return o;
}

// The args of OML's triplet and triplet_plain: margin (null: soft), reduction, need_logs.
auto triplet_parse(const std::string& loss) {
  return [loss](config::ArgsReader& r) {
    TripletOptions o;
    r.custom([&] {  // `margin: null` is the soft margin, not the default
      const config::Node margin = r.take("margin");
      if (margin.defined()) o.margin = margin.as<std::optional<double>>();
    });
    r.optional("reduction", o.reduction);
    bool need_logs = true;  // OML's switch for its per-step logs; they are always recorded here
    r.optional("need_logs", need_logs);
    r.check([&] { check_options(o, loss); });
    return o;
  };
}

struct TripletArgs {
  TripletOptions loss;
  ParsedMiner miner;
};

struct NHardArgs {
  HardnessRange positive{1, 1}, negative{1, 1};
};

struct MemoryArgs {
  int64_t bank_size_in_batches = 20, tri_expand_k = 3;
};

struct BankArgs {
  int64_t bank_size_in_batches = 10;
  ParsedMiner miner;
};

}  // namespace

void register_builtin_losses(Registries& reg) {
  reg.losses.add(
      "triplet_with_miner",
      [](config::ArgsReader& r) {
        TripletArgs a;
        r.custom([&] {  // `margin: null` is the soft margin, not the default
          const config::Node margin = r.take("margin");
          if (margin.defined()) a.loss.margin = margin.as<std::optional<double>>();
        });
        r.optional("reduction", a.loss.reduction);
        bool need_logs = true;  // OML's switch for its per-step logs; they are always recorded here
        r.optional("need_logs", need_logs);
        a.miner = triplet_miner(r, "all_triplets");
        r.check([&] { check_options(a.loss); });
        return a;
      },
      [](const TripletArgs& a, const CriterionContext&) -> std::shared_ptr<Criterion> {
        return TripletLossWithMiner(build_triplet_miner(a.miner), a.loss).ptr();
      },
      "triplet loss (margin or soft) over the triplets of a miner");
  reg.losses.add(
      "triplet", triplet_parse("triplet"),
      [](const TripletOptions& o, const CriterionContext&) -> std::shared_ptr<Criterion> {
        return TripletLoss(TripletLayout::blocks, o).ptr();
      },
      "OML's TripletLoss (margin, reduction, need_logs) on a batch of triplets stacked as [anchors; "
      "positives; negatives]; no miner");
  reg.losses.add(
      "triplet_plain", triplet_parse("triplet_plain"),
      [](const TripletOptions& o, const CriterionContext&) -> std::shared_ptr<Criterion> {
        return TripletLoss(TripletLayout::interleaved, o).ptr();
      },
      "OML's TripletLossPlain (margin, reduction, need_logs): triplet i at rows 3i, 3i+1, 3i+2; no miner");
  reg.losses.add(
      "arcface", config::checked_parse<ArcFaceOptions>([](config::ArgsReader& r, ArcFaceOptions& o) {
        read_arcface(r, o);
      }),
      [](ArcFaceOptions o, const CriterionContext& ctx) -> std::shared_ptr<Criterion> {
        return ArcFaceLoss(with_run_sizes(o, ctx, "arcface")).ptr();
      },
      "OML's ArcFaceLoss: additive angular margin softmax with trainable class weights (in_features, "
      "num_classes, m, s, smoothing_epsilon, reduction)");
  reg.losses.add(
      "mlp_arcface",
      config::checked_parse<MLPArcFaceOptions>([](config::ArgsReader& r, MLPArcFaceOptions& o) {
        read_arcface(r, o.arcface);
        r.required("mlp_features", o.mlp_features);
      }),
      [](MLPArcFaceOptions o, const CriterionContext& ctx) -> std::shared_ptr<Criterion> {
        o.arcface = with_run_sizes(o.arcface, ctx, "mlp_arcface");
        return MLPArcFaceLoss(o).ptr();
      },
      "OML's ArcFaceLossWithMLP: torchvision's MLP (mlp_features) in front of arcface (in_features, "
      "num_classes, m, s, smoothing_epsilon, reduction)");
  reg.losses.add(
      "surrogate_precision",
      config::checked_parse<SurrogatePrecisionOptions>(
          [](config::ArgsReader& r, SurrogatePrecisionOptions& o) {
            r.optional("k", o.k)
                .optional("temperature1", o.temperature1)
                .optional("temperature2", o.temperature2);
            r.optional("chunk_size", o.chunk_size).optional("reduction", o.reduction);
          }),
      [](const SurrogatePrecisionOptions& o, const CriterionContext&) -> std::shared_ptr<Criterion> {
        return SurrogatePrecision(o).ptr();
      },
      "1 - smoothed precision@k");
  reg.losses.add(
      "contrastive",
      pair_loss_parse(
          ContrastiveOptions{},
          [](config::ArgsReader& r, ContrastiveOptions& o) {
            r.optional("pos_margin", o.pos_margin).optional("neg_margin", o.neg_margin);
          },
          [](const ContrastiveOptions& o) { check_options(o); }),
      [](const PairLossArgs<ContrastiveOptions>& a, const CriterionContext&) -> std::shared_ptr<Criterion> {
        return ContrastiveLoss(a.loss, build_pair_selection_miner(a.miner)).ptr();
      },
      "PML's ContrastiveLoss: positive pairs pulled within pos_margin, negatives pushed past neg_margin "
      "(distance, miner)");
  reg.losses.add(
      "multi_similarity",
      pair_loss_parse(
          MultiSimilarityOptions{},
          [](config::ArgsReader& r, MultiSimilarityOptions& o) {
            r.optional("alpha", o.alpha).optional("beta", o.beta).optional("base", o.base);
          },
          [](const MultiSimilarityOptions& o) { check_options(o); }),
      [](const PairLossArgs<MultiSimilarityOptions>& a,
         const CriterionContext&) -> std::shared_ptr<Criterion> {
        return MultiSimilarityLoss(a.loss, build_pair_selection_miner(a.miner)).ptr();
      },
      "PML's MultiSimilarityLoss, cosine similarities by default (alpha, beta, base, distance, miner)");
  const auto read_temperature = [](config::ArgsReader& r, TemperatureOptions& o) {
    r.optional("temperature", o.temperature);
  };
  reg.losses.add(
      "supcon",
      pair_loss_parse(TemperatureOptions{0.1}, read_temperature,
                      [](const TemperatureOptions& o) { check_options(o, "supcon"); }),
      [](const PairLossArgs<TemperatureOptions>& a, const CriterionContext&) -> std::shared_ptr<Criterion> {
        return SupConLoss(a.loss, build_pair_selection_miner(a.miner)).ptr();
      },
      "PML's SupConLoss (supervised contrastive), cosine similarities by default; temperature (0.1), "
      "distance, miner");
  reg.losses.add(
      "ntxent",
      pair_loss_parse(TemperatureOptions{0.07}, read_temperature,
                      [](const TemperatureOptions& o) { check_options(o, "ntxent"); }),
      [](const PairLossArgs<TemperatureOptions>& a, const CriterionContext&) -> std::shared_ptr<Criterion> {
        return NTXentLoss(a.loss, build_pair_selection_miner(a.miner)).ptr();
      },
      "PML's NTXentLoss (InfoNCE over every positive pair), cosine similarities by default; temperature "
      "(0.07), distance, miner");
  reg.losses.add(
      "circle",
      pair_loss_parse(
          CircleOptions{},
          [](config::ArgsReader& r, CircleOptions& o) { r.optional("m", o.m).optional("gamma", o.gamma); },
          [](const CircleOptions& o) { check_options(o); }),
      [](const PairLossArgs<CircleOptions>& a, const CriterionContext&) -> std::shared_ptr<Criterion> {
        return CircleLoss(a.loss, build_pair_selection_miner(a.miner)).ptr();
      },
      "PML's CircleLoss on cosine similarities (m, gamma, miner)");
  reg.losses.add(
      "proxy_anchor",
      config::checked_parse<ProxyAnchorOptions>([](config::ArgsReader& r, ProxyAnchorOptions& o) {
        read_class_sizes(r, o);
        r.optional("margin", o.margin).optional("alpha", o.alpha);
        read_distance(r, o.distance);
      }),
      [](const ProxyAnchorOptions& o, const CriterionContext& ctx) -> std::shared_ptr<Criterion> {
        return ProxyAnchorLoss(with_run_sizes(o, ctx, "proxy_anchor")).ptr();
      },
      "PML's ProxyAnchorLoss: a trainable proxy per class, cosine similarities by default (margin, alpha, "
      "distance)");
  reg.losses.add(
      "proxy_nca", config::checked_parse<ProxyNCAOptions>([](config::ArgsReader& r, ProxyNCAOptions& o) {
        read_class_sizes(r, o);
        r.optional("softmax_scale", o.softmax_scale);
        read_distance(r, o.distance);
      }),
      [](const ProxyNCAOptions& o, const CriterionContext& ctx) -> std::shared_ptr<Criterion> {
        return ProxyNCALoss(with_run_sizes(o, ctx, "proxy_nca")).ptr();
      },
      "PML's ProxyNCALoss: softmax over squared distances to a trainable proxy per class (softmax_scale, "
      "distance)");
  reg.losses.add(
      "soft_triple",
      config::checked_parse<SoftTripleOptions>([](config::ArgsReader& r, SoftTripleOptions& o) {
        read_class_sizes(r, o);
        r.optional("centers_per_class", o.centers_per_class).optional("la", o.la);
        r.optional("gamma", o.gamma).optional("margin", o.margin);
        read_distance(r, o.distance);
      }),
      [](const SoftTripleOptions& o, const CriterionContext& ctx) -> std::shared_ptr<Criterion> {
        return SoftTripleLoss(with_run_sizes(o, ctx, "soft_triple")).ptr();
      },
      "PML's SoftTripleLoss: several trainable centres per class (centers_per_class, la, gamma, margin)");
  reg.losses.add(
      "cosface", config::checked_parse<CosFaceOptions>([](config::ArgsReader& r, CosFaceOptions& o) {
        read_class_sizes(r, o);
        r.optional("margin", o.margin).optional("scale", o.scale);
        read_distance(r, o.distance);
      }),
      [](const CosFaceOptions& o, const CriterionContext& ctx) -> std::shared_ptr<Criterion> {
        return CosFaceLoss(with_run_sizes(o, ctx, "cosface")).ptr();
      },
      "PML's CosFaceLoss: cosine classifier with an additive cosine margin (margin, scale)");
  reg.losses.add(
      "sub_center_arcface",
      config::checked_parse<SubCenterArcFaceOptions>([](config::ArgsReader& r, SubCenterArcFaceOptions& o) {
        read_class_sizes(r, o);
        r.optional("margin", o.margin).optional("scale", o.scale).optional("sub_centers", o.sub_centers);
        read_distance(r, o.distance);
      }),
      [](const SubCenterArcFaceOptions& o, const CriterionContext& ctx) -> std::shared_ptr<Criterion> {
        return SubCenterArcFaceLoss(with_run_sizes(o, ctx, "sub_center_arcface")).ptr();
      },
      "PML's SubCenterArcFaceLoss: ArcFace over the nearest of sub_centers weights per class (margin in "
      "degrees)");
  reg.miners.add(
      "all_triplets",
      [](config::ArgsReader& r) {
        int64_t max_output = AllTripletsMiner::kNoCap;  // OML's default: every triplet
        r.optional("max_output_triplets", max_output);
        r.check([&] { AllTripletsMiner::check(max_output); });
        return max_output;
      },
      [](int64_t max_output, const NoContext&) -> std::shared_ptr<Miner> {
        return std::make_shared<AllTripletsMiner>(max_output);
      },
      "all valid triplets, randomly capped at max_output_triplets");
  reg.miners.add(
      "hard_triplets", no_args,
      [](NoOptions, const NoContext&) -> std::shared_ptr<Miner> {
        return std::make_shared<HardTripletsMiner>();
      },
      "per anchor: farthest positive, nearest negative");
  reg.miners.add(
      "n_hard_triplets",
      [](config::ArgsReader& r) {
        NHardArgs a;
        r.custom([&] { a.positive = hardness(r.take("n_positive"), a.positive); });
        r.custom([&] { a.negative = hardness(r.take("n_negative"), a.negative); });
        r.check([&] { NHardTripletsMiner::check(a.positive, a.negative); });
        return a;
      },
      [](const NHardArgs& a, const NoContext&) -> std::shared_ptr<Miner> {
        return std::make_shared<NHardTripletsMiner>(a.positive, a.negative);
      },
      "per anchor: the n hardest (or a-th..b-th hardest) positives x negatives");
  reg.miners.add(
      "hard_cluster", no_args,
      [](NoOptions, const NoContext&) -> std::shared_ptr<Miner> {
        return std::make_shared<HardClusterMiner>();
      },
      "label means as anchors, farthest member, nearest other mean");
  reg.miners.add(
      "triplets_with_memory",
      [](config::ArgsReader& r) {
        MemoryArgs a;
        r.optional("bank_size_in_batches", a.bank_size_in_batches).optional("tri_expand_k", a.tri_expand_k);
        r.check([&] { TripletsWithMemoryMiner::check(a.bank_size_in_batches, a.tri_expand_k); });
        return a;
      },
      [](const MemoryArgs& a, const NoContext&) -> std::shared_ptr<Miner> {
        return std::make_shared<TripletsWithMemoryMiner>(a.bank_size_in_batches, a.tri_expand_k);
      },
      "batch triplets extended with negatives from a memory bank of past batches");
  reg.miners.add(
      "miner_with_bank",
      [](config::ArgsReader& r) {
        BankArgs a;
        bool need_logs = false;  // OML's switch for the miner's logs (its own yaml sets it); not written here
        r.optional("bank_size_in_batches", a.bank_size_in_batches).optional("need_logs", need_logs);
        a.miner = triplet_miner(r, "hard_triplets");
        r.check([&] { MinerWithBank::check(a.bank_size_in_batches); });
        r.check([&] {
          if (!a.miner.ok()) return;
          std::shared_ptr<TripletMiner> inner;
          try {  // as miner_of_kind: a build that fails is reported by the loss's build
            inner = build_triplet_miner(a.miner);
          } catch (const std::exception&) {
            return;
          }
          if (inner) MinerWithBank::check_miner(*inner, "'" + a.miner.spec.name + "'");
        });
        return a;
      },
      [](const BankArgs& a, const NoContext&) -> std::shared_ptr<Miner> {
        return std::make_shared<MinerWithBank>(a.bank_size_in_batches, build_triplet_miner(a.miner));
      },
      "runs another miner on the batch plus a bank of past batches");
  reg.miners.add(
      "multi_similarity",
      config::checked_parse<MultiSimilarityMinerOptions>(
          [](config::ArgsReader& r, MultiSimilarityMinerOptions& o) {
            r.optional("epsilon", o.epsilon);
            read_distance(r, o.distance);
          }),
      [](const MultiSimilarityMinerOptions& o, const NoContext&) -> std::shared_ptr<Miner> {
        return std::make_shared<MultiSimilarityMiner>(o);
      },
      "PML's MultiSimilarityMiner: the pairs harder than the closest negative / farthest positive by "
      "epsilon (distance), for the pair losses");
  reg.miners.add(
      "pairs",
      [](config::ArgsReader& r) {
        bool hard = true;
        r.optional("hard", hard);
        return hard;
      },
      [](bool hard, const NoContext&) -> std::shared_ptr<Miner> {
        return std::make_shared<PairsMiner>(hard);
      },
      "positive/negative pairs for pairwise training (hard or all)");
}

}  // namespace oml::losses
