#pragma once
// Embeddings of a frozen extractor, cached on disk (the pairwise pipelines train and validate
// on them). A cache file is named by a hash of everything that decides its content: the
// extractor's component spec and weights, the extraction transform, and the split's rows
// (image paths and boxes), so a changed input never reuses a stale file.

#include <filesystem>
#include <memory>
#include <string>

#include "oml/config/run_config.h"
#include "runtime/embedding.h"

namespace oml::pipelines {

struct CachedEmbeddingsRequest {
  const config::RunConfig* config = nullptr;
  models::Extractor* extractor = nullptr;        ///< weights already loaded
  std::shared_ptr<const data::Dataset> dataset;  ///< image dataset with the extraction transform
  std::string split_name;                        ///< "train" / "validation", part of the file name
  EmbedOptions embed;                            ///< batch size, workers, progress label
};

/// The folder the cache lives in: `embeddings_cache_dir`, or logs_root/embeddings_cache.
std::filesystem::path embeddings_cache_dir(const config::RunConfig& config);

/// "embeddings_<split>_<16 hex digits>.pt" for the request (computed on rank 0's inputs).
std::string embeddings_cache_name(const CachedEmbeddingsRequest& request);

/// [N, D] float32 CPU embeddings of request.dataset, on every rank. Rank 0 decides: when its
/// cache file exists every rank reads it; otherwise the ranks embed their shares together
/// (embed_dataset) and rank 0 writes the file atomically while the others wait. Collective.
at::Tensor cached_embeddings(const CachedEmbeddingsRequest& request, const RunContext& context);

}  // namespace oml::pipelines
