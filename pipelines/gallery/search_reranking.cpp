// oml-search --rerank (search_reranking.h; docs/serving.md#re-ranking-with-a-pairwise-model).
#include "gallery/search_reranking.h"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/transform.h"
#include "oml/models/pairwise_model.h"
#include "oml/retrieval/postprocessor.h"
#include "runtime/pipeline_setup.h"
#include "runtime/run_context.h"

namespace oml::pipelines {

SearchReranker::SearchReranker(const cli::Invocation& inv, const std::filesystem::path& file) {
  OML_CHECK(std::filesystem::is_regular_file(file), UsageError, "--rerank ", file.string(),
            ": no such file; expected a pairwise config naming `pairwise_model` (with its weights) and "
            "`postprocessor` (docs/serving.md#re-ranking-with-a-pairwise-model)");
  config_ = inv.load_config(config::Document::from_file(file.string(), inv.overrides));
  // The model and the postprocessor's args fail here, before any query is embedded.
  const config::ComponentSpec spec = require_component(config_, config_.pairwise_model, "pairwise_model");
  model_name_ = spec.name;
  check_pairwise_postprocessor(config_);
  context_ = std::make_unique<RunContext>(start_run(config_));
  try {
    model_ = build_pairwise_model(config_, *context_);
  } catch (Error& e) {
    e.add_context("(the pairwise_model of --rerank " + file.string() + ", with its weights)");
    throw;
  }
  model_->eval();
  if (model_->takes_images()) transform_ = build_transform(config_, config_.transforms_val, "transforms_val");
}

SearchReranker::~SearchReranker() = default;

bool SearchReranker::takes_images() const { return model_->takes_images(); }

std::string SearchReranker::extractor_weights() const {
  return !config_.weights.empty() ? config_.weights : config_.extractor_weights;
}

int64_t SearchReranker::retrieve_k(int64_t k) const {
  const PairInput unused = [](int64_t) -> at::Tensor {
    throw InternalError("SearchReranker::retrieve_k: a pair was scored");
  };
  return std::max(k, pairwise_postprocessor(config_, *context_, *model_, unused, unused)->required_top_k());
}

PairInput SearchReranker::image_inputs(const data::DataSplit& rows) const {
  OML_CHECK(transform_ != nullptr, InternalError, "image_inputs for a model that takes embeddings");
  auto images = std::make_shared<const data::ImageDataset>(rows, transform_, image_limits(config_));
  const auto seed = static_cast<uint64_t>(config_.seed);
  // The transform is the deterministic transforms_val; the key only makes the call well-defined.
  return [images, seed](int64_t row) { return images->load(row, data::RandomKey{seed, 0, row}); };
}

PairInput SearchReranker::embedding_inputs(const at::Tensor& embeddings) {
  return [embeddings](int64_t row) { return embeddings[row].to(torch::kFloat).clone(); };
}

retrieval::RetrievalResults SearchReranker::rerank(const retrieval::RetrievalResults& found,
                                                   const PairInput& queries, const PairInput& gallery) const {
  // The postprocessor scores (query id, gallery id) pairs; here the ids are the rows the inputs
  // read: query q, gallery position g. The caller's ids come back unchanged.
  retrieval::RetrievalResults rows = found;
  std::iota(rows.query_ids.begin(), rows.query_ids.end(), int64_t{0});
  std::iota(rows.gallery_ids.begin(), rows.gallery_ids.end(), int64_t{0});
  retrieval::RetrievalResults out =
      pairwise_postprocessor(config_, *context_, *model_, queries, gallery)->process(rows);
  out.query_ids = found.query_ids;
  out.gallery_ids = found.gallery_ids;
  return out;
}

}  // namespace oml::pipelines
