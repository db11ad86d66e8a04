// oml-train: trains the pipeline named by the config's `pipeline:` key.
#include <boost/program_options.hpp>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/report/profiler_setup.h"
#include "shell/cli.h"
#include "shell/launch.h"
#include "training/extractor_pipelines.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-train";
  spec.summary = "train an extractor or a pairwise re-ranker from a YAML config";
  spec.usage =
      "  oml-train --config FILE [--set key=value]... [--plugin LIB.so]... [--nproc-per-node N] [--resume "
      "CKPT] [--profile FROM:TO]";
  spec.allocator = oml::AllocatorUse::training;
  spec.add_options = [](po::options_description& o) {
    oml::cli::add_launch_options(o);
    o.add_options()("resume", po::value<std::string>(),
                    "continue the run saved in this checkpoint (a last.ckpt)");
    o.add_options()("profile", po::value<std::string>(),
                    "record optimizer steps FROM to TO (as train.jsonl numbers them) into a Chrome trace "
                    "in the run's profile/ folder; the config key `profile: \"FROM:TO\"`");
  };
  spec.run = [](const oml::cli::Invocation& given) {
    // --profile is the config's `profile:` key, set last (as a --set would).
    oml::cli::Invocation inv = given;
    if (inv.vars.count("profile")) {
      const std::string text = inv.vars["profile"].as<std::string>();
      oml::config::StepRange range;
      const std::string problem = oml::config::parse_step_range(text, range);
      if (!problem.empty()) throw oml::UsageError("--profile: " + problem);
      inv.overrides.push_back("profile=\"" + text + "\"");
    }
    const oml::config::Document document = inv.load_document();
    const oml::config::RunConfig config = inv.load_config(document);
    // Before any thread starts (the launched ranks inherit the environment).
    if (config.profile)
      oml::report::prepare_profiler_process(config.accelerator != oml::config::Accelerator::cpu);
    if (auto code = oml::cli::launch_if_requested(inv, config)) return *code;
    oml::pipelines::TrainRequest request;
    if (inv.vars.count("resume")) request.resume_from = inv.vars["resume"].as<std::string>();
    // The Trainer and the layers below take typed options; their SettingErrors are placed here.
    return oml::config::placing_settings(config.source, [&] {
      if (config.pipeline == oml::config::Pipeline::pairwise)
        return oml::pipelines::train_pairwise(document, config, request);
      return oml::pipelines::train_extractor(document, config, request);
    });
  };
  return oml::cli::run_command(argc, argv, spec);
}
