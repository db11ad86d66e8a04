// oml-convert: converts public datasets into the OML format (images + df.csv).
#include <boost/program_options.hpp>

#include "../cli.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-convert";
  spec.summary = "convert a dataset into the OML format (images + df.csv)";
  spec.usage = "  oml-convert FORMAT --src DIR --dst DIR";
  spec.needs_config = false;
  spec.add_options = [](po::options_description& o) {
    // clang-format off
    o.add_options()
      ("format", po::value<std::string>(), "fashion-mnist | image-folder | cub | sop | cars | inshop")
      ("src", po::value<std::string>(), "the dataset as downloaded")
      ("dst", po::value<std::string>(), "output folder (images + df.csv)");
    // clang-format on
  };
  spec.add_positional = [](po::positional_options_description& p) { p.add("format", 1); };
  spec.run = [](const oml::cli::Invocation& inv) {
    throw oml::RuntimeError("dataset conversion is not implemented in this build of oml-cpp yet");
    return 1;
  };
  return oml::cli::run_command(argc, argv, spec);
}
