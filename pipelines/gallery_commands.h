#pragma once
// The commands over saved galleries (docs/serving.md):
//   oml-index build     — a gallery (images through a model, or embeddings) -> an index folder
//   oml-index add       — items appended, with new ids
//   oml-index remove    — items removed by id
//   oml-index calibrate — the open-set threshold for a target false match rate
//   oml-index info      — what an index folder holds
//   oml-search          — queries (images, a dataframe, or embeddings) against an index folder
// Each runs in one process; the index folder's format is index_folder.h.

#include "cli.h"

namespace oml::pipelines {

int index_build(const cli::Invocation& invocation);
int index_add(const cli::Invocation& invocation);
int index_remove(const cli::Invocation& invocation);
int index_calibrate(const cli::Invocation& invocation);
int index_info(const cli::Invocation& invocation);
int search_index(const cli::Invocation& invocation);

}  // namespace oml::pipelines
