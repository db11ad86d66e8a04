// oml-validate: retrieval metrics for a checkpoint, or for precomputed embeddings.
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
    return oml::pipelines::validate_extractor(inv);
  };
  return oml::cli::run_command(argc, argv, spec);
}
