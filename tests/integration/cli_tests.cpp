// The command shells, run as a user runs them: help, version, and every kind of bad input
// giving one clear line and the documented exit code (2 user error, 1 runtime failure).
#include "oml/io/npy.h"
#include "oml/registry/plugin.h"
#include "pipeline_fixtures.h"
#include "support/support.h"

namespace cli_tests {

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;
using Catch::Matchers::StartsWith;
using oml::test::CommandResult;
using oml::test::quote;
using oml::test::run_oml;
using oml::test::TempDir;
using oml::test::write_file;

namespace {
const std::vector<std::string> kCommands{"oml-train", "oml-validate", "oml-predict", "oml-sampler",
                                         "oml-convert"};

// No stack dumps, no uncaught exceptions, no LibTorch backtraces.
void check_clean_error(const CommandResult& r) {
  CHECK_THAT(r.err, !Contains("terminate called") && !Contains("Exception raised from") &&
                        !Contains("frame #") && !Contains("c10::Error"));
}

std::string plugin_arg(const std::string& name) { return "--plugin " + quote(oml::test::fixture_path(name)); }

// Each of `places` occurs in `text`, each after the one before.
void check_in_order(const std::string& text, const std::vector<std::string>& places) {
  std::size_t at = 0;
  for (const std::string& place : places) {
    INFO(place);
    const std::size_t found = text.find(place, at);
    CHECK(found != std::string::npos);
    if (found != std::string::npos) at = found;
  }
}
}  // namespace

TEST_CASE("Every command prints help and version and exits 0", "[cli]") {
  for (const auto& cmd : kCommands) {
    const auto help = run_oml(cmd, "--help");
    CHECK(help.exit_code == 0);
    CHECK_THAT(help.out, Contains("Usage:") && Contains("--config") && Contains("--set") &&
                             Contains("--plugin") && Contains("--list-components"));
    const auto version = run_oml(cmd, "--version");
    CHECK(version.exit_code == 0);
    CHECK_THAT(version.out, Contains(cmd) && Contains("oml-cpp") && Contains("built with LibTorch ") &&
                                Contains("process groups: gloo"));
  }
}

TEST_CASE("accelerator: cuda on a machine without a GPU exits 2 naming the LibTorch it was built with",
          "[cli][gpu-build]") {
  const auto version = run_oml("oml-train", "--version");
  CHECK((version.out.find("nccl") != std::string::npos) == static_cast<bool>(OML_TORCH_CUDA));
  // CUDA_VISIBLE_DEVICES empty: no GPU, as on CI's machines, also where the tests run beside one.
  const auto r = oml::test::run(
      "CUDA_VISIBLE_DEVICES= " + quote(oml::test::command_path("oml-train")) + " --config " +
      quote(oml::test::source_path("configs/fashion_mnist/train_extractor.yaml")) +
      " --set accelerator=cuda" + " --set dataset_root=" + quote(oml::test::fashion_mnist_subset().string()) +
      " --set max_epochs=1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(OML_TORCH_CUDA ? "no GPU is visible to this process" : "CPU-only LibTorch"));
  CHECK_THAT(r.err, !Contains("Traceback") && !Contains("terminate called"));
}

TEST_CASE("oml-train keeps every freed block in the heap, other commands only those up to 32 MB", "[cli]") {
  // -v prints the setting at start-up; the missing config then ends the command.
  TempDir dir;
  const std::string args = " -v --config " + quote((dir / "none.yaml").string());
  const auto train = run_oml("oml-train", args);
  CHECK_THAT(train.err, Contains("malloc: every freed block kept in the heap (training)"));
  const auto validate = run_oml("oml-validate", args);
  CHECK_THAT(validate.err,
             Contains("malloc: freed blocks up to 32 MB kept in the heap, larger ones unmapped"));
  // A user's own glibc setting wins.
  const auto own =
      oml::test::run("MALLOC_MMAP_MAX_=65536 " + quote(oml::test::command_path("oml-train")) + args);
  CHECK_THAT(own.err, Contains("malloc: settings left as the environment set them"));
  for (const auto* r : {&train, &validate, &own}) {
    CHECK(r->exit_code == 2);
    CHECK_THAT(r->err, Contains("none.yaml"));
  }
}

TEST_CASE("Bad usage exits 2 with a hint to --help", "[cli]") {
  const auto unknown = run_oml("oml-train", "--no-such-flag");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("oml-train: usage error:") && Contains("--help"));
  const auto no_config = run_oml("oml-train", "");
  CHECK(no_config.exit_code == 2);
  CHECK_THAT(no_config.err, Contains("--config FILE is required"));
  check_clean_error(unknown);
}

TEST_CASE("A malformed YAML config exits 2 naming file, line and column", "[cli][config]") {
  TempDir dir;
  write_file(dir / "bad.yaml", "seed: 1\nsampler: {name: balance\nmax_epochs: 2\n");
  const auto r = run_oml("oml-train", "--config " + quote((dir / "bad.yaml").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("config error") && Contains("bad.yaml:") && Contains("malformed YAML"));
  check_clean_error(r);
}

TEST_CASE("An unknown key and a wrong type exit 2 with the place", "[cli][config]") {
  TempDir dir;
  write_file(dir / "c.yaml", "seed: 1\nbs_trian: 8\n");
  const auto unknown = run_oml("oml-train", "--config " + quote((dir / "c.yaml").string()));
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("c.yaml:2:1") && Contains("unknown key 'bs_trian'") &&
                              Contains("did you mean 'bs_train'"));
  write_file(dir / "t.yaml", "seed: one\n");
  const auto type = run_oml("oml-train", "--config " + quote((dir / "t.yaml").string()));
  CHECK(type.exit_code == 2);
  CHECK_THAT(type.err, Contains("t.yaml:1:7") && Contains("seed") && Contains("expected an integer"));
  const auto set = run_oml(
      "oml-train", "--config " + quote((dir / "t.yaml").string()) + " --set seed=5 --set max_epochs=x");
  CHECK(set.exit_code == 2);
  CHECK_THAT(set.err, Contains("--set max_epochs") && Contains("expected an integer"));
  check_clean_error(type);
}

TEST_CASE("An unknown ddp.gradient_compression exits 2 naming the key and the accepted values",
          "[cli][config]") {
  TempDir dir;
  write_file(dir / "c.yaml", "seed: 1\nddp:\n  gradient_compression: int8\n");
  const auto r = run_oml("oml-train", "--config " + quote((dir / "c.yaml").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("c.yaml:3") && Contains("ddp.gradient_compression") &&
                        Contains("expected one of none, bf16, fp16") && Contains("'int8'"));
  check_clean_error(r);
}

TEST_CASE("A component or dataset_root emptied by --set points at the flag", "[cli][config]") {
  TempDir dir;
  write_file(dir / "c.yaml", oml::test::train_config(dir / "logs"));
  const std::string config = "--config " + quote((dir / "c.yaml").string());
  const auto extractor = run_oml("oml-train", config + " --set extractor=");
  CHECK(extractor.exit_code == 2);
  CHECK_THAT(extractor.err,
             Contains("--set extractor") && Contains("needs 'extractor:") && !Contains("c.yaml:"));
  const auto root = run_oml("oml-train", config + " --set dataset_root=");
  CHECK(root.exit_code == 2);
  CHECK_THAT(root.err, Contains("--set dataset_root") && Contains("needs 'dataset_root'"));
  check_clean_error(extractor);
}

TEST_CASE("A rendezvous port in use is our one line, without LibTorch's glog lines before it", "[cli][ddp]") {
  TempDir dir;
  write_file(dir / "c.yaml", oml::test::train_config(dir / "logs"));
  // Hold a port, then ask the launcher to host its store there.
  const int holder = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(holder, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  REQUIRE(::listen(holder, 1) == 0);
  socklen_t length = sizeof(address);
  REQUIRE(::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  const int port = ntohs(address.sin_port);
  const auto r = run_oml("oml-train", "--config " + quote((dir / "c.yaml").string()) +
                                          " --nproc-per-node 2 --master-port " + std::to_string(port));
  ::close(holder);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err,
             StartsWith("oml-train: distributed error: launcher: cannot host the rendezvous store on port " +
                        std::to_string(port)));
  CHECK_THAT(r.err, !Contains("InitGoogleLogging") && !Contains("socket.cpp"));
}

TEST_CASE("An unknown logger names the loggers there are, and ${now:...} is the launch time",
          "[cli][config]") {
  TempDir dir;
  write_file(dir / "c.yaml", oml::test::train_config(dir / "logs"));
  const std::string config = "--config " + quote((dir / "c.yaml").string());
  const auto comet = run_oml("oml-train", config + " --set 'logger={name: comet}'");
  CHECK(comet.exit_code == 2);
  CHECK_THAT(comet.err, Contains("--set logger") && Contains("unknown logger 'comet'") &&
                            Contains("neptune") && Contains("clearml") && Contains("wandb") &&
                            Contains("tensorboard"));
  CHECK_FALSE(std::filesystem::exists(dir / "logs" / "run"));
  // The launcher's start time reaches the config (its ranks get it from the launcher).
  const auto now =
      oml::test::run("OML_RUN_START_TIME=1234567890 " + quote(oml::test::command_path("oml-train")) + " " +
                     config + " --set 'run_name=r_${now:%s}' --set max_epochs=1");
  INFO(now.err);
  CHECK(now.exit_code == 0);
  CHECK(std::filesystem::exists(dir / "logs" / "r_1234567890" / "checkpoints" / "last.ckpt"));
}

TEST_CASE("An OML-shaped config with Hydra's run directory, now resolver and OML's keys trains",
          "[cli][config]") {
  TempDir dir;
  std::string config = oml::test::train_config(dir / "logs");
  config.replace(config.find("run_name: run\n"), std::string("run_name: run\n").size(), "");
  config +=
      "postfix: metric_learning\naccelerator: auto\ndevices: 1\nfind_unused_parameters: false\n"
      "logs_folder: ${now:%Y-%m-%d_%H-%M-%S}_${postfix}\nhydra_dir: ${logs_root}/${logs_folder}/\n"
      "tags:\n  - ${postfix}\n  - subset\nlog_images: true\n"
      "hydra:\n  run:\n    dir: ${hydra_dir}\n  searchpath:\n   - pkg://oml.configs\n  job:\n    chdir: "
      "True\n";
  config.replace(config.find("metric_args: {"), std::string("metric_args: {").size(),
                 "metric_args: {metrics_to_exclude_from_visualization: [precision,], pfc_variance: [0.5], "
                 "return_only_main_category: true, visualize_only_main_category: true, ");
  write_file(dir / "oml.yaml", config);
  const auto r =
      run_oml("oml-train", "--config " + quote((dir / "oml.yaml").string()) + " --set max_epochs=1");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("hydra.job.chdir") && !Contains("hydra.searchpath"));  // oml.configs: ours
  std::vector<std::filesystem::path> runs;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "logs")) runs.push_back(entry.path());
  REQUIRE(runs.size() == 1);
  CHECK_THAT(runs[0].filename().string(), EndsWith("_metric_learning"));
  CHECK(std::filesystem::exists(runs[0] / "images" / "epoch_001" / "worst_cmc_1.png"));
  CHECK_THAT(oml::test::read_file(runs[0] / "config.yaml"), Contains("subset"));
}

TEST_CASE("A config with OML's defaults list trains with the shipped config groups", "[cli][config]") {
  // As OML's test configs: components from config groups, one chosen on the command line.
  TempDir dir;
  std::string config = oml::test::train_config(dir / "logs");
  for (const std::string line :
       {"sampler: {name: balance, args: {n_labels: 5, n_instances: 4, epoch_size: 3}}\n",
        "optimizer: {name: adam, args: {lr: 0.001}}\n"}) {
    config.erase(config.find(line), line.size());
  }
  config += "defaults:\n  - optimizer: sgd\n  - sampler: balance\n";
  write_file(dir / "oml.yaml", config);
  const auto r =
      run_oml("oml-train", "--config " + quote((dir / "oml.yaml").string()) +
                               " --set max_epochs=1 --set optimizer=adam --set optimizer.args.lr=0.002");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string resolved = oml::test::read_file(dir / "logs" / "run" / "config.yaml");
  INFO(resolved);
  CHECK_THAT(resolved, Contains("name: adam") && Contains("lr: 0.002") && Contains("name: balance") &&
                           Contains("n_instances: 2") && !Contains("defaults"));
  // An option that does not exist: exit 2 naming the entry and the group's options.
  write_file(dir / "typo.yaml", config + "  - scheduler: cosine_anealing\n");
  const auto typo = run_oml("oml-train", "--config " + quote((dir / "typo.yaml").string()));
  CHECK(typo.exit_code == 2);
  CHECK_THAT(typo.err, Contains("typo.yaml:") &&
                           Contains("defaults: no config 'scheduler/cosine_anealing.yaml'") &&
                           Contains("did you mean 'cosine_annealing'"));
}

TEST_CASE("Every mistake of a config is reported at once, by line", "[cli][config]") {
  TempDir dir;
  write_file(dir / "five.yaml",
             "seed: one\n"                                      // a wrong type
             "bs_trian: 8\n"                                    // an unknown key
             "max_epochs: 0\n"                                  // a bad value
             "sampler: {name: balanse, args: {n_labels: 2}}\n"  // an unknown component
             "metric_args: {cmc_top_k: [0]}\n");                // a bad metric argument
  const auto r = run_oml("oml-train", "--config " + quote((dir / "five.yaml").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             StartsWith("oml-train: config error: 5 problems in the config (all of them, by place):\n"));
  check_in_order(r.err, {"five.yaml:1:7", "five.yaml:2:1", "five.yaml:3:13", "five.yaml:4:", "five.yaml:5:"});
  CHECK_THAT(r.err, Contains("did you mean 'bs_train'") && Contains("did you mean 'balance'"));
  check_clean_error(r);
}

TEST_CASE("Mistakes inside components' args are reported with the rest, nested ones too, nothing twice",
          "[cli][config]") {
  TempDir dir;
  write_file(dir / "args.yaml",
             "seed: one\n"                                                    // 1: top-level type
             "extractor: {name: resnet, args: {arch: resnet18, gem: 3.0}}\n"  // 2: unknown arg
             "criterion:\n"
             "  name: triplet_with_miner\n"
             "  args:\n"
             "    margin: 0.1\n"
             "    miner: {name: hard_triplet}\n"                                // 7: nested unknown name
             "optimizer: {name: adam, args: {lr: fast, betas: [0.9, 0.99]}}\n"  // 8: arg type
             "sampler: {name: balanse, args: {n_labelz: 2}}\n"                  // 9: unknown name only
             "pairwise_model: {name: concat_siamese, args: {extractor: {name: resnet, args: {archh: x}}}}\n"
             "postprocessor: {name: pairwise_reranker, args: {batch_size: 4}}\n");  // 11: missing top_n
  const auto r = run_oml("oml-train", "--config " + quote((dir / "args.yaml").string()));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             StartsWith("oml-train: config error: 7 problems in the config (all of them, by place):\n"));
  check_in_order(r.err, {"args.yaml:1:7: seed", "args.yaml:2:50: extractor.args.gem: unknown key 'gem'",
                         "args.yaml:7:19: criterion.args.miner.name: unknown miner 'hard_triplet'",
                         "args.yaml:8:36: optimizer.args.lr:",
                         "args.yaml:9:17: sampler.name: unknown sampler", "args.yaml:10:", "args.yaml:11:"});
  CHECK_THAT(r.err, Contains("unknown key 'archh'") && Contains("missing required key 'top_n'") &&
                        Contains("did you mean 'hard_triplets'"));
  CHECK_THAT(r.err, !Contains("n_labelz"));  // the args of an unknown sampler are not judged
  check_clean_error(r);
}

TEST_CASE("Six mistakes, one in a plugin component's args, are reported together before any work",
          "[cli][config][plugins]") {
  // Two in the run config itself, three in built-in components' args (one nested, one relating
  // two args) and one in the args of a sampler a plugin registers: every parse runs first.
  TempDir dir;
  write_file(dir / "six.yaml",
             "plugins: [" + quote(OML_EXAMPLE_PLUGIN) +
                 "]\n"
                 "seed: one\n"                                                     // 2: a wrong type
                 "max_epochs: 0\n"                                                 // 3: a bad value
                 "extractor: {name: resnet, args: {arch: resnet18, gem_p: -1}}\n"  // 4: a bad arg value
                 "criterion:\n"
                 "  name: triplet_with_miner\n"
                 "  args: {miner: {name: n_hard_triplets, args: {n_positive: 0}}}\n"  // 7: a nested arg
                 "optimizer: {name: sgd, args: {nesterov: true}}\n"  // 8: args that contradict
                 "sampler: {name: frequency_balance, args: {n_labels: 1, n_instances: 4}}\n");  // 9: plugin
  const auto r = run_oml("oml-train", "--config " + quote((dir / "six.yaml").string()));
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             StartsWith("oml-train: config error: 6 problems in the config (all of them, by place):\n"));
  check_in_order(
      r.err,
      {"six.yaml:2:7: seed", "six.yaml:3:13: max_epochs",
       "six.yaml:4:57: extractor.args.gem_p: extractor 'resnet': gem_p must be > 0",
       "six.yaml:7:60: criterion.args.miner.args.n_positive: miner 'n_hard_triplets': n_positive must be",
       "six.yaml:8:41: optimizer.args.nesterov: optimizer 'sgd': nesterov needs momentum > 0",
       "six.yaml:9:53: sampler.args.n_labels: sampler 'frequency_balance': n_labels must be > 1, got 1",
       "(sampler 'frequency_balance' comes from plugin 'frequency_sampler'"});
  check_clean_error(r);
}

TEST_CASE("A plugin retrieval backend that searches by Euclidean distance only is refused for dot",
          "[cli][registry][distance]") {
  TempDir dir;
  oml::io::write_npy(dir / "g.npy", torch::randn({20, 4}));
  const std::string build = plugin_arg("libgood_plugin.so") + " build --embeddings " +
                            quote((dir / "g.npy").string()) +
                            " --set 'retrieval_backend={name: fixture_euclidean_backend";
  const auto refused =
      run_oml("oml-index", build + ", distance: dot}' --out " + quote((dir / "dot").string()));
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err,
             Contains("retrieval_backend.distance") &&
                 Contains("'fixture_euclidean_backend' searches by Euclidean distance only, not by dot"));
  CHECK_FALSE(std::filesystem::exists(dir / "dot"));
  check_clean_error(refused);
  const auto built = run_oml("oml-index", build + "}' --out " + quote((dir / "euclidean").string()));
  INFO(built.err);
  CHECK(built.exit_code == 0);
}

TEST_CASE("An unknown component exits 2 listing the known ones", "[cli][registry]") {
  TempDir dir;
  write_file(dir / "c.yaml", "sampler:\n  name: fixture_sampelr\n");
  const auto r =
      run_oml("oml-train", plugin_arg("libgood_plugin.so") + " --config " + quote((dir / "c.yaml").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("c.yaml:2:9") && Contains("unknown sampler 'fixture_sampelr'") &&
                        Contains("did you mean 'fixture_sampler'") && Contains("known samplers:"));
  check_clean_error(r);
}

TEST_CASE("Plugin failures exit 2 naming the library and the failed step", "[cli][plugins]") {
  TempDir dir;
  write_file(dir / "c.yaml", "seed: 1\n");
  const std::string cfg = " --config " + quote((dir / "c.yaml").string());
  SECTION("missing file") {
    const auto r = run_oml("oml-train", "--plugin /nonexistent/libx.so" + cfg);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("plugin error") && Contains("'/nonexistent/libx.so' not found"));
  }
  SECTION("no entry point") {
    const auto r = run_oml("oml-train", plugin_arg("libno_entry_plugin.so") + cfg);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("no entry point 'oml_plugin_info'"));
  }
  SECTION("wrong API version") {
    const auto r = run_oml("oml-train", plugin_arg("libwrong_api_plugin.so") + cfg);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("plugin API version 99") &&
                          Contains("provides version " + std::to_string(OML_PLUGIN_API_VERSION)));
  }
  SECTION("duplicate component name") {
    const auto r =
        run_oml("oml-train", plugin_arg("libgood_plugin.so") + " " + plugin_arg("libclash_plugin.so") + cfg);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("sampler 'fixture_sampler'") && Contains("clash_fixture") &&
                          Contains("good_fixture"));
  }
  SECTION("plugins listed in the config") {
    write_file(dir / "p.yaml", "plugins: [/nonexistent/liby.so]\n");
    const auto r = run_oml("oml-train", "--config " + quote((dir / "p.yaml").string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("liby.so' not found") && Contains("p.yaml:1:10"));
  }
}

TEST_CASE("Listing components shows plugin-added components with their origin", "[cli][plugins]") {
  const auto r = run_oml("oml-sampler", plugin_arg("libgood_plugin.so") + " --list-components");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("samplers:") && Contains("fixture_sampler") && Contains("good_fixture") &&
                        Contains("transforms:") && Contains("postprocessors:"));
}

TEST_CASE("A zoo weights name whose file is missing exits 2 naming the file and its URL", "[cli][models]") {
  TempDir dir;
  write_file(dir / "v.yaml", "dataset_root: " + oml::test::fashion_mnist_subset().string() +
                                 "\nlogs_root: " + (dir / "logs").string() +
                                 "\nnum_threads: 1\nnum_workers: 1\nweights_dir: " + (dir / "zoo").string() +
                                 "\ntransforms_val: {name: norm}\n"
                                 "extractor: {name: vit, args: {arch: vits16, weights: vits16_sop}}\n");
  const auto r = run_oml("oml-validate", "--config " + quote((dir / "v.yaml").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Contains((dir / "zoo" / "vits16_sop.ckpt").string()) &&
                 Contains("https://oml.daloroserver.com/download/checkpoints/sop/vits16_sop_21e743.ckpt"));
  check_clean_error(r);
}

}  // namespace cli_tests
