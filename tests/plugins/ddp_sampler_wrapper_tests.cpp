// The DDP plugin's sampler wrapper (docs/contracts.md#ddp-sampler-wrapper) and the oml-sampler report
// (docs/contracts.md#sampler-report).
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "oml/config/document.h"
#include "oml/config/run_config.h"
#include "oml/ddp/ddp_sampler_wrapper.h"
#include "oml/ddp/epoch_position.h"
#include "oml/ddp/sampler_report.h"
#include "oml/samplers/balance_sampler.h"
#include "oml/samplers/index_samplers.h"
#include "runtime/pipeline_setup.h"
#include "sampler_test_data.h"
#include "support/support.h"

namespace ddp_sampler_wrapper_tests {

using Catch::Matchers::Contains;
using oml::data::Batch;
using oml::ddp::DdpSamplerOptions;
using oml::ddp::DDPSamplerWrapper;
using oml::test::make_context;

namespace {

// The ranks' items interleaved back into one list: position r + i * W holds rank r's i-th item,
// which is how the wrapper deals them out.
template <class Item>
std::vector<Item> interleave(const std::vector<std::vector<Item>>& per_rank) {
  std::vector<Item> out;
  const std::size_t steps = per_rank.at(0).size();
  for (std::size_t i = 0; i < steps; ++i) {
    for (const auto& rank : per_rank) out.push_back(rank.at(i));
  }
  return out;
}

// Checks docs/contracts.md#ddp-sampler-wrapper on any item type: `dealt` (interleaved ranks) against
// the wrapped epoch `base`.
template <class Item>
void check_dealt(const std::vector<Item>& base, const std::vector<Item>& dealt, int64_t world,
                 const DdpSamplerOptions& options) {
  const auto n = static_cast<int64_t>(base.size());
  const int64_t per_rank = options.pad_to_world_size ? (n + world - 1) / world : n / world;
  REQUIRE(static_cast<int64_t>(dealt.size()) == per_rank * world);
  if (!options.shuffle_between_ranks) {
    // Exactly the epoch, padded by repeating it from its start (cyclically), or truncated.
    for (int64_t p = 0; p < per_rank * world; ++p) REQUIRE(dealt[p] == base[p % n]);
    return;
  }
  // Shuffled: the first min(n, total) items are a permutation of (a prefix of) the epoch, and the
  // padding repeats the shuffled list from its start.
  const int64_t kept = std::min<int64_t>(n, per_rank * world);
  for (int64_t p = kept; p < per_rank * world; ++p) REQUIRE(dealt[p] == dealt[p % n]);
  auto shuffled = std::vector<Item>(dealt.begin(), dealt.begin() + kept);
  auto sorted_base = base;
  std::sort(shuffled.begin(), shuffled.end());
  std::sort(sorted_base.begin(), sorted_base.end());
  if (kept == n) {
    REQUIRE(shuffled == sorted_base);
  } else {
    REQUIRE(std::includes(sorted_base.begin(), sorted_base.end(), shuffled.begin(), shuffled.end()));
  }
}

const DdpSamplerOptions kAllOptions[] = {{false, true}, {false, false}, {true, true}, {true, false}};

}  // namespace

TEST_CASE("torch_randperm equals torch.randperm with a seeded CPU generator", "[ddp]") {
  // Produced with Debian's python3-torch 1.13:
  //   torch.randperm(n, generator=torch.Generator().manual_seed(s)).tolist()
  CHECK(oml::ddp::torch_randperm(10, 0) == std::vector<int64_t>{4, 1, 7, 5, 3, 9, 0, 8, 6, 2});
  CHECK(oml::ddp::torch_randperm(10, 42) == std::vector<int64_t>{2, 6, 1, 8, 4, 5, 0, 9, 3, 7});
  CHECK(oml::ddp::torch_randperm(7, 43) == std::vector<int64_t>{3, 1, 2, 4, 5, 0, 6});
  CHECK(oml::ddp::torch_randperm(25, 1234567) == std::vector<int64_t>{6,  24, 0,  17, 7,  4,  23, 18, 1,
                                                                      22, 8,  15, 21, 20, 10, 11, 13, 9,
                                                                      12, 2,  3,  14, 19, 16, 5});
}

TEST_CASE("Shuffled positions equal torch's DistributedSampler", "[ddp]") {
  // Produced with python3-torch 1.13: list(DistributedSampler(range(10), num_replicas=W, rank=r,
  // shuffle=True, seed=40, drop_last=...)) after set_epoch(2); the shuffle seed is 40 + 2. The
  // wrapper deals the indices of a sequential sampler over 10 rows, one batch per rank.
  auto rows = make_context({6, 3, 5, 0}, 1);
  rows.labels.resize(10);
  const auto sequential =
      std::make_shared<oml::samplers::SequentialSampler>(rows, oml::samplers::IndexSamplerOptions{10, false});
  auto positions = [&](int64_t rank, int64_t world, const DdpSamplerOptions& options) {
    const auto batches = DDPSamplerWrapper(sequential, options, rank, world, 40).batches(2);
    REQUIRE(batches.size() == 1);
    return batches.front();
  };
  const DdpSamplerOptions padded{true, true}, dropped{true, false};
  const std::vector<std::vector<int64_t>> w3_pad{{2, 8, 0, 7}, {6, 4, 9, 2}, {1, 5, 3, 6}};
  const std::vector<std::vector<int64_t>> w3_drop{{2, 8, 0}, {6, 4, 9}, {1, 5, 3}};
  const std::vector<std::vector<int64_t>> w4_pad{{2, 4, 3}, {6, 5, 7}, {1, 0, 2}, {8, 9, 6}};
  const std::vector<std::vector<int64_t>> w4_drop{{2, 4}, {6, 5}, {1, 0}, {8, 9}};
  for (int64_t r = 0; r < 3; ++r) {
    CHECK(positions(r, 3, padded) == w3_pad[r]);
    CHECK(positions(r, 3, dropped) == w3_drop[r]);
  }
  for (int64_t r = 0; r < 4; ++r) {
    CHECK(positions(r, 4, padded) == w4_pad[r]);
    CHECK(positions(r, 4, dropped) == w4_drop[r]);
  }
}

TEST_CASE("A wrapped batch sampler deals whole batches: equal steps, union = epoch + padding", "[ddp]") {
  for (uint64_t trial = 0; trial < 12; ++trial) {
    const auto context = make_context({7 + static_cast<int64_t>(trial * 3), 2, 5, 0}, trial + 40);
    const auto sampler = std::make_shared<oml::samplers::BalanceSampler>(
        context, oml::samplers::BalanceOptions{2, 2, std::nullopt});
    for (int64_t world = 1; world <= 4; ++world) {
      for (const auto& options : kAllOptions) {
        if (!options.pad_to_world_size && sampler->size() < world) continue;  // tested as an error below
        INFO("trial " << trial << " W " << world << " shuffle " << options.shuffle_between_ranks << " pad "
                      << options.pad_to_world_size);
        for (int64_t epoch : {0, 3}) {
          std::vector<std::vector<Batch>> ranks;
          for (int64_t r = 0; r < world; ++r) {
            const DDPSamplerWrapper wrapper(sampler, options, r, world, context.seed);
            ranks.push_back(wrapper.batches(epoch));
            REQUIRE(static_cast<int64_t>(ranks.back().size()) == wrapper.size());
            REQUIRE(ranks.back().size() == ranks.front().size());  // every rank runs the same steps
          }
          // The wrapped epoch is the unwrapped sampler's: it does not depend on W.
          check_dealt(sampler->batches(epoch), interleave(ranks), world, options);
        }
      }
    }
  }
}

TEST_CASE("A wrapped index sampler deals indices, then each rank batches its share", "[ddp]") {
  for (uint64_t trial = 0; trial < 12; ++trial) {
    const auto context = make_context({5 + static_cast<int64_t>(trial), 1, 4, 0}, trial + 70);
    for (bool drop_last : {false, true}) {
      const auto sampler = std::make_shared<oml::samplers::RandomSampler>(
          context, oml::samplers::IndexSamplerOptions{3, drop_last});
      for (int64_t world = 1; world <= 4; ++world) {
        for (const auto& options : kAllOptions) {
          INFO("trial " << trial << " W " << world << " drop_last " << drop_last);
          const int64_t per_rank =
              oml::ddp::items_per_rank(sampler->size(), world, options.pad_to_world_size);
          if (oml::data::batch_count(per_rank, 3, drop_last) == 0) {
            CHECK_THROWS_AS(DDPSamplerWrapper(sampler, options, 0, world, context.seed), oml::ConfigError);
            continue;
          }
          std::vector<std::vector<int64_t>> shares;
          for (int64_t r = 0; r < world; ++r) {
            const DDPSamplerWrapper wrapper(sampler, options, r, world, context.seed);
            const auto batches = wrapper.batches(5);
            REQUIRE(static_cast<int64_t>(batches.size()) == wrapper.size());
            REQUIRE(wrapper.size() == oml::data::batch_count(per_rank, 3, drop_last));
            for (std::size_t b = 0; b + 1 < batches.size(); ++b) REQUIRE(batches[b].size() == 3);
            const auto share = oml::test::flatten(batches);
            if (!drop_last) REQUIRE(static_cast<int64_t>(share.size()) == per_rank);
            shares.push_back(share);
          }
          if (!drop_last) check_dealt(sampler->indices(5), interleave(shares), world, options);
        }
      }
    }
  }
}

TEST_CASE("With one rank the wrapper equals the unwrapped sampler, shuffled or not", "[ddp]") {
  const auto context = make_context({13, 2, 4, 0}, 99);
  const std::shared_ptr<const oml::data::Sampler> samplers[] = {
      std::make_shared<oml::samplers::BalanceSampler>(context,
                                                      oml::samplers::BalanceOptions{3, 2, std::nullopt}),
      std::make_shared<oml::samplers::RandomSampler>(context, oml::samplers::IndexSamplerOptions{4, true}),
      std::make_shared<oml::samplers::SequentialSampler>(context,
                                                         oml::samplers::IndexSamplerOptions{5, false})};
  for (const auto& sampler : samplers) {
    for (const auto& options : kAllOptions) {
      const DDPSamplerWrapper wrapper(sampler, options, 0, 1, context.seed);
      CHECK(wrapper.size() == oml::data::batches_per_epoch(*sampler));
      for (int64_t epoch = 0; epoch < 3; ++epoch) {
        CHECK(oml::data::epoch_batches(wrapper, epoch) == oml::data::epoch_batches(*sampler, epoch));
      }
    }
  }
}

TEST_CASE("Each epoch re-draws the wrapped sampler's epoch", "[ddp]") {
  const auto context = make_context({16, 2, 4, 0}, 5);
  const auto sampler = std::make_shared<oml::samplers::BalanceSampler>(
      context, oml::samplers::BalanceOptions{2, 2, std::nullopt});
  const DDPSamplerWrapper wrapper(sampler, {true, true}, 1, 3, context.seed);
  CHECK(wrapper.batches(0) != wrapper.batches(1));
  CHECK(wrapper.batches(1) == DDPSamplerWrapper(sampler, {true, true}, 1, 3, context.seed).batches(1));
}

TEST_CASE("A world without padding that leaves a rank no batch is a config error", "[ddp]") {
  const auto context = make_context({6, 2, 3, 0}, 8);
  const auto sampler = std::make_shared<oml::samplers::BalanceSampler>(
      context, oml::samplers::BalanceOptions{2, 2, std::nullopt});
  REQUIRE(sampler->size() == 3);
  CHECK_NOTHROW(DDPSamplerWrapper(sampler, {false, true}, 3, 4, 0));
  CHECK_THROWS_WITH(DDPSamplerWrapper(sampler, {false, false}, 0, 4, 0),
                    Contains("sampler 'balance' yields 3 batches per epoch") && Contains("4 ranks") &&
                        Contains("pad_to_world_size: true"));
  CHECK_THROWS_AS(DDPSamplerWrapper(sampler, {false, true}, 4, 4, 0), oml::UsageError);
}

namespace {

// A sampler that breaks the contract as its `fault` says, for the checks that enforce it.
class FaultySampler : public oml::data::IndexSampler {
 public:
  FaultySampler(std::string fault, int64_t size) : fault_(std::move(fault)), size_(size) {}
  std::string name() const override { return "faulty"; }
  int64_t size() const override { return size_; }
  int64_t batch_size() const override { return 2; }
  bool drop_last() const override { return false; }
  std::vector<int64_t> indices(int64_t) const override {
    if (fault_ == "throws") throw std::runtime_error("epoch boom");
    if (fault_ == "throws int") throw 5;
    if (fault_ == "overstates") return {0, 1, 2};  // size() says far more
    std::vector<int64_t> out(static_cast<std::size_t>(size_));
    for (int64_t i = 0; i < size_; ++i) out[static_cast<std::size_t>(i)] = i;
    if (fault_ == "out of range") out.back() = 300;
    if (fault_ == "negative") out.front() = INT64_MIN;
    return out;
  }

 private:
  std::string fault_;
  int64_t size_;
};

}  // namespace

TEST_CASE("A sampler breaking its contract is a plugin error naming it and the epoch", "[ddp][samplers]") {
  const auto epoch = [](const std::string& fault, int64_t size = 6) {
    const auto sampler = std::make_shared<FaultySampler>(fault, size);
    const auto batches = DDPSamplerWrapper(sampler, {false, true}, 0, 1, 0).batches(3);
    oml::data::check_batches(*sampler, batches, 3, 6);
    return batches;
  };
  CHECK_NOTHROW(epoch("none"));
  CHECK_THROWS_MATCHES(epoch("throws"), oml::PluginError,
                       Catch::Matchers::Message("sampler 'faulty' failed to draw epoch 3: epoch boom"));
  CHECK_THROWS_WITH(epoch("throws int"),
                    Contains("sampler 'faulty' failed to draw epoch 3") && Contains("not a std::exception"));
  // 2^40 promised, 3 drawn: refused before an order of 2^40 positions is allocated.
  CHECK_THROWS_WITH(
      epoch("overstates", int64_t{1} << 40),
      Contains("sampler 'faulty' produced 3 indices for epoch 3, but its size() says 1099511627776"));
  CHECK_THROWS_MATCHES(epoch("out of range"), oml::PluginError,
                       Catch::Matchers::Message("sampler 'faulty' put row 300 in batch 2 of epoch 3, outside "
                                                "the 6 rows it samples from [0, 6)"));
  CHECK_THROWS_WITH(epoch("negative"), Contains("put row -9223372036854775808 in batch 0 of epoch 3"));
  const auto sampler = std::make_shared<FaultySampler>("none", 6);
  CHECK_THROWS_WITH(oml::data::check_batches(*sampler, {{0, 1}, {}}, 0, 6),
                    Contains("sampler 'faulty' gave an empty batch (batch 1 of epoch 0)"));
  // oml-sampler's report checks what it prints as training does.
  std::ostringstream report;
  CHECK_THROWS_AS(oml::ddp::write_sampler_report(report, std::make_shared<FaultySampler>("out of range", 6),
                                                 1, 1, {false, true}, 0, 6),
                  oml::PluginError);
}

TEST_CASE("Batch and share counts do not overflow near INT64_MAX", "[ddp][samplers]") {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  CHECK(oml::data::batch_count(300, kMax, false) == 1);
  CHECK(oml::data::batch_count(300, kMax, true) == 0);
  CHECK(oml::data::batch_count(kMax, 2, false) == kMax / 2 + 1);
  CHECK(oml::ddp::items_per_rank(kMax, 2, true) == kMax / 2 + 1);
  CHECK(oml::ddp::items_per_rank(kMax, 2, false) == kMax / 2);
}

TEST_CASE("The sampler report lists every rank's batches of every epoch", "[ddp]") {
  const auto context = make_context({10, 2, 3, 0}, 12);
  const auto sampler = std::make_shared<oml::samplers::BalanceSampler>(
      context, oml::samplers::BalanceOptions{2, 2, std::nullopt});
  const DdpSamplerOptions options{true, true};
  const auto report = oml::ddp::sampler_report(sampler, 3, 2, options, context.seed);
  CHECK(report["world_size"] == 3);
  REQUIRE(report["epochs"].size() == 2);
  for (int64_t e = 0; e < 2; ++e) {
    const auto& epoch = report["epochs"][e];
    CHECK(epoch["epoch"] == e);
    REQUIRE(epoch["ranks"].size() == 3);
    for (int64_t r = 0; r < 3; ++r) {
      CHECK(epoch["ranks"][r]["rank"] == r);
      const auto batches = epoch["ranks"][r]["batches"].get<std::vector<Batch>>();
      CHECK(batches == DDPSamplerWrapper(sampler, options, r, 3, context.seed).batches(e));
    }
  }
  // The streamed text is that JSON in nlohmann's compact form, one line.
  std::ostringstream streamed;
  oml::ddp::write_sampler_report(streamed, sampler, 3, 2, options, context.seed);
  CHECK(streamed.str() == report.dump() + "\n");
  const auto single = oml::ddp::sampler_report(sampler, 1, 1, options, context.seed);
  CHECK(single["epochs"][0]["ranks"][0]["batches"].get<std::vector<Batch>>() == sampler->batches(0));
  CHECK_THROWS_AS(oml::ddp::sampler_report(sampler, 0, 1, options, 0), oml::UsageError);
  CHECK_THROWS_WITH(oml::ddp::sampler_report(sampler, 2000000000, 1, options, 0),
                    Contains("--world-size must be 1 to 65536, got 2000000000"));
  CHECK_THROWS_WITH(oml::ddp::sampler_report(sampler, 2, 0, options, 0), Contains("--epochs must be >= 1"));
}

TEST_CASE("The ddp section of a config gives the wrapper's options, with OML's defaults", "[ddp]") {
  const auto defaults = oml::pipelines::ddp_sampler_options(oml::config::RunConfig{});
  CHECK_FALSE(defaults.shuffle_between_ranks);
  CHECK(defaults.pad_to_world_size);
  const auto document = oml::config::Document::from_string(
      "ddp: {shuffle_between_ranks: true, pad_to_world_size: false}\n", "cfg.yaml");
  const auto options = oml::pipelines::ddp_sampler_options(oml::config::parse_run_config(document.root()));
  CHECK(options.shuffle_between_ranks);
  CHECK_FALSE(options.pad_to_world_size);
}

}  // namespace ddp_sampler_wrapper_tests
