// Losses and miners: reference values computed by hand (see the comments) or by independent
// straightforward implementations in double precision.
#include <torch/torch.h>

#include <cmath>
#include <set>

#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "oml/config/document.h"
#include "oml/losses/arcface.h"
#include "oml/losses/host_labels.h"
#include "oml/losses/miners.h"
#include "oml/losses/surrogate_precision.h"
#include "oml/losses/triplet_loss.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace losses_tests {

using Catch::Matchers::Contains;
using namespace oml::losses;

namespace {

// Points on a line: labels [0, 0, 0, 1, 1] at x = [0, 1, 3, 4, 10].
torch::Tensor line_points() { return torch::tensor({0.0, 1.0, 3.0, 4.0, 10.0}).unsqueeze(1); }
torch::Tensor line_labels() { return torch::tensor({0, 0, 0, 1, 1}, torch::kLong); }

std::vector<int64_t> vec(const torch::Tensor& t) {
  const auto c = t.to(torch::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

// Every triplet but the placeholders (TripletSet::valid) is valid: same label for anchor and
// positive, different for the negative, and the positive is another item than the anchor.
void check_valid(const TripletSet& t, const torch::Tensor& pool_labels) {
  const auto a = vec(t.anchors), p = vec(t.positives), n = vec(t.negatives), l = vec(pool_labels);
  const auto listed = t.valid.defined() ? vec(t.valid) : std::vector<int64_t>(a.size(), 1);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (listed[i] == 0) continue;
    CHECK(a[i] != p[i]);
    CHECK(l[a[i]] == l[p[i]]);
    CHECK(l[a[i]] != l[n[i]]);
  }
}

torch::Tensor triplet_of(const TripletSet& t, std::size_t i) {
  return torch::tensor({vec(t.anchors)[i], vec(t.positives)[i], vec(t.negatives)[i]}, torch::kLong);
}

}  // namespace

TEST_CASE("Triplet loss with a margin and the soft triplet loss match their formulas", "[losses]") {
  const auto a = torch::tensor({{0.0, 0.0}});
  const auto p = torch::tensor({{3.0, 4.0}});  // d(a, p) = 5
  const auto n = torch::tensor({{0.0, 4.0}});  // d(a, n) = 4
  CHECK(triplet_losses(a, p, n, 0.1).item<double>() == Approx(0.1 + 5 - 4));
  CHECK(triplet_losses(a, p, n, std::nullopt).item<double>() == Approx(std::log1p(std::exp(1.0))));
  const auto far = torch::tensor({{6.0, 8.0}});  // d(a, n) = 10: inactive with a margin
  CHECK(triplet_losses(a, p, far, 0.1).item<double>() == 0.0);
  CHECK(triplet_losses(a, p, far, std::nullopt).item<double>() == Approx(std::log1p(std::exp(-5.0))));
}

TEST_CASE("The hard triplets miner takes the farthest positive and the nearest negative",
          "[losses][miners]") {
  HardTripletsMiner miner;
  const auto t = miner.mine(line_points(), line_labels());
  // Worked out on the line: anchor 0 -> positives {1 (d 1), 2 (d 3)}, negatives {3 (4), 4 (10)}...
  CHECK(vec(t.anchors) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(vec(t.positives) == std::vector<int64_t>{2, 2, 0, 4, 3});
  CHECK(vec(t.negatives) == std::vector<int64_t>{3, 3, 3, 2, 2});
}

TEST_CASE("The hard triplets miner never picks the anchor as its own positive", "[losses][miners]") {
  HardTripletsMiner miner;
  // All embeddings equal: every distance is 0, so only the masks decide.
  const auto labels = torch::tensor({0, 0, 1, 1, 2, 2}, torch::kLong);
  const auto t = miner.mine(torch::zeros({6, 3}), labels);
  REQUIRE(t.size() == 6);
  check_valid(t, labels);
}

TEST_CASE("The hard miner's anchors without a positive are placeholders that count nowhere",
          "[losses][miners]") {
  // Labels 0, 0, 1, 2: items 2 and 3 have no positive. One triplet per row, two of them valid;
  // the loss and its logs are those of the two real triplets.
  const auto points = torch::tensor({{0.0, 0.0}, {1.0, 0.0}, {3.0, 0.0}, {0.5, 2.0}});
  const auto labels = torch::tensor({0, 0, 1, 2}, torch::kLong);
  HardTripletsMiner miner;
  const auto t = miner.mine(points, labels);
  REQUIRE(t.size() == 4);
  CHECK(vec(t.valid.to(torch::kLong)) == std::vector<int64_t>{1, 1, 0, 0});
  CHECK(vec(t.positives.slice(0, 0, 2)) == std::vector<int64_t>{1, 0});
  CHECK(vec(t.negatives.slice(0, 0, 2)) == std::vector<int64_t>{3, 2});
  TripletLossWithMiner loss(std::make_shared<HardTripletsMiner>(), TripletOptions{0.5, "mean"});
  const auto out = loss->forward(points, labels);
  // Anchor 0: relu(0.5 + 1 - d(0, 3) = 2.0616) = 0; anchor 1: relu(0.5 + 1 - 2) = 0 too; with
  // margin 1.5 anchor 0 becomes active.
  const double d03 = std::sqrt(0.25 + 4.0);
  CHECK(out.loss.item<double>() == Approx(0.0));
  CHECK(out.logs.at("n_triplets").item<double>() == 2);
  CHECK(out.logs.at("pos_dist").item<double>() == Approx(1.0));
  CHECK(out.logs.at("neg_dist").item<double>() == Approx((d03 + 2.0) / 2));
  TripletLossWithMiner wide(std::make_shared<HardTripletsMiner>(), TripletOptions{1.5, "sum"});
  const auto summed = wide->forward(points, labels);
  CHECK(summed.loss.item<double>() == Approx((1.5 + 1 - d03) + (1.5 + 1 - 2)));
  CHECK(summed.logs.at("active_tri").item<double>() == Approx(1.0));
}

TEST_CASE("Triplet loss with hard mining gives the hand-computed loss and logs", "[losses]") {
  TripletLossWithMiner loss(std::make_shared<HardTripletsMiner>(), TripletOptions{0.1, "mean"});
  const auto out = loss->forward(line_points(), line_labels());
  // Per anchor relu(0.1 + d(a,p) - d(a,n)): 0, 0, 2.1, 5.1, 0.
  CHECK(out.loss.item<double>() == Approx(7.2 / 5));
  CHECK(out.logs.at("active_tri").item<double>() == Approx(0.4));
  CHECK(out.logs.at("pos_dist").item<double>() == Approx((3 + 2 + 3 + 6 + 6) / 5.0));
  CHECK(out.logs.at("neg_dist").item<double>() == Approx((4 + 3 + 1 + 1 + 7) / 5.0));
  CHECK(out.logs.at("n_triplets").item<double>() == 5);
}

TEST_CASE("The all-triplets miner lists every valid triplet and caps the count with distinct ones",
          "[losses][miners]") {
  // Label 0: 3 anchors x 2 positives x 2 negatives = 12; label 1: 2 x 1 x 3 = 6.
  AllTripletsMiner all(100);
  const auto t = all.mine(line_points(), line_labels());
  CHECK(t.size() == 18);
  check_valid(t, line_labels());
  torch::manual_seed(0);
  AllTripletsMiner capped(5);
  const auto c = capped.mine(line_points(), line_labels());
  REQUIRE(c.size() == 5);
  check_valid(c, line_labels());
  std::set<std::vector<int64_t>> distinct;
  for (std::size_t i = 0; i < 5; ++i) distinct.insert(vec(triplet_of(c, i)));
  CHECK(distinct.size() == 5);
}

TEST_CASE(
    "all_triplets lists every triplet by default, as OML's, and the loss reads long lists' distances "
    "from the distance matrix",
    "[losses][miners]") {
  oml::cli::register_builtins();
  // OML's CARS batch: 20 labels x 10 items, B (K - 1) (B - K) = 200 * 9 * 190 triplets, none dropped.
  const auto labels = torch::arange(20).repeat_interleave(10);
  const auto doc = oml::config::Document::from_string(
      "criterion: {name: triplet_with_miner, args: {margin: null, miner: {name: all_triplets}}}",
      "cars.yaml");
  const auto loss = oml::registries().losses.create(
      oml::config::parse_component(doc.root()["criterion"], "criterion"), CriterionContext{});
  torch::manual_seed(2);
  const auto x = torch::randn({200, 8}, torch::kDouble).requires_grad_(true);
  const auto out = loss->forward(x, labels);
  CHECK(out.logs.at("n_triplets").item<double>() == 342000);

  // The same triplets' distances taken row by row (what a short list does), in double: the loss,
  // its logs and its gradient agree to rounding.
  const auto t = AllTripletsMiner().mine(x, labels);
  REQUIRE(t.size() == 342000);
  REQUIRE(2 * t.size() > 200 * 200);  // the matrix path
  const auto a = x.index_select(0, t.anchors);
  const auto d_ap = (a - x.index_select(0, t.positives)).norm(2, 1);
  const auto d_an = (a - x.index_select(0, t.negatives)).norm(2, 1);
  const auto [m_ap, m_an] = triplet_distances(t);
  CHECK(oml::test::max_abs_diff(m_ap, d_ap) < 1e-12);
  CHECK(oml::test::max_abs_diff(m_an, d_an) < 1e-12);
  const auto expected = triplet_losses_of_distances(d_ap, d_an, std::nullopt).mean();
  CHECK(out.loss.item<double>() == Approx(expected.item<double>()).epsilon(1e-12));
  CHECK(out.logs.at("pos_dist").item<double>() == Approx(d_ap.mean().item<double>()).epsilon(1e-12));
  CHECK(out.logs.at("neg_dist").item<double>() == Approx(d_an.mean().item<double>()).epsilon(1e-12));
  const auto grad = torch::autograd::grad({out.loss}, {x}, {}, /*retain_graph=*/true)[0];
  const auto expected_grad = torch::autograd::grad({expected}, {x})[0];
  CHECK(oml::test::max_abs_diff(grad, expected_grad) < 1e-12);

  // Two equal embeddings (distance 0): a finite gradient, zero along that pair, as the row path.
  const auto y = torch::randn({12, 3}, torch::kDouble);
  y[1].copy_(y[0]);
  const auto yl = torch::arange(3).repeat_interleave(4);
  const auto yg = y.clone().requires_grad_(true);
  const auto ts = AllTripletsMiner().mine(yg, yl);
  REQUIRE(2 * ts.size() > 12 * 12);
  const auto [z_ap, z_an] = triplet_distances(ts);
  triplet_losses_of_distances(z_ap, z_an, 0.1).sum().backward();
  CHECK(torch::isfinite(yg.grad()).all().item<bool>());
  const auto yr = y.clone().requires_grad_(true);
  const auto ar = yr.index_select(0, ts.anchors);
  triplet_losses(ar, yr.index_select(0, ts.positives), yr.index_select(0, ts.negatives), 0.1)
      .sum()
      .backward();
  CHECK(oml::test::max_abs_diff(yg.grad(), yr.grad()) < 1e-12);
}

TEST_CASE("The n-hard triplets miner takes the requested hardness ranks", "[losses][miners]") {
  // The hardest positive with the 2nd..3rd nearest negatives.
  NHardTripletsMiner miner({1, 1}, {2, 3});
  const auto t = miner.mine(line_points(), line_labels());
  // Anchor 0: positive 2; negatives by distance 3 (4), 4 (10) -> rank 2 is 4.
  // Anchor 3: positive 4; negatives 2 (1), 1 (3), 0 (4) -> ranks 2, 3 are 1, 0.
  std::set<std::vector<int64_t>> got;
  const auto valid = vec(t.valid);
  for (std::size_t i = 0; i < static_cast<std::size_t>(t.size()); ++i) {
    if (valid[i] != 0) got.insert(vec(triplet_of(t, i)));
  }
  CHECK(got.count({0, 2, 4}) == 1);
  CHECK(got.count({3, 4, 1}) == 1);
  CHECK(got.count({3, 4, 0}) == 1);
  // A grid of 1 x 2 ranks for each of the 5 anchors, whatever the labels (nothing is read back);
  // valid: label-0 anchors have 2 negatives (one in range), label-1 anchors 3.
  CHECK(t.size() == 5 * 1 * 2);
  CHECK(got.size() == 3 * 1 + 2 * 2);
  check_valid(t, line_labels());
  // No anchor with a 3rd positive: no triplet at all, said on the host labels.
  CHECK_THROWS_WITH(NHardTripletsMiner({3, 3}, {1, 1}).check_labels(line_labels()),
                    Contains("n_hard_triplets: the batch yields no triplet: no item has 3 positive(s)"));
  CHECK_NOTHROW(miner.check_labels(line_labels()));
}

TEST_CASE("The hard cluster miner uses label means, farthest members and nearest other means",
          "[losses][miners]") {
  HardClusterMiner miner;
  const auto x = torch::tensor({0.0, 1.0, 5.0, 10.0, 11.0, 13.0}).unsqueeze(1);
  const auto labels = torch::tensor({0, 0, 0, 1, 1, 1}, torch::kLong);
  const auto t = miner.mine(x, labels);
  // Means 2 and 34/3 (rows 6, 7 of the pool); farthest members: x=5 (row 2) and x=13 (row 5).
  CHECK(t.pool.size(0) == 8);
  CHECK(t.pool[6].item<double>() == Approx(2.0));
  CHECK(t.pool[7].item<double>() == Approx(34.0 / 3));
  CHECK(vec(t.anchors) == std::vector<int64_t>{6, 7});
  CHECK(vec(t.positives) == std::vector<int64_t>{2, 5});
  CHECK(vec(t.negatives) == std::vector<int64_t>{7, 6});
  CHECK_THROWS_WITH(miner.mine(line_points(), line_labels()), Contains("same number"));
}

TEST_CASE(
    "triplets_with_memory mines as OML's TripletMinerWithMemory: the batch's triplets, then bank pairs "
    "and bank negatives",
    "[losses][miners]") {
  torch::manual_seed(1);
  TripletsWithMemoryMiner miner(/*bank_size_in_batches=*/2, /*tri_expand_k=*/3);
  const auto labels = torch::tensor({0, 0, 0, 0, 1, 1, 1, 1}, torch::kLong);
  const auto x = torch::randn({8, 6}, torch::kDouble).requires_grad_(true);
  // The batch's 8 * 3 * 4 = 96 triplets, then 96 * (3 - 1) / 2 = 96 tries of each mixed kind. The
  // bank starts with OML's stand-ins (labels -1..-8 per batch slot, no batch label), so every try
  // is kept: 288, as OML 4.0's miner gives for this batch (and 222 for the second one below).
  const auto first = miner.mine(x, labels);
  REQUIRE(first.size() == 288);
  const auto stand_in_labels = -torch::arange(1, 9, torch::kLong).repeat({2});
  const auto pool_labels = torch::cat({labels, stand_in_labels});
  check_valid(first, pool_labels);
  REQUIRE(first.pool.size(0) == 8 + 16);
  CHECK(torch::equal(first.from_batch, torch::arange(288) < 96));
  const auto rows = [](const torch::Tensor& index, int64_t from, int64_t to) {
    return index.slice(0, from, to);
  };
  // 1: batch rows only; 2: anchor and positive from the bank, the negative from the batch; 3: the
  // reverse for the negative.
  CHECK((rows(first.anchors, 0, 96) < 8).all().item<bool>());
  CHECK((rows(first.negatives, 0, 96) < 8).all().item<bool>());
  CHECK((rows(first.anchors, 96, 192) >= 8).all().item<bool>());
  CHECK((rows(first.positives, 96, 192) >= 8).all().item<bool>());
  CHECK((rows(first.negatives, 96, 192) < 8).all().item<bool>());
  CHECK((rows(first.anchors, 192, 288) < 8).all().item<bool>());
  CHECK((rows(first.negatives, 192, 288) >= 8).all().item<bool>());
  // The stand-ins' embeddings: one-hot at min(|label|, D - 1).
  const auto stand_ins = first.pool.slice(0, 8);
  CHECK(torch::equal(stand_ins.argmax(1), stand_in_labels.abs().clamp_max(5)));
  CHECK(stand_ins.sum().item<double>() == 16);

  // The bank took the first batch over its first 8 rows: its pairs now come from labels 0 and 1
  // (the stand-ins left have one row each), and some draws meet a negative of the same label.
  const auto y = torch::randn({8, 6}, torch::kDouble);
  const auto second = miner.mine(y, labels);
  check_valid(second, torch::cat({labels, labels, stand_in_labels.slice(0, 8)}));
  CHECK(torch::equal(second.pool.slice(0, 8, 16), x.detach()));
  CHECK(second.size() > 96);
  CHECK(second.size() < 288);
  const auto bank_anchors = rows(second.anchors, 96, second.size());
  CHECK((bank_anchors < 16).all().item<bool>());  // batch or first-batch rows: no stand-in anchors

  // Through the loss: OML's logs of the batch's and the mixed triplets; the gradient reaches the
  // batch rows only (the bank is detached).
  TripletLossWithMiner loss(std::make_shared<TripletsWithMemoryMiner>(2, 3),
                            TripletOptions{std::nullopt, "mean"});
  const auto out = loss->forward(x, labels);
  for (const char* key : {"orig_active_tri", "bank_active_tri", "pos_dist_orig", "neg_dist_orig",
                          "pos_dist_bank", "neg_dist_bank"}) {
    INFO(key);
    CHECK(std::isfinite(out.logs.at(key).item<double>()));
  }
  out.loss.backward();
  CHECK(torch::isfinite(x.grad()).all().item<bool>());

  // Every batch the bank's size; labels >= 0 (no stand-in's).
  CHECK_THROWS_WITH(
      miner.mine(torch::randn({4, 6}, torch::kDouble), torch::tensor({0, 0, 1, 1}, torch::kLong)),
      Contains("a batch of 4 items after batches of 8"));
  TripletsWithMemoryMiner fresh(2, 3);
  CHECK_THROWS_WITH(fresh.check_labels(torch::tensor({-1, -1, 2, 2}, torch::kLong)), Contains("label -1"));
}

TEST_CASE("Miners that list on the host take the step's declared host labels, else read them back",
          "[losses][miners]") {
  torch::manual_seed(2);
  const auto embeddings = torch::randn({6, 4});
  const auto labels = torch::tensor({0, 0, 1, 1, 2, 2}, torch::kLong);  // 3 labels of 2: 6 x 1 x 4 triplets
  // A declared copy with other values shows which one the miner read: 2 labels of 3, 6 x 2 x 3.
  const auto other = torch::tensor({0, 0, 0, 1, 1, 1}, torch::kLong);
  AllTripletsMiner all;
  CHECK(all.mine(embeddings, labels).anchors.size(0) == 24);
  {
    const HostLabels declared(labels, other);
    CHECK(host_labels(labels).is_same(other));
    CHECK(all.mine(embeddings, labels).anchors.size(0) == 36);
    // Only that very tensor: a copy of the labels is read as it is.
    const auto copy = labels.clone();
    CHECK_FALSE(host_labels(copy).is_same(other));
    CHECK(all.mine(embeddings, copy).anchors.size(0) == 24);
    {
      const HostLabels inner(copy, other);  // nested: both declared
      CHECK(host_labels(copy).is_same(other));
      CHECK(host_labels(labels).is_same(other));
    }
    CHECK_FALSE(host_labels(copy).is_same(other));
  }
  CHECK(all.mine(embeddings, labels).anchors.size(0) == 24);  // the declaration ended
  // With a true copy declared, the host-side miners mine exactly what they mine reading back.
  const auto same = labels.clone();
  HardClusterMiner cluster;
  TripletsWithMemoryMiner memory(2, 3), memory_declared(2, 3);
  const auto read_back = cluster.mine(embeddings, labels);
  torch::manual_seed(5);
  const auto memory_read_back = memory.mine(embeddings, labels);
  const HostLabels declared(labels, same);
  const auto from_host = cluster.mine(embeddings, labels);
  CHECK(torch::equal(from_host.anchors, read_back.anchors));
  CHECK(torch::equal(from_host.positives, read_back.positives));
  CHECK(torch::equal(from_host.negatives, read_back.negatives));
  torch::manual_seed(5);
  const auto memory_from_host = memory_declared.mine(embeddings, labels);
  CHECK(torch::equal(memory_from_host.anchors, memory_read_back.anchors));
  CHECK(torch::equal(memory_from_host.negatives, memory_read_back.negatives));
}

TEST_CASE("The bank miner keeps only triplets anchored in the current batch", "[losses][miners]") {
  MinerWithBank miner(3, std::make_shared<HardTripletsMiner>());
  // As OML's: the batch alone until the bank holds 3 batches.
  for (int i = 1; i <= 3; ++i) CHECK(miner.mine(line_points() * i, line_labels()).pool.size(0) == 5);
  const auto t = miner.mine(line_points() * 4, line_labels());
  CHECK(t.pool.size(0) == 5 + 3 * 5);
  CHECK(t.size() == 5);
  CHECK((t.anchors < 5).all().item<bool>());
  check_valid(t, line_labels().repeat({4}));
  // Rows 0-4: the batch, x = 0, 4, 12, 16, 40; then the bank oldest first: 1x (rows 5-9), 2x,
  // 3x. Row 1 (x = 4, label 0): farthest positive row 2 (x = 12), nearest negative the bank's
  // row 8 (x = 4, label 1); row 4 (x = 40, label 1): farthest positive the bank's row 8, nearest
  // negative row 2.
  CHECK(vec(triplet_of(t, 1)) == std::vector<int64_t>{1, 2, 8});
  CHECK(vec(triplet_of(t, 4)) == std::vector<int64_t>{4, 8, 2});
}

namespace {

// The valid triplets of a set, as sorted (anchor, positive, negative) rows.
std::set<std::vector<int64_t>> valid_triplets(const TripletSet& t) {
  const auto a = vec(t.anchors), p = vec(t.positives), n = vec(t.negatives);
  const auto listed = t.valid.defined() ? vec(t.valid) : std::vector<int64_t>(a.size(), 1);
  std::set<std::vector<int64_t>> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (listed[i] != 0) out.insert({a[i], p[i], n[i]});
  }
  return out;
}

// A miner without its own mine_anchored: TripletMiner's default.
class DefaultAnchoring : public TripletMiner {
 public:
  TripletSet mine(const torch::Tensor& embeddings, const torch::Tensor& labels) override {
    return inner_.mine(embeddings, labels);
  }

 private:
  NHardTripletsMiner inner_{{1, 2}, {1, 3}};
};

}  // namespace

TEST_CASE("Anchored mining gives mine()'s triplets whose anchors are the first rows", "[losses][miners]") {
  torch::manual_seed(3);
  const auto embeddings = torch::randn({24, 4});
  const auto labels = torch::arange(6).repeat_interleave(4).index_select(0, torch::randperm(24));
  std::vector<std::pair<std::string, std::shared_ptr<TripletMiner>>> miners{
      {"hard_triplets", std::make_shared<HardTripletsMiner>()},
      {"n_hard_triplets", std::make_shared<NHardTripletsMiner>(HardnessRange{1, 2}, HardnessRange{2, 4})},
      {"all_triplets", std::make_shared<AllTripletsMiner>()},
      {"the default", std::make_shared<DefaultAnchoring>()}};
  for (const auto& [name, miner] : miners) {
    for (const int64_t n : {1, 7, 24}) {
      INFO(name << ", " << n << " anchors");
      std::set<std::vector<int64_t>> expected;
      for (const auto& row : valid_triplets(miner->mine(embeddings, labels))) {
        if (row[0] < n) expected.insert(row);
      }
      const auto anchored = miner->mine_anchored(embeddings, labels, n);
      CHECK(!expected.empty());
      CHECK(valid_triplets(anchored) == expected);
    }
  }
}

TEST_CASE("Anchored all_triplets draws its cap among the anchors' triplets only", "[losses][miners]") {
  // Rows 0-1 anchor (labels 0, 1); every row partners: each anchor has 3 positives and 6
  // negatives, so 2 x 18 = 36 anchored triplets, against 160 for all 10 rows as anchors.
  const auto labels = torch::tensor({0, 1, 0, 0, 0, 1, 1, 1, 2, 2}, torch::kLong);
  const auto embeddings = torch::randn({10, 3});
  CHECK(AllTripletsMiner().mine_anchored(embeddings, labels, 2).size() == 36);
  CHECK(AllTripletsMiner().mine(embeddings, labels).size() == 160);
  torch::manual_seed(0);
  const auto capped = AllTripletsMiner(20).mine_anchored(embeddings, labels, 2);
  CHECK(capped.size() == 20);
  CHECK(valid_triplets(capped).size() == 20);
  CHECK((capped.anchors < 2).all().item<bool>());
  check_valid(capped, labels);
}

TEST_CASE("The bank miner checks its anchors on the host and refuses miners with anchors of their own",
          "[losses][miners]") {
  // Labels 0, 1 in the bank's batch; the current batch's labels 7, 8 have no positive anywhere.
  MinerWithBank miner(1, std::make_shared<HardTripletsMiner>());
  miner.mine(torch::randn({4, 2}), torch::tensor({0, 0, 1, 1}, torch::kLong));
  CHECK_THROWS_WITH(miner.mine(torch::randn({4, 2}), torch::tensor({7, 8, 9, 10}, torch::kLong)),
                    Contains("hard_triplets: no anchor of the current batch (4 rows) has 1 positive(s) and 1 "
                             "negative(s) among the 8 rows mined"));
  // n_hard_triplets' first ranks: 3 positives are more than any row has.
  MinerWithBank ranks(1, std::make_shared<NHardTripletsMiner>(HardnessRange{3, 3}, HardnessRange{1, 1}));
  ranks.mine(torch::randn({5, 2}), torch::tensor({0, 0, 0, 0, 1}, torch::kLong));
  CHECK_THROWS_WITH(ranks.mine(torch::randn({4, 2}), torch::tensor({5, 5, 6, 6}, torch::kLong)),
                    Contains("n_hard_triplets: no anchor of the current batch (4 rows) has 3 positive(s) "
                             "and 1 negative(s) among the 9 rows mined"));
  CHECK_THROWS_AS(MinerWithBank(2, std::make_shared<HardClusterMiner>()), oml::config::ArgumentError);
  CHECK_THROWS_AS(MinerWithBank(2, std::make_shared<TripletsWithMemoryMiner>(2, 3)),
                  oml::config::ArgumentError);
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string(
      "criterion: {name: triplet_with_miner, args: {miner: {name: miner_with_bank, args: {miner: {name: "
      "hard_cluster}}}}}\n",
      "bank.yaml");
  CHECK_THROWS_WITH(oml::registries().losses.create(
                        oml::config::parse_component(doc.root()["criterion"], "criterion"), {8, 5}),
                    Contains("miner 'hard_cluster' makes anchors of its own"));
}

TEST_CASE("The bank miner takes a batch without triplets of its own once the bank supplies them",
          "[losses][miners]") {
  MinerWithBank miner(1, std::make_shared<HardTripletsMiner>());
  miner.mine(torch::randn({4, 2}), torch::tensor({7, 8, 7, 8}, torch::kLong));
  // Labels 7 and 8 find their positives in the bank; 9 and 10 have none anywhere.
  const auto lone = torch::tensor({7, 8, 9, 10}, torch::kLong);
  CHECK_NOTHROW(miner.check_labels(lone));
  const auto t = miner.mine(torch::randn({4, 2}), lone);
  CHECK(vec(t.anchors) == std::vector<int64_t>{0, 1, 2, 3});
  CHECK(vec(t.valid.to(torch::kLong)) == std::vector<int64_t>{1, 1, 0, 0});
  const auto pool = vec(torch::tensor({7, 8, 9, 10, 7, 8, 7, 8}, torch::kLong));  // batch, then bank
  const auto positives = vec(t.positives);
  for (int a = 0; a < 2; ++a) {
    CHECK(positives[a] >= 4);
    CHECK(pool[positives[a]] == pool[a]);
  }
}

TEST_CASE("The bank miner checks the labels' declared host copies, not their values read back",
          "[losses][miners]") {
  // The "device" labels have triplets; their declared host copy (what the step's loader holds)
  // has none: the check reads the copy, so it fails.
  MinerWithBank miner(1, std::make_shared<HardTripletsMiner>());
  const auto labels = torch::tensor({0, 0, 1, 1}, torch::kLong);
  const auto host = torch::tensor({0, 1, 2, 3}, torch::kLong);
  const HostLabels declared(labels, host);
  CHECK_THROWS_WITH(miner.mine(torch::randn({4, 2}), labels),
                    Contains("hard_triplets: no anchor of the current batch (4 rows) has 1 positive(s)"));
}

TEST_CASE("The pairs miner builds hard pairs or all pairs with 'different' targets", "[losses][miners]") {
  PairsMiner hard(true);
  const auto h = hard.mine(line_points(), line_labels());
  // OML 4.0's PairsMiner(hard_mining=True) gives the same 7 pairs for this batch: the hard
  // triplets' pairs, each unordered pair once (0-2 and 3-4 are each other's farthest positives).
  CHECK(vec(h.ids1) == std::vector<int64_t>{0, 1, 3, 0, 1, 2, 2});
  CHECK(vec(h.ids2) == std::vector<int64_t>{2, 2, 4, 3, 3, 3, 4});
  CHECK(vec(h.is_negative) == std::vector<int64_t>{0, 0, 0, 1, 1, 1, 1});
  PairsMiner all(false);
  const auto a = all.mine(line_points(), line_labels());
  CHECK(a.ids1.numel() == 10);
  CHECK(a.is_negative.sum().item<double>() == 6);  // 3 x 2 cross-label pairs
}

TEST_CASE("Degenerate batches give clear errors instead of empty losses", "[losses][miners]") {
  // The hard miner reads no label value in mine() (so that a GPU step waits for nothing): its
  // label checks are check_labels(), which the loss runs on the host.
  HardTripletsMiner miner;
  CHECK_THROWS_WITH(miner.check_labels(torch::zeros({4}, torch::kLong)),
                    Contains("hard_triplets: the batch has a single label"));
  CHECK_THROWS_WITH(miner.check_labels(torch::tensor({0, 1, 2}, torch::kLong)), Contains("one item"));
  CHECK_THROWS_AS(miner.mine(torch::randn({3, 2}), torch::zeros({4}, torch::kLong)), oml::DataError);
  TripletLossWithMiner loss(std::make_shared<HardTripletsMiner>(), TripletOptions{0.1, "mean"});
  CHECK_THROWS_WITH(loss->forward(torch::randn({3, 2}), torch::tensor({0, 1, 2}, torch::kLong)),
                    Contains("hard_triplets: every label of the batch has one item"));
  TripletLossWithMiner all(std::make_shared<AllTripletsMiner>(), TripletOptions{0.1, "mean"});
  CHECK_THROWS_WITH(all->check_labels(torch::zeros({4}, torch::kLong)), Contains("single label"));
}

TEST_CASE("ArcFace logits add the angular margin to the target class only", "[losses]") {
  ArcFaceOptions o;
  o.in_features = 2;
  o.num_classes = 3;
  o.m = 0.5;
  o.s = 2.0;
  ArcFaceLoss loss(o);
  {
    torch::NoGradGuard no_grad;
    loss->weight.copy_(torch::tensor({{1.0, 0.0}, {0.0, 1.0}, {-1.0, 0.0}}));
  }
  const auto x = torch::tensor({{1.0, 0.5}});
  const auto y = torch::tensor({0}, torch::kLong);
  const double c0 = 1 / std::sqrt(1.25), c1 = 0.5 / std::sqrt(1.25);  // cosines to classes 0 and 1
  const std::vector<double> expected{2 * std::cos(std::acos(c0) + 0.5), 2 * c1, -2 * c0};
  const auto z = loss->logits(x, y);
  for (int c = 0; c < 3; ++c) CHECK(z[0][c].item<double>() == Approx(expected[c]).epsilon(1e-5));

  // Cross-entropy by hand, without and with label smoothing (eps = 0.3 -> targets .8, .1, .1).
  double lse = 0;
  for (double v : expected) lse += std::exp(v);
  lse = std::log(lse);
  CHECK(loss->forward(x, y).loss.item<double>() == Approx(lse - expected[0]).epsilon(1e-5));
  o.smoothing_epsilon = 0.3;
  ArcFaceLoss smoothed(o);
  {
    torch::NoGradGuard no_grad;
    smoothed->weight.copy_(loss->weight);
  }
  const double smooth = 0.8 * (lse - expected[0]) + 0.1 * (lse - expected[1]) + 0.1 * (lse - expected[2]);
  const auto out = smoothed->forward(x, y);
  CHECK(out.loss.item<double>() == Approx(smooth).epsilon(1e-5));
  CHECK(out.logs.at("accuracy").item<double>() == 1.0);
}

TEST_CASE("ArcFace rejects labels beyond num_classes", "[losses]") {
  ArcFaceLoss loss(ArcFaceOptions{4, 3});
  CHECK_THROWS_WITH(loss->forward(torch::randn({2, 4}), torch::tensor({0, 3}, torch::kLong)),
                    Contains("num_classes"));
}

TEST_CASE("The chunked smooth-rank gradient equals autograd through the direct formula",
          "[losses][gradients]") {
  torch::manual_seed(3);
  const auto x = torch::randn({7, 3}, torch::kDouble);
  const auto w = torch::randn({7, 7}, torch::kDouble);
  const double t = 0.3;
  auto d1 = pairwise_distances(x, x).detach().requires_grad_(true);
  (smooth_ranks(d1, t, 2) * w).sum().backward();
  // Direct: rank(i, j) = sum_l sigmoid((d_ij - d_il) / t), a B x B x B graph.
  auto d2 = d1.detach().clone().requires_grad_(true);
  const auto ranks = torch::sigmoid((d2.unsqueeze(2) - d2.unsqueeze(1)) / t).sum(2);
  CHECK(oml::test::max_abs_diff(smooth_ranks(d1.detach(), t, 3), ranks) < 1e-12);
  (ranks * w).sum().backward();
  CHECK(oml::test::max_abs_diff(d1.grad(), d2.grad()) < 1e-10);
}

TEST_CASE("Triplet and surrogate losses have gradients matching finite differences", "[losses][gradients]") {
  torch::manual_seed(5);
  const auto labels = torch::tensor({0, 0, 1, 1, 2, 2}, torch::kLong);
  std::vector<std::pair<std::string, std::shared_ptr<Criterion>>> losses{
      {"soft triplet",
       TripletLossWithMiner(std::make_shared<AllTripletsMiner>(), TripletOptions{std::nullopt, "mean"})
           .ptr()},
      {"surrogate precision", SurrogatePrecision(SurrogatePrecisionOptions{2, 0.5, 0.5, 4, "mean"}).ptr()}};
  for (auto& [name, loss] : losses) {
    INFO(name);
    auto x = torch::randn({6, 3}, torch::kDouble).requires_grad_(true);
    loss->forward(x, labels).loss.backward();
    const auto analytic = x.grad().clone();
    torch::NoGradGuard no_grad;
    const double h = 1e-6;
    for (int64_t i = 0; i < 6; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        auto plus = x.detach().clone(), minus = x.detach().clone();
        plus[i][j] += h;
        minus[i][j] -= h;
        const double numeric = (loss->forward(plus, labels).loss.item<double>() -
                                loss->forward(minus, labels).loss.item<double>()) /
                               (2 * h);
        CHECK(analytic[i][j].item<double>() == Approx(numeric).margin(1e-5));
      }
    }
  }
}

TEST_CASE("Losses and miners are built from config with nested miners", "[losses][registry]") {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string(
      "criterion: {name: triplet_with_miner, args: {margin: null, miner: {name: n_hard_triplets, "
      "args: {n_positive: 2, n_negative: [1, 2]}}}}\n"
      "bad: {name: triplet_with_miner, args: {miner: {name: pairs}}}\n"
      "arc: {name: arcface, args: {m: 0.3}}\n",
      "loss.yaml");
  oml::losses::CriterionContext ctx{8, 5};
  auto loss = oml::registries().losses.create(
      oml::config::parse_component(doc.root()["criterion"], "criterion"), ctx);
  const auto out = loss->forward(line_points(), line_labels());
  CHECK(out.loss.item<double>() > 0);
  CHECK_THROWS_WITH(
      oml::registries().losses.create(oml::config::parse_component(doc.root()["bad"], "bad"), ctx),
      Contains("produces pairs"));
  auto arc = oml::registries().losses.create(oml::config::parse_component(doc.root()["arc"], "arc"), ctx);
  CHECK(arc->parameters().at(0).sizes() == torch::IntArrayRef({5, 8}));
}

}  // namespace losses_tests
