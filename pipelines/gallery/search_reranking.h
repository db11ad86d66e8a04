#pragma once
// oml-search --rerank: each query's top results from the index re-ranked by a trained pairwise
// model, as oml-validate's pairwise pipeline re-ranks validation (the config's `postprocessor`,
// normally `pairwise_reranker`; docs/serving.md#re-ranking-with-a-pairwise-model).
//
//   SearchReranker reranker(invocation, "validate_pairwise.yaml");   // model and args checked
//   found = index.search(queries, {reranker.retrieve_k(k)});
//   found = reranker.rerank(found, reranker.image_inputs(query_rows), reranker.image_inputs(gallery_rows));

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "oml/retrieval/retrieval_results.h"
#include "runtime/pairwise_setup.h"
#include "shell/cli.h"

namespace oml::data {
class Transform;
}  // namespace oml::data

namespace oml::pipelines {

class SearchReranker {
 public:
  /// Reads the re-ranking config `file` — oml-validate's pairwise config, or OML's
  /// postprocessor_validate.yaml (`postprocessor_weights`); the command's --set overrides apply
  /// to it — builds its `pairwise_model` with its weights and checks its `postprocessor`, before
  /// any query is embedded: UsageError / ConfigError / DataError naming the file, key or weights.
  SearchReranker(const cli::Invocation& invocation, const std::filesystem::path& file);
  ~SearchReranker();

  /// Whether the model reads images (then both sides' images are read) or embeddings.
  bool takes_images() const;
  /// The pairwise model's name ("concat_siamese"), for messages.
  const std::string& model_name() const { return model_name_; }
  /// The extractor weights the config names (`weights` or OML's `extractor_weights`; "" when
  /// none): the extractor the re-ranker was trained over.
  std::string extractor_weights() const;
  /// Items a query must retrieve for a list of `k`: max(k, what the postprocessor re-scores).
  int64_t retrieve_k(int64_t k) const;

  /// The model's input for row i of `rows`: its image (path and box) through the config's
  /// transforms_val. Only for a model that takes images.
  PairInput image_inputs(const data::DataSplit& rows) const;
  /// The model's input for row i of `embeddings` ([N, D] float32, may be memory-mapped).
  static PairInput embedding_inputs(const at::Tensor& embeddings);

  /// `found` with each query's head re-scored and re-sorted: query q reads queries(q), gallery
  /// position g reads gallery(g). Lists keep their length; ids and labels are kept.
  retrieval::RetrievalResults rerank(const retrieval::RetrievalResults& found, const PairInput& queries,
                                     const PairInput& gallery) const;

 private:
  config::RunConfig config_;
  std::unique_ptr<RunContext> context_;
  std::shared_ptr<models::PairwiseModel> model_;
  std::string model_name_;
  std::shared_ptr<const data::Transform> transform_;  // for a model that takes images
};

}  // namespace oml::pipelines
