#include "shell/cli.h"
#include "shell/components.h"

#include <c10/util/Exception.h>
#include <torch/version.h>

#include <boost/program_options.hpp>
#include <cstdlib>
#include <iostream>
#include <new>

#include "oml/common/logging.h"
#include "oml/common/runtime.h"
#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "oml/config/error_list.h"
#include "oml/data/sampler.h"
#include "oml/distributed/process_group.h"
#include "oml/io/pending_files.h"
#include "oml/losses/criterion.h"
#include "oml/metrics/metric_table.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/scheduler.h"
#include "oml/registry/parsed_components.h"
#include "oml/registry/plugin.h"
#include "oml/registry/registries.h"
#include "oml/report/run_logger.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/postprocessor.h"
#include "oml/version.h"
#include "runtime/pipeline_setup.h"
#include "runtime/progress.h"

namespace po = boost::program_options;

namespace oml::cli {

namespace {

void load_plugins(const std::vector<std::string>& paths) {
  for (const auto& path : paths) {
    const LoadedPlugin& plugin = load_plugin(path);
    log::debug("loaded plugin '" + plugin.name + "' " + plugin.version + " from " + plugin.path);
  }
}

}  // namespace

int report_exception(const std::string& name) {
  try {
    throw;
  } catch (const Error& e) {
    std::cerr << name << ": " << e.kind() << ": " << e.what() << "\n";
    for (const auto& line : e.context()) std::cerr << "  " << line << "\n";
    return e.exit_code();
  } catch (const c10::Error& e) {
    std::cerr << name << ": error: " << first_line(e.what_without_backtrace()) << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << name << ": error: out of memory\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << name << ": internal error: " << first_line(e.what()) << "\n";
    return 1;
  } catch (...) {
    std::cerr << name << ": internal error: an exception that is not a std::exception\n";
    return 1;
  }
}

config::Document Invocation::load_document() const {
  if (!config_path) throw UsageError(command + ": --config FILE is required (see --help)");
  return config::Document::from_file(*config_path, overrides);
}

config::RunConfig Invocation::load_config() const { return load_config(load_document()); }

config::RunConfig Invocation::load_config(const config::Document& document) const {
  // Plugins named in the config are loaded before the config is interpreted, so that their
  // components can be referenced by name.
  const config::Node plugins_node = document.root()["plugins"];
  if (plugins_node.defined() && !plugins_node.is_null()) {
    const auto paths = plugins_node.as<std::vector<std::string>>();
    try {
      load_plugins(paths);
    } catch (Error& e) {
      e.add_context("(plugin listed at " + plugins_node.describe() + ")");
      throw;
    }
  }
  // Every problem of the config at once: its keys, the component names and metric_args.
  config::ErrorList errors;
  config::RunConfig config = config::parse_run_config(document.root(), errors);
  auto components = std::make_shared<ParsedComponents>(check_components(config, errors));
  errors.check([&] {
    config::placing_settings(document.root(), [&] {
      components->metrics =
          std::make_shared<const metrics::MetricTable>(metrics::configure_metrics(config.metric_args));
    });
  });
  errors.throw_if_any();
  config.components = std::move(components);
  // The backend is built once here: what relates it to the metrics (fnmr@fmr needs the exact
  // backend) fails before any work too.
  config::placing_settings(document.root(), [&] { pipelines::check_retrieval_backend(config); });
  // Once per run: by the launcher (or the only process), not again by each rank.
  const char* rank = std::getenv("RANK");
  if (rank == nullptr || std::string(rank) == "0") {
    for (const std::string& notice : config.notices) log::info(notice);
  }
  return config;
}

ParsedComponents check_components(const config::RunConfig& c, config::ErrorList& errors) {
  // Every named component must exist, and its args parse, before any work starts, so that a
  // typo fails in the first second rather than after a dataset has been loaded. Only the parse
  // phase runs: it needs no data and builds nothing (registry/registry.h). What it makes is
  // kept: the pipelines build from it and never read the args again.
  auto& r = registries();
  const auto parse = [&](const auto& registry, const std::optional<config::ComponentSpec>& spec) {
    using Parsed = typename std::decay_t<decltype(registry)>::Parsed;
    return spec ? std::optional<Parsed>(registry.parse(*spec, errors)) : std::nullopt;
  };
  ParsedComponents parsed;
  parsed.transforms_train = parse(r.transforms, c.transforms_train);
  parsed.transforms_val = parse(r.transforms, c.transforms_val);
  parsed.transforms_extraction = parse(r.transforms, c.transforms_extraction);
  parsed.transforms_predict = parse(r.transforms, c.transforms_predict);
  parsed.sampler = parse(r.samplers, c.sampler);
  parsed.extractor = parse(r.extractors, c.extractor);
  parsed.criterion = parse(r.losses, c.criterion);
  parsed.optimizer = parse(r.optimizers, c.optimizer);
  parsed.scheduler = parse(r.schedulers, c.scheduling.scheduler);
  parsed.postprocessor = parse(r.postprocessors, c.postprocessor);
  parsed.retrieval_backend = parse(r.retrieval_backends, c.retrieval_backend);
  parsed.pairwise_model = parse(r.pairwise_models, c.pairwise_model);
  if (c.logger && errors.check([&] { report::require_logger(*c.logger); }))
    parsed.logger = parse(r.loggers, c.logger);
  return parsed;
}

ParsedComponents check_components(const config::RunConfig& c) {
  config::ErrorList errors;
  ParsedComponents parsed = check_components(c, errors);
  errors.throw_if_any();
  return parsed;
}

void print_components(std::ostream& out) {
  registries().for_each([&](const std::string& kind, const std::vector<ComponentInfo>& infos) {
    out << kind << ":\n";
    if (infos.empty()) out << "  (none)\n";
    for (const auto& info : infos) {
      out << "  " << info.name;
      if (!info.help.empty()) out << " — " << info.help;
      if (info.origin != "built-in") out << " [" << info.origin << "]";
      out << "\n";
    }
  });
}

int run_command(int argc, char** argv, const CommandSpec& spec) {
  const std::string name = spec.name;
  try {
    try {
      po::options_description common("Options");
      // clang-format off
      common.add_options()
        ("help,h", "show this help and exit")
        ("version", "show the version and exit")
        ("config,c", po::value<std::string>(), "YAML config file")
        ("set,s", po::value<std::vector<std::string>>()->composing(),
         "override a config key: --set key.path=value (repeatable; value is YAML)")
        ("plugin,p", po::value<std::vector<std::string>>()->composing(),
         "load a plugin library before reading the config (repeatable)")
        ("list-components", "list every registered component (built-in and plugins) and exit")
        ("verbose,v", "log debug messages")
        ("quiet,q", "log warnings and errors only (and no progress output unless --progress says otherwise)")
        ("progress", po::value<std::string>(),
         "progress display: auto (a bar on a terminal, lines otherwise), bar, lines (a line every 10 s) or quiet");
      // clang-format on
      po::options_description own(spec.name + " options");
      if (spec.add_options) spec.add_options(own);
      po::options_description all;
      all.add(common).add(own);
      po::positional_options_description positional;
      if (spec.add_positional) spec.add_positional(positional);

      Invocation inv;
      inv.command = name;
      for (int i = 0; i < argc; ++i) inv.argv.emplace_back(argv[i]);
      po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), inv.vars);
      po::notify(inv.vars);

      if (inv.vars.count("help")) {
        std::cout << name << " — " << spec.summary << "\n\nUsage:\n" << spec.usage << "\n\n" << all << "\n";
        return 0;
      }
      if (inv.vars.count("version")) {
        std::cout << name << " (oml-cpp) " << OML_VERSION_STRING << "\n"
                  << "built with LibTorch " << TORCH_VERSION
                  << "; process groups: " << join(distributed::available_backends(), ", ") << "\n";
        return 0;
      }
      configure_library_logging(name.c_str(), inv.vars.count("verbose") > 0);
      log::init(-1, inv.vars.count("verbose") ? log::Level::debug
                    : inv.vars.count("quiet") ? log::Level::warn
                                              : log::Level::info);
      if (inv.vars.count("progress")) {
        pipelines::Progress::set_default_mode(
            pipelines::parse_progress_mode(inv.vars["progress"].as<std::string>()));
      } else if (inv.vars.count("quiet")) {
        pipelines::Progress::set_default_mode(pipelines::ProgressMode::quiet);
      }
      if (inv.vars.count("config")) inv.config_path = inv.vars["config"].as<std::string>();
      if (inv.vars.count("set")) inv.overrides = inv.vars["set"].as<std::vector<std::string>>();
      if (inv.vars.count("plugin")) inv.plugins = inv.vars["plugin"].as<std::vector<std::string>>();

      register_builtins();
      load_plugins(inv.plugins);
      if (inv.vars.count("list-components")) {
        if (inv.config_path) inv.load_config();  // loads the config's plugins too
        print_components(std::cout);
        return 0;
      }
      if (spec.needs_config && !inv.config_path) {
        throw UsageError("--config FILE is required (see " + name + " --help)");
      }
      if (!tune_allocator(spec.allocator)) {
        log::debug("malloc: settings left as the environment set them");
      } else if (spec.allocator == AllocatorUse::training) {
        log::debug("malloc: every freed block kept in the heap (training)");
      } else {
        log::debug("malloc: freed blocks up to 32 MB kept in the heap, larger ones unmapped");
      }
      warn_if_reference_blas();
      io::install_interrupt_cleanup(name);
      const int code = spec.run(inv);
      io::wait_if_interrupted();
      return code;
    } catch (const po::error& e) {
      throw UsageError(std::string(e.what()) + " (see " + name + " --help)");
    }
  } catch (...) {
    io::wait_if_interrupted();  // an error the interrupt's cleanup caused is not reported
    return report_exception(name);
  }
}

}  // namespace oml::cli
