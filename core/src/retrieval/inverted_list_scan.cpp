#include "oml/retrieval/detail/inverted_list_scan.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <utility>

#include "candidate_lists.h"
#include "oml/common/error.h"
#include "oml/common/runtime.h"
#include "oml/retrieval/detail/distance_blocks.h"

namespace oml::retrieval::detail {

struct InvertedListScanner::Candidate {
  float value;  // ||g||^2 - 2 q.g in fp32: orders the list's items like ||q - g||^2
  int64_t position;
  const float* vector;
};

// The k best candidates of each query of a chunk, in one allocation.
class InvertedListScanner::ChunkHeaps {
 public:
  // Max-heap order: the worst kept candidate at the front; ties by position, as the exact backend.
  static bool before(const Candidate& a, const Candidate& b) {
    return a.value < b.value || (a.value == b.value && a.position < b.position);
  }

  ChunkHeaps(int64_t n, int64_t k)
      : k_(k),
        entries_(static_cast<std::size_t>(n * k)),
        sizes_(static_cast<std::size_t>(n), 0),
        thresholds_(static_cast<std::size_t>(n), std::numeric_limits<float>::infinity()) {}

  float threshold(int64_t row) const { return thresholds_[row]; }

  void offer(int64_t row, const Candidate& candidate) {
    Candidate* heap = entries_.data() + row * k_;
    int64_t& size = sizes_[row];
    if (size < k_) {
      heap[size++] = candidate;
      std::push_heap(heap, heap + size, before);
      if (size == k_) thresholds_[row] = heap[0].value;
      return;
    }
    if (!before(candidate, heap[0])) return;
    std::pop_heap(heap, heap + k_, before);
    heap[k_ - 1] = candidate;
    std::push_heap(heap, heap + k_, before);
    thresholds_[row] = heap[0].value;
  }

  const Candidate* begin(int64_t row) const { return entries_.data() + row * k_; }
  int64_t size(int64_t row) const { return sizes_[row]; }

 private:
  int64_t k_;
  std::vector<Candidate> entries_;
  std::vector<int64_t> sizes_;
  std::vector<float> thresholds_;
};

InvertedListScanner::InvertedListScanner(std::vector<InvertedList> lists, int64_t dim, ListScanShape shape)
    : lists_(std::move(lists)), norms_(lists_.size()), dim_(dim), shape_(shape) {
  OML_ASSERT(dim_ > 0 && shape_.row_tile > 0 && shape_.column_tile > 0);
  at::parallel_for(0, num_lists(), 16, [&](int64_t begin, int64_t end) {
    for (int64_t l = begin; l < end; ++l) {
      const InvertedList& list = lists_[l];
      std::vector<float>& norms = norms_[l];
      norms.resize(static_cast<std::size_t>(list.size));
      for (int64_t i = 0; i < list.size; ++i) {
        const float* v = list.vectors + i * dim_;
        float sum = 0.0f;
        for (int64_t d = 0; d < dim_; ++d) sum += v[d] * v[d];
        norms[i] = sum;
      }
    }
  });
}

int64_t InvertedListScanner::chunk_rows(int64_t wanted, int64_t top_k) {
  constexpr int64_t kBudget = int64_t{256} << 20;
  const int64_t per_row = std::max<int64_t>(1, at::get_num_threads()) * std::max<int64_t>(1, top_k) *
                          static_cast<int64_t>(sizeof(Candidate));
  return std::max<int64_t>(1, std::min(wanted, std::max<int64_t>(256, kBudget / per_row)));
}

void InvertedListScanner::scan_list(int64_t l, const float* queries, int64_t q0, const int64_t* list_rows,
                                    int64_t count, const IgnoredPairs& ignored, ChunkHeaps& heaps,
                                    std::vector<float>& gathered, std::vector<float>& block) const {
  const InvertedList& list = lists_[l];
  gathered.resize(static_cast<std::size_t>(std::min(shape_.row_tile, count) * dim_));
  block.resize(static_cast<std::size_t>(std::min(shape_.row_tile, count) * std::min(shape_.column_tile, list.size)));
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
      // -2 q.g straight from the BLAS (alpha = -2 is exact); beta = 0 ignores the old contents.
      at::addmm_out(values, values, a, b.t(), /*beta=*/0, /*alpha=*/-2);
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
  for (int t = 0; t < threads; ++t) heaps.emplace_back(n, top_k);
  std::atomic<int64_t> next_list{0};
  const SingleThreadedBlas one_blas_thread;
  at::parallel_for(0, threads, 1, [&](int64_t first, int64_t last) {
    for (int64_t task = first; task < last; ++task) {
      ChunkHeaps& mine = heaps[task];
      std::vector<float> gathered;
      std::vector<float> block;
      for (int64_t l = next_list++; l < nlist; l = next_list++) {
        if (lists_[l].size > 0 && start[l + 1] > start[l]) {
          scan_list(l, queries, q0, rows.data() + start[l], start[l + 1] - start[l], ignored, mine, gathered,
                    block);
        }
      }
    }
  });

  // Exact order and distances of the kept candidates, then the lists in query order.
  std::vector<std::vector<std::pair<double, int64_t>>> exact(static_cast<std::size_t>(n));
  at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      for (const ChunkHeaps& thread_heaps : heaps) {
        const Candidate* kept = thread_heaps.begin(i);
        for (int64_t j = 0; j < thread_heaps.size(i); ++j) {
          exact[i].emplace_back(exact_squared_distance(queries + i * dim_, kept[j].vector, dim_),
                                kept[j].position);
        }
      }
    }
  });
  for (int64_t i = 0; i < n; ++i) append_list(out, ignored, q0 + i, exact[i], top_k);
}

}  // namespace oml::retrieval::detail
