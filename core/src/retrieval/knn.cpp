#include "oml/retrieval/knn.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>
#include <utility>

#include "oml/common/error.h"
#include "oml/io/mapped_file.h"
#include "oml/retrieval/detail/distance_blocks.h"

namespace oml::retrieval {

void RetrievalResults::check_consistent() const {
  const int64_t q = num_queries();
  OML_ASSERT(q >= 0 && offsets.front() == 0);
  OML_ASSERT(retrieved.size() == distances.size());
  OML_ASSERT(offsets.back() == static_cast<int64_t>(retrieved.size()));
  OML_ASSERT(static_cast<int64_t>(n_gt.size()) == q && static_cast<int64_t>(query_labels.size()) == q &&
             static_cast<int64_t>(query_ids.size()) == q);
  OML_ASSERT(gallery_labels.size() == gallery_ids.size());
  for (int64_t i = 0; i < q; ++i) {
    OML_ASSERT(offsets[i] <= offsets[i + 1], "query ", i);
    for (int64_t j = offsets[i]; j < offsets[i + 1]; ++j) {
      OML_ASSERT(retrieved[j] >= 0 && retrieved[j] < num_gallery(), "query ", i);
      OML_ASSERT(j == offsets[i] || distances[j - 1] <= distances[j], "query ", i, " is not sorted");
    }
  }
}

void validate_item_set(const ItemSet& items, const char* what) {
  OML_CHECK(items.embeddings.defined(), DataError, what, " embeddings are missing");
  OML_CHECK(items.embeddings.dim() == 2, DataError, what, " embeddings must be a [N, D] matrix, got ",
            items.embeddings.dim(), " dimensions");
  OML_CHECK(items.embeddings.scalar_type() == at::kFloat, DataError, what,
            " embeddings must be float32, got ", items.embeddings.scalar_type());
  const int64_t n = items.embeddings.size(0);
  OML_CHECK(items.embeddings.size(1) > 0, DataError, what, " embeddings have dimension 0");
  OML_CHECK(static_cast<int64_t>(items.labels.size()) == n, DataError, what, ": ", n, " embeddings but ",
            items.labels.size(), " labels");
  OML_CHECK(static_cast<int64_t>(items.ids.size()) == n, DataError, what, ": ", n, " embeddings but ",
            items.ids.size(), " ids");
  OML_CHECK(items.sequences.empty() || static_cast<int64_t>(items.sequences.size()) == n, DataError, what,
            ": ", n, " embeddings but ", items.sequences.size(), " sequence ids");
  // In row chunks: a [N, D] mask of a million embeddings would cost more than the retrieval.
  constexpr int64_t kChunk = 65536;
  // Queries carry negative ids (no gallery item has them): they are named by their row alone.
  const auto row_name = [&](int64_t row) {
    return ::oml::detail::concat(
        what, " embedding row ", row,
        items.ids[row] >= 0 ? " (dataset index " + std::to_string(items.ids[row]) + ")" : "");
  };
  // Distances are computed in float32 as |q|^2 - 2 q.g + |g|^2: a finite row of norm past ~1e18
  // (3e38 is a valid float) overflows them to inf or NaN. No model's embeddings come near it.
  constexpr double kMaxNorm = 1e18;
  for (int64_t start = 0; start < n; start += kChunk) {
    const at::Tensor chunk = items.embeddings.narrow(0, start, std::min(kChunk, n - start));
    const at::Tensor finite_rows = at::isfinite(chunk).all(1);
    if (!finite_rows.all().item<bool>()) {
      const int64_t row = start + (~finite_rows).nonzero()[0][0].item<int64_t>();
      throw DataError(row_name(row) + " contains NaN or infinity");
    }
    const at::Tensor norms = at::linalg_vector_norm(chunk, 2, at::IntArrayRef{1}, false, c10::nullopt);
    io::release_mapped_rows(items.embeddings, start, std::min(n, start + kChunk));
    const at::Tensor too_large = norms > kMaxNorm;
    if (too_large.any().item<bool>()) {
      const int64_t row = start + too_large.nonzero()[0][0].item<int64_t>();
      throw DataError(::oml::detail::concat(row_name(row), " has norm ", norms[row - start].item<double>(),
                                            ", past the ", kMaxNorm,
                                            " float32 distances can hold (|q|^2 + |g|^2 would overflow)"));
    }
  }
}

// --- ignored pairs and ground truth ---------------------------------------------------------

namespace {

std::unordered_map<int64_t, int64_t> positions_of_ids(const ItemSet& gallery) {
  const auto ng = static_cast<int64_t>(gallery.ids.size());
  std::unordered_map<int64_t, int64_t> position_of_id;
  position_of_id.reserve(static_cast<std::size_t>(ng));
  for (int64_t g = 0; g < ng; ++g) {
    const bool fresh = position_of_id.emplace(gallery.ids[g], g).second;
    OML_CHECK(fresh, DataError, "gallery dataset index ", gallery.ids[g], " occurs twice (positions ",
              position_of_id[gallery.ids[g]], " and ", g, ")");
  }
  return position_of_id;
}

std::unordered_map<int64_t, int64_t> count_labels(const ItemSet& gallery) {
  std::unordered_map<int64_t, int64_t> label_count;
  for (const int64_t label : gallery.labels) ++label_count[label];
  return label_count;
}

}  // namespace

IgnoredPairs::IgnoredPairs(const ItemSet& queries, const ItemSet& gallery,
                           const detail::PreparedGallery* prepared) {
  const auto nq = static_cast<int64_t>(queries.ids.size());
  const auto ng = static_cast<int64_t>(gallery.ids.size());
  const bool with_sequences = !queries.sequences.empty() && !gallery.sequences.empty();

  std::unordered_map<int64_t, int64_t> computed;
  if (prepared == nullptr) computed = positions_of_ids(gallery);
  const std::unordered_map<int64_t, int64_t>& position_of_id = prepared ? prepared->position_of_id : computed;
  // Per sequence: gallery size and per-label counts, so that n_gt needs no pair listing.
  std::unordered_map<int64_t, int64_t> sequence_size;
  std::map<std::pair<int64_t, int64_t>, int64_t> sequence_label_size;
  if (with_sequences) {
    gallery_sequence_ = gallery.sequences;
    for (int64_t g = 0; g < ng; ++g) {
      if (gallery.sequences[g] < 0) continue;
      ++sequence_size[gallery.sequences[g]];
      ++sequence_label_size[{gallery.sequences[g], gallery.labels[g]}];
    }
  }

  self_.assign(nq, -1);
  query_sequence_.assign(nq, -1);
  count_.assign(nq, 0);
  count_same_label_.assign(nq, 0);
  for (int64_t q = 0; q < nq; ++q) {
    const auto found = position_of_id.find(queries.ids[q]);
    const int64_t self = found == position_of_id.end() ? -1 : found->second;
    const int64_t sequence = with_sequences ? queries.sequences[q] : -1;
    self_[q] = self;
    query_sequence_[q] = sequence;
    const bool self_in_sequence = self >= 0 && sequence >= 0 && gallery_sequence_[self] == sequence;
    int64_t count = (self >= 0 && !self_in_sequence) ? 1 : 0;
    int64_t same_label =
        (self >= 0 && !self_in_sequence && gallery.labels[self] == queries.labels[q]) ? 1 : 0;
    if (sequence >= 0) {
      const auto size = sequence_size.find(sequence);
      if (size != sequence_size.end()) count += size->second;
      const auto labelled = sequence_label_size.find({sequence, queries.labels[q]});
      if (labelled != sequence_label_size.end()) same_label += labelled->second;
    }
    count_[q] = count;
    count_same_label_[q] = same_label;
  }
}

std::vector<int64_t> count_ground_truth(const ItemSet& queries, const ItemSet& gallery,
                                        const IgnoredPairs& ignored,
                                        const detail::PreparedGallery* prepared) {
  std::unordered_map<int64_t, int64_t> computed;
  if (prepared == nullptr) computed = count_labels(gallery);
  const std::unordered_map<int64_t, int64_t>& label_count = prepared ? prepared->label_count : computed;
  std::vector<int64_t> n_gt(queries.labels.size());
  for (std::size_t q = 0; q < n_gt.size(); ++q) {
    const auto found = label_count.find(queries.labels[q]);
    const int64_t total = found == label_count.end() ? 0 : found->second;
    n_gt[q] = total - ignored.count_with_label(static_cast<int64_t>(q));
  }
  return n_gt;
}

BlockShape choose_block_shape(int64_t num_queries, int64_t num_gallery, const KnnOptions& options) {
  OML_CHECK(options.memory_budget_mb > 0, ConfigError, "retrieval memory budget must be positive, got ",
            options.memory_budget_mb, " MB");
  const double budget_floats = options.memory_budget_mb * 1024.0 * 1024.0 / sizeof(float);
  // Gallery tiles of up to 16k columns keep a block row within L2 for the scan that follows
  // the multiply, while still giving the BLAS long rows; query chunks fill the budget.
  int64_t tile = options.gallery_tile > 0 ? options.gallery_tile : std::min<int64_t>(num_gallery, 16384);
  tile = std::max<int64_t>(1, std::min(tile, std::max<int64_t>(num_gallery, 1)));
  int64_t chunk = options.query_chunk;
  if (chunk <= 0) chunk = static_cast<int64_t>(budget_floats / static_cast<double>(tile));
  chunk = std::max<int64_t>(1, std::min(chunk, std::max<int64_t>(num_queries, 1)));
  return {chunk, tile};
}

// --- the blocked engine ---------------------------------------------------------------------

namespace detail {

namespace {

// ||row||^2 in double over the raw rows (no [N, D] double copy: a million rows would need 1 GB),
// in row chunks, so that a memory-mapped set leaves the resident set again behind the scan.
std::vector<double> squared_norms(const at::Tensor& rows) {
  const float* data = rows.data_ptr<float>();
  const int64_t n = rows.size(0);
  const int64_t dim = rows.size(1);
  std::vector<double> out(static_cast<std::size_t>(n));
  constexpr int64_t kChunk = 65536;
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t stop = std::min(n, start + kChunk);
    at::parallel_for(start, stop, 4096, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        double sum = 0.0;
        for (int64_t d = 0; d < dim; ++d) sum += static_cast<double>(data[r * dim + d]) * data[r * dim + d];
        out[r] = sum;
      }
    });
    io::release_mapped_rows(rows, start, stop);
  }
  return out;
}

}  // namespace

PreparedGallery::PreparedGallery(const ItemSet& gallery_set, bool with_norms_)
    : gallery(gallery_set.embeddings.contiguous()),
      norm2(with_norms_ ? squared_norms(gallery) : std::vector<double>()),
      position_of_id(positions_of_ids(gallery_set)),
      label_count(count_labels(gallery_set)),
      with_norms(with_norms_),
      ids_(gallery_set.ids),
      labels_(gallery_set.labels) {}

void PreparedGallery::appended(const ItemSet& gallery_set, int64_t first) {
  gallery = gallery_set.embeddings.contiguous();
  const int64_t n = gallery.size(0);
  if (with_norms) {
    const std::vector<double> added = squared_norms(gallery.narrow(0, first, n - first));
    norm2.insert(norm2.end(), added.begin(), added.end());
  }
  for (int64_t g = first; g < n; ++g) {
    const bool fresh = position_of_id.emplace(gallery_set.ids[g], g).second;
    OML_CHECK(fresh, DataError, "gallery dataset index ", gallery_set.ids[g], " occurs twice (positions ",
              position_of_id[gallery_set.ids[g]], " and ", g, ")");
    ++label_count[gallery_set.labels[g]];
  }
  ids_.insert(ids_.end(), gallery_set.ids.begin() + first, gallery_set.ids.end());
  labels_.insert(labels_.end(), gallery_set.labels.begin() + first, gallery_set.labels.end());
}

void PreparedGallery::removed(const ItemSet& gallery_set, const std::vector<int64_t>& removed) {
  gallery = gallery_set.embeddings.contiguous();
  if (removed.empty()) return;
  for (const int64_t p : removed) {
    position_of_id.erase(ids_[static_cast<std::size_t>(p)]);
    const auto label = label_count.find(labels_[static_cast<std::size_t>(p)]);
    if (--label->second == 0) label_count.erase(label);
  }
  // The kept rows after the first removed one moved up: their norms and positions follow.
  const auto first = static_cast<std::size_t>(removed.front());
  const auto compact = [&](auto& values) {
    std::size_t write = first;
    auto next = removed.begin();
    for (std::size_t i = first; i < values.size(); ++i) {
      if (next != removed.end() && *next == static_cast<int64_t>(i)) {
        ++next;
        continue;
      }
      values[write++] = values[i];
    }
    values.resize(write);
  };
  if (with_norms) compact(norm2);
  compact(ids_);
  compact(labels_);
  for (std::size_t g = first; g < ids_.size(); ++g) position_of_id[ids_[g]] = static_cast<int64_t>(g);
}

PreparedPair::PreparedPair(const ItemSet& query_set, const ItemSet& gallery_set, Measure measure)
    : PreparedPair(query_set, gallery_set.embeddings.contiguous(),
                   squared_norms(gallery_set.embeddings.contiguous()), measure) {}

PreparedPair::PreparedPair(const ItemSet& query_set, const PreparedGallery& prepared, Measure measure)
    : PreparedPair(query_set, prepared.gallery, prepared.norm2, measure) {}

PreparedPair::PreparedPair(const ItemSet& query_set, at::Tensor gallery_rows, const std::vector<double>& g2,
                           Measure measure_kind) {
  OML_ASSERT(g2.size() == static_cast<std::size_t>(gallery_rows.size(0)), "gallery norms missing");
  queries = query_set.embeddings.contiguous();
  gallery = std::move(gallery_rows);
  gallery_mapped = io::is_mapped(gallery);
  measure = measure_kind;
  dim = queries.size(1);
  OML_CHECK(gallery.size(1) == dim, DataError, "queries have dimension ", dim, " but the gallery has ",
            gallery.size(1));
  const std::vector<double> q2 = squared_norms(queries);
  gallery_norm2.resize(g2.size());
  query_norm2.resize(q2.size());
  query_norm.resize(q2.size());
  double max2 = 0.0;
  for (std::size_t g = 0; g < g2.size(); ++g) {
    gallery_norm2[g] = measure == Measure::negative_dot ? 0.0f : static_cast<float>(g2[g]);
    max2 = std::max(max2, g2[g]);
  }
  gallery_max_norm = std::sqrt(max2);
  double max_query_norm = 0.0;
  for (std::size_t q = 0; q < q2.size(); ++q) {
    query_norm[q] = std::sqrt(q2[q]);
    max_query_norm = std::max(max_query_norm, query_norm[q]);
  }
  if (measure == Measure::negative_dot) {
    // |q.g| <= ||q|| ||g|| (Cauchy-Schwarz); 1 % covers the norms' and the block's rounding.
    value_offset = static_cast<double>(static_cast<float>(1.01 * max_query_norm * gallery_max_norm));
  }
  for (std::size_t q = 0; q < q2.size(); ++q) {
    query_norm2[q] =
        measure == Measure::negative_dot ? static_cast<float>(value_offset) : static_cast<float>(q2[q]);
  }
}

double selection_error_bound(Measure measure, int64_t dim, double query_norm, double gallery_max_norm) {
  constexpr double unit_roundoff = 1.0 / (1 << 24);
  // The sum of the magnitudes: |q.g| <= ||q|| ||g||, plus ||g||^2 under euclidean (2 q.g).
  const double magnitude = measure == Measure::negative_dot
                               ? query_norm * gallery_max_norm
                               : gallery_max_norm * gallery_max_norm + 2.0 * query_norm * gallery_max_norm;
  return 1.01 * static_cast<double>(dim + 4) * unit_roundoff * magnitude;
}

namespace {

// ||a - b||^2 in double precision over `dim` floats.
double exact_squared_distance(const float* a, const float* b, int64_t dim) {
  double sum = 0.0;
  for (int64_t d = 0; d < dim; ++d) {
    const double diff = static_cast<double>(a[d]) - static_cast<double>(b[d]);
    sum += diff * diff;
  }
  return sum;
}

}  // namespace

double exact_key(Measure measure, const float* a, const float* b, int64_t dim) {
  if (measure == Measure::euclidean) return exact_squared_distance(a, b, dim);
  double dot = 0.0;
  for (int64_t d = 0; d < dim; ++d) dot += static_cast<double>(a[d]) * static_cast<double>(b[d]);
  return -dot;
}

double distance_of_key(Measure measure, double key) {
  return measure == Measure::euclidean ? std::sqrt(std::max(key, 0.0)) : key;
}

double PreparedPair::exact_key(int64_t q, int64_t g) const {
  const float* query = queries.data_ptr<float>() + q * dim;
  if (!gallery_mapped) return detail::exact_key(measure, query, gallery.data_ptr<float>() + g * dim, dim);
  // Candidates lie anywhere in the gallery; a fault on the mapping would make the page cache's
  // whole folio around each one resident (io/mapped_file.h).
  thread_local std::vector<float> row;
  row.resize(static_cast<std::size_t>(dim));
  io::gather_rows(gallery, &g, 1, row.data());
  return detail::exact_key(measure, query, row.data(), dim);
}

double PreparedPair::distance_of_value(double value) const {
  return measure == Measure::negative_dot ? value - value_offset : std::sqrt(std::max(value, 0.0));
}

double PreparedPair::max_value() const {
  if (measure == Measure::negative_dot) return 2.0 * value_offset;
  double max_query_norm = 0.0;
  for (const double n : query_norm) max_query_norm = std::max(max_query_norm, n);
  const double reach = max_query_norm + gallery_max_norm;
  return reach * reach;
}

void for_each_block(const PreparedPair& pair, const BlockShape& shape,
                    const std::vector<BlockConsumer*>& consumers) {
  const int64_t nq = pair.num_queries();
  const int64_t ng = pair.num_gallery();
  if (nq == 0 || ng == 0) return;
  at::NoGradGuard no_grad;
  std::vector<float> buffer(static_cast<std::size_t>(shape.query_chunk * shape.gallery_tile));
  for (int64_t q0 = 0; q0 < nq; q0 += shape.query_chunk) {
    const int64_t q1 = std::min(nq, q0 + shape.query_chunk);
    for (auto* consumer : consumers) consumer->chunk_begin(q0, q1);
    const at::Tensor query_block = pair.queries.narrow(0, q0, q1 - q0);
    for (int64_t g0 = 0; g0 < ng; g0 += shape.gallery_tile) {
      const int64_t g1 = std::min(ng, g0 + shape.gallery_tile);
      at::Tensor out = at::from_blob(buffer.data(), {q1 - q0, g1 - g0}, at::kFloat);
      // -2 q.g (-q.g) straight from the BLAS (alpha = -2 is exact); beta = 0 ignores the old contents.
      at::addmm_out(out, out, query_block, pair.gallery.narrow(0, g0, g1 - g0).t(), /*beta=*/0,
                    /*alpha=*/pair.block_alpha());
      for (auto* consumer : consumers) consumer->block(q0, q1, g0, g1, buffer.data());
      io::release_mapped_rows(pair.gallery, g0, g1);  // no-op unless memory-mapped
    }
    for (auto* consumer : consumers) consumer->chunk_done(q0, q1);
    io::release_mapped_rows(pair.queries, q0, q1);
  }
}

}  // namespace detail

// --- top-k selection ------------------------------------------------------------------------

namespace {

// Per query row: the k smallest approximate values s (a max-heap) and every candidate within
// the error margin of the current k-th value. Candidates whose s exceeds (k-th s) + 2 * bound
// can never enter the exact top k and are dropped.
struct RowSelection {
  std::vector<float> heap;
  std::vector<std::pair<float, int64_t>> candidates;
  float threshold = std::numeric_limits<float>::infinity();
  std::size_t prune_at = 64;

  void reset(std::size_t k) {
    heap.clear();
    candidates.clear();
    threshold = std::numeric_limits<float>::infinity();
    prune_at = std::max<std::size_t>(64, 4 * k);
  }
};

class TopKConsumer final : public detail::BlockConsumer {
 public:
  TopKConsumer(const detail::PreparedPair& pair, const IgnoredPairs& ignored, int64_t k, int64_t chunk,
               RetrievalResults& out)
      : pair_(pair),
        ignored_(ignored),
        k_(k),
        rows_(static_cast<std::size_t>(chunk)),
        margin_(static_cast<std::size_t>(chunk)),
        out_(out) {}

  void chunk_begin(int64_t q0, int64_t q1) override {
    for (int64_t i = 0; i < q1 - q0; ++i) {
      rows_[i].reset(static_cast<std::size_t>(k_));
      margin_[i] = 2.0 * pair_.selection_error_bound(q0 + i);
    }
  }

  void block(int64_t q0, int64_t q1, int64_t g0, int64_t g1, const float* block) override {
    const int64_t width = g1 - g0;
    const float* norms = pair_.gallery_norm2.data() + g0;
    at::parallel_for(0, q1 - q0, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        scan_row(q0 + i, rows_[i], margin_[i], block + i * width, norms, g0, width);
    });
  }

  void chunk_done(int64_t q0, int64_t q1) override {
    at::parallel_for(0, q1 - q0, 16, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) finish_row(q0 + i, rows_[i]);
    });
  }

 private:
  void scan_row(int64_t q, RowSelection& row, double margin, const float* values, const float* norms,
                int64_t g0, int64_t width) const {
    constexpr int64_t kGroup = 16;
    int64_t j = 0;
    for (; j + kGroup <= width; j += kGroup) {
      // Cheap vectorisable test first: most groups hold nothing below the threshold.
      const float threshold = row.threshold;
      int below = 0;
      for (int64_t t = 0; t < kGroup; ++t) below += (values[j + t] + norms[j + t]) <= threshold;
      if (below == 0) continue;
      for (int64_t t = 0; t < kGroup; ++t) offer(q, row, margin, values[j + t] + norms[j + t], g0 + j + t);
    }
    for (; j < width; ++j) offer(q, row, margin, values[j] + norms[j], g0 + j);
  }

  void offer(int64_t q, RowSelection& row, double margin, float value, int64_t position) const {
    if (!(value <= row.threshold) || ignored_.contains(q, position)) return;
    row.candidates.emplace_back(value, position);
    auto& heap = row.heap;
    if (static_cast<int64_t>(heap.size()) < k_) {
      heap.push_back(value);
      std::push_heap(heap.begin(), heap.end());
    } else if (value < heap.front()) {
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = value;
      std::push_heap(heap.begin(), heap.end());
    } else {
      return;
    }
    if (static_cast<int64_t>(heap.size()) == k_) {
      row.threshold = static_cast<float>(static_cast<double>(heap.front()) + margin);
      // Rounding the threshold to float must not cut a candidate the bound keeps.
      if (static_cast<double>(row.threshold) < static_cast<double>(heap.front()) + margin) {
        row.threshold = std::nextafter(row.threshold, std::numeric_limits<float>::infinity());
      }
    }
    if (row.candidates.size() >= row.prune_at) prune(row);
  }

  static void prune(RowSelection& row) {
    const float threshold = row.threshold;
    auto& c = row.candidates;
    c.erase(
        std::remove_if(c.begin(), c.end(), [threshold](const auto& e) { return !(e.first <= threshold); }),
        c.end());
    row.prune_at = std::max(row.prune_at, 2 * c.size());
  }

  void finish_row(int64_t q, RowSelection& row) const {
    prune(row);
    std::vector<std::pair<double, int64_t>> exact;
    exact.reserve(row.candidates.size());
    for (const auto& candidate : row.candidates) {
      exact.emplace_back(pair_.exact_key(q, candidate.second), candidate.second);
    }
    const int64_t keep = out_.size(q);
    OML_ASSERT(static_cast<int64_t>(exact.size()) >= keep, "query ", q, ": ", exact.size(),
               " candidates for ", keep, " places");
    std::partial_sort(exact.begin(), exact.begin() + keep, exact.end());
    for (int64_t i = 0; i < keep; ++i) {
      out_.retrieved[out_.offsets[q] + i] = exact[i].second;
      out_.distances[out_.offsets[q] + i] =
          static_cast<float>(detail::distance_of_key(pair_.measure, exact[i].first));
    }
  }

  const detail::PreparedPair& pair_;
  const IgnoredPairs& ignored_;
  int64_t k_;
  std::vector<RowSelection> rows_;
  std::vector<double> margin_;
  RetrievalResults& out_;
};

// Reports the queries finished after each chunk (the unit a user can relate to the data).
class ProgressConsumer final : public detail::BlockConsumer {
 public:
  ProgressConsumer(const ProgressCallback& callback, int64_t total) : callback_(callback), total_(total) {}
  void block(int64_t, int64_t, int64_t, int64_t, const float*) override {}
  void chunk_done(int64_t, int64_t q1) override { callback_(q1, total_); }

 private:
  const ProgressCallback& callback_;
  int64_t total_;
};

}  // namespace

namespace detail {

RetrievalResults retrieve_knn_fused(const ItemSet& queries, const ItemSet& gallery, const PreparedPair& pair,
                                    const IgnoredPairs& ignored, const KnnOptions& options,
                                    const std::vector<BlockConsumer*>& also,
                                    const PreparedGallery* prepared) {
  OML_CHECK(options.top_k > 0, ConfigError, "retrieval top_k must be positive, got ", options.top_k);
  OML_ASSERT(pair.measure == options.measure, "the prepared pair's measure differs from the options'");
  RetrievalResults out;
  const int64_t nq = pair.num_queries();
  const int64_t ng = pair.num_gallery();
  out.n_gt = count_ground_truth(queries, gallery, ignored, prepared);
  out.query_labels = queries.labels;
  out.gallery_labels = gallery.labels;
  out.query_ids = queries.ids;
  out.gallery_ids = gallery.ids;
  out.offsets.assign(static_cast<std::size_t>(nq + 1), 0);
  for (int64_t q = 0; q < nq; ++q) {
    out.offsets[q + 1] = out.offsets[q] + std::min(options.top_k, ng - ignored.count(q));
  }
  out.retrieved.assign(static_cast<std::size_t>(out.offsets.back()), -1);
  out.distances.assign(static_cast<std::size_t>(out.offsets.back()), 0.0f);

  const BlockShape shape = choose_block_shape(nq, ng, options);
  TopKConsumer topk(pair, ignored, options.top_k, shape.query_chunk, out);
  ProgressConsumer progress(options.on_progress, nq);
  std::vector<BlockConsumer*> consumers{&topk};
  consumers.insert(consumers.end(), also.begin(), also.end());
  if (options.on_progress) {
    options.on_progress(0, nq);  // starts the clock before the first chunk, so its rate is right
    consumers.push_back(&progress);
  }
  for_each_block(pair, shape, consumers);
  return out;
}

}  // namespace detail

RetrievalResults retrieve_knn(const ItemSet& queries, const ItemSet& gallery, const KnnOptions& options) {
  OML_CHECK(options.top_k > 0, ConfigError, "retrieval top_k must be positive, got ", options.top_k);
  validate_item_set(queries, "query");
  validate_item_set(gallery, "gallery");
  const detail::PreparedPair pair(queries, gallery, options.measure);
  const IgnoredPairs ignored(queries, gallery);
  return detail::retrieve_knn_fused(queries, gallery, pair, ignored, options, {});
}

}  // namespace oml::retrieval
