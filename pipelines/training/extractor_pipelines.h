#pragma once
// The pipelines behind the commands (docs/training.md describes the training loop):
//   train_extractor    — oml-train with `pipeline: extractor`
//   train_pairwise     — oml-train with `pipeline: pairwise` (a re-ranker over a trained extractor)
//   validate_extractor — oml-validate: metrics for weights, or for precomputed embeddings
//   validate_pairwise  — oml-validate with `pipeline: pairwise`: metrics before and after re-ranking
//   predict_extractor  — oml-predict: embeddings for a folder of images or a dataframe
// Each runs as a single process or as one rank of a multi-process job (the launcher is
// handled by the command before these are called). The command reads and resolves the config
// once and passes both the document (written into run directories) and the typed config.

#include <string>

#include "oml/data/dataframe.h"
#include "shell/cli.h"

namespace oml::config {
class Document;
}  // namespace oml::config

namespace oml::pipelines {

/// What oml-train's command line adds to the config.
struct TrainRequest {
  std::string resume_from;  ///< --resume: a checkpoint of an earlier run to continue; empty: a new run
};

int train_extractor(const config::Document& document, const config::RunConfig& config,
                    const TrainRequest& request);
int train_pairwise(const config::Document& document, const config::RunConfig& config,
                   const TrainRequest& request);
int validate_extractor(const cli::Invocation& invocation, const config::RunConfig& config);
int validate_pairwise(const cli::Invocation& invocation, const config::RunConfig& config);
int predict_extractor(const cli::Invocation& invocation, const config::RunConfig& config);

}  // namespace oml::pipelines
