// The built-in postprocessors: constant_thresholding, adaptive_thresholding, pairwise_reranker.
#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <utility>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/config/args_reader.h"
#include "oml/config/argument_error.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/postprocessor.h"

namespace oml::retrieval {

namespace {

// Copies everything but the lists, which `keep(q)` shortens to a prefix of length keep(q).
template <class KeepFn>
RetrievalResults keep_prefixes(const RetrievalResults& in, KeepFn&& keep) {
  RetrievalResults out = in;
  out.retrieved.clear();
  out.distances.clear();
  out.offsets.assign(1, 0);
  for (int64_t q = 0; q < in.num_queries(); ++q) {
    const int64_t n = keep(q);
    out.retrieved.insert(out.retrieved.end(), in.retrieved.begin() + in.begin(q),
                         in.retrieved.begin() + in.begin(q) + n);
    out.distances.insert(out.distances.end(), in.distances.begin() + in.begin(q),
                         in.distances.begin() + in.begin(q) + n);
    out.offsets.push_back(static_cast<int64_t>(out.retrieved.size()));
  }
  return out;
}

class ConstantThresholding final : public Postprocessor {
 public:
  explicit ConstantThresholding(ConstantThresholdingOptions options) : options_(options) {}
  std::string name() const override { return "constant_thresholding"; }

  RetrievalResults process(const RetrievalResults& results) const override {
    // Lists are ascending, so "distance < th" is a prefix.
    return keep_prefixes(results, [&](int64_t q) {
      const auto first = results.distances.begin() + results.begin(q);
      const auto last = results.distances.begin() + results.end(q);
      return static_cast<int64_t>(std::lower_bound(first, last, static_cast<float>(options_.th)) - first);
    });
  }

 private:
  ConstantThresholdingOptions options_;
};

class AdaptiveThresholding final : public Postprocessor {
 public:
  explicit AdaptiveThresholding(AdaptiveThresholdingOptions options) : options_(options) {}
  std::string name() const override { return "adaptive_thresholding"; }

  RetrievalResults process(const RetrievalResults& results) const override {
    // The mean gap over every consecutive pair of every list.
    double gap_sum = 0.0;
    int64_t gaps = 0;
    for (int64_t q = 0; q < results.num_queries(); ++q) {
      for (int64_t i = results.begin(q) + 1; i < results.end(q); ++i) {
        gap_sum += static_cast<double>(results.distances[i]) - results.distances[i - 1];
        ++gaps;
      }
    }
    if (gaps == 0) return results;
    const double limit = options_.n_std * gap_sum / static_cast<double>(gaps);
    return keep_prefixes(results, [&](int64_t q) {
      for (int64_t i = results.begin(q) + 1; i < results.end(q); ++i) {
        if (static_cast<double>(results.distances[i]) - results.distances[i - 1] > limit)
          return i - results.begin(q);
      }
      return results.size(q);
    });
  }

 private:
  AdaptiveThresholdingOptions options_;
};

class PairwiseReranker final : public Postprocessor {
 public:
  PairwiseReranker(PairwiseRerankerOptions options, PairScorer scorer)
      : options_(options), scorer_(std::move(scorer)) {}
  std::string name() const override { return "pairwise_reranker"; }
  int64_t required_top_k() const override { return options_.top_n; }

  RetrievalResults process(const RetrievalResults& results) const override {
    RetrievalResults out = results;
    const std::vector<float> scores = score_heads(results);
    std::size_t next = 0;
    std::vector<std::pair<double, int64_t>> head;
    for (int64_t q = 0; q < results.num_queries(); ++q) {
      const int64_t n = std::min(options_.top_n, results.size(q));
      head.clear();
      for (int64_t i = 0; i < n; ++i)
        head.emplace_back(scores[next++], results.retrieved[results.begin(q) + i]);
      // Stable: equal scores keep the retrieval order.
      std::stable_sort(head.begin(), head.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      if (n < results.size(q)) keep_below_tail(head, results.distances[results.begin(q) + n]);
      for (int64_t i = 0; i < n; ++i) {
        out.retrieved[out.begin(q) + i] = head[i].second;
        out.distances[out.begin(q) + i] = static_cast<float>(head[i].first);
      }
    }
    return out;
  }

 private:
  // Scores of the (query, head item) pairs of all queries, in list order, batch by batch.
  std::vector<float> score_heads(const RetrievalResults& results) const {
    std::vector<int64_t> query_ids;
    std::vector<int64_t> gallery_ids;
    for (int64_t q = 0; q < results.num_queries(); ++q) {
      const int64_t n = std::min(options_.top_n, results.size(q));
      for (int64_t i = 0; i < n; ++i) {
        query_ids.push_back(results.query_ids[q]);
        gallery_ids.push_back(results.gallery_ids[results.retrieved[results.begin(q) + i]]);
      }
    }
    std::vector<float> scores;
    scores.reserve(query_ids.size());
    for (std::size_t start = 0; start < query_ids.size();
         start += static_cast<std::size_t>(options_.batch_size)) {
      const std::size_t stop =
          std::min(query_ids.size(), start + static_cast<std::size_t>(options_.batch_size));
      const std::vector<int64_t> batch_q(query_ids.begin() + start, query_ids.begin() + stop);
      const std::vector<int64_t> batch_g(gallery_ids.begin() + start, gallery_ids.begin() + stop);
      const std::vector<float> batch = scorer_(batch_q, batch_g);
      OML_CHECK(batch.size() == batch_q.size(), RuntimeError,
                "pairwise_reranker: the pairwise model returned ", batch.size(), " scores for ",
                batch_q.size(), " pairs");
      for (std::size_t i = 0; i < batch.size(); ++i) {
        OML_CHECK(std::isfinite(batch[i]), RuntimeError,
                  "pairwise_reranker: the pairwise model scored the pair (query ", batch_q[i], ", gallery ",
                  batch_g[i], ") as ", batch[i], "; expected a finite number");
      }
      scores.insert(scores.end(), batch.begin(), batch.end());
    }
    return scores;
  }

  // docs/metrics.md#pairwise-re-ranking: a head whose largest score exceeds the first tail
  // distance is rescaled by tail[0] / head[-1] and shifted down by OML's epsilon (1000 float32
  // epsilons: PairwiseReranker's gap for float32 scores), so the whole list stays ascending.
  static void keep_below_tail(std::vector<std::pair<double, int64_t>>& head, double tail_first) {
    if (head.empty() || head.back().first <= tail_first) return;
    constexpr double kEpsilon = 1000.0 * std::numeric_limits<float>::epsilon();
    const double last = head.back().first;
    if (tail_first > 0.0) {
      const double scale = tail_first / last;
      for (auto& item : head) item.first = item.first * scale - kEpsilon;
    } else {
      // A non-positive tail start would flip the order under scaling; shift instead.
      for (auto& item : head) item.first += tail_first - last - kEpsilon;
    }
    // Float rounding must not lift the last head item above the tail.
    for (auto& item : head) item.first = std::min(item.first, tail_first);
  }

  PairwiseRerankerOptions options_;
  PairScorer scorer_;
};

}  // namespace

std::shared_ptr<Postprocessor> make_constant_thresholding(const ConstantThresholdingOptions& options) {
  return std::make_shared<ConstantThresholding>(options);
}

void check_options(const AdaptiveThresholdingOptions& options) {
  config::check_argument(options.n_std > 0.0, "postprocessor 'adaptive_thresholding'", "n_std",
                         "n_std must be > 0, got ", options.n_std);
}

std::shared_ptr<Postprocessor> make_adaptive_thresholding(const AdaptiveThresholdingOptions& options) {
  check_options(options);
  return std::make_shared<AdaptiveThresholding>(options);
}

void check_options(const PairwiseRerankerOptions& options) {
  const std::string who = "postprocessor 'pairwise_reranker'";
  config::check_argument(options.top_n > 1, who, "top_n", "top_n must be > 1, got ", options.top_n);
  config::check_argument(options.batch_size > 0, who, "batch_size", "batch_size must be > 0, got ",
                         options.batch_size);
}

std::shared_ptr<Postprocessor> make_pairwise_reranker(const PairwiseRerankerOptions& options,
                                                      PairScorer scorer) {
  check_options(options);
  OML_CHECK(static_cast<bool>(scorer), UsageError,
            "postprocessor 'pairwise_reranker' needs a pairwise model");
  return std::make_shared<PairwiseReranker>(options, std::move(scorer));
}

void register_builtin_postprocessors(Registries& registries) {
  auto& registry = registries.postprocessors;
  registry.add(
      "constant_thresholding",
      [](config::ArgsReader& reader) {
        ConstantThresholdingOptions options;
        reader.required("th", options.th);
        return options;
      },
      [](const ConstantThresholdingOptions& options, const PostprocessorContext&) {
        return make_constant_thresholding(options);
      },
      "th (required): keep retrieved items with distance < th");
  registry.add(
      "adaptive_thresholding",
      config::checked_parse<AdaptiveThresholdingOptions>(
          [](config::ArgsReader& reader, AdaptiveThresholdingOptions& options) {
            reader.required("n_std", options.n_std);
          }),
      [](const AdaptiveThresholdingOptions& options, const PostprocessorContext&) {
        return make_adaptive_thresholding(options);
      },
      "n_std (required): cut each list at its first gap > n_std x the mean gap");
  registry.add(
      "pairwise_reranker",
      config::checked_parse<PairwiseRerankerOptions>(
          [](config::ArgsReader& reader, PairwiseRerankerOptions& options) {
            reader.required("top_n", options.top_n);
            reader.optional("batch_size", options.batch_size);
            reader.optional("use_fp16", options.use_fp16);
            // The model itself is built by the pipeline and reaches us as context.pairwise_scores.
            reader.take("pairwise_model");
            // OML's loader and progress-bar settings: the pairs are read by the pipeline's own
            // loader (num_workers of the config) and progress is the command's --progress.
            reader.take("num_workers");
            reader.take("verbose");
          }),
      [](const PairwiseRerankerOptions& options, const PostprocessorContext& context) {
        // Which pipelines give a pairwise model is the run's business, not the args': a config
        // without `pairwise_model:` reaches here.
        config::check_fits(static_cast<bool>(context.pairwise_scores), "postprocessor 'pairwise_reranker'",
                           "pairwise_model",
                           "needs a pairwise model, but none is configured; set `pairwise_model: {name: ..., "
                           "args: ...}` (see docs/pairwise.md)");
        if (options.use_fp16 && context.half_precision_scores) {
          static std::once_flag said;  // the postprocessor is built for every validation
          if (context.half_precision != "float16")
            std::call_once(said, [&] {
              log::info("pairwise_reranker: use_fp16 scores in " + context.half_precision +
                        " here (float16 autocast needs CUDA)");
            });
          return make_pairwise_reranker(options, context.half_precision_scores);
        }
        return make_pairwise_reranker(options, context.pairwise_scores);
      },
      "top_n (required, > 1), batch_size = 128, use_fp16 = false: re-score the first top_n items with the "
      "pairwise model (use_fp16: under float16 autocast on CUDA, bfloat16 on the CPU)");
}

}  // namespace oml::retrieval
