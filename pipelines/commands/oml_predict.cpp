// oml-predict: embeddings for a folder of images or a dataframe.
#include <boost/program_options.hpp>

#include "../cli.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-predict";
  spec.summary = "compute embeddings for a folder of images or a dataframe";
  spec.usage = "  oml-predict --config FILE [--set key=value]... [--plugin LIB.so]... [--nproc-per-node N]";
  spec.add_options = [](po::options_description& o) {
    o.add_options()("nproc-per-node", po::value<int>()->default_value(1), "worker processes to start");
  };
  spec.run = [](const oml::cli::Invocation& inv) {
    inv.load_config();
    throw oml::RuntimeError("prediction is not implemented in this build of oml-cpp yet");
    return 1;
  };
  return oml::cli::run_command(argc, argv, spec);
}
