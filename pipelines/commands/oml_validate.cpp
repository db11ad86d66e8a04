// oml-validate: retrieval metrics for a checkpoint, or for precomputed embeddings;
// with `pipeline: pairwise`, before and after re-ranking with a pairwise model.
#include <boost/program_options.hpp>

#include "../cli.h"
#include "../extractor_pipelines.h"
#include "../launch.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-validate";
  spec.summary = "compute retrieval metrics for a checkpoint or for precomputed embeddings";
  spec.usage = "  oml-validate --config FILE [--set key=value]... [--plugin LIB.so]... [--nproc-per-node N]";
  spec.add_options = [](po::options_description& o) { oml::cli::add_launch_options(o); };
  spec.run = [](const oml::cli::Invocation& inv) {
    if (auto code = oml::cli::launch_if_requested(inv)) return *code;
    const oml::config::RunConfig config = inv.load_config();
    if (config.pipeline == "pairwise") return oml::pipelines::validate_pairwise(inv, config);
    return oml::pipelines::validate_extractor(inv, config);
  };
  return oml::cli::run_command(argc, argv, spec);
}
