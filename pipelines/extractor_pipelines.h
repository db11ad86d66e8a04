#pragma once
// The extractor pipelines behind the commands (DESIGN.md "the training loop"):
//   train_extractor    — oml-train with `pipeline: extractor`
//   validate_extractor — oml-validate: metrics for weights, or for precomputed embeddings
//   predict_extractor  — oml-predict: embeddings for a folder of images or a dataframe
// Each runs as a single process or as one rank of a multi-process job (the launcher is
// handled by the command before these are called).

#include "cli.h"

namespace oml::pipelines {

int train_extractor(const cli::Invocation& invocation);
int validate_extractor(const cli::Invocation& invocation);
int predict_extractor(const cli::Invocation& invocation);

}  // namespace oml::pipelines
