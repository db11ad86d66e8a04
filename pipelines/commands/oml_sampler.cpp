// oml-sampler: prints, as JSON, what each rank receives each epoch from the configured sampler.
#include <boost/program_options.hpp>

#include <nlohmann/json.hpp>

#include <iostream>

#include "oml/data/dataframe.h"
#include "oml/data/sampler.h"
#include "oml/ddp/sampler_report.h"
#include "oml/samplers/builtin_samplers.h"
#include "runtime/pipeline_setup.h"
#include "shell/cli.h"

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
    oml::config::RunConfig config = inv.load_config();
    if (inv.vars.count("seed")) config.seed = inv.vars["seed"].as<int64_t>();
    // Only labels and categories matter here: image files are not needed.
    const oml::data::Dataframe dataframe =
        oml::pipelines::read_run_dataframe(config, /*require_items=*/false);
    if (dataframe.train().empty()) {
      throw oml::DataError(dataframe.file() + ": has no rows with split 'train' to sample from");
    }
    const auto context = oml::pipelines::sampler_context_for(config, dataframe);
    const auto sampler =
        oml::samplers::build_sampler(oml::pipelines::parsed_components(config).sampler, context);
    oml::ddp::write_sampler_report(std::cout, sampler, inv.vars["world-size"].as<int>(),
                                   inv.vars["epochs"].as<int>(), oml::pipelines::ddp_sampler_options(config),
                                   config.seed, static_cast<int64_t>(context.labels.size()));
    return 0;
  };
  return oml::cli::run_command(argc, argv, spec);
}
