#include "oml/losses/register.h"

#include <torch/torch.h>

#include "oml/config/reader.h"
#include "oml/losses/arcface.h"
#include "oml/losses/miners.h"
#include "oml/losses/surrogate_precision.h"
#include "oml/losses/triplet_loss.h"
#include "oml/registry/registries.h"

namespace oml::losses {
namespace {

// A nested `miner: {name, args}` that must produce triplets; `fallback` when absent.
std::shared_ptr<TripletMiner> triplet_miner(const config::Node& node, const std::string& owner,
                                            const std::string& fallback) {
  config::ComponentSpec spec;
  if (node.is_null()) {
    spec.name = fallback;
  } else {
    spec = config::parse_component(node, owner + ".miner");
  }
  const std::shared_ptr<Miner> built = registries().miners.create(spec);
  if (!built) return nullptr;  // an args check (config/args_check.h): nothing is built
  auto miner = std::dynamic_pointer_cast<TripletMiner>(built);
  if (!miner) {
    const std::string where = node.defined() ? node.describe() + ": " : "";
    throw ConfigError(where + owner + " needs a triplet miner, but miner '" + spec.name + "' produces pairs");
  }
  return miner;
}

// `n: 3` -> the 3 hardest ([1, 3]); `[a, b]` -> a-th..b-th hardest.
HardnessRange hardness(const config::Node& node, HardnessRange fallback) {
  if (!node.defined()) return fallback;
  if (node.is_sequence()) {
    const auto v = node.as<std::vector<int64_t>>();
    if (v.size() != 2) node.fail("expected an integer n or a range [a, b]");
    return {v[0], v[1]};
  }
  return {1, node.as<int64_t>()};
}

}  // namespace

void register_builtin_losses(Registries& reg) {
  reg.losses.add(
      "triplet_with_miner",
      [](const config::Node& args, const CriterionContext&) -> std::shared_ptr<Criterion> {
        TripletOptions o;
        config::MapReader r(args, "loss 'triplet_with_miner' args");
        if (r.has("margin")) o.margin = r.take("margin").as<std::optional<double>>();
        r.optional("reduction", o.reduction);
        bool need_logs = true;  // OML's switch for its per-step logs; they are always recorded here
        r.optional("need_logs", need_logs);
        auto miner = triplet_miner(r.take("miner"), "triplet_with_miner", "all_triplets");
        r.finish();
        return TripletLossWithMiner(miner, o).ptr();
      },
      "triplet loss (margin or soft) over the triplets of a miner");
  reg.losses.add(
      "arcface",
      [](const config::Node& args, const CriterionContext& ctx) -> std::shared_ptr<Criterion> {
        ArcFaceOptions o;
        o.in_features = ctx.embedding_size;
        o.num_classes = ctx.num_classes;
        config::MapReader r(args, "loss 'arcface' args");
        r.optional("in_features", o.in_features).optional("num_classes", o.num_classes).optional("m", o.m);
        r.optional("s", o.s).optional("smoothing_epsilon", o.smoothing_epsilon);
        r.finish();
        return ArcFaceLoss(o).ptr();
      },
      "additive angular margin softmax with trainable class weights");
  reg.losses.add(
      "surrogate_precision",
      [](const config::Node& args, const CriterionContext&) -> std::shared_ptr<Criterion> {
        SurrogatePrecisionOptions o;
        config::MapReader r(args, "loss 'surrogate_precision' args");
        r.optional("k", o.k)
            .optional("temperature1", o.temperature1)
            .optional("temperature2", o.temperature2);
        r.optional("chunk_size", o.chunk_size);
        r.finish();
        return SurrogatePrecision(o).ptr();
      },
      "1 - smoothed precision@k");

  reg.miners.add(
      "all_triplets",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<Miner> {
        int64_t max_output = 512;
        config::MapReader r(args, "miner 'all_triplets' args");
        r.optional("max_output_triplets", max_output);
        r.finish();
        return std::make_shared<AllTripletsMiner>(max_output);
      },
      "all valid triplets, randomly capped at max_output_triplets");
  reg.miners.add(
      "hard_triplets",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<Miner> {
        config::MapReader(args, "miner 'hard_triplets' args").finish();
        return std::make_shared<HardTripletsMiner>();
      },
      "per anchor: farthest positive, nearest negative");
  reg.miners.add(
      "n_hard_triplets",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<Miner> {
        config::MapReader r(args, "miner 'n_hard_triplets' args");
        const auto pos = hardness(r.take("n_positive"), {1, 1});
        const auto neg = hardness(r.take("n_negative"), {1, 1});
        r.finish();
        return std::make_shared<NHardTripletsMiner>(pos, neg);
      },
      "per anchor: the n hardest (or a-th..b-th hardest) positives x negatives");
  reg.miners.add(
      "hard_cluster",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<Miner> {
        config::MapReader(args, "miner 'hard_cluster' args").finish();
        return std::make_shared<HardClusterMiner>();
      },
      "label means as anchors, farthest member, nearest other mean");
  reg.miners.add(
      "triplets_with_memory",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<Miner> {
        int64_t bank = 20, k = 3;
        config::MapReader r(args, "miner 'triplets_with_memory' args");
        r.optional("bank_size_in_batches", bank).optional("tri_expand_k", k);
        r.finish();
        return std::make_shared<TripletsWithMemoryMiner>(bank, k);
      },
      "batch triplets extended with negatives from a memory bank of past batches");
  reg.miners.add(
      "miner_with_bank",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<Miner> {
        int64_t bank = 10;
        config::MapReader r(args, "miner 'miner_with_bank' args");
        r.optional("bank_size_in_batches", bank);
        auto inner = triplet_miner(r.take("miner"), "miner_with_bank", "hard_triplets");
        r.finish();
        return std::make_shared<MinerWithBank>(bank, inner);
      },
      "runs another miner on the batch plus a bank of past batches");
  reg.miners.add(
      "pairs",
      [](const config::Node& args, const NoContext&) -> std::shared_ptr<Miner> {
        bool hard = true;
        config::MapReader r(args, "miner 'pairs' args");
        r.optional("hard", hard);
        r.finish();
        return std::make_shared<PairsMiner>(hard);
      },
      "positive/negative pairs for pairwise training (hard or all)");
}

}  // namespace oml::losses
