#pragma once
// What a run's rows, or an index's items, are: images, texts or audio files. One answer shared
// by the commands that train and embed (run_inputs.h derives it from the extractor's input())
// and by the index and the server (index_folder.h keeps it in the manifest).

namespace oml::pipelines {

/// An index of embeddings counts as images: its items.csv may name paths.
enum class RowInput { images, texts, audio };

}  // namespace oml::pipelines
