// Built-in samplers (docs/samplers.md): property tests over many random label sets, determinism in
// (seed, epoch), and the errors for bad arguments and bad data.
#include <numeric>

#include "oml/config/document.h"
#include "oml/registry/registries.h"
#include "oml/samplers/balance_sampler.h"
#include "oml/samplers/builtin_samplers.h"
#include "oml/samplers/category_balance_sampler.h"
#include "oml/samplers/distinct_category_balance_sampler.h"
#include "oml/samplers/index_samplers.h"
#include "sampler_test_data.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"

namespace samplers_tests {

using Catch::Matchers::Contains;
using oml::config::Document;
using oml::config::parse_component;
using oml::data::Batch;
using oml::test::check_blocks;
using oml::test::LabelSetShape;
using oml::test::make_context;

namespace {

// Builds the sampler a YAML `sampler:` entry names, through the registry.
std::shared_ptr<oml::data::Sampler> from_yaml(const std::string& yaml,
                                              const oml::data::SamplerContext& context) {
  oml::cli::register_builtins();
  static std::vector<Document> keep_alive;  // nodes refer into their document
  keep_alive.push_back(Document::from_string(yaml, "cfg.yaml"));
  const auto node = keep_alive.back().root()["sampler"];
  if (node.is_null())
    return oml::samplers::build_sampler(std::optional<oml::config::ComponentSpec>(), context);
  return oml::samplers::build_sampler(parse_component(node, "sampler"), context);
}

// A few label sets per trial: random sizes plus the corner cases the issue names.
std::vector<LabelSetShape> shapes(uint64_t trial, int64_t n_categories = 0) {
  std::mt19937_64 gen(trial);
  LabelSetShape random_shape;
  random_shape.n_labels = 2 + static_cast<int64_t>(gen() % 30);
  random_shape.min_items = 2;
  random_shape.max_items = 2 + static_cast<int64_t>(gen() % 8);
  random_shape.n_categories = n_categories;
  LabelSetShape two_items = random_shape;  // every label has exactly 2 items
  two_items.max_items = 2;
  return {random_shape, two_items};
}

void check_epochs_differ(const oml::data::Sampler& sampler) {
  const auto first = oml::data::epoch_batches(sampler, 0);
  bool differs = false;
  for (int64_t e = 1; e < 6 && !differs; ++e) differs = oml::data::epoch_batches(sampler, e) != first;
  CHECK(differs);
}

}  // namespace

TEST_CASE("Sequential sampler yields the rows in order, batched like torch's BatchSampler", "[samplers]") {
  auto context = make_context({7, 2, 2, 0}, 1);  // 14 rows
  const oml::samplers::SequentialSampler keep(context, {5, false});
  const oml::samplers::SequentialSampler drop(context, {5, true});
  std::vector<int64_t> expected(14);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(keep.indices(3) == expected);
  CHECK(keep.size() == 14);
  const auto batches = oml::data::epoch_batches(keep, 0);
  REQUIRE(batches.size() == 3);  // ceil(14 / 5)
  CHECK(batches[2] == Batch{10, 11, 12, 13});
  CHECK(oml::data::epoch_batches(drop, 0).size() == 2);  // floor(14 / 5)
  CHECK(oml::data::batches_per_epoch(drop) == 2);
}

TEST_CASE("Random sampler yields a permutation that depends only on seed and epoch", "[samplers]") {
  for (uint64_t trial = 0; trial < 20; ++trial) {
    const auto context = make_context(shapes(trial)[0], trial);
    const oml::samplers::RandomSampler sampler(context, {3, false});
    auto indices = sampler.indices(2);
    CHECK(indices == oml::samplers::RandomSampler(context, {3, false}).indices(2));
    std::sort(indices.begin(), indices.end());
    std::vector<int64_t> all(context.labels.size());
    std::iota(all.begin(), all.end(), 0);
    CHECK(indices == all);
    check_epochs_differ(sampler);
    auto other_seed = context;
    other_seed.seed += 1;
    CHECK(oml::samplers::RandomSampler(other_seed, {3, false}).indices(2) != sampler.indices(2));
  }
}

TEST_CASE("A null sampler is random with bs_train and drop_last", "[samplers]") {
  auto context = make_context({10, 3, 3, 0}, 3);  // 30 rows
  context.default_batch_size = 8;
  const auto sampler = from_yaml("sampler: null\n", context);
  CHECK(sampler->name() == "random");
  CHECK(sampler->batch_size() == 8);
  CHECK(sampler->drop_last());
  CHECK(oml::data::batches_per_epoch(*sampler) == 3);
  const auto named = from_yaml("sampler: {name: sequential}\n", context);
  CHECK(named->batch_size() == 8);
  CHECK_FALSE(named->drop_last());
}

TEST_CASE("Balance batches hold P labels with K items each and no label repeats within an epoch",
          "[samplers]") {
  for (uint64_t trial = 0; trial < 60; ++trial) {
    for (const auto& shape : shapes(trial)) {
      const auto context = make_context(shape, trial * 31 + 1);
      const int64_t L = shape.n_labels;
      for (int64_t p : {int64_t{2}, L / 2 + 1, L}) {  // P = L included
        if (p < 2) continue;
        for (int64_t k : {2, 3, 5}) {
          INFO("trial " << trial << " L " << L << " P " << p << " K " << k);
          const oml::samplers::BalanceSampler sampler(context, {p, k, std::nullopt});
          REQUIRE(sampler.size() == L / p);
          REQUIRE(sampler.batch_size() == p * k);
          const auto batches = sampler.batches(trial);
          REQUIRE(static_cast<int64_t>(batches.size()) == L / p);
          std::set<int64_t> seen;
          for (const auto& batch : batches) {
            REQUIRE(static_cast<int64_t>(batch.size()) == p * k);
            for (int64_t label : check_blocks(context, batch, k)) REQUIRE(seen.insert(label).second);
          }
          CHECK(batches == oml::samplers::BalanceSampler(context, {p, k, std::nullopt}).batches(trial));
        }
      }
    }
  }
}

TEST_CASE("Balance epochs depend on seed and epoch only, and differ between epochs", "[samplers]") {
  const auto context = make_context({20, 2, 6, 0}, 5);
  const oml::samplers::BalanceSampler sampler(context, {4, 3, std::nullopt});
  CHECK(sampler.batches(4) == sampler.batches(4));
  check_epochs_differ(sampler);
  auto other = context;
  other.seed = 8;
  CHECK(oml::samplers::BalanceSampler(other, {4, 3, std::nullopt}).batches(4) != sampler.batches(4));
}

TEST_CASE("Balance with epoch_size draws labels without repetition until the pool refills", "[samplers]") {
  for (uint64_t trial = 0; trial < 30; ++trial) {
    const auto shape = shapes(trial)[0];
    const auto context = make_context(shape, trial + 100);
    const int64_t L = shape.n_labels;
    const int64_t p = 2 + static_cast<int64_t>(trial % static_cast<uint64_t>(L - 1));
    const int64_t cycle = L / p;  // batches until fewer than P unused labels remain
    const int64_t epoch_size = 3 * cycle + 1;
    const oml::samplers::BalanceSampler sampler(context, {p, 2, epoch_size});
    REQUIRE(sampler.size() == epoch_size);
    const auto batches = sampler.batches(1);
    REQUIRE(static_cast<int64_t>(batches.size()) == epoch_size);
    std::set<int64_t> seen;
    for (int64_t b = 0; b < epoch_size; ++b) {
      if (b % cycle == 0) seen.clear();
      for (int64_t label : check_blocks(context, batches[b], 2)) REQUIRE(seen.insert(label).second);
    }
  }
}

TEST_CASE("Category balance batches hold C categories x P labels x K items", "[samplers]") {
  for (uint64_t trial = 0; trial < 40; ++trial) {
    for (auto shape : shapes(trial, 3)) {
      shape.n_labels = std::max<int64_t>(shape.n_labels, 6);  // >= 2 labels per category
      const auto context = make_context(shape, trial * 7 + 3);
      const int64_t L = shape.n_labels;
      for (bool weight : {true, false}) {
        for (int64_t c : {1, 2, 3}) {
          INFO("trial " << trial << " L " << L << " C " << c << " weight " << weight);
          const oml::samplers::CategoryBalanceOptions options{c, 2, 3, false, weight};
          const oml::samplers::CategoryBalanceSampler sampler(context, options);
          REQUIRE(sampler.size() == (L + 1) / 2);
          REQUIRE(sampler.batch_size() == c * 2 * 3);
          const auto batches = sampler.batches(trial);
          REQUIRE(static_cast<int64_t>(batches.size()) == (L + 1) / 2);
          for (const auto& batch : batches) {
            const auto labels = check_blocks(context, batch, 3);
            REQUIRE(static_cast<int64_t>(labels.size()) == c * 2);
            std::set<std::string> categories;
            for (int64_t g = 0; g < c; ++g) {
              const std::string category = "c" + std::to_string(labels[2 * g] % 3);
              REQUIRE("c" + std::to_string(labels[2 * g + 1] % 3) == category);  // P labels of one category
              REQUIRE(labels[2 * g] != labels[2 * g + 1]);                       // distinct labels
              REQUIRE(categories.insert(category).second);                       // C distinct categories
            }
          }
          CHECK(batches == oml::samplers::CategoryBalanceSampler(context, options).batches(trial));
          check_epochs_differ(sampler);
        }
      }
    }
  }
}

TEST_CASE("Category balance with resample_labels repeats the labels of small categories", "[samplers]") {
  // Categories c0, c1, c2 with 2 labels each; P = 3 needs resampling.
  const auto context = make_context({6, 2, 4, 3}, 11);
  CHECK_THROWS_AS(oml::samplers::CategoryBalanceSampler(context, {1, 3, 2, false, true}), oml::DataError);
  const oml::samplers::CategoryBalanceSampler sampler(context, {2, 3, 2, true, true});
  for (const auto& batch : sampler.batches(0)) {
    const auto labels = check_blocks(context, batch, 2);
    REQUIRE(labels.size() == 6);
    for (int g = 0; g < 2; ++g) {
      // Both labels of the category appear (smart_sample takes all before repeating).
      const std::set<int64_t> distinct(labels.begin() + 3 * g, labels.begin() + 3 * g + 3);
      CHECK(distinct.size() == 2);
    }
  }
}

TEST_CASE("Category balance weights categories by their number of labels", "[samplers]") {
  // Category c0 holds 18 labels and c1 2, so weighted draws pick c1 with probability 0.1.
  oml::data::SamplerContext context;
  for (int64_t l = 0; l < 20; ++l) {
    for (int i = 0; i < 2; ++i) {
      context.labels.push_back(l);
      context.categories.push_back(l < 18 ? "c0" : "c1");
    }
  }
  const auto share_of_c1 = [&](bool weight) {
    const oml::samplers::CategoryBalanceSampler sampler(context, {1, 2, 2, false, weight});
    int64_t c1 = 0, total = 0;
    for (int64_t e = 0; e < 50; ++e) {
      for (const auto& batch : sampler.batches(e)) {
        c1 += context.categories[batch[0]] == "c1";
        ++total;
      }
    }
    return static_cast<double>(c1) / static_cast<double>(total);
  };
  CHECK(share_of_c1(true) == Approx(0.1).margin(0.04));
  CHECK(share_of_c1(false) == Approx(0.5).margin(0.08));
}

TEST_CASE("Distinct category balance uses every label of a category before repeating one", "[samplers]") {
  for (uint64_t trial = 0; trial < 40; ++trial) {
    LabelSetShape shape = shapes(trial, 4)[trial % 2];
    shape.n_labels = std::max<int64_t>(shape.n_labels, 12);  // >= 3 labels per category
    const auto context = make_context(shape, trial * 13 + 5);
    for (int64_t c : {1, 2, 4}) {
      for (int64_t p : {2, 3}) {
        INFO("trial " << trial << " L " << shape.n_labels << " C " << c << " P " << p);
        const int64_t epoch_size = 3 + static_cast<int64_t>(trial % 10);
        const oml::samplers::DistinctCategoryBalanceSampler sampler(context, {c, p, 2, epoch_size});
        REQUIRE(sampler.size() == epoch_size);
        const auto batches = sampler.batches(trial);
        REQUIRE(static_cast<int64_t>(batches.size()) == epoch_size);

        // Replays the rule of docs/samplers.md on the output: per category, which labels are still unused.
        std::map<std::string, std::set<int64_t>> all_labels;
        for (int64_t l = 0; l < shape.n_labels; ++l) all_labels["c" + std::to_string(l % 4)].insert(l);
        auto unused = all_labels;
        for (const auto& batch : batches) {
          int64_t open = 0;
          for (const auto& kv : unused) open += !kv.second.empty();
          if (open < c) unused = all_labels;  // the pool resets
          const auto labels = check_blocks(context, batch, 2);
          REQUIRE(static_cast<int64_t>(labels.size()) == c * p);
          std::set<std::string> categories;
          for (int64_t g = 0; g < c; ++g) {
            const std::string category = "c" + std::to_string(labels[g * p] % 4);
            REQUIRE(categories.insert(category).second);
            REQUIRE_FALSE(unused[category].empty());
            const std::set<int64_t> chosen(labels.begin() + g * p, labels.begin() + (g + 1) * p);
            REQUIRE(static_cast<int64_t>(chosen.size()) == p);
            std::set<int64_t> fresh;
            for (int64_t l : chosen) {
              REQUIRE("c" + std::to_string(l % 4) == category);
              if (unused[category].count(l)) fresh.insert(l);
            }
            const auto have = static_cast<int64_t>(unused[category].size());
            // Unused labels first: all P are fresh, or all remaining fresh ones are taken.
            REQUIRE(static_cast<int64_t>(fresh.size()) == std::min(p, have));
            for (int64_t l : chosen) unused[category].erase(l);
          }
        }
        CHECK(batches ==
              oml::samplers::DistinctCategoryBalanceSampler(context, {c, p, 2, epoch_size}).batches(trial));
        check_epochs_differ(sampler);
      }
    }
  }
}

TEST_CASE("Bad sampler arguments name the sampler, the argument, the value and the config place",
          "[samplers]") {
  const auto context = make_context({10, 2, 4, 2}, 21);
  SECTION("P > L") {
    const std::string yaml = "sampler:\n  name: balance\n  args: {n_labels: 12, n_instances: 2}\n";
    CHECK_THROWS_AS(from_yaml(yaml, context), oml::DataError);  // the args do not fit the data
    CHECK_THROWS_WITH(from_yaml(yaml, context), Contains("cfg.yaml:3:") &&
                                                    Contains("sampler.args.n_labels") &&
                                                    Contains("sampler 'balance'") && Contains("got 12") &&
                                                    Contains("1 < n_labels <= 10"));
  }
  SECTION("P = 1") {
    CHECK_THROWS_WITH(oml::samplers::BalanceSampler(context, {1, 2, std::nullopt}),
                      Contains("n_labels") && Contains("got 1"));
  }
  SECTION("K = 1") {
    const std::string yaml = "sampler: {name: balance, args: {n_labels: 2, n_instances: 1}}\n";
    CHECK_THROWS_WITH(from_yaml(yaml, context), Contains("sampler.args.n_instances") &&
                                                    Contains("n_instances must be > 1") && Contains("got 1"));
  }
  SECTION("epoch_size = 0") {
    const std::string yaml = "sampler: {name: balance, args: {n_labels: 2, n_instances: 2, epoch_size: 0}}\n";
    CHECK_THROWS_WITH(from_yaml(yaml, context), Contains("sampler.args.epoch_size") && Contains("got 0"));
  }
  SECTION("unknown argument") {
    const std::string yaml = "sampler: {name: balance, args: {n_labels: 2, n_instances: 2, epoch_sise: 3}}\n";
    CHECK_THROWS_WITH(from_yaml(yaml, context),
                      Contains("epoch_sise") && Contains("did you mean 'epoch_size'"));
  }
  SECTION("category count out of range") {
    const std::string yaml =
        "sampler: {name: category_balance, args: {n_categories: 3, n_labels: 2, n_instances: 2}}\n";
    CHECK_THROWS_WITH(from_yaml(yaml, context), Contains("sampler 'category_balance'") &&
                                                    Contains("1 <= n_categories <= 2") && Contains("got 3"));
  }
  SECTION("a category with too few labels") {
    const std::string yaml =
        "sampler: {name: distinct_category_balance, args: {n_categories: 1, n_labels: 6, n_instances: 2, "
        "epoch_size: 5}}\n";
    CHECK_THROWS_WITH(from_yaml(yaml, context), Contains("category 'c0'") && Contains("has only 5 labels") &&
                                                    Contains("n_labels is 6"));
  }
  SECTION("batch size of an index sampler") {
    CHECK_THROWS_WITH(from_yaml("sampler: {name: random, args: {batch_size: 0}}\n", context),
                      Contains("sampler.args.batch_size") && Contains("got 0"));
    CHECK_THROWS_WITH(from_yaml("sampler: {name: sequential}\n", context),
                      Contains("batch_size is required"));
  }
}

TEST_CASE("Data a sampler cannot satisfy is a data error naming the label or the missing column",
          "[samplers]") {
  SECTION("a label with one item") {
    auto context = make_context({5, 2, 3, 2}, 23);
    context.labels.push_back(5);  // label 5 (value 1005) occurs once
    context.categories.push_back("c1");
    context.label_values.push_back(1005);
    CHECK_THROWS_AS(oml::samplers::BalanceSampler(context, {2, 2, std::nullopt}), oml::DataError);
    CHECK_THROWS_WITH(
        oml::samplers::BalanceSampler(context, {2, 2, std::nullopt}),
        Contains("sampler 'balance': label 1005 has only 1 item in the train split of test.csv"));
    CHECK_THROWS_WITH(oml::samplers::CategoryBalanceSampler(context, {1, 2, 2, false, true}),
                      Contains("label 1005 has only 1 item"));
  }
  SECTION("no category column") {
    const auto context = make_context({6, 2, 3, 0}, 29);
    for (const std::string name : {"category_balance", "distinct_category_balance"}) {
      const std::string yaml = "sampler: {name: " + name +
                               ", args: {n_categories: 1, n_labels: 2, n_instances: 2" +
                               (name == "distinct_category_balance" ? ", epoch_size: 2" : "") + "}}\n";
      CHECK_THROWS_AS(from_yaml(yaml, context), oml::DataError);
      CHECK_THROWS_WITH(
          from_yaml(yaml, context),
          Contains("sampler '" + name + "' needs a 'category' column") && Contains("test.csv has none"));
    }
  }
  SECTION("a batch too large to exist") {
    const auto context = make_context({6, 2, 3, 0}, 29);  // 36 rows
    CHECK_THROWS_WITH(
        from_yaml("sampler: {name: random, args: {batch_size: 9223372036854775807}}\n", context),
        Contains("has batch size 9223372036854775807; at most 2147483648 rows fit in a batch"));
    CHECK_NOTHROW(
        from_yaml("sampler: {name: random, args: {batch_size: 64}}\n", context));  // one batch of 36
  }
  SECTION("no rows") {
    oml::data::SamplerContext empty;
    empty.source = "the train split of empty.csv";
    CHECK_THROWS_WITH(oml::samplers::RandomSampler(empty, {4, false}),
                      Contains("the train split of empty.csv has no rows to sample"));
  }
}

TEST_CASE("An unknown sampler name lists the known samplers and the closest one", "[samplers]") {
  const auto context = make_context({6, 2, 3, 0}, 31);
  const std::string yaml = "sampler: {name: balanse, args: {n_labels: 2, n_instances: 2}}\n";
  CHECK_THROWS_AS(from_yaml(yaml, context), oml::ConfigError);
  CHECK_THROWS_WITH(from_yaml(yaml, context),
                    Contains("cfg.yaml:1:") && Contains("unknown sampler 'balanse'") &&
                        Contains("did you mean 'balance'") && Contains("distinct_category_balance"));
}

namespace {
// A plugin's sampler that checks nothing: its rows in batches of 20, a short last one dropped.
class SteplessSampler : public oml::data::IndexSampler {
 public:
  explicit SteplessSampler(int64_t rows) : rows_(rows) {}
  std::string name() const override { return "test_stepless_sampler"; }
  int64_t size() const override { return rows_; }
  int64_t batch_size() const override { return 20; }
  bool drop_last() const override { return true; }
  std::vector<int64_t> indices(int64_t) const override { return std::vector<int64_t>(rows_, 0); }

 private:
  int64_t rows_;
};
}  // namespace

TEST_CASE("A plugin sampler that throws is reported as a plugin error naming its origin",
          "[samplers][plugins]") {
  oml::cli::register_builtins();
  auto& samplers = oml::registries().samplers;
  if (!samplers.contains("test_throwing_sampler")) {
    samplers.add(
        "test_throwing_sampler", oml::no_args,
        [](oml::NoOptions, const oml::data::SamplerContext&) -> std::shared_ptr<oml::data::Sampler> {
          throw std::runtime_error("cannot read my weights table");
        },
        "throws a foreign exception", "plugin 'thrower' (/tmp/libthrower.so)");
    // Five rows in batches of 20 with drop_last: an epoch of no step.
    samplers.add(
        "test_stepless_sampler", oml::no_args,
        [](oml::NoOptions, const oml::data::SamplerContext& c) -> std::shared_ptr<oml::data::Sampler> {
          return std::make_shared<SteplessSampler>(static_cast<int64_t>(c.labels.size()));
        },
        "gives no batch", "plugin 'thrower' (/tmp/libthrower.so)");
    samplers.add(
        "test_null_sampler", oml::no_args,
        [](oml::NoOptions, const oml::data::SamplerContext&) -> std::shared_ptr<oml::data::Sampler> {
          return nullptr;
        },
        "returns no sampler", "plugin 'thrower' (/tmp/libthrower.so)");
  }
  const auto context = make_context({6, 2, 3, 0}, 37);
  CHECK_THROWS_AS(from_yaml("sampler: {name: test_throwing_sampler}\n", context), oml::PluginError);
  CHECK_THROWS_WITH(from_yaml("sampler: {name: test_throwing_sampler}\n", context),
                    Contains("sampler 'test_throwing_sampler' from plugin 'thrower' (/tmp/libthrower.so) "
                             "failed while being built: cannot read my weights table"));
  CHECK_THROWS_WITH(from_yaml("sampler: {name: test_null_sampler}\n", context),
                    Contains("returned no sampler"));
  auto five = make_context({6, 2, 3, 0}, 37);
  five.labels.resize(5);
  five.categories.clear();
  CHECK_THROWS_WITH(
      from_yaml("sampler: {name: test_stepless_sampler}\n", five),
      Contains("sampler 'test_stepless_sampler' (plugin 'thrower' (/tmp/libthrower.so)) gives no "
               "batch per epoch: 5 rows of") &&
          Contains("in batches of 20 with drop_last"));
}

TEST_CASE("Samplers group labels that were not remapped to 0..L-1", "[samplers]") {
  oml::data::SamplerContext context;
  context.labels = {900000, 5, -3, 5, 900000, -3, 5};  // sparse and negative values
  const oml::samplers::BalanceSampler sampler(context, {3, 2, std::nullopt});
  const auto batches = sampler.batches(0);
  REQUIRE(batches.size() == 1);
  const auto labels = check_blocks(context, batches[0], 2);
  CHECK(std::set<int64_t>(labels.begin(), labels.end()) == std::set<int64_t>{-3, 5, 900000});
}

}  // namespace samplers_tests
