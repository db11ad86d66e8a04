// oml-predict: embeddings for a folder of images or a dataframe; with --retrieve K, each item's K
// nearest neighbours among them.
#include <boost/program_options.hpp>

#include "shell/cli.h"
#include "shell/launch.h"
#include "training/extractor_pipelines.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-predict";
  spec.summary = "compute embeddings for a folder of images or a dataframe";
  spec.usage =
      "  oml-predict --config FILE [--set key=value]... [--plugin LIB.so]... [--nproc-per-node N] "
      "[--retrieve K]";
  spec.add_options = [](po::options_description& o) {
    oml::cli::add_launch_options(o);
    o.add_options()("retrieve", po::value<int64_t>(),
                    "also write the K nearest other items of every item, found by the config's "
                    "retrieval_backend (neighbours.csv, neighbours_ids.npy, neighbours_distances.npy)");
  };
  spec.run = [](const oml::cli::Invocation& inv) {
    const oml::config::RunConfig config = inv.load_config();
    if (auto code = oml::cli::launch_if_requested(inv, config)) return *code;
    return oml::config::placing_settings(config.source,
                                         [&] { return oml::pipelines::predict_extractor(inv, config); });
  };
  return oml::cli::run_command(argc, argv, spec);
}
