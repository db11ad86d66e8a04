// oml-search: queries against a saved index folder -> their nearest gallery items (docs/serving.md).
#include <boost/program_options.hpp>

#include "gallery/gallery_commands.h"
#include "oml/common/error.h"
#include "shell/cli.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-search";
  spec.summary = "search a saved gallery index with new queries (docs/serving.md)";
  spec.usage =
      "  oml-search --index DIR (--images FOLDER | --texts FILE | --audio FOLDER | --dataframe CSV | "
      "--embeddings FILE.npy "
      "[--items "
      "CSV]) "
      "--out DIR\n"
      "             [--top-k K] [--threshold DISTANCE|none] [--rerank PAIRWISE.yaml [--set key=value]...]";
  spec.needs_config = false;
  spec.add_options = [](po::options_description& o) {
    // clang-format off
    o.add_options()
      ("index", po::value<std::string>(), "the index folder (oml-index build)")
      ("images", po::value<std::string>(), "the queries: a folder of images, embedded by the index's model")
      ("texts", po::value<std::string>(), "the queries: a UTF-8 file of texts, one per line, embedded by a text index's model")
      ("audio", po::value<std::string>(), "the queries: a folder of audio files, embedded by an audio index's model")
      ("dataframe", po::value<std::string>(), "the queries: a dataframe's images, texts or audio files, embedded by the index's model")
      ("embeddings", po::value<std::string>(), "the queries as float32 [N, D] embeddings (.npy)")
      ("items", po::value<std::string>(), "with --embeddings: a CSV naming the queries' paths (column path)")
      ("out", po::value<std::string>(), "the folder for neighbours.csv, neighbours_ids.npy, neighbours_distances.npy")
      ("top-k", po::value<int64_t>()->default_value(10), "neighbours per query")
      ("threshold", po::value<std::string>(),
       "keep only neighbours within this distance (default: the index's calibrated threshold, if any; 'none': all); "
       "a query with none is unknown")
      ("rerank", po::value<std::string>(),
       "re-rank each query's top results with a trained pairwise model: a pairwise config (oml-validate's, or "
       "OML's postprocessor_validate.yaml) naming pairwise_model with its weights and postprocessor "
       "(pairwise_reranker: top_n, batch_size, use_fp16); --set overrides its keys");
    // clang-format on
  };
  spec.run = [](const oml::cli::Invocation& inv) {
    OML_CHECK(!inv.config_path, UsageError, "oml-search takes no --config: the index folder keeps its own");
    return oml::pipelines::search_index(inv);
  };
  return oml::cli::run_command(argc, argv, spec);
}
