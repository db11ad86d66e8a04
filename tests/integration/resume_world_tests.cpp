// oml-train --resume on another number of ranks (docs/ddp.md#resuming-on-another-number-of-ranks):
// 2 ranks stop in the middle of epoch 2 (max_steps), 1 and 3 ranks finish it, and the rows every
// rank trained on (OML_TRACE_BATCHES) are the uninterrupted run's, each once, plus padding. Also:
// the exit-2 case (no padding, an uneven rest) and a checkpoint of an earlier build.
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "integration/pipeline_fixtures.h"
#include "oml/io/checkpoint.h"
#include "oml/io/torch_file.h"
#include "support/support.h"

namespace resume_world_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

using Rows = std::vector<int64_t>;

struct TracedStep {
  int64_t step = 0;
  int64_t rank = 0;
  Rows rows;
};

// oml-train with OML_TRACE_BATCHES=<trace>.
CommandResult train_traced(const fs::path& trace, const std::string& args) {
  return run("OML_TRACE_BATCHES=" + quote(trace.string()) + " " +
             quote((fs::path(OML_BIN_DIR) / "oml-train").string()) + " " + args);
}

// The steps every rank traced in `epoch`, in step order and rank order within a step.
std::vector<TracedStep> traced_epoch(const fs::path& trace, int64_t epoch) {
  std::vector<TracedStep> out;
  for (const auto& file : fs::directory_iterator(trace)) {
    for (const auto& record : read_jsonl(file.path())) {
      if (record.at("epoch") == epoch)
        out.push_back({record.at("step"), record.at("rank"), record.at("indices").get<Rows>()});
    }
  }
  std::sort(out.begin(), out.end(), [](const TracedStep& a, const TracedStep& b) {
    return std::tie(a.step, a.rank) < std::tie(b.step, b.rank);
  });
  return out;
}

// What oml-sampler prints for `epoch` of a world of `world` ranks, as traced steps (step = batch).
std::vector<TracedStep> sampler_epoch(const std::string& config_args, int64_t world, int64_t epoch) {
  const auto r = run_oml("oml-sampler", config_args + " --world-size " + std::to_string(world) +
                                            " --epochs " + std::to_string(epoch + 1));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto report = nlohmann::json::parse(r.out);
  std::vector<TracedStep> out;
  for (const auto& rank : report.at("epochs").at(epoch).at("ranks")) {
    int64_t t = 0;
    for (const auto& batch : rank.at("batches")) out.push_back({t++, rank.at("rank"), batch.get<Rows>()});
  }
  std::sort(out.begin(), out.end(), [](const TracedStep& a, const TracedStep& b) {
    return std::tie(a.step, a.rank) < std::tie(b.step, b.rank);
  });
  return out;
}

// The epoch's global order as the ranks consumed it (docs/ddp.md): a batch sampler's batches one
// after the other; for an index sampler, row j of every rank's batch before row j + 1 (the wrapper
// deals position p to rank p mod W), each row an item of its own.
std::vector<Rows> global_sequence(const std::vector<TracedStep>& steps, bool index_sampler) {
  std::vector<Rows> out;
  for (std::size_t first = 0; first < steps.size();) {
    std::size_t last = first;
    while (last < steps.size() && steps[last].step == steps[first].step) ++last;
    if (!index_sampler) {
      for (std::size_t i = first; i < last; ++i) out.push_back(steps[i].rows);
    } else {
      for (std::size_t j = 0; j < steps[first].rows.size(); ++j) {
        for (std::size_t i = first; i < last; ++i) out.push_back({steps[i].rows.at(j)});
      }
    }
    first = last;
  }
  return out;
}

// `consumed` is `uninterrupted`'s first `distinct` items in order, then padding: its first items
// again, fewer than `max_padding`.
void check_same_items(const std::vector<Rows>& consumed, const std::vector<Rows>& uninterrupted,
                      std::size_t distinct, std::size_t max_padding) {
  REQUIRE(uninterrupted.size() >= distinct);
  REQUIRE(consumed.size() >= distinct);
  for (std::size_t i = 0; i < distinct; ++i) {
    INFO("item " << i << " of the epoch's order");
    REQUIRE(consumed[i] == uninterrupted[i]);
  }
  const std::size_t padding = consumed.size() - distinct;
  CHECK(padding < max_padding);
  for (std::size_t j = 0; j < padding; ++j) CHECK(consumed[distinct + j] == uninterrupted[j]);
}

// Epoch 1 of a run that `first` (2 ranks) stopped and `rest` finished, as one global sequence.
std::vector<Rows> interrupted_then_resumed(const fs::path& first, const fs::path& rest, bool index_sampler) {
  std::vector<Rows> out = global_sequence(traced_epoch(first, 1), index_sampler);
  for (auto& item : global_sequence(traced_epoch(rest, 1), index_sampler)) out.push_back(std::move(item));
  return out;
}

// A copy of the interrupted run (its directory and last.ckpt) for one resume; returns the checkpoint.
fs::path copy_of_run(const fs::path& run, const fs::path& to) {
  fs::create_directories(to);
  fs::copy(run, to / "run", fs::copy_options::recursive);
  return to / "run" / "checkpoints" / "last.ckpt";
}

// One resume of the interrupted run in `dir`/logs/run on `ranks` ranks: a copy of the run in
// `dir`/resumed_on_<ranks>, finished by oml-train traced into `dir`/trace_<ranks>.
struct TracedResume {
  CommandResult result;
  fs::path copy;   // the resumed copy of the run's folder
  fs::path trace;  // its OML_TRACE_BATCHES folder
};

TracedResume resume_copy_traced(const fs::path& dir, const std::string& config, int ranks) {
  TracedResume out;
  out.copy = dir / ("resumed_on_" + std::to_string(ranks));
  out.trace = dir / ("trace_" + std::to_string(ranks));
  out.result = train_traced(out.trace, config + " --nproc-per-node " + std::to_string(ranks) +
                                           " --set max_steps=100 --resume " +
                                           quote(copy_of_run(dir / "logs" / "run", out.copy).string()));
  INFO(out.result.out << out.result.err);
  REQUIRE(out.result.exit_code == 0);
  return out;
}

}  // namespace

TEST_CASE("An epoch started on 2 ranks and resumed on 1 or 3 consumes the uninterrupted run's batches once",
          "[pipelines][ddp][resume][integration]") {
  TempDir dir;
  // 8 balance batches per epoch: 4 steps on 2 ranks. max_steps 6 stops after 2 steps of epoch 2,
  // 4 of its batches consumed; 1 rank takes the other 4 in 4 steps, 3 ranks in 2 steps (+2 padding).
  write_file(dir / "train.yaml", train_config(dir / "logs"));
  const std::string config = "--config " + quote((dir / "train.yaml").string()) +
                             " --set sampler.args.epoch_size=8 --set valid_period=2";
  const auto full = train_traced(dir / "trace_full", config + " --nproc-per-node 2 --set run_name=full");
  INFO(full.out << full.err);
  REQUIRE(full.exit_code == 0);
  const auto part = train_traced(dir / "trace_part", config + " --nproc-per-node 2 --set max_steps=6");
  INFO(part.out << part.err);
  REQUIRE(part.exit_code == 0);
  const auto last = oml::io::load_checkpoint(dir / "logs" / "run" / "checkpoints" / "last.ckpt");
  REQUIRE(last.resume.has_value());
  CHECK(last.resume->sampler_epoch == 1);
  CHECK(last.resume->sampler_batch == 2);
  CHECK(last.resume->sampler_consumed == 4);
  CHECK(last.resume->sampler_world_size == 2);

  // The uninterrupted run trained on exactly what oml-sampler prints for 2 ranks.
  const auto uninterrupted = traced_epoch(dir / "trace_full", 1);
  const auto printed = sampler_epoch(config, 2, 1);
  REQUIRE(uninterrupted.size() == printed.size());
  for (std::size_t i = 0; i < printed.size(); ++i) {
    CHECK(uninterrupted[i].rank == printed[i].rank);
    CHECK(uninterrupted[i].rows == printed[i].rows);
  }
  const std::vector<Rows> reference = global_sequence(uninterrupted, false);
  REQUIRE(reference.size() == 8);

  for (int ranks : {1, 3}) {
    INFO("resumed on " << ranks << " rank(s)");
    const auto resumed = resume_copy_traced(dir.path(), config, ranks);
    CHECK_THAT(resumed.result.out + resumed.result.err, Contains("epoch 1 was started by 2 rank(s)"));
    const auto epoch = traced_epoch(resumed.trace, 1);
    CHECK(epoch.size() == (ranks == 1 ? 4u : 6u));  // 4 steps of 1 rank, 2 steps of 3 ranks
    check_same_items(interrupted_then_resumed(dir / "trace_part", resumed.trace, false), reference, 8, ranks);
    CHECK(oml::io::load_checkpoint(resumed.copy / "run" / "checkpoints" / "last.ckpt").epoch == 2);
  }

  {
    // A checkpoint of an earlier build (no consumed/world_size): taken as written by this run's
    // number of ranks, with a warning; on the same number it continues exactly.
    const fs::path ckpt = copy_of_run(dir / "logs" / "run", dir / "legacy");
    auto content = oml::io::read_torch_file(ckpt);
    auto sampler = content.toGenericDict().at("resume").toGenericDict().at("sampler").toGenericDict();
    (void)sampler.erase("consumed");  // the count erased is known: one each
    (void)sampler.erase("world_size");
    oml::io::write_torch_file(ckpt, content);
    const auto resumed =
        train_traced(dir / "trace_legacy",
                     config + " --nproc-per-node 2 --set max_steps=100 --resume " + quote(ckpt.string()));
    INFO(resumed.out << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK_THAT(resumed.err,
               Contains("written by an earlier oml-cpp that does not record its number of ranks; "
                        "assuming 2"));
    check_same_items(interrupted_then_resumed(dir / "trace_part", dir / "trace_legacy", false), reference, 8,
                     1);
  }

  {
    // Without padding, 3 ranks cannot share the 4 remaining batches: exit 2, the run untouched.
    const fs::path ckpt = copy_of_run(dir / "logs" / "run", dir / "unpadded");
    const std::string before = read_file(ckpt);
    const auto r = run_oml("oml-train", config +
                                            " --nproc-per-node 3 --set ddp.pad_to_world_size=false"
                                            " --set max_steps=100 --resume " +
                                            quote(ckpt.string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("cannot continue epoch 1 of sampler 'balance' exactly on 3 rank(s)") &&
                          Contains("4 of its batches remain") && Contains("Resume on 1, 2 or 4 rank(s)") &&
                          Contains("ddp.pad_to_world_size: true"));
    CHECK(read_file(ckpt) == before);
    CHECK_FALSE(fs::exists(dir / "unpadded" / "run" / "config.resume-1.yaml"));
  }
}

TEST_CASE("A shuffled index-sampler epoch resumed on 1 or 3 ranks continues the 2 ranks' order",
          "[pipelines][ddp][resume][integration]") {
  TempDir dir;
  // 300 rows, batches of 16 per rank with drop_last: 9 steps on 2 ranks (288 rows). max_steps 13
  // stops after 4 steps of epoch 2 (128 rows); 160 remain: 10 steps on 1 rank, 4 steps on 3 ranks
  // (192 rows, 32 of them padding). One rank alone never shuffles between ranks; it must follow
  // the order of the 2 ranks that started the epoch.
  write_file(dir / "train.yaml", train_config(dir / "logs", "ddp: {shuffle_between_ranks: true}\n"));
  const std::string config = "--config " + quote((dir / "train.yaml").string()) +
                             " --set 'sampler={name: random, args: {batch_size: 16, drop_last: true}}'"
                             " --set valid_period=2";
  const auto part = train_traced(dir / "trace_part", config + " --nproc-per-node 2 --set max_steps=13");
  INFO(part.out << part.err);
  REQUIRE(part.exit_code == 0);
  const auto last = oml::io::load_checkpoint(dir / "logs" / "run" / "checkpoints" / "last.ckpt");
  REQUIRE(last.resume.has_value());
  CHECK(last.resume->sampler_consumed == 128);
  CHECK(last.resume->sampler_world_size == 2);

  // The uninterrupted 2-rank epoch, as oml-sampler prints it (the first test case shows that the
  // trainer runs exactly those batches).
  const std::vector<Rows> reference = global_sequence(sampler_epoch(config, 2, 1), true);
  REQUIRE(reference.size() == 288);
  for (int ranks : {1, 3}) {
    INFO("resumed on " << ranks << " rank(s)");
    const auto resumed = resume_copy_traced(dir.path(), config, ranks);
    CHECK(traced_epoch(resumed.trace, 1).size() == (ranks == 1 ? 10u : 12u));
    check_same_items(interrupted_then_resumed(dir / "trace_part", resumed.trace, true), reference, 288,
                     16 * ranks);
  }
}

}  // namespace resume_world_tests
