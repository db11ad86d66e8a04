// oml-validate: retrieval metrics for a checkpoint, or for precomputed embeddings;
// with `pipeline: pairwise`, before and after re-ranking with a pairwise model.
#include <boost/program_options.hpp>

#include "shell/cli.h"
#include "shell/launch.h"
#include "training/extractor_pipelines.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-validate";
  spec.summary = "compute retrieval metrics for a checkpoint or for precomputed embeddings";
  spec.usage =
      "  oml-validate --config FILE [--set key=value]... [--plugin LIB.so]... [--nproc-per-node N]\n"
      "               [--visualize N [--visualize-metric cmc/1]...] [--query-ids 3,17,42] [--visualize-top-k "
      "K]";
  spec.add_options = [](po::options_description& o) {
    oml::cli::add_launch_options(o);
    // clang-format off
    o.add_options()
      ("visualize", po::value<int64_t>(),
       "draw the N worst queries of each per-query metric (cmc, precision, map) as a PNG grid in <run>/images/")
      ("visualize-metric", po::value<std::vector<std::string>>()->composing(),
       "only this metric's worst queries (cmc/1 or OVERALL/cmc/1; repeatable)")
      ("query-ids", po::value<std::vector<std::string>>()->composing(),
       "also draw these queries (0-based validation rows in dataframe order, comma-separated) into queries.png")
      ("visualize-top-k", po::value<int64_t>()->default_value(5), "retrieved items per grid row");
    // clang-format on
  };
  spec.run = [](const oml::cli::Invocation& inv) {
    const oml::config::RunConfig config = inv.load_config();
    if (auto code = oml::cli::launch_if_requested(inv, config)) return *code;
    return oml::config::placing_settings(config.source, [&] {
      if (config.pipeline == oml::config::Pipeline::pairwise)
        return oml::pipelines::validate_pairwise(inv, config);
      return oml::pipelines::validate_extractor(inv, config);
    });
  };
  return oml::cli::run_command(argc, argv, spec);
}
