// The extractor pipelines end to end, as a user runs them: oml-train on a Fashion-MNIST subset
// (single process and 2 ranks), oml-validate on its checkpoint, oml-predict, resume, and the
// bad inputs a new user tries.
#include <torch/torch.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "integration/pipeline_fixtures.h"
#include "oml/common/strings.h"
#include "oml/io/checkpoint.h"
#include "oml/io/npy.h"
#include "oml/metrics/clustering.h"
#include "support/support.h"

namespace pipeline_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

TEST_CASE("Training, validation and prediction round trip on a Fashion-MNIST subset",
          "[pipelines][integration]") {
  TempDir dir;
  write_file(dir / "train.yaml", train_config(dir / "logs"));
  const auto train = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()));
  INFO(train.err);
  REQUIRE(train.exit_code == 0);
  const fs::path run = dir / "logs" / "run";
  for (const char* file :
       {"config.yaml", "train.jsonl", "metrics.jsonl", "checkpoints/best.ckpt", "checkpoints/last.ckpt"}) {
    INFO(file);
    CHECK(fs::exists(run / file));
  }
  const auto steps = read_jsonl(run / "train.jsonl");
  REQUIRE(steps.size() == 6);  // 2 epochs x epoch_size 3
  CHECK(steps.back().at("step") == 6);
  for (const char* key : {"loss", "lr", "samples_per_s", "active_tri", "pos_dist", "neg_dist"})
    CHECK(steps[0].contains(key));
  CHECK(read_jsonl(run / "metrics.jsonl").size() == 2);
  CHECK_THAT(train.out, Contains("OVERALL/cmc/1"));

  const auto last = oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt");
  CHECK(last.epoch == 2);
  CHECK(last.step == 6);
  CHECK(last.resume.has_value());
  CHECK_THAT(last.config, Contains("conv_net"));

  // oml-validate on best.ckpt reproduces the metrics training logged for it.
  write_file(dir / "validate.yaml", validate_config(dir / "logs", run / "checkpoints" / "best.ckpt"));
  const auto validate = run_oml("oml-validate", "--config " + quote((dir / "validate.yaml").string()));
  INFO(validate.err);
  REQUIRE(validate.exit_code == 0);
  check_same_metrics(
      best_metrics(run),
      read_json(dir / "logs" / "validation" / "metrics.json").get<std::map<std::string, double>>());

  // oml-predict: one embedding per dataframe row, in file order, with the row list.
  const auto predict = run_oml("oml-predict", "--config " + quote((dir / "validate.yaml").string()) +
                                                  " --set save_dir=" + quote((dir / "pred").string()) +
                                                  " --set transforms_predict.name=norm");
  INFO(predict.err);
  REQUIRE(predict.exit_code == 0);
  const at::Tensor embeddings = oml::io::read_npy_matrix(dir / "pred" / "embeddings.npy");
  CHECK(embeddings.size(0) == 600);
  CHECK(embeddings.size(1) == 16);
  const std::string csv = oml::test::read_file(dir / "pred" / "embeddings.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 601);
  CHECK_THAT(csv, Contains("index,path\n0,"));

  // Outputs replace only what the same command wrote before; a user's files are never overwritten.
  const std::string predict_args = "--config " + quote((dir / "validate.yaml").string()) +
                                   " --set transforms_predict.name=norm --set save_dir=";
  CHECK(run_oml("oml-predict", predict_args + quote((dir / "pred").string())).exit_code == 0);
  write_file(dir / "mine" / "embeddings.npy", "the user's own embeddings");
  const auto refused = run_oml("oml-predict", predict_args + quote((dir / "mine").string()));
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Contains("already holds embeddings.npy, which oml-predict did not write"));
  CHECK(oml::test::read_file(dir / "mine" / "embeddings.npy") == "the user's own embeddings");
  write_file(dir / "logs" / "mine" / "metrics.json", "{}\n");
  const auto not_validated =
      run_oml("oml-validate", "--config " + quote((dir / "validate.yaml").string()) + " --set run_name=mine");
  CHECK(not_validated.exit_code == 2);
  CHECK_THAT(not_validated.err, Contains("already holds metrics.json, which oml-validate did not write"));
  CHECK(oml::test::read_file(dir / "logs" / "mine" / "metrics.json") == "{}\n");

  // A file put into an earlier output folder since, of an output's name, is the user's: the
  // marker lists what the command wrote, so it is refused (it was overwritten, exit 0).
  const fs::path pred = dir / "pred";
  write_file(pred / "neighbours.csv", "the user's neighbours");
  const auto theirs = run_oml("oml-predict", predict_args + quote(pred.string()) + " --retrieve 2");
  CHECK(theirs.exit_code == 2);
  CHECK_THAT(theirs.err, Contains("already holds neighbours.csv, which oml-predict did not write"));
  CHECK(oml::test::read_file(pred / "neighbours.csv") == "the user's neighbours");
  fs::remove(pred / "neighbours.csv");
  write_file(dir / "elsewhere.npy", "the user's");
  fs::remove(pred / "embeddings.npy");
  fs::create_symlink(dir / "elsewhere.npy", pred / "embeddings.npy");  // a link in its place
  const auto link = run_oml("oml-predict", predict_args + quote(pred.string()));
  CHECK(link.exit_code == 2);
  CHECK_THAT(link.err, Contains("embeddings.npy is no longer the file oml-predict wrote there"));
  CHECK(oml::test::read_file(dir / "elsewhere.npy") == "the user's");
  fs::remove(pred / "embeddings.npy");

  // Its own outputs form one set: neighbours of an earlier --retrieve are removed by a run
  // without it, rather than left beside embeddings of other rows.
  REQUIRE(run_oml("oml-predict", predict_args + quote(pred.string()) + " --retrieve 2").exit_code == 0);
  CHECK(fs::exists(pred / "neighbours_ids.npy"));
  const auto plain = run_oml("oml-predict", predict_args + quote(pred.string()));
  INFO(plain.err);
  REQUIRE(plain.exit_code == 0);
  CHECK_FALSE(fs::exists(pred / "neighbours.csv"));
  CHECK_FALSE(fs::exists(pred / "neighbours_ids.npy"));
  CHECK(fs::exists(pred / "embeddings.npy"));
  // A copy with its times (cp -a, a backup restored) is still the command's; a marker line naming
  // anything but its outputs is ignored, never removed.
  REQUIRE(
      oml::test::run("cp -a " + quote(pred.string()) + " " + quote((dir / "pred_copy").string())).exit_code ==
      0);
  write_file(dir / "victim.txt", "the user's");
  {
    std::ofstream marker(dir / "pred_copy" / ".oml-predict", std::ios::app);
    marker << "../victim.txt pending\n";
  }
  const auto copied = run_oml("oml-predict", predict_args + quote((dir / "pred_copy").string()));
  INFO(copied.err);
  CHECK(copied.exit_code == 0);
  CHECK(oml::test::read_file(dir / "victim.txt") == "the user's");

  // A save_dir that is a link to nothing is refused before the work (it failed after it).
  fs::create_directory_symlink(dir / "nowhere", dir / "dangling");
  const auto dangling = run_oml("oml-predict", predict_args + quote((dir / "dangling").string()));
  CHECK(dangling.exit_code == 2);
  CHECK_THAT(dangling.err, Contains("is a link to nothing"));

  // A second process writing into the folder at the same time is refused (the two mixed their
  // files, both exit 0).
  const int lock = ::open((pred / ".oml-predict.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(lock >= 0);
  REQUIRE(::flock(lock, LOCK_EX | LOCK_NB) == 0);
  const auto busy = run_oml("oml-predict", predict_args + quote(pred.string()));
  ::close(lock);
  CHECK(busy.exit_code == 2);
  CHECK_THAT(busy.err, Contains("another oml-predict is writing its outputs into"));
}

namespace {
// The fixtures' metric_args with PML's AccuracyCalculator metrics added (nmi and ami where the
// build has Faiss): every rank computes them from the merged embeddings.
std::string with_pml_metrics(std::string config) {
  const std::string metric_args = "metric_args: {cmc_top_k: [1, 5], precision_top_k: [5], map_top_k: [5]";
  const auto at = config.find(metric_args);
  REQUIRE(at != std::string::npos);
  config.insert(at + metric_args.size(),
                std::string(", mean_average_precision_at_r: true, r_precision: true, mrr: true, "
                            "precision_at_1: true") +
                    (oml::metrics::kmeans_available() ? ", nmi: true, ami: true" : ""));
  return config;
}
}  // namespace

TEST_CASE("A plugin sampler that draws another epoch on each rank stops a DDP run, naming it",
          "[pipelines][ddp][integration][plugins]") {
  TempDir dir;
  write_file(dir / "train.yaml", train_config(dir / "logs"));
  const auto r = run_oml("oml-train", "--nproc-per-node 2 --plugin " +
                                          quote(oml::test::fixture_path("libgood_plugin.so")) + " --config " +
                                          quote((dir / "train.yaml").string()) +
                                          " --set 'sampler={name: fixture_pid_sampler}'");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Contains("plugin error: sampler 'fixture_pid_sampler' drew another epoch 0 on rank 1 than on "
                      "rank 0: an epoch must be a pure function of the seed, the epoch and the data"));
  const fs::path steps = dir / "logs" / "run" / "train.jsonl";
  CHECK((!fs::exists(steps) || read_file(steps).empty()));  // not one step on two epochs
}

TEST_CASE("Two-rank DDP training checkpoints once and matches single-process validation",
          "[pipelines][ddp][integration]") {
  TempDir dir;
  write_file(dir / "train.yaml", with_pml_metrics(train_config(dir / "logs")));
  const auto train =
      run_oml("oml-train", "--nproc-per-node 2 --config " + quote((dir / "train.yaml").string()));
  INFO(train.err);
  REQUIRE(train.exit_code == 0);
  CHECK_THAT(train.out + train.err, Contains("[rank 0]") && Contains("[rank 1]"));
  const fs::path run = dir / "logs" / "run";
  CHECK(fs::exists(run / "checkpoints" / "best.ckpt"));
  CHECK(read_jsonl(run / "metrics.jsonl").size() == 2);  // written by rank 0 only
  // 3 batches per epoch split over 2 ranks (padded): 2 steps per epoch on every rank.
  CHECK(read_jsonl(run / "train.jsonl").size() == 4);

  write_file(dir / "validate.yaml",
             with_pml_metrics(validate_config(dir / "logs", run / "checkpoints" / "best.ckpt")));
  const auto validate = run_oml("oml-validate", "--config " + quote((dir / "validate.yaml").string()));
  INFO(validate.err);
  REQUIRE(validate.exit_code == 0);
  CHECK(best_metrics(run).count("OVERALL/mean_average_precision_at_r") == 1);
  check_same_metrics(
      best_metrics(run),
      read_json(dir / "logs" / "validation" / "metrics.json").get<std::map<std::string, double>>());
}

TEST_CASE("max_steps stops training mid-epoch, validates and checkpoints where it stopped",
          "[pipelines][integration]") {
  TempDir dir;
  write_file(dir / "train.yaml",
             train_config(dir / "logs", "max_steps: 4\n"));  // 2 epochs x 3 batches would be 6
  const auto train = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()));
  INFO(train.out << train.err);
  REQUIRE(train.exit_code == 0);
  const fs::path run = dir / "logs" / "run";
  const auto steps = read_jsonl(run / "train.jsonl");
  REQUIRE(steps.size() == 4);
  CHECK(steps.back().at("step") == 4);
  CHECK(steps.back().at("epoch") == 1);
  CHECK(read_jsonl(run / "metrics.jsonl").size() == 2);  // after epoch 1 and where it stopped
  const auto last = oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt");
  CHECK(last.step == 4);
  REQUIRE(last.resume.has_value());
  CHECK(last.resume->sampler_epoch ==
        1);  // with a larger max_steps a resume continues at epoch 2's second batch
  CHECK(last.resume->sampler_batch == 1);

  // Resuming with the same max_steps has nothing left to do: no extra step.
  const auto again = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()) + " --resume " +
                                              quote((run / "checkpoints" / "last.ckpt").string()));
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  CHECK(read_jsonl(run / "train.jsonl").size() == 4);
  CHECK(oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt").step == 4);
}

namespace {

// Entries of `state` whose names start with `prefix` ("extractor." is extractor_with_mlp's
// backbone, parameters and BatchNorm buffers alike).
oml::io::StateDict entries(const oml::io::StateDict& state, const std::string& prefix) {
  oml::io::StateDict out;
  for (const auto& kv : state) {
    if (kv.first.rfind(prefix, 0) == 0) out.emplace(kv);
  }
  return out;
}

// Without BatchNorm's running statistics: what the optimizer changes.
oml::io::StateDict parameters_of(oml::io::StateDict state) {
  for (auto it = state.begin(); it != state.end();) {
    const bool statistic = it->first.find("running_") != std::string::npos ||
                           it->first.find("num_batches_tracked") != std::string::npos;
    it = statistic ? state.erase(it) : std::next(it);
  }
  return state;
}

bool bit_identical(const oml::io::StateDict& a, const oml::io::StateDict& b) {
  if (a.size() != b.size() || a.empty()) return false;
  for (const auto& kv : a) {
    const auto it = b.find(kv.first);
    if (it == b.end() || !torch::equal(kv.second, it->second)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("freeze_n_epochs keeps the backbone bit-identical and in eval mode, then trains it",
          "[pipelines][integration]") {
  TempDir dir;
  const std::string mlp =
      "{name: extractor_with_mlp, args: {extractor: {name: conv_net, args: {channels: [8, 16, "
      "16], feat_dim: 16}}, mlp_features: [16]";  // closed by the caller: "}}"
  // Runs an extractor_with_mlp over the subset; returns its last.ckpt's state dict.
  auto train = [&](const std::string& name, const std::string& extra, const std::string& args) {
    write_file(dir / (name + ".yaml"), train_config(dir / name, extra));
    const auto r = run_oml("oml-train", "--config " + quote((dir / (name + ".yaml")).string()) + " " + args);
    INFO(name << ": " << r.out << r.err);
    REQUIRE(r.exit_code == 0);
    return oml::io::load_checkpoint(dir / name / "run" / "checkpoints" / "last.ckpt").state_dict;
  };
  // A trained start, so that "unchanged" cannot be mistaken for "still at its initialisation".
  const auto start = train("start", "", "--set 'extractor=" + mlp + "}}' --set max_epochs=1");
  const fs::path weights = dir / "start" / "run" / "checkpoints" / "last.ckpt";
  const std::string from_start = mlp + ", weights: " + weights.string();

  SECTION("the top-level key") {
    const auto one =
        train("one", "freeze_n_epochs: 1\n", "--set 'extractor=" + from_start + "}}' --set max_epochs=1");
    // Parameters and BatchNorm running statistics alike: a backbone in train mode would have
    // updated its running mean and variance even without gradients.
    CHECK(bit_identical(entries(one, "extractor."), entries(start, "extractor.")));
    CHECK_FALSE(bit_identical(entries(one, "projection."), entries(start, "projection.")));

    const auto two =
        train("two", "freeze_n_epochs: 1\n", "--set 'extractor=" + from_start + "}}' --set max_epochs=2");
    // After the frozen epoch the backbone's weights train: none of them keeps its start value.
    const auto trained = parameters_of(entries(two, "extractor.")),
               started = parameters_of(entries(start, "extractor."));
    REQUIRE_FALSE(trained.empty());
    for (const auto& kv : trained) CHECK_FALSE(torch::equal(kv.second, started.at(kv.first)));

    // The extractor's own argument is the same schedule.
    const auto by_args =
        train("by_args", "", "--set 'extractor=" + from_start + ", freeze_n_epochs: 1}}' --set max_epochs=2");
    CHECK(bit_identical(by_args, two));
  }
  SECTION("two ranks: frozen, then trained with averaged gradients") {
    // check_params_every: 1 compares every parameter across the ranks after each step, so a
    // backbone whose gradients stopped being averaged after unfreezing would fail the run.
    const auto two_ranks =
        train("ranks", "freeze_n_epochs: 1\nddp: {check_params_every: 1}\n",
              "--nproc-per-node 2 --set 'extractor=" + from_start + "}}' --set max_epochs=2");
    CHECK_FALSE(bit_identical(parameters_of(entries(two_ranks, "extractor.")),
                              parameters_of(entries(start, "extractor."))));
  }
  SECTION("train_backbone: false freezes every epoch") {
    const auto frozen = train(
        "frozen", "", "--set 'extractor=" + from_start + ", train_backbone: false}}' --set max_epochs=2");
    CHECK(bit_identical(entries(frozen, "extractor."), entries(start, "extractor.")));
  }
  SECTION("two different counts are a config error") {
    write_file(dir / "c.yaml", train_config(dir / "c", "freeze_n_epochs: 1\n"));
    const auto r = run_oml("oml-train", "--config " + quote((dir / "c.yaml").string()) +
                                            " --set 'extractor=" + from_start + ", freeze_n_epochs: 2}}'");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("freeze_n_epochs"));
    SECTION("and a model that cannot freeze is one too") {
      const auto plain = run_oml("oml-train", "--config " + quote((dir / "c.yaml").string()));
      CHECK(plain.exit_code == 2);
      CHECK_THAT(plain.err, Contains("freeze_n_epochs") && Contains("conv_net"));
    }
  }
}

TEST_CASE("Resuming from last.ckpt continues exactly like an uninterrupted run", "[pipelines][integration]") {
  TempDir dir;
  write_file(dir / "full.yaml", train_config(dir / "full"));
  REQUIRE(run_oml("oml-train", "--config " + quote((dir / "full.yaml").string())).exit_code == 0);

  write_file(dir / "part.yaml", train_config(dir / "part"));
  REQUIRE(run_oml("oml-train", "--config " + quote((dir / "part.yaml").string()) + " --set max_epochs=1")
              .exit_code == 0);
  const fs::path last = dir / "part" / "run" / "checkpoints" / "last.ckpt";
  const auto resumed = run_oml(
      "oml-train", "--config " + quote((dir / "part.yaml").string()) + " --resume " + quote(last.string()));
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);

  check_same_training_log(dir / "full" / "run" / "train.jsonl", dir / "part" / "run" / "train.jsonl", "step");
  check_same_metrics(read_jsonl(dir / "full" / "run" / "metrics.jsonl")
                         .back()
                         .at("metrics")
                         .get<std::map<std::string, double>>(),
                     read_jsonl(dir / "part" / "run" / "metrics.jsonl")
                         .back()
                         .at("metrics")
                         .get<std::map<std::string, double>>());
}

TEST_CASE("Bad training input fails early with a clear message and exit code", "[pipelines][integration]") {
  TempDir dir;
  auto train = [&](const std::string& extra_config, const std::string& args = "") {
    write_file(dir / "c.yaml", train_config(dir / "logs", extra_config));
    return run_oml("oml-train", "--config " + quote((dir / "c.yaml").string()) + " " + args);
  };
  SECTION("a wrong dataset path") {
    const auto r = train("", "--set dataset_root=/nonexistent/fmnist");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("dataset_root") && Contains("'/nonexistent/fmnist' does not exist"));
  }
  SECTION("a P x K sampler larger than the labels") {
    const auto r = train("", "--set sampler.args.n_labels=40");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("n_labels") && Contains("40"));
  }
  SECTION("a checkpoint metric that is not computed") {
    const auto r = train("metric_for_checkpointing: OVERALL/cmc/10\n");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("metric_for_checkpointing") && Contains("'OVERALL/cmc/10' is not computed"));
    // Found by the Trainer, reported at the key's place in the file.
    CHECK_THAT(r.err, Contains(".yaml:") && Contains(": metric_for_checkpointing: 'OVERALL/cmc/10'"));
  }
  SECTION("valid_period 0") {
    const auto r = train("", "--set valid_period=0");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("valid_period") && Contains("positive"));
  }
  SECTION("a loss that becomes NaN") {
    const auto r = train("", "--set 'optimizer={name: sgd, args: {lr: 1.0e+30}}' --set max_epochs=3");
    CHECK(r.exit_code == 1);
    CHECK_THAT(r.err, Contains("loss became") && Contains("step"));
    CHECK_THAT(r.err, !Contains("Exception raised from"));
  }
}

TEST_CASE("oml-validate computes metrics from precomputed embeddings without a model",
          "[pipelines][metrics][integration]") {
  TempDir dir;
  // Embeddings that put every label on its own axis: a perfect retrieval, cmc@1 = 1.
  const auto df = oml::test::read_file(fashion_mnist_subset() / "df.csv");
  std::vector<int64_t> labels;
  std::istringstream lines(df);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    if (line.find(",validation,") != std::string::npos)
      labels.push_back(std::stoll(line.substr(0, line.find(','))));
  }
  REQUIRE(labels.size() == 300);
  at::Tensor embeddings = torch::zeros({300, 10});
  for (int64_t i = 0; i < 300; ++i) embeddings[i][labels[static_cast<std::size_t>(i)]] = 1.0;
  oml::io::write_npy(dir / "emb.npy", embeddings);
  write_file(dir / "v.yaml", "dataset_root: " + fashion_mnist_subset().string() +
                                 "\nlogs_root: " + (dir / "logs").string() +
                                 "\nrun_name: v\nembeddings: " + (dir / "emb.npy").string() +
                                 "\nmetric_args: {cmc_top_k: [1], map_top_k: [5], fmr_vals: [0.1]}\n");
  const auto r = run_oml("oml-validate", "--config " + quote((dir / "v.yaml").string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto metrics = read_json(dir / "logs" / "v" / "metrics.json");
  CHECK(metrics.at("OVERALL/cmc/1").get<double>() == Approx(1.0));
  CHECK(metrics.at("OVERALL/map/5").get<double>() == Approx(1.0));
  CHECK(metrics.at("OVERALL/fnmr@fmr/0.1").get<double>() == Approx(0.0));
  CHECK_THAT(r.out, Contains("OVERALL/cmc/1"));

  // Wrong number of rows: a clear data error naming both files.
  oml::io::write_npy(dir / "short.npy", torch::zeros({7, 10}));
  const auto bad = run_oml("oml-validate", "--config " + quote((dir / "v.yaml").string()) +
                                               " --set embeddings=" + quote((dir / "short.npy").string()));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("short.npy") && Contains("7 rows") && Contains("300 validation rows"));
}

TEST_CASE("oml-sampler prints what each rank receives each epoch", "[pipelines][samplers][integration]") {
  TempDir dir;
  write_file(dir / "c.yaml", train_config(dir / "logs"));
  const auto r =
      run_oml("oml-sampler", "--config " + quote((dir / "c.yaml").string()) + " --world-size 2 --epochs 2");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto report = nlohmann::json::parse(r.out);
  CHECK(report.at("world_size") == 2);
  REQUIRE(report.at("epochs").size() == 2);
  for (const auto& epoch : report.at("epochs")) {
    REQUIRE(epoch.at("ranks").size() == 2);
    for (const auto& rank : epoch.at("ranks")) {
      const auto batches = rank.at("batches").get<std::vector<std::vector<int64_t>>>();
      CHECK(batches.size() == 2);  // 3 balance batches, padded to 2 per rank
      for (const auto& batch : batches) {
        CHECK(batch.size() == 20);  // P x K = 5 x 4
        for (auto index : batch) CHECK((index >= 0 && index < 300));
      }
    }
  }
  CHECK(report.at("epochs")[0] != report.at("epochs")[1]);
  // Two billion epochs stream: the first megabyte arrives at once, in constant memory.
  const auto many =
      oml::test::run(quote(oml::test::command_path("oml-sampler")) + " --config " +
                         quote((dir / "c.yaml").string()) + " --epochs 2000000000 | head -c 1000000",
                     60);
  CHECK(many.exit_code == 0);
  CHECK(many.out.size() == 1000000);
  CHECK(many.out.rfind("{\"epochs\":[{\"epoch\":0,", 0) == 0);
  const auto bad = run_oml(
      "oml-sampler", "--config " + quote((dir / "c.yaml").string()) + " --set sampler.args.n_instances=1");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("n_instances"));
}

TEST_CASE("Killing a rank mid-training ends the job promptly and keeps last.ckpt loadable",
          "[pipelines][ddp][integration]") {
  TempDir dir;
  // Long enough that the kill lands mid-run: 200 short epochs, validation only at the end, and
  // last.ckpt after every epoch (without a trigger it would wait for a validation).
  write_file(dir / "c.yaml", train_config(dir / "logs", "every_n_epochs: 1\n"));
  const fs::path run = dir / "logs" / "run";
  const std::string script = quote(oml::test::command_path("oml-train")) + " --nproc-per-node 2 --config " +
                             quote((dir / "c.yaml").string()) +
                             " --set max_epochs=200 --set valid_period=1000 >" +
                             quote((dir / "out").string()) + " 2>" + quote((dir / "err").string()) +
                             " &\n"
                             "launcher=$!\n"
                             "for i in $(seq 1200); do [ -f " +
                             quote((run / "checkpoints" / "last.ckpt").string()) +
                             " ] && break; sleep 0.05; done\n"
                             "worker=$(pgrep -P $launcher | tail -n 1)\n"
                             "kill -9 $worker\n"
                             "start=$(date +%s%N)\n"
                             "wait $launcher; rc=$?\n"
                             "echo \"$rc $(( ($(date +%s%N) - start) / 1000000 ))\"\n";
  const auto r = oml::test::run(script, 120);
  REQUIRE(r.exit_code == 0);
  std::istringstream result(r.out);
  int rc = 0;
  long elapsed_ms = 0;
  result >> rc >> elapsed_ms;
  const std::string err = oml::test::read_file(dir / "err") + oml::test::read_file(dir / "out");
  INFO(err);
  CHECK(rc != 0);
  CHECK(elapsed_ms < 30000);
  CHECK_THAT(err, Contains("rank") && Contains("killed"));
  // The checkpoint written before the kill is whole and loads.
  const auto last = oml::io::load_checkpoint(run / "checkpoints" / "last.ckpt");
  CHECK(last.epoch >= 1);
  CHECK_FALSE(last.state_dict.empty());
}

TEST_CASE("A rank started twice, or for another world size, is refused at the rendezvous at once",
          "[pipelines][ddp][integration]") {
  TempDir dir;
  write_file(dir / "c.yaml", train_config(dir / "logs", "ddp: {timeout_s: 60}\n"));
  // The processes `ranks` (RANK:WORLD_SIZE) started as torchrun would, each with its output in
  // out<i>; prints their exit codes and the seconds the slowest took.
  const auto start = [&](const std::vector<std::pair<int, int>>& ranks) {
    const std::string port = std::to_string(free_port());
    std::string script = "t0=$(date +%s)\n";
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      script += "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port +
                " WORLD_SIZE=" + std::to_string(ranks[i].second) + " RANK=" + std::to_string(ranks[i].first) +
                " " + quote(oml::test::command_path("oml-train")) + " --config " +
                quote((dir / "c.yaml").string()) + " --progress quiet > " +
                quote((dir / ("out" + std::to_string(i))).string()) + " 2>&1 &\npid" + std::to_string(i) +
                "=$!\nsleep 0.2\n";
    }
    for (std::size_t i = 0; i < ranks.size(); ++i)
      script += "wait $pid" + std::to_string(i) + "; echo -n \"$? \"\n";
    script += "echo $(( $(date +%s) - t0 ))\n";
    return oml::test::run(script, 200).out;
  };
  SECTION("a second process with rank 1 stops with exit 2; the run goes on") {
    // Long enough that the store (rank 0's) is still up when the later of the two arrives.
    std::string config = train_config(dir / "logs", "ddp: {timeout_s: 60}\n");
    config.replace(config.find("max_epochs: 2"), 13, "max_epochs: 30");
    write_file(dir / "c.yaml", config);
    const std::string r = start({{0, 2}, {1, 2}, {1, 2}});
    INFO(r << read_file(dir / "out1") << read_file(dir / "out2"));
    // Whichever of the two came second to the store is refused.
    CHECK((r.substr(0, 6) == "0 0 2 " || r.substr(0, 6) == "0 2 0 "));
    const fs::path refused = dir / (r.substr(0, 6) == "0 0 2 " ? "out2" : "out1");
    CHECK_THAT(read_file(refused), Contains("usage error: rank 1 (") && Contains(") is already taken by ") &&
                                       Contains("two processes were started with the same rank"));
  }
  SECTION("rank 1 started for a world of 3 beside rank 0's 2: both stop within seconds, not ddp.timeout_s") {
    const std::string r = start({{0, 2}, {1, 3}});
    INFO(r << read_file(dir / "out0") << read_file(dir / "out1"));
    CHECK(r.substr(0, 4) == "1 2 ");
    CHECK(std::stoi(r.substr(4)) < 30);  // ddp.timeout_s is 60 (Gloo's own rendezvous took 5x that)
    const std::string why =
        "rank 1 was started for a world size of 3 (WORLD_SIZE, or --nnodes x --nproc-per-node) but the ranks "
        "before it for 2";
    CHECK_THAT(read_file(dir / "out1"), Contains("config error: " + why));
    CHECK_THAT(read_file(dir / "out0"), Contains("rank 0: rendezvous of 2 ranks through") && Contains(why));
  }
}

TEST_CASE("Ranks started by an external launcher's variables train like --nproc-per-node",
          "[pipelines][ddp][integration]") {
  // What `torchrun --no-python --nproc-per-node 2 oml-train ...` does: two processes with
  // RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set.
  TempDir dir;
  // `devices: 4` is the config's own rank count; the external launcher's 2 win, with a warning.
  write_file(dir / "c.yaml", train_config(dir / "logs", "devices: 4\n"));
  const std::string port = std::to_string(free_port());
  std::string script;
  for (int rank = 0; rank < 2; ++rank) {
    script += "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port +
              " WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 RANK=" + std::to_string(rank) +
              " LOCAL_RANK=" + std::to_string(rank) + " " + quote(oml::test::command_path("oml-train")) +
              " --config " + quote((dir / "c.yaml").string()) + " > " +
              quote((dir / ("out" + std::to_string(rank))).string()) + " 2>&1 &\n";
    script += "pid" + std::to_string(rank) + "=$!\n";
  }
  script += "wait $pid0; a=$?; wait $pid1; b=$?; echo \"$a $b\"\n";
  const auto r = oml::test::run(script, 300);
  INFO(oml::test::read_file(dir / "out0") + oml::test::read_file(dir / "out1"));
  CHECK(oml::trim(r.out) == "0 0");
  const fs::path run = dir / "logs" / "run";
  CHECK(fs::exists(run / "checkpoints" / "best.ckpt"));
  CHECK(read_jsonl(run / "train.jsonl").size() == 4);
  CHECK_THAT(oml::test::read_file(dir / "out1"), Contains("[rank 1]"));
  CHECK_THAT(oml::test::read_file(dir / "out0"), Contains("`devices` in the config is ignored"));

  write_file(dir / "validate.yaml", validate_config(dir / "logs", run / "checkpoints" / "best.ckpt"));
  REQUIRE(run_oml("oml-validate", "--config " + quote((dir / "validate.yaml").string())).exit_code == 0);
  check_same_metrics(
      best_metrics(run),
      read_json(dir / "logs" / "validation" / "metrics.json").get<std::map<std::string, double>>());
}

TEST_CASE(
    "oml-validate and oml-predict give identical outputs on 2 ranks (--nproc-per-node or devices: 2) and on "
    "one",
    "[pipelines][ddp][integration]") {
  TempDir dir;
  write_file(dir / "train.yaml", train_config(dir / "logs"));
  REQUIRE(run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()) + " --set max_epochs=1")
              .exit_code == 0);
  write_file(dir / "validate.yaml",
             validate_config(dir / "logs", dir / "logs" / "run" / "checkpoints" / "last.ckpt"));
  const std::string config = "--config " + quote((dir / "validate.yaml").string());

  const auto one = run_oml("oml-validate", config + " --set run_name=one");
  const auto two = run_oml("oml-validate", "--nproc-per-node 2 " + config + " --set run_name=two");
  INFO(one.err << two.err);
  REQUIRE(one.exit_code == 0);
  REQUIRE(two.exit_code == 0);
  check_same_metrics(read_json(dir / "logs" / "one" / "metrics.json").get<std::map<std::string, double>>(),
                     read_json(dir / "logs" / "two" / "metrics.json").get<std::map<std::string, double>>());

  const std::string predict = config + " --set transforms_predict.name=norm --set save_dir=";
  const auto p1 = run_oml("oml-predict", predict + quote((dir / "p1").string()));
  // `devices: 2` in the config starts 2 ranks like --nproc-per-node 2.
  const auto p2 = run_oml("oml-predict", predict + quote((dir / "p2").string()) + " --set devices=2");
  INFO(p1.err << p2.err);
  REQUIRE(p1.exit_code == 0);
  REQUIRE(p2.exit_code == 0);
  CHECK_THAT(p2.out + p2.err, Contains("[rank 1]"));
  const at::Tensor e1 = oml::io::read_npy_matrix(dir / "p1" / "embeddings.npy");
  const at::Tensor e2 = oml::io::read_npy_matrix(dir / "p2" / "embeddings.npy");
  REQUIRE(e1.sizes() == e2.sizes());
  CHECK(max_abs_diff(e1, e2) < 1e-5);
  CHECK(read_file(dir / "p1" / "embeddings.csv") == read_file(dir / "p2" / "embeddings.csv"));
}

TEST_CASE("A run of oml-predict that fails half-way leaves the earlier run's outputs whole, as one set",
          "[pipelines][integration][failpoint]") {
  TempDir dir;
  const auto config = [&](int seed) {
    return "dataset_root: " + fashion_mnist_subset().string() + "\nsave_dir: " + (dir / "pred").string() +
           "\nseed: " + std::to_string(seed) +
           "\nnum_workers: 1\ntransforms_predict: {name: norm}\n"
           "extractor: {name: conv_net, args: {channels: [8], feat_dim: 8}}\n";
  };
  write_file(dir / "a.yaml", config(1));
  write_file(dir / "b.yaml", config(2));  // other random weights: other embeddings and neighbours
  const auto predict = [&](const std::string& yaml, const std::string& env = "") {
    return run(env + quote(command_path("oml-predict")) + " --progress quiet --retrieve 3 --config " +
               quote((dir / yaml).string()));
  };
  REQUIRE(predict("a.yaml").exit_code == 0);
  std::map<std::string, std::string> before;
  for (const auto& entry : fs::directory_iterator(dir / "pred"))
    before[entry.path().filename()] = read_file(entry.path());
  // The last file written fails (as on a full disk): nothing of the second run may be in place.
  const auto failed = predict("b.yaml", "env OML_FAILPOINTS=before_rename:neighbours.csv=fail ");
  INFO(failed.err);
  CHECK(failed.exit_code == 1);
  std::map<std::string, std::string> after;
  for (const auto& entry : fs::directory_iterator(dir / "pred"))
    after[entry.path().filename()] = read_file(entry.path());
  CHECK(after == before);  // every file the first run's, no temporary beside them
  REQUIRE(predict("b.yaml").exit_code == 0);
  CHECK(read_file(dir / "pred" / "embeddings.npy") != before.at("embeddings.npy"));
}

TEST_CASE("OML_FAILPOINTS pauses an atomic write before its rename, and a malformed value is a config error",
          "[pipelines][integration][failpoint]") {
  TempDir dir;
  write_file(dir / "predict.yaml", "dataset_root: " + fashion_mnist_subset().string() +
                                       "\nsave_dir: " + (dir / "pred").string() +
                                       "\nnum_workers: 1\ntransforms_predict: {name: norm}\n"
                                       "extractor: {name: conv_net, args: {channels: [8], feat_dim: 8}}\n");
  const std::string predict = quote(command_path("oml-predict")) + " --progress quiet --config " +
                              quote((dir / "predict.yaml").string());
  const auto paused = run(
      "env OML_FAILPOINTS=before_rename:nothing=pause:9,before_rename:embeddings.npy=pause:0.2 " + predict);
  INFO(paused.err);
  CHECK(paused.exit_code == 0);
  CHECK_THAT(paused.err, Contains("failpoint before_rename:embeddings.npy: pausing 0.2 s"));
  CHECK_FALSE(Contains("before_rename:nothing").match(paused.err));
  CHECK(fs::exists(dir / "pred" / "embeddings.npy"));

  // Killed (SIGKILL) inside that window, it leaves its temporary; the next run removes it.
  const auto killed =
      run("env OML_FAILPOINTS=before_rename:embeddings.npy=pause:60 " + predict + " 2>" +
          quote((dir / "err").string()) + " & pid=$!; for i in $(seq 600); do grep -q failpoint " +
          quote((dir / "err").string()) + " && break; sleep 0.1; done; kill -9 $pid; wait $pid");
  CHECK(killed.exit_code == 128 + 9);
  auto temporaries = [&] {
    int n = 0;
    for (const auto& entry : fs::directory_iterator(dir / "pred"))
      n += entry.path().filename().string().find(".tmp-") != std::string::npos;
    return n;
  };
  CHECK(temporaries() == 1);
  CHECK(run(predict).exit_code == 0);
  CHECK(temporaries() == 0);

  const auto malformed = run("env OML_FAILPOINTS=before_rename:embeddings.npy=sleep " + predict);
  CHECK(malformed.exit_code == 2);
  CHECK_THAT(
      malformed.err,
      Contains(
          "OML_FAILPOINTS: expected entries NAME=pause:SECONDS, NAME=fail or NAME=throw separated by ','") &&
          Contains("'before_rename:embeddings.npy=sleep'"));
}

}  // namespace pipeline_tests
