#include "oml/losses/miners.h"

#include <torch/torch.h>

#include <limits>
#include <map>
#include <set>

#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "oml/losses/criterion.h"
#include "oml/losses/host_labels.h"

namespace oml::losses {
namespace {

using torch::indexing::Slice;

// Fails with a clear message unless labels [B] can form at least one triplet.
void require_triplet_labels(const torch::Tensor& labels, const std::string& who) {
  torch::Tensor unique, inverse, counts;
  std::tie(unique, inverse, counts) = torch::_unique2(labels, /*sorted=*/true, false, /*return_counts=*/true);
  OML_CHECK(unique.numel() >= 2, DataError, who, ": the batch has a single label (", labels.size(0),
            " items); triplets need at least two labels — use a sampler such as 'balance'");
  OML_CHECK(counts.max().item<int64_t>() >= 2, DataError, who, ": every label of the batch has one item ",
            "(", labels.size(0),
            " items); triplets need a label with two items — use a sampler such as 'balance'");
}

// The batch's shapes, then its labels as above.
void require_triplets_possible(const torch::Tensor& embeddings, const torch::Tensor& labels,
                               const std::string& who) {
  check_batch(embeddings, labels, who);
  require_triplet_labels(labels, who);
}

struct Masks {
  torch::Tensor positive;  // [B, B] same label, not the item itself
  torch::Tensor negative;  // [B, B] different label
};

Masks masks(const torch::Tensor& labels) {
  const auto same = labels.unsqueeze(0) == labels.unsqueeze(1);
  const auto eye =
      torch::eye(labels.size(0), torch::TensorOptions().dtype(torch::kBool).device(labels.device()));
  return {same & ~eye, ~same};
}

// The masks of the first n_anchors rows against every row: [n_anchors, M].
Masks anchor_masks(const torch::Tensor& labels, int64_t n_anchors) {
  const int64_t rows = labels.size(0);
  if (n_anchors == rows) return masks(labels);
  const auto same = labels.narrow(0, 0, n_anchors).unsqueeze(1) == labels.unsqueeze(0);
  const auto eye =
      torch::eye(n_anchors, rows, torch::TensorOptions().dtype(torch::kBool).device(labels.device()));
  return {same & ~eye, ~same};
}

// Fails unless 0 < n_anchors <= the rows of labels [M].
void check_anchor_count(const torch::Tensor& labels, int64_t n_anchors, const std::string& who) {
  OML_CHECK(n_anchors > 0 && n_anchors <= labels.size(0), InternalError, who, ": ", n_anchors,
            " anchor rows asked of ", labels.size(0), " rows");
}

// DataError unless one of the first n_anchors rows of host labels [M] has `positives` items of
// its label (itself not counted) and `negatives` of other labels among the M rows. A plain loop
// over host memory: O(n_anchors M), nothing dispatched to ATen.
void require_anchor_with(const torch::Tensor& labels, int64_t n_anchors, int64_t positives, int64_t negatives,
                         const std::string& who) {
  check_anchor_count(labels, n_anchors, who);
  const auto host = labels.to(torch::kCPU).to(torch::kLong).contiguous();
  const auto acc = host.accessor<int64_t, 1>();
  const int64_t rows = host.size(0);
  bool found = false;
  for (int64_t i = 0; i < n_anchors && !found; ++i) {
    int64_t same = 0;
    for (int64_t j = 0; j < rows; ++j) same += acc[j] == acc[i];
    found = same - 1 >= positives && rows - same >= negatives;
  }
  OML_CHECK(found, DataError, who, ": no anchor of the current batch (", n_anchors, " rows) has ", positives,
            " positive(s) and ", negatives, " negative(s) among the ", rows, " rows mined");
}

std::vector<std::vector<int64_t>> row_lists(const torch::Tensor& mask) {
  const auto m = mask.to(torch::kCPU).contiguous();
  const auto acc = m.accessor<bool, 2>();
  std::vector<std::vector<int64_t>> out(m.size(0));
  for (int64_t i = 0; i < m.size(0); ++i) {
    for (int64_t j = 0; j < m.size(1); ++j) {
      if (acc[i][j]) out[i].push_back(j);
    }
  }
  return out;
}

// Every triplet (i, j, k) of the batch, j a positive and k a negative of i, anchor by anchor
// (then positive, then negative), appended to a, p, n.
void append_every_triplet(const std::vector<std::vector<int64_t>>& pos,
                          const std::vector<std::vector<int64_t>>& neg, std::vector<int64_t>& a,
                          std::vector<int64_t>& p, std::vector<int64_t>& n) {
  for (std::size_t i = 0; i < pos.size(); ++i) {
    for (int64_t j : pos[i]) {
      for (int64_t k : neg[i]) {
        a.push_back(static_cast<int64_t>(i));
        p.push_back(j);
        n.push_back(k);
      }
    }
  }
}

// Triplets listed on the host, their indices sent to the pool's device without waiting for it.
TripletSet make_set(torch::Tensor pool, const std::vector<int64_t>& a, const std::vector<int64_t>& p,
                    const std::vector<int64_t>& n, const std::string& who) {
  OML_CHECK(!a.empty(), DataError, who, ": the batch yields no triplet");
  const auto device = pool.device();
  return {std::move(pool),
          to_device_indices(a, device),
          to_device_indices(p, device),
          to_device_indices(n, device),
          {},
          {}};
}

// `count` distinct integers from [0, total), uniformly (Floyd's algorithm: O(count) memory
// however large `total` is), sorted.
std::vector<int64_t> sample_distinct(int64_t total, int64_t count) {
  const auto u = torch::rand({count}, torch::kDouble);
  const auto acc = u.accessor<double, 1>();
  std::set<int64_t> chosen;
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = total - count + i;
    const int64_t t = std::min(j, static_cast<int64_t>(acc[i] * static_cast<double>(j + 1)));
    if (!chosen.insert(t).second) chosen.insert(j);
  }
  return {chosen.begin(), chosen.end()};
}

// OML's TripletMinerWithMemory.get_pos_pairs(groups, count): labels drawn uniformly with
// replacement, all ordered pairs of each drawn label's rows pooled until there are `count`, then
// `count` of them in random order. A label with one row adds nothing, so only labels with two
// rows or more are drawn (the same pairs, in distribution); none: no pair (OML would loop forever).
std::vector<std::pair<int64_t, int64_t>> draw_positive_pairs(
    const std::map<int64_t, std::vector<int64_t>>& groups, int64_t count) {
  std::vector<const std::vector<int64_t>*> with_pairs;
  for (const auto& entry : groups) {
    if (entry.second.size() >= 2) with_pairs.push_back(&entry.second);
  }
  std::vector<std::pair<int64_t, int64_t>> pooled;
  if (count <= 0 || with_pairs.empty()) return pooled;
  while (static_cast<int64_t>(pooled.size()) < count) {
    const auto& rows = *with_pairs[static_cast<std::size_t>(
        torch::randint(static_cast<int64_t>(with_pairs.size()), {1}, torch::kLong).item<int64_t>())];
    for (std::size_t i = 0; i < rows.size(); ++i) {
      for (std::size_t j = i + 1; j < rows.size(); ++j) {
        pooled.emplace_back(rows[i], rows[j]);
        pooled.emplace_back(rows[j], rows[i]);
      }
    }
  }
  const auto order = torch::randperm(static_cast<int64_t>(pooled.size()), torch::kLong);
  const auto at = order.accessor<int64_t, 1>();
  std::vector<std::pair<int64_t, int64_t>> out;
  out.reserve(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) out.push_back(pooled[static_cast<std::size_t>(at[i])]);
  return out;
}

}  // namespace

void TripletMiner::check_labels(const torch::Tensor& labels) {
  require_triplet_labels(labels, "triplet miner");
}

TripletSet TripletMiner::mine_anchored(const torch::Tensor& embeddings, const torch::Tensor& labels,
                                       int64_t n_anchors) {
  check_anchor_count(labels, n_anchors, "triplet miner");
  TripletSet t = mine(embeddings, labels);
  const auto anchored = t.anchors < n_anchors;
  t.valid = t.valid.defined() ? t.valid & anchored : anchored;
  // A miner of unknown rule may anchor nothing on these rows: a loss over no triplet is not a
  // number. This fallback reads the answer back; the built-in miners override it and do not.
  OML_CHECK(t.valid.any().item<bool>(), DataError, "triplet miner: none of its ", t.size(),
            " triplets has its anchor among the first ", n_anchors, " rows (the current batch)");
  return t;
}

void TripletMiner::check_anchored_labels(const torch::Tensor& labels, int64_t n_anchors) {
  require_anchor_with(labels, n_anchors, 1, 1, "triplet miner");
}

AllTripletsMiner::AllTripletsMiner(int64_t max_output_triplets) : max_output_triplets_(max_output_triplets) {
  check(max_output_triplets_);
}

void AllTripletsMiner::check(int64_t max_output_triplets) {
  config::check_argument(max_output_triplets > 0, "miner 'all_triplets'", "max_output_triplets",
                         "max_output_triplets must be > 0, got ", max_output_triplets);
}

TripletSet AllTripletsMiner::mine(const torch::Tensor& embeddings, const torch::Tensor& labels) {
  return mine_anchored(embeddings, labels, labels.size(0));
}

TripletSet AllTripletsMiner::mine_anchored(const torch::Tensor& embeddings, const torch::Tensor& labels,
                                           int64_t n_anchors) {
  check_batch(embeddings, labels, "all_triplets");
  // Listed on the host, from the step's host copy of the labels where it declared one.
  const auto host = host_labels(labels);
  if (n_anchors == host.size(0)) {
    require_triplet_labels(host, "all_triplets");
  } else {
    check_anchored_labels(host, n_anchors);
  }
  const auto m = anchor_masks(host, n_anchors);
  const auto pos = row_lists(m.positive);
  const auto neg = row_lists(m.negative);
  std::vector<int64_t> first(pos.size() + 1, 0);  // first flat triplet id of each anchor
  for (std::size_t i = 0; i < pos.size(); ++i) {
    first[i + 1] = first[i] + static_cast<int64_t>(pos[i].size() * neg[i].size());
  }
  const int64_t total = first.back();
  std::vector<int64_t> a, p, n;
  const auto emit = [&](int64_t id) {
    const auto anchor = std::upper_bound(first.begin(), first.end(), id) - first.begin() - 1;
    const int64_t r = id - first[anchor];
    const int64_t n_neg = static_cast<int64_t>(neg[anchor].size());
    a.push_back(anchor);
    p.push_back(pos[anchor][r / n_neg]);
    n.push_back(neg[anchor][r % n_neg]);
  };
  if (total <= max_output_triplets_) {
    append_every_triplet(pos, neg, a, p, n);
  } else {
    for (int64_t id : sample_distinct(total, max_output_triplets_)) emit(id);
  }
  return make_set(embeddings, a, p, n, "all_triplets");
}

void AllTripletsMiner::check_anchored_labels(const torch::Tensor& labels, int64_t n_anchors) {
  require_anchor_with(labels, n_anchors, 1, 1, "all_triplets");
}

TripletSet HardTripletsMiner::mine(const torch::Tensor& embeddings, const torch::Tensor& labels) {
  return mine_anchored(embeddings, labels, labels.size(0));
}

void HardTripletsMiner::check_anchored_labels(const torch::Tensor& labels, int64_t n_anchors) {
  require_anchor_with(labels, n_anchors, 1, 1, "hard_triplets");
}

TripletSet HardTripletsMiner::mine_anchored(const torch::Tensor& embeddings, const torch::Tensor& labels,
                                            int64_t n_anchors) {
  check_batch(embeddings, labels, "hard_triplets");
  check_anchor_count(labels, n_anchors, "hard_triplets");
  torch::NoGradGuard no_grad;
  const auto d = pairwise_distances(embeddings.detach().narrow(0, 0, n_anchors), embeddings.detach());
  const auto m = anchor_masks(labels, n_anchors);
  const auto inf = std::numeric_limits<float>::infinity();
  // A row without a positive (or negative) is all -inf (inf): its argmax is some row, and the
  // triplet is marked not valid.
  const auto hardest_pos = d.masked_fill(~m.positive, -inf).argmax(1);
  const auto hardest_neg = d.masked_fill(~m.negative, inf).argmin(1);
  const auto anchors = torch::arange(n_anchors, hardest_pos.options());
  return {embeddings, anchors, hardest_pos, hardest_neg, m.positive.any(1) & m.negative.any(1), {}};
}

void HardTripletsMiner::check_labels(const torch::Tensor& labels) {
  require_triplet_labels(labels, "hard_triplets");
}

NHardTripletsMiner::NHardTripletsMiner(HardnessRange positive, HardnessRange negative)
    : positive_(positive), negative_(negative) {
  check(positive_, negative_);
}

void NHardTripletsMiner::check(HardnessRange positive, HardnessRange negative) {
  for (const auto& [range, what] : {std::pair{positive, "n_positive"}, std::pair{negative, "n_negative"}}) {
    config::check_argument(range.first >= 1 && range.first <= range.second, "miner 'n_hard_triplets'", what,
                           what, " must be n >= 1 or a range [a, b] with 1 <= a <= b, got [", range.first,
                           ", ", range.second, "]");
  }
}

TripletSet NHardTripletsMiner::mine(const torch::Tensor& embeddings, const torch::Tensor& labels) {
  return mine_anchored(embeddings, labels, labels.size(0));
}

TripletSet NHardTripletsMiner::mine_anchored(const torch::Tensor& embeddings, const torch::Tensor& labels,
                                             int64_t n_anchors) {
  check_batch(embeddings, labels, "n_hard_triplets");
  check_anchor_count(labels, n_anchors, "n_hard_triplets");
  torch::NoGradGuard no_grad;
  const int64_t b = labels.size(0), a = n_anchors;  // partner rows, anchor rows
  const auto d = pairwise_distances(embeddings.detach().narrow(0, 0, a), embeddings.detach());
  const auto m = anchor_masks(labels, a);
  const auto inf = std::numeric_limits<float>::infinity();
  // Hardest first: positives by decreasing distance, negatives by increasing distance (a stable
  // sort: ties in batch order). Ranks past an anchor's own count land on the masked-out rows.
  const auto pos_order = d.masked_fill(~m.positive, -inf).sort(/*stable=*/true, 1, /*descending=*/true);
  const auto neg_order = d.masked_fill(~m.negative, inf).sort(/*stable=*/true, 1, /*descending=*/false);
  // The grid of 0-based ranks [p_lo, p_hi) x [n_lo, n_hi) for every anchor, in the order the
  // loops over anchors, positive ranks and negative ranks list them.
  const int64_t p_lo = positive_.first - 1, p_hi = std::min(positive_.second, b);
  const int64_t n_lo = negative_.first - 1, n_hi = std::min(negative_.second, b);
  const auto index = torch::TensorOptions().dtype(torch::kLong).device(labels.device());
  if (p_lo >= p_hi || n_lo >= n_hi) {  // ranks beyond the batch (check_labels refuses such batches)
    const auto none = torch::zeros({0}, index);
    return {embeddings, none, none, none, torch::zeros({0}, index.dtype(torch::kBool)), {}};
  }
  const int64_t np = p_hi - p_lo, nn = n_hi - n_lo;
  const auto p_ranks = torch::arange(p_lo, p_hi, index), n_ranks = torch::arange(n_lo, n_hi, index);
  const auto positives = std::get<1>(pos_order).index_select(1, p_ranks);  // [A, np]
  const auto negatives = std::get<1>(neg_order).index_select(1, n_ranks);  // [A, nn]
  const auto valid =
      (p_ranks.unsqueeze(0) < m.positive.sum(1, /*keepdim=*/true)).unsqueeze(2) &
      (n_ranks.unsqueeze(0) < m.negative.sum(1, /*keepdim=*/true)).unsqueeze(1);  // [A, np, nn]
  return {embeddings,
          torch::arange(a, index).view({a, 1, 1}).expand({a, np, nn}).reshape(-1),
          positives.unsqueeze(2).expand({a, np, nn}).reshape(-1),
          negatives.unsqueeze(1).expand({a, np, nn}).reshape(-1),
          valid.reshape(-1),
          {}};
}

void NHardTripletsMiner::check_anchored_labels(const torch::Tensor& labels, int64_t n_anchors) {
  require_anchor_with(labels, n_anchors, positive_.first, negative_.first, "n_hard_triplets");
}

void NHardTripletsMiner::check_labels(const torch::Tensor& labels) {
  require_triplet_labels(labels, "n_hard_triplets");
  // One anchor with at least the first rank of each range, else no triplet at all.
  const auto m = masks(labels);
  const bool any =
      ((m.positive.sum(1) >= positive_.first) & (m.negative.sum(1) >= negative_.first)).any().item<bool>();
  OML_CHECK(any, DataError, "n_hard_triplets: the batch yields no triplet: no item has ", positive_.first,
            " positive(s) and ", negative_.first, " negative(s) (n_positive and n_negative start there)");
}

TripletSet HardClusterMiner::mine(const torch::Tensor& embeddings, const torch::Tensor& labels) {
  check_batch(embeddings, labels, "hard_cluster");
  // The label groups from the step's host copy of the labels (host_labels): their sizes decide
  // the shapes below, which the host must know.
  torch::Tensor unique, host_inverse, counts;
  std::tie(unique, host_inverse, counts) =
      torch::_unique2(host_labels(labels), /*sorted=*/true, /*return_inverse=*/true, true);
  const int64_t n_labels = unique.numel();
  OML_CHECK(n_labels >= 2, DataError, "hard_cluster: the batch has a single label; it needs at least two");
  const int64_t k = counts[0].item<int64_t>();
  OML_CHECK((counts == k).all().item<bool>() && k >= 2, DataError,
            "hard_cluster: every label of the batch must have the same number (>= 2) of items, got counts ",
            counts.min().item<int64_t>(), "..", counts.max().item<int64_t>(), " — use the 'balance' sampler");
  const torch::Tensor inverse = to_device_indices(host_inverse, embeddings.device());
  const auto means =
      torch::zeros({n_labels, embeddings.size(1)}, embeddings.options()).index_add(0, inverse, embeddings) /
      static_cast<double>(k);
  torch::Tensor positives, negatives;
  {
    torch::NoGradGuard no_grad;
    const auto to_own_mean = (embeddings - means.index_select(0, inverse)).norm(2, 1);
    // Farthest item of each label from its mean: scatter-max of distances by label.
    const auto own =
        inverse.unsqueeze(0) == torch::arange(n_labels, inverse.options()).unsqueeze(1);  // [L, B]
    positives = to_own_mean.unsqueeze(0).masked_fill(~own, -1.0).argmax(1);
    auto between = pairwise_distances(means.detach(), means.detach());
    between.fill_diagonal_(std::numeric_limits<float>::infinity());
    negatives = between.argmin(1);
  }
  const int64_t b = embeddings.size(0);
  const auto label_rows = torch::arange(n_labels, inverse.options()) + b;
  return {torch::cat({embeddings, means}, 0), label_rows, positives, negatives + b, {}, {}};
}

TripletsWithMemoryMiner::TripletsWithMemoryMiner(int64_t bank_size_in_batches, int64_t tri_expand_k)
    : bank_size_in_batches_(bank_size_in_batches), tri_expand_k_(tri_expand_k) {
  check(bank_size_in_batches_, tri_expand_k_);
}

void TripletsWithMemoryMiner::check(int64_t bank_size_in_batches, int64_t tri_expand_k) {
  const std::string who = "miner 'triplets_with_memory'";
  config::check_argument(bank_size_in_batches >= 1, who, "bank_size_in_batches",
                         "bank_size_in_batches must be >= 1, got ", bank_size_in_batches);
  config::check_argument(tri_expand_k >= 1, who, "tri_expand_k", "tri_expand_k must be >= 1, got ",
                         tri_expand_k);
}

void TripletsWithMemoryMiner::check_labels(const torch::Tensor& labels) {
  require_triplet_labels(labels, "triplets_with_memory");
  const int64_t lowest = labels.min().item<int64_t>();
  OML_CHECK(
      lowest >= 0, DataError, "triplets_with_memory: the batch has label ", lowest,
      "; labels must be >= 0, as the bank marks the rows no batch has filled yet with labels -1, -2, ... "
      "(as OML's miner does)");
}

TripletSet TripletsWithMemoryMiner::mine(const torch::Tensor& embeddings, const torch::Tensor& labels) {
  check_batch(embeddings, labels, "triplets_with_memory");
  const auto cpu_labels = host_labels(labels);  // the step's host copy where it declared one
  check_labels(cpu_labels);
  const int64_t b = embeddings.size(0), dim = embeddings.size(1);
  if (!bank_embeddings_.defined()) {  // OML's stand-ins: labels -1..-B per batch slot, one-hot rows
    batch_size_ = b;
    const int64_t rows = bank_size_in_batches_ * b;
    bank_labels_ = -torch::arange(1, b + 1, torch::kLong).repeat({bank_size_in_batches_});
    const auto index = torch::TensorOptions().dtype(torch::kLong).device(embeddings.device());
    bank_embeddings_ = torch::zeros({rows, dim}, embeddings.options().requires_grad(false));
    bank_embeddings_.index_put_(
        {torch::arange(rows, index), bank_labels_.abs().clamp_max(dim - 1).to(index.device())},
        torch::ones({}, bank_embeddings_.options()));
  }
  OML_CHECK(b == batch_size_, DataError, "triplets_with_memory: a batch of ", b, " items after batches of ",
            batch_size_,
            "; the bank holds whole batches, as OML's, so every batch must have the same size (a P x K "
            "sampler's batches do)");
  const int64_t bank_rows = bank_labels_.size(0);
  const auto label = cpu_labels.accessor<int64_t, 1>();
  const auto bank_label = bank_labels_.accessor<int64_t, 1>();

  // 1. Every triplet of the batch.
  const auto m = masks(cpu_labels);
  const auto pos = row_lists(m.positive);
  const auto neg = row_lists(m.negative);
  std::vector<int64_t> a, p, n;
  append_every_triplet(pos, neg, a, p, n);
  std::vector<std::pair<int64_t, int64_t>> batch_pairs;  // ordered positive pairs
  for (int64_t i = 0; i < b; ++i) {
    for (int64_t j : pos[i]) batch_pairs.emplace_back(i, j);
  }
  const int64_t from_batch = static_cast<int64_t>(a.size());
  const int64_t tries = from_batch * (tri_expand_k_ - 1) / 2;

  // 2. Anchor and positive from the bank, a batch row as the negative.
  std::map<int64_t, std::vector<int64_t>> bank_groups;
  for (int64_t r = 0; r < bank_rows; ++r) bank_groups[bank_label[r]].push_back(r);
  const auto bank_pairs = draw_positive_pairs(bank_groups, tries);
  const auto negatives_2 = torch::randint(b, {static_cast<int64_t>(bank_pairs.size())}, torch::kLong);
  const auto neg_2 = negatives_2.accessor<int64_t, 1>();
  for (std::size_t t = 0; t < bank_pairs.size(); ++t) {
    if (bank_label[bank_pairs[t].first] == label[neg_2[t]]) continue;
    a.push_back(b + bank_pairs[t].first);
    p.push_back(b + bank_pairs[t].second);
    n.push_back(neg_2[t]);
  }

  // 3. A positive pair of the batch (uniformly, with replacement), a bank row as the negative.
  const auto pairs_3 = torch::randint(static_cast<int64_t>(batch_pairs.size()), {tries}, torch::kLong);
  const auto negatives_3 = torch::randint(bank_rows, {tries}, torch::kLong);
  const auto pair_3 = pairs_3.accessor<int64_t, 1>();
  const auto neg_3 = negatives_3.accessor<int64_t, 1>();
  for (int64_t t = 0; t < tries; ++t) {
    const auto [i, j] = batch_pairs[static_cast<std::size_t>(pair_3[t])];
    if (label[i] == bank_label[neg_3[t]]) continue;
    a.push_back(i);
    p.push_back(j);
    n.push_back(b + neg_3[t]);
  }

  auto out = make_set(torch::cat({embeddings, bank_embeddings_}, 0), a, p, n, "triplets_with_memory");
  if (static_cast<int64_t>(a.size()) > from_batch) {
    out.from_batch = torch::arange(static_cast<int64_t>(a.size()), out.anchors.options()) < from_batch;
  }
  // The bank takes the batch after mining it, over its oldest rows (as OML's ring of batches).
  {
    torch::NoGradGuard no_grad;
    bank_embeddings_.narrow(0, next_, b).copy_(embeddings.detach());
    bank_labels_.narrow(0, next_, b).copy_(cpu_labels);
  }
  next_ = (next_ + b) % bank_rows;
  return out;
}

MinerWithBank::MinerWithBank(int64_t bank_size_in_batches, std::shared_ptr<TripletMiner> miner)
    : bank_size_in_batches_(bank_size_in_batches), miner_(std::move(miner)) {
  OML_ASSERT(miner_ != nullptr);
  check(bank_size_in_batches_);
  check_miner(*miner_, "given to it");
}

void MinerWithBank::check(int64_t bank_size_in_batches) {
  config::check_argument(bank_size_in_batches >= 1, "miner 'miner_with_bank'", "bank_size_in_batches",
                         "bank_size_in_batches must be >= 1, got ", bank_size_in_batches);
}

void MinerWithBank::check_miner(const TripletMiner& miner, const std::string& miner_name) {
  config::check_argument(miner.anchors_on_rows(), "miner 'miner_with_bank'", "miner", "the miner ",
                         miner_name,
                         " makes anchors of its own; the bank's miner must anchor triplets on the "
                         "batch's rows (hard_triplets, n_hard_triplets, all_triplets)");
}

void MinerWithBank::check_labels(const torch::Tensor&) {}

TripletSet MinerWithBank::mine(const torch::Tensor& embeddings, const torch::Tensor& labels) {
  check_batch(embeddings, labels, "miner_with_bank");
  const int64_t b = embeddings.size(0);
  Batch current{embeddings.detach(), labels, host_labels(labels)};
  std::vector<torch::Tensor> e{embeddings}, l{labels}, h{current.host_labels};
  // As OML's: the bank joins once it holds bank_size_in_batches batches; until then the batch alone.
  if (static_cast<int64_t>(bank_.size()) == bank_size_in_batches_) {
    for (const auto& entry : bank_) {
      e.push_back(entry.embeddings.to(embeddings.device()));
      l.push_back(entry.labels.to(labels.device()));
      h.push_back(entry.host_labels);
    }
  }
  const auto pool_labels = l.size() == 1 ? labels : torch::cat(l, 0);
  const auto pool_host = h.size() == 1 ? current.host_labels : torch::cat(h, 0);
  // The checks on the host; the inner miner lists on the host from the same copy (no read-back).
  miner_->check_anchored_labels(pool_host, b);
  TripletSet out;
  {
    const HostLabels declared(pool_labels, pool_host);
    out = miner_->mine_anchored(e.size() == 1 ? embeddings : torch::cat(e, 0), pool_labels, b);
  }
  bank_.push_back(std::move(current));
  if (static_cast<int64_t>(bank_.size()) > bank_size_in_batches_) bank_.pop_front();
  return out;
}

PairsMiner::PairsMiner(bool hard) : hard_(hard) {}

PairSet PairsMiner::mine(const torch::Tensor& embeddings, const torch::Tensor& labels) {
  check_batch(embeddings, labels, "pairs");
  OML_CHECK(labels.size(0) >= 2, DataError, "pairs: the batch has a single item; pairs need two");
  const auto m = masks(labels);
  torch::Tensor ids1, ids2;
  if (hard_) {
    require_triplets_possible(embeddings, labels, "pairs");
    torch::NoGradGuard no_grad;
    const auto d = pairwise_distances(embeddings.detach(), embeddings.detach());
    const auto inf = std::numeric_limits<float>::infinity();
    // OML's PairsMiner: the pairs of its hard triplets (anchors with a positive and a negative),
    // each unordered pair once, the smaller row first; positive pairs, then negative pairs.
    const int64_t b = labels.size(0);
    const auto anchors = (m.positive.any(1) & m.negative.any(1)).nonzero().squeeze(1);
    const auto unique_pairs = [&](const torch::Tensor& partner) {
      const auto other = partner.index_select(0, anchors);
      const auto key = torch::minimum(anchors, other) * b + torch::maximum(anchors, other);
      const auto keys = std::get<0>(torch::_unique2(key, /*sorted=*/true));
      return std::pair{keys.div(b, "floor"), keys.remainder(b)};
    };
    const auto [pos_1, pos_2] = unique_pairs(d.masked_fill(~m.positive, -inf).argmax(1));
    const auto [neg_1, neg_2] = unique_pairs(d.masked_fill(~m.negative, inf).argmin(1));
    ids1 = torch::cat({pos_1, neg_1});
    ids2 = torch::cat({pos_2, neg_2});
  } else {
    const auto pairs =
        torch::triu_indices(labels.size(0), labels.size(0), 1,
                            torch::TensorOptions().dtype(torch::kLong).device(labels.device()));
    ids1 = pairs[0];
    ids2 = pairs[1];
  }
  const auto is_negative = (labels.index_select(0, ids1) != labels.index_select(0, ids2)).to(torch::kFloat);
  return {ids1, ids2, is_negative};
}

void check_options(const MultiSimilarityMinerOptions& o) {
  const std::string who = "miner 'multi_similarity'";
  config::check_argument(o.epsilon >= 0, who, "epsilon", "epsilon must be >= 0, got ", o.epsilon);
  check_options(o.distance, who);
}

MultiSimilarityMiner::MultiSimilarityMiner(MultiSimilarityMinerOptions options) : options_(options) {
  check_options(options_);
}

MinedPairs MultiSimilarityMiner::mine(const torch::Tensor& embeddings, const torch::Tensor& labels) {
  check_batch(embeddings, labels, "multi_similarity miner");
  torch::NoGradGuard no_grad;
  const Masks all = masks(labels);
  const Distance distance(options_.distance);
  const auto values = distance.matrix(embeddings.detach(), embeddings.detach());
  const auto lowest = std::numeric_limits<float>::lowest(), highest = std::numeric_limits<float>::max();
  // Per anchor, the closest negative and the farthest positive, as PML finds them by sorting with
  // the other pairs set to +-max (an anchor without such pairs then selects nothing).
  const double eps = options_.epsilon;
  if (distance.larger_is_closer()) {
    const auto closest_negative = values.masked_fill(~all.negative, lowest).amax(1, true);
    const auto farthest_positive = values.masked_fill(~all.positive, highest).amin(1, true);
    return {all.positive & (values - eps < closest_negative),
            all.negative & (values + eps > farthest_positive)};
  }
  const auto closest_negative = values.masked_fill(~all.negative, highest).amin(1, true);
  const auto farthest_positive = values.masked_fill(~all.positive, lowest).amax(1, true);
  return {all.positive & (values + eps > closest_negative),
          all.negative & (values - eps < farthest_positive)};
}

}  // namespace oml::losses
