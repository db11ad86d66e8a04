// oml-index: a gallery saved for searching — build, add, remove, compact, calibrate, info (docs/serving.md).
#include <boost/program_options.hpp>

#include "gallery/gallery_commands.h"
#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "shell/cli.h"

namespace po = boost::program_options;

namespace {

int run_index(const oml::cli::Invocation& inv) {
  OML_CHECK(inv.vars.count("action"), UsageError,
            "an ACTION is required: build, add, remove, compact, calibrate or info");
  const std::string action = inv.vars["action"].as<std::string>();
  if (action == "build") return oml::pipelines::index_build(inv);
  OML_CHECK(!inv.config_path, UsageError, "oml-index ", action,
            " takes no --config: the index folder keeps the config it was built with");
  if (action == "add") return oml::pipelines::index_add(inv);
  if (action == "remove") return oml::pipelines::index_remove(inv);
  if (action == "compact") return oml::pipelines::index_compact(inv);
  if (action == "calibrate") return oml::pipelines::index_calibrate(inv);
  if (action == "info") return oml::pipelines::index_info(inv);
  throw oml::UsageError("unknown ACTION '" + action +
                        "'; expected build, add, remove, compact, calibrate or info");
}

}  // namespace

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-index";
  spec.summary = "save a gallery for searching, and change it (docs/serving.md)";
  spec.usage =
      "  oml-index build  --config FILE [--set key=value]... --out DIR [--embeddings FILE.npy [--items CSV]] "
      "[--k K]\n"
      "                   (the gallery: the config's data_dir or dataframe through its model, or "
      "--embeddings)\n"
      "  oml-index add    --index DIR (--images FOLDER | --texts FILE | --audio FOLDER | --dataframe CSV | "
      "--embeddings "
      "FILE.npy "
      "[--items CSV])\n"
      "  oml-index remove --index DIR (--ids 3,17,... | --ids-file FILE)\n"
      "  oml-index compact --index DIR   (the changes logged by add/remove written into a new version)\n"
      "  oml-index calibrate --index DIR --target-fmr F (--dataframe CSV | --images FOLDER | --embeddings "
      "FILE.npy --items CSV)\n"
      "                   (a labelled set: the distance threshold at false match rate F, used by "
      "oml-search)\n"
      "  oml-index info   --index DIR";
  spec.needs_config = false;
  spec.add_options = [](po::options_description& o) {
    // clang-format off
    o.add_options()
      ("action", po::value<std::string>(), "build | add | remove | compact | calibrate | info")
      ("out", po::value<std::string>(), "build: the index folder to create (must not exist, or be empty)")
      ("index", po::value<std::string>(), "add, remove, compact, calibrate, info: the index folder")
      ("embeddings", po::value<std::string>(), "the items as float32 [N, D] embeddings (.npy), not images, texts or audio")
      ("items", po::value<std::string>(), "with --embeddings: a CSV whose header names any of path, label, category; a row per embedding")
      ("images", po::value<std::string>(), "add, calibrate: a folder of images, embedded by the index's model")
      ("texts", po::value<std::string>(), "add: a UTF-8 file of texts, one per line, embedded by a text index's model")
      ("audio", po::value<std::string>(), "add: a folder of audio files, embedded by an audio index's model")
      ("dataframe", po::value<std::string>(), "add, calibrate: a dataframe (path or text, label, category columns), embedded by the index's model")
      ("ids", po::value<std::string>(), "remove: item ids, comma-separated")
      ("ids-file", po::value<std::string>(), "remove: a file of item ids, one per line")
      ("target-fmr", po::value<double>(), "calibrate: the false match rate to allow (e.g. 0.001)")
      ("k", po::value<int64_t>()->default_value(10),
       "build: the k of the searches: target_recall chooses the search parameters for recall@k");
    // clang-format on
  };
  spec.add_positional = [](po::positional_options_description& p) { p.add("action", 1); };
  spec.run = run_index;
  return oml::cli::run_command(argc, argv, spec);
}
