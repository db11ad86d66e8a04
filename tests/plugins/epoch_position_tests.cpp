// Continuing an epoch on another number of ranks (DDPSamplerWrapper::batches_from,
// docs/ddp.md#resuming-on-another-number-of-ranks).
#include "oml/ddp/ddp_sampler_wrapper.h"
#include "oml/samplers/balance_sampler.h"
#include "oml/samplers/index_samplers.h"
#include "sampler_test_data.h"
#include "support/support.h"

namespace epoch_position_tests {

using Catch::Matchers::Contains;
using oml::data::Batch;
using oml::ddp::DdpSamplerOptions;
using oml::ddp::EpochPosition;
using oml::test::make_context;

namespace {

const DdpSamplerOptions kAllOptions[] = {{false, true}, {false, false}, {true, true}, {true, false}};

// A batch sampler with 8 batches per epoch and index samplers over 23 rows, with and without
// drop_last: the shapes whose tails (padding, truncation, dropped short batches) differ.
std::vector<std::shared_ptr<const oml::data::Sampler>> samplers_under_test() {
  const auto context = make_context({12, 2, 4, 0}, 31);
  std::vector<std::shared_ptr<const oml::data::Sampler>> out;
  out.push_back(
      std::make_shared<oml::samplers::BalanceSampler>(context, oml::samplers::BalanceOptions{3, 2, 8}));
  auto rows = make_context({6, 3, 5, 0}, 32);
  rows.labels.resize(23);
  for (bool drop_last : {false, true}) {
    out.push_back(std::make_shared<oml::samplers::RandomSampler>(
        rows, oml::samplers::IndexSamplerOptions{3, drop_last}));
  }
  return out;
}

// Every rank's batches, or nothing when the wrapper refuses the world (a rank would get no batch).
std::optional<std::vector<std::vector<Batch>>> wrapper_batches(
    std::shared_ptr<const oml::data::Sampler> sampler, const DdpSamplerOptions& options, int64_t world,
    int64_t epoch) {
  std::vector<std::vector<Batch>> ranks;
  for (int64_t r = 0; r < world; ++r) {
    try {
      ranks.push_back(oml::ddp::DDPSamplerWrapper(sampler, options, r, world, 7).batches(epoch));
    } catch (const oml::ConfigError&) {
      return std::nullopt;
    }
  }
  return ranks;
}

// Rank `rank` of `world`'s batches for the rest of the epoch at `position`.
std::vector<Batch> rest_of(std::shared_ptr<const oml::data::Sampler> sampler,
                           const DdpSamplerOptions& options, const EpochPosition& position, int64_t rank,
                           int64_t world) {
  return oml::ddp::DDPSamplerWrapper(std::move(sampler), options, rank, world, 7).batches_from(position);
}

std::vector<std::vector<Batch>> resumed_batches(const std::shared_ptr<const oml::data::Sampler>& sampler,
                                                const DdpSamplerOptions& options,
                                                const EpochPosition& position, int64_t world) {
  std::vector<std::vector<Batch>> ranks;
  for (int64_t r = 0; r < world; ++r) ranks.push_back(rest_of(sampler, options, position, r, world));
  for (const auto& rank : ranks) REQUIRE(rank.size() == ranks.front().size());  // equal steps
  return ranks;
}

// The ranks' steps `first..` merged back into the global order they were dealt from: step by step,
// and within a step item j of every rank's batch before item j + 1 (the wrapper deals position
// p to rank p mod W). A batch sampler's "items" are whole batches.
std::vector<Batch> global_sequence(const oml::data::Sampler& sampler,
                                   const std::vector<std::vector<Batch>>& ranks, std::size_t first = 0,
                                   std::size_t last = SIZE_MAX) {
  std::vector<Batch> out;
  const std::size_t steps = std::min(last, ranks.at(0).size());
  for (std::size_t t = first; t < steps; ++t) {
    if (sampler.kind() == oml::data::SamplerKind::batch) {
      for (const auto& rank : ranks) out.push_back(rank[t]);
      continue;
    }
    for (std::size_t j = 0; j < ranks[0][t].size(); ++j) {
      for (const auto& rank : ranks) out.push_back({rank[t].at(j)});
    }
  }
  return out;
}

}  // namespace

TEST_CASE("A fresh epoch position gives exactly the wrapper's batches", "[ddp][resume]") {
  for (const auto& sampler : samplers_under_test()) {
    for (const auto& options : kAllOptions) {
      for (int64_t world = 1; world <= 4; ++world) {
        INFO(sampler->name() << " drop_last " << sampler->drop_last() << " W " << world << " shuffle "
                             << options.shuffle_between_ranks << " pad " << options.pad_to_world_size);
        const auto expected = wrapper_batches(sampler, options, world, 2);
        if (!expected) continue;
        CHECK(resumed_batches(sampler, options, {2, 0, world}, world) == *expected);
      }
    }
  }
}

TEST_CASE("Resuming on the same number of ranks continues with the wrapper's remaining batches",
          "[ddp][resume]") {
  for (const auto& sampler : samplers_under_test()) {
    for (const auto& options : kAllOptions) {
      for (int64_t world = 1; world <= 4; ++world) {
        const auto full = wrapper_batches(sampler, options, world, 1);
        if (!full) continue;
        for (std::size_t s = 0; s < full->at(0).size(); ++s) {  // inside the epoch, as checkpoints are
          INFO(sampler->name() << " drop_last " << sampler->drop_last() << " W " << world << " step " << s);
          const EpochPosition at{1, static_cast<int64_t>(s) * oml::ddp::items_per_step(*sampler, world),
                                 world};
          const auto rest = resumed_batches(sampler, options, at, world);
          for (int64_t r = 0; r < world; ++r) {
            CHECK(rest[r] == std::vector<Batch>(full->at(r).begin() + s, full->at(r).end()));
          }
        }
      }
    }
  }
}

TEST_CASE(
    "An epoch continued on another number of ranks consumes the uninterrupted run's items once, "
    "plus padding",
    "[ddp][resume]") {
  for (const auto& sampler : samplers_under_test()) {
    for (const auto& options : kAllOptions) {
      for (int64_t world = 1; world <= 4; ++world) {
        const auto uninterrupted = wrapper_batches(sampler, options, world, 3);
        if (!uninterrupted) continue;
        const std::vector<Batch> reference = global_sequence(*sampler, *uninterrupted);
        const int64_t end = oml::ddp::items_per_epoch(*sampler, options, world);
        for (std::size_t s = 0; s < uninterrupted->at(0).size(); ++s) {
          const EpochPosition at{3, static_cast<int64_t>(s) * oml::ddp::items_per_step(*sampler, world),
                                 world};
          for (int64_t resumed_on = 1; resumed_on <= 5; ++resumed_on) {
            INFO(sampler->name() << " drop_last " << sampler->drop_last() << " shuffle "
                                 << options.shuffle_between_ranks << " pad " << options.pad_to_world_size
                                 << ": " << world << " ranks for " << s << " steps, then " << resumed_on
                                 << " ranks");
            std::vector<Batch> consumed = global_sequence(*sampler, *uninterrupted, 0, s);
            REQUIRE(static_cast<int64_t>(consumed.size()) == at.consumed);
            std::vector<std::vector<Batch>> rest;
            try {
              rest = resumed_batches(sampler, options, at, resumed_on);
            } catch (const oml::ConfigError&) {
              // Only without padding, and only when the new world cannot share the rest.
              CHECK_FALSE(options.pad_to_world_size);
              continue;
            }
            for (const Batch& item : global_sequence(*sampler, rest)) consumed.push_back(item);
            // The uninterrupted run's items in its order, each once ...
            REQUIRE(static_cast<int64_t>(consumed.size()) >= end);
            for (int64_t p = 0; p < end; ++p) REQUIRE(consumed[p] == reference.at(p));
            // ... then padding: the order's first items again, fewer than one step of the new world.
            const auto padding = static_cast<int64_t>(consumed.size()) - end;
            CHECK(padding < std::max<int64_t>(1, oml::ddp::items_per_step(*sampler, resumed_on)));
            if (!options.pad_to_world_size) CHECK(padding == 0);
            for (int64_t j = 0; j < padding; ++j) REQUIRE(consumed[end + j] == reference.at(j));
          }
        }
      }
    }
  }
}

TEST_CASE("An epoch interrupted twice, on different numbers of ranks, still consumes each item once",
          "[ddp][resume]") {
  for (const auto& sampler : samplers_under_test()) {
    for (const auto& options : {DdpSamplerOptions{false, true}, DdpSamplerOptions{true, true}}) {
      const std::vector<Batch> reference =
          global_sequence(*sampler, wrapper_batches(sampler, options, 2, 4).value());
      const int64_t end = oml::ddp::items_per_epoch(*sampler, options, 2);
      // 2 ranks take 1 step, 3 ranks continue for 1 step (as the Trainer counts it: items of the
      // global order, the world that started the epoch kept), 1 rank takes the rest.
      const EpochPosition first{4, oml::ddp::items_per_step(*sampler, 2), 2};
      const auto middle = resumed_batches(sampler, options, first, 3);
      REQUIRE(middle.at(0).size() > 1);  // the second stop lies inside the epoch
      const EpochPosition second{4, first.consumed + oml::ddp::items_per_step(*sampler, 3), 2};
      std::vector<Batch> consumed(reference.begin(), reference.begin() + first.consumed);
      for (const Batch& item : global_sequence(*sampler, middle, 0, 1)) consumed.push_back(item);
      REQUIRE(static_cast<int64_t>(consumed.size()) == second.consumed);
      for (const Batch& item : global_sequence(*sampler, resumed_batches(sampler, options, second, 1)))
        consumed.push_back(item);
      INFO(sampler->name() << " drop_last " << sampler->drop_last() << " shuffle "
                           << options.shuffle_between_ranks);
      REQUIRE(static_cast<int64_t>(consumed.size()) >= end);
      CHECK(std::vector<Batch>(consumed.begin(), consumed.begin() + end) ==
            std::vector<Batch>(reference.begin(), reference.begin() + end));
      const auto padding = static_cast<int64_t>(consumed.size()) - end;
      CHECK(padding < oml::ddp::items_per_step(*sampler, 1));
      for (int64_t j = 0; j < padding; ++j) CHECK(consumed[end + j] == reference.at(j));
    }
  }
}

TEST_CASE("A shuffled epoch started on several ranks keeps their order on one rank", "[ddp][resume]") {
  const auto sampler = samplers_under_test().front();
  const DdpSamplerOptions shuffled{true, true};
  const auto two = wrapper_batches(sampler, shuffled, 2, 0).value();
  // One rank alone would not shuffle; continuing the 2-rank epoch it must follow their order.
  const auto rest = rest_of(sampler, shuffled, {0, 4, 2}, 0, 1);
  REQUIRE(rest.size() == 4);
  for (std::size_t i = 0; i < rest.size(); ++i) CHECK(rest[i] == two.at(i % 2).at(2 + i / 2));
  const auto unshuffled = oml::data::epoch_batches(*sampler, 0);
  CHECK(rest != std::vector<Batch>(unshuffled.begin() + 4, unshuffled.end()));
}

TEST_CASE(
    "Without padding, a world that cannot share the rest exactly is a config error naming the worlds "
    "that can",
    "[ddp][resume]") {
  const auto sampler = samplers_under_test().front();
  REQUIRE(sampler->size() == 8);
  const DdpSamplerOptions unpadded{false, false};
  // 2 ranks took 2 steps: 4 of 8 batches remain; 3 ranks would need 1 padding batch.
  CHECK_THROWS_AS(rest_of(sampler, unpadded, {1, 4, 2}, 0, 3), oml::ConfigError);
  CHECK_THROWS_WITH(rest_of(sampler, unpadded, {1, 4, 2}, 0, 3),
                    Contains("cannot continue epoch 1 of sampler 'balance' exactly on 3 rank(s)") &&
                        Contains("4 of its batches remain") && Contains("Resume on 1, 2 or 4 rank(s)") &&
                        Contains("ddp.pad_to_world_size: true"));
  CHECK(rest_of(sampler, unpadded, {1, 4, 2}, 3, 4).size() == 1);
  // An index sampler with drop_last needs whole batches on every rank.
  const auto dropping = samplers_under_test().back();
  REQUIRE(dropping->drop_last());
  // 1 rank, batch 3: 21 of 23 indices per epoch; after 2 steps 15 remain, 2 ranks would need 18.
  CHECK_THROWS_WITH(rest_of(dropping, unpadded, {0, 6, 1}, 0, 2), Contains("15 of its indices remain") &&
                                                                      Contains("in whole batches of 3") &&
                                                                      Contains("Resume on 1 or 5 rank(s)"));
}

TEST_CASE("A position outside the epoch is a data error", "[ddp][resume]") {
  const auto sampler = samplers_under_test().front();
  const DdpSamplerOptions padded{false, true};
  CHECK_THROWS_WITH(rest_of(sampler, padded, {1, 9, 2}, 0, 2),
                    Contains("cannot resume sampler 'balance' at epoch 1 after 9 of its batches") &&
                        Contains("consume 8") && Contains("changed since the checkpoint"));
  CHECK_THROWS_AS(rest_of(sampler, padded, {1, -1, 2}, 0, 2), oml::DataError);
  CHECK_THROWS_AS(rest_of(sampler, padded, {-1, 0, 2}, 0, 2), oml::DataError);
  CHECK_THROWS_WITH(rest_of(sampler, padded, {1, 0, 0}, 0, 2), Contains("started by 0 ranks"));
  CHECK_THROWS_AS(rest_of(sampler, padded, {1, 0, int64_t{1} << 40}, 0, 2), oml::DataError);
  // The end of an epoch is a position too: nothing left.
  CHECK(rest_of(sampler, padded, {1, 8, 2}, 1, 3).empty());
}

}  // namespace epoch_position_tests
