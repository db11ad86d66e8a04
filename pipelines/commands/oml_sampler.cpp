// oml-sampler: prints, as JSON, what each rank receives each epoch from the configured sampler.
#include <boost/program_options.hpp>

#include "../cli.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-sampler";
  spec.summary = "show the batches each rank receives from the configured sampler";
  spec.usage = "  oml-sampler --config FILE --world-size W --epochs E [--seed S] [--plugin LIB.so]...";
  spec.add_options = [](po::options_description& o) {
    // clang-format off
    o.add_options()
      ("world-size", po::value<int>()->default_value(1), "number of ranks to simulate")
      ("epochs", po::value<int>()->default_value(1), "number of epochs to print")
      ("seed", po::value<int64_t>(), "sampler seed (default: the config's seed)");
    // clang-format on
  };
  spec.run = [](const oml::cli::Invocation& inv) {
    inv.load_config();
    throw oml::RuntimeError("sampler inspection is not implemented in this build of oml-cpp yet");
    return 1;
  };
  return oml::cli::run_command(argc, argv, spec);
}
