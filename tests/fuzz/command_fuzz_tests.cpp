// The same property at the process level: the real oml-train on mutated configs and --set flags
// exits with 0 or 2 (with a message on stderr), never with 1 and never by a signal. A crash in
// a parser kills the in-process fuzz tests too; this also covers what only the command does
// (option parsing, the error printing at its edge, start_run).
//
// Every run is made to stop before training: `--set dataset_root=<a missing folder>` comes last,
// so oml-train reads and checks the whole config, loads its plugins, checks the component names
// and sets up the run, then fails reading the dataframe. `--set devices=1` keeps it from
// starting worker processes. Each run has 60 s and 4 GiB of address space. OML_FUZZ_COMMAND_RUNS
// sets the number of runs (default 20, about 0.4 s each).
#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "fuzz/config_input.h"
#include "fuzz/fuzz.h"
#include "support/support.h"

namespace command_fuzz_tests {

using namespace oml;

TEST_CASE("oml-train on mutated configs exits with 0 or 2, never 1 or a signal", "[fuzz][command]") {
  const fuzz::Settings settings = fuzz::settings_from_environment(0);
  if (settings.replay && settings.replay->filename().string().rfind("command-", 0) != 0) return;
  const char* runs_text = std::getenv("OML_FUZZ_COMMAND_RUNS");
  const int runs = settings.replay ? 1 : runs_text ? std::atoi(runs_text) : 20;

  const std::vector<std::string> seeds = fuzz::config_seeds();
  const std::vector<std::string> keys = fuzz::config_key_paths(seeds);
  fuzz::Mutator mutator(settings.seed ^ std::hash<std::string>{}("command"), fuzz::yaml_dictionary());
  test::TempDir dir;
  int by_exit_code[3] = {0, 0, 0};
  for (int run = 0; run < runs; ++run) {
    const std::string input = settings.replay
                                  ? fuzz::read_bytes(*settings.replay)
                                  : fuzz::mutate_config(mutator, mutator.pick(seeds), seeds, keys);
    const fuzz::ConfigInput config = fuzz::decode_config(input);
    test::write_file(dir / "fuzz.yaml", config.yaml);
    std::string args = "--config " + test::quote((dir / "fuzz.yaml").string()) + " --progress quiet";
    for (std::string flag : config.overrides) {
      std::replace(flag.begin(), flag.end(), '\0', ' ');  // no command line can hold a NUL
      args += " --set " + test::quote(flag);
    }
    args += " --set " + test::quote("dataset_root=" + (dir / "missing").string()) + " --set devices=1" +
            " --set " + test::quote("logs_root=" + (dir / "logs").string());

    // Bounds: 60 s, and 4 GiB of address space (oml-train starts in less than 1 GiB).
    const test::CommandResult result = test::run(
        "ulimit -v 4194304 && exec " + test::quote(test::command_path("oml-train")) + " " + args, 60);
    const bool kept =
        (result.exit_code == 0 || result.exit_code == 2) && (result.exit_code == 0 || !result.err.empty());
    if (kept) {
      ++by_exit_code[result.exit_code];
      continue;
    }
    const std::filesystem::path saved =
        settings.out_dir / ("command-" + std::to_string(settings.seed) + "-" + std::to_string(run) + ".fuzz");
    fuzz::write_bytes(saved, input);
    FAIL_CHECK("oml-train " << args << "\nexited with " << result.exit_code
                            << (result.exit_code > 128 ? " (a signal)" : "") << ", stderr:\n"
                            << result.err << "\ninput saved in " << saved.string()
                            << "\nreproduce: OML_FUZZ_REPLAY=" << saved.string()
                            << " build/tests/oml_fuzz_tests \"[command]\"");
  }
  std::cout << "fuzz command: " << runs << " oml-train runs (seed " << settings.seed
            << "): " << by_exit_code[0] << " exited with 0, " << by_exit_code[2] << " with 2 and a message\n";
}

}  // namespace command_fuzz_tests
