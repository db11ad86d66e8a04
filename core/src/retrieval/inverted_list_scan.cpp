#include "oml/retrieval/detail/inverted_list_scan.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>

#include "candidate_lists.h"
#include "oml/common/error.h"
#include "oml/common/runtime.h"
#include "oml/retrieval/detail/distance_blocks.h"

namespace oml::retrieval::detail {

struct InvertedListScanner::Candidate {
  float value;  // ||g||^2 - 2 q.g in fp32: orders the list's items like ||q - g||^2 (or -q.g)
  int64_t position;
  const float* vector;
};

// Per query of a chunk: the k smallest values seen (a max-heap) and every candidate within the
// error margin of the current k-th value, as the exact engine's selection (knn.cpp) keeps them.
// A candidate whose value exceeds (k-th value) + margin cannot be among the exact top k.
class InvertedListScanner::ChunkHeaps {
 public:
  ChunkHeaps(int64_t n, int64_t k, const std::vector<double>& margins) : k_(k), margins_(margins), rows_(n) {}

  float threshold(int64_t row) const { return rows_[row].threshold; }

  // `candidate.value` <= threshold(row) and not an ignored pair.
  void offer(int64_t row, const Candidate& candidate) {
    Row& r = rows_[row];
    r.candidates.push_back(candidate);
    auto& heap = r.heap;
    if (static_cast<int64_t>(heap.size()) < k_) {
      heap.push_back(candidate.value);
      std::push_heap(heap.begin(), heap.end());
    } else if (candidate.value < heap.front()) {
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = candidate.value;
      std::push_heap(heap.begin(), heap.end());
    } else {
      return;
    }
    if (static_cast<int64_t>(heap.size()) == k_) {
      const double bound = static_cast<double>(heap.front()) + margins_[row];
      r.threshold = static_cast<float>(bound);
      // Rounding the threshold to float must not cut a candidate the bound keeps.
      if (static_cast<double>(r.threshold) < bound) {
        r.threshold = std::nextafter(r.threshold, std::numeric_limits<float>::infinity());
      }
      if (r.candidates.size() >= std::max<std::size_t>(64, 4 * static_cast<std::size_t>(k_))) prune(r);
    }
  }

  // The candidates still within the threshold.
  const std::vector<Candidate>& candidates(int64_t row) {
    prune(rows_[row]);
    return rows_[row].candidates;
  }

 private:
  struct Row {
    std::vector<float> heap;
    std::vector<Candidate> candidates;
    float threshold = std::numeric_limits<float>::infinity();
  };

  static void prune(Row& r) {
    const float threshold = r.threshold;
    auto& c = r.candidates;
    c.erase(std::remove_if(c.begin(), c.end(),
                           [threshold](const Candidate& e) { return !(e.value <= threshold); }),
            c.end());
  }

  int64_t k_;
  const std::vector<double>& margins_;
  std::vector<Row> rows_;
};

InvertedListScanner::InvertedListScanner(std::vector<InvertedList> lists, int64_t dim, Measure measure,
                                         ListScanShape shape)
    : lists_(std::move(lists)), norms_(lists_.size()), dim_(dim), measure_(measure), shape_(shape) {
  OML_ASSERT(dim_ > 0 && shape_.row_tile > 0 && shape_.column_tile > 0);
  at::parallel_for(0, num_lists(), 16, [&](int64_t begin, int64_t end) {
    for (int64_t l = begin; l < end; ++l) {
      const InvertedList& list = lists_[l];
      std::vector<float>& norms = norms_[l];
      norms.resize(static_cast<std::size_t>(list.size));
      for (int64_t i = 0; i < list.size; ++i) {
        const float* v = list.vectors + i * dim_;
        double sum = 0.0;
        for (int64_t d = 0; d < dim_; ++d) sum += static_cast<double>(v[d]) * v[d];
        norms[i] = static_cast<float>(sum);
      }
    }
  });
  for (auto& norms : norms_) {
    for (const float norm2 : norms) max_norm_ = std::max(max_norm_, std::sqrt(static_cast<double>(norm2)));
    // Inner products need no norms in the values, only the largest for the bound.
    if (measure_ == Measure::negative_dot) std::fill(norms.begin(), norms.end(), 0.0f);
  }
}

namespace {

// Runs work(0) on the calling thread and work(1 .. threads - 1) on their own threads; the first
// exception is rethrown after every thread has finished.
template <class Work>
void run_on_threads(int threads, Work& work) {
  std::mutex mutex;
  std::exception_ptr error;
  auto guarded = [&](int t) {
    try {
      work(t);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mutex);
      if (!error) error = std::current_exception();
    }
  };
  std::vector<std::thread> others;
  others.reserve(static_cast<std::size_t>(std::max(0, threads - 1)));
  for (int t = 1; t < threads; ++t) others.emplace_back(guarded, t);
  guarded(0);
  for (auto& thread : others) thread.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

int64_t InvertedListScanner::chunk_rows(int64_t wanted, int64_t top_k) {
  constexpr int64_t kBudget = int64_t{256} << 20;
  // Per query and thread: the heap and up to max(64, 4 k) candidates before a prune.
  const int64_t candidates = std::max<int64_t>(64, 4 * std::max<int64_t>(1, top_k));
  const int64_t per_row = std::max<int64_t>(1, at::get_num_threads()) *
                          (candidates * static_cast<int64_t>(sizeof(Candidate)) + top_k * 4 + 64);
  return std::max<int64_t>(1, std::min(wanted, std::max<int64_t>(256, kBudget / per_row)));
}

void InvertedListScanner::scan_list(int64_t l, const float* queries, int64_t q0, const int64_t* list_rows,
                                    int64_t count, const IgnoredPairs& ignored, ChunkHeaps& heaps,
                                    std::vector<float>& gathered, std::vector<float>& block) const {
  const InvertedList& list = lists_[l];
  gathered.resize(static_cast<std::size_t>(std::min(shape_.row_tile, count) * dim_));
  block.resize(
      static_cast<std::size_t>(std::min(shape_.row_tile, count) * std::min(shape_.column_tile, list.size)));
  for (int64_t r0 = 0; r0 < count; r0 += shape_.row_tile) {
    const int64_t m = std::min(shape_.row_tile, count - r0);
    const int64_t* tile_rows = list_rows + r0;
    for (int64_t i = 0; i < m; ++i) {
      std::memcpy(gathered.data() + i * dim_, queries + tile_rows[i] * dim_, sizeof(float) * dim_);
    }
    const at::Tensor a = at::from_blob(gathered.data(), {m, dim_}, at::kFloat);
    for (int64_t c0 = 0; c0 < list.size; c0 += shape_.column_tile) {
      const int64_t w = std::min(shape_.column_tile, list.size - c0);
      // The list's memory is only read: from_blob needs a non-const pointer.
      const at::Tensor b = at::from_blob(const_cast<float*>(list.vectors + c0 * dim_), {w, dim_}, at::kFloat);
      at::Tensor values = at::from_blob(block.data(), {m, w}, at::kFloat);
      // -2 q.g (-q.g) straight from the BLAS (alpha = -2 is exact); beta = 0 ignores the old contents.
      at::addmm_out(values, values, a, b.t(), /*beta=*/0, /*alpha=*/block_alpha(measure_));
      const float* norms = norms_[l].data() + c0;
      const int64_t* positions = list.positions + c0;
      const float* vectors = list.vectors + c0 * dim_;
      for (int64_t i = 0; i < m; ++i) {
        const int64_t row = tile_rows[i];
        const float* v = block.data() + i * w;
        auto consider = [&](int64_t t) {
          const float value = v[t] + norms[t];
          if (!(value <= heaps.threshold(row)) || ignored.contains(q0 + row, positions[t])) return;
          heaps.offer(row, {value, positions[t], vectors + t * dim_});
        };
        constexpr int64_t kGroup = 16;
        int64_t j = 0;
        for (; j + kGroup <= w; j += kGroup) {
          // Cheap vectorisable test first: most groups hold nothing below the threshold.
          const float threshold = heaps.threshold(row);
          int below = 0;
          for (int64_t t = 0; t < kGroup; ++t) below += (v[j + t] + norms[j + t]) <= threshold;
          if (below == 0) continue;
          for (int64_t t = j; t < j + kGroup; ++t) consider(t);
        }
        for (; j < w; ++j) consider(j);
      }
    }
  }
}

void InvertedListScanner::scan(const float* queries, int64_t n, int64_t q0, const int64_t* probes,
                               int64_t nprobe, const IgnoredPairs& ignored, int64_t top_k,
                               RetrievalResults& out) const {
  OML_ASSERT(top_k > 0 && nprobe > 0 && n >= 0);
  const int64_t nlist = num_lists();

  // The (query, list) pairs grouped by list: rows_[start[l] .. start[l + 1]) probe list l.
  std::vector<int64_t> start(static_cast<std::size_t>(nlist + 1), 0);
  for (int64_t i = 0; i < n * nprobe; ++i) {
    const int64_t l = probes[i];
    OML_ASSERT(l < nlist, "probe of list ", l, " in an index of ", nlist, " lists");
    if (l >= 0) ++start[l + 1];
  }
  for (int64_t l = 0; l < nlist; ++l) start[l + 1] += start[l];
  std::vector<int64_t> rows(static_cast<std::size_t>(start[nlist]));
  {
    std::vector<int64_t> cursor(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n * nprobe; ++i) {
      if (probes[i] >= 0) rows[cursor[probes[i]]++] = i / nprobe;
    }
  }

  // Each thread takes the next unscanned list and keeps its own k best per query, so no two
  // threads write one heap; the BLAS runs single-threaded inside each thread's multiplies.
  const int threads = std::max(1, std::min<int>(at::get_num_threads(), static_cast<int>(nlist)));
  std::vector<ChunkHeaps> heaps;
  heaps.reserve(static_cast<std::size_t>(threads));
  // The exact engine's bound of a computed ||g||^2 - 2 q.g (-q.g) against the exact value
  // (selection_error_bound): twice of it separates what can still be in the top k.
  std::vector<double> margins(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double q2 = 0.0;
    for (int64_t d = 0; d < dim_; ++d)
      q2 += static_cast<double>(queries[i * dim_ + d]) * queries[i * dim_ + d];
    margins[i] = 2.0 * selection_error_bound(measure_, dim_, std::sqrt(q2), max_norm_);
  }
  for (int t = 0; t < threads; ++t) heaps.emplace_back(n, top_k, margins);
  std::atomic<int64_t> next_list{0};
  const SingleThreadedBlas one_blas_thread;
  auto work = [&](int t) {
    const SingleThreadedBlas one_blas_thread_here;  // MKL's setting is per thread
    std::vector<float> gathered;
    std::vector<float> block;
    for (int64_t l = next_list++; l < nlist; l = next_list++) {
      if (lists_[l].size > 0 && start[l + 1] > start[l]) {
        scan_list(l, queries, q0, rows.data() + start[l], start[l + 1] - start[l], ignored, heaps[t],
                  gathered, block);
      }
    }
  };
  // Plain threads, each taking the next list: lists differ widely in length, and at::parallel_for
  // would hand each thread a fixed range of them.
  run_on_threads(threads, work);

  // Exact order and distances of the kept candidates, then the lists in query order.
  std::vector<std::vector<std::pair<double, int64_t>>> exact(static_cast<std::size_t>(n));
  auto rank_exactly = [&](int t) {
    for (int64_t i = t; i < n; i += threads) {
      for (ChunkHeaps& thread_heaps : heaps) {
        for (const Candidate& kept : thread_heaps.candidates(i)) {
          exact[i].emplace_back(exact_key(measure_, queries + i * dim_, kept.vector, dim_), kept.position);
        }
      }
    }
  };
  run_on_threads(threads, rank_exactly);
  for (int64_t i = 0; i < n; ++i) append_list(out, ignored, q0 + i, exact[i], top_k, measure_);
}

}  // namespace oml::retrieval::detail
