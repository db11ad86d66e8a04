// Lightning's ModelCheckpoint as oml-train has it: the config keys, when checkpoints are due
// (CheckpointSchedule), which best checkpoints are kept (BestCheckpoints), and the background
// CheckpointWriter with its failure path.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/config/run_config.h"
#include "oml/io/checkpoint.h"
#include "support/config_errors.h"
#include "support/support.h"
#include "training/best_checkpoints.h"
#include "training/checkpoint_schedule.h"
#include "training/checkpoint_writer.h"

namespace checkpointing_tests {

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using oml::config::CheckpointingOptions;
using oml::pipelines::BestCheckpoints;
using oml::pipelines::CheckpointSchedule;
using oml::pipelines::CheckpointWriter;
using oml::test::TempDir;

namespace {

oml::config::RunConfig parse(const std::string& yaml) {
  return oml::test::parse_run_config_text(yaml, "checkpointing.yaml");
}

std::string parse_error(const std::string& yaml) {
  return oml::test::run_config_error(yaml, "checkpointing.yaml");
}

using Clock = CheckpointSchedule::Clock;
Clock::time_point at(double seconds) {
  return Clock::time_point() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// The steps (of 1..steps, one a second from t = 1) after which last.ckpt is due.
std::vector<int64_t> due_steps(CheckpointSchedule schedule, int64_t steps) {
  schedule.start(at(0));
  std::vector<int64_t> due;
  for (int64_t step = 1; step <= steps; ++step) {
    if (schedule.after_step(step, at(static_cast<double>(step)))) due.push_back(step);
  }
  return due;
}

oml::io::Checkpoint small_checkpoint(int64_t step) {
  oml::io::Checkpoint checkpoint;
  checkpoint.state_dict.emplace("w", torch::full({4}, static_cast<float>(step)));
  checkpoint.config = "seed: 1\n";
  checkpoint.step = step;
  return checkpoint;
}

}  // namespace

TEST_CASE("ModelCheckpoint's keys are read at the top level with oml-train's defaults",
          "[config][checkpointing]") {
  const CheckpointingOptions defaults = parse("max_epochs: 1\n").controls.checkpointing;
  CHECK(defaults.save_top_k == 1);
  CHECK(defaults.save_last);
  CHECK_FALSE(defaults.has_trigger());

  const CheckpointingOptions given =
      parse("save_top_k: -1\nsave_last: false\nevery_n_train_steps: 50\nevery_n_epochs: 0\n")
          .controls.checkpointing;
  CHECK(given.save_top_k == -1);
  CHECK_FALSE(given.save_last);
  CHECK(*given.every_n_train_steps == 50);
  CHECK(*given.every_n_epochs == 0);  // given, so the default triggers are off; 0 is not a second trigger
  CHECK(given.has_trigger());

  // train_time_interval is a duration as max_time takes it.
  CHECK(*parse("train_time_interval: {minutes: 10}\n").controls.checkpointing.train_time_interval_s == 600);
  CHECK(*parse("train_time_interval: \"00:01:00:00\"\n").controls.checkpointing.train_time_interval_s ==
        3600);
}

TEST_CASE("Bad ModelCheckpoint keys are config errors naming the key, with Lightning's rules",
          "[config][checkpointing]") {
  CHECK_THAT(parse_error("save_top_k: -2\n"), Contains("save_top_k") && Contains("got -2"));
  CHECK_THAT(parse_error("every_n_epochs: -1\n"), Contains("every_n_epochs"));
  CHECK_THAT(parse_error("every_n_train_steps: -5\n"), Contains("every_n_train_steps"));
  CHECK_THAT(parse_error("train_time_interval: 300\n"),
             Contains("train_time_interval") && Contains("DD:HH:MM:SS"));
  CHECK_THAT(parse_error("save_last: sometimes\n"), Contains("save_last"));
  CHECK_THAT(parse_error("every_n_epochs: 2\ntrain_time_interval: {minutes: 5}\n"),
             Contains("every_n_epochs, train_time_interval are mutually exclusive"));
  // A callback's argument is not a Trainer argument.
  CHECK_THAT(parse_error("lightning_trainer_extra_args: {save_top_k: 3}\n"),
             Contains("'save_top_k' is an argument of Lightning's ModelCheckpoint callback") &&
                 Contains("top level"));
}

TEST_CASE("Without a trigger, last.ckpt is due at each validation and every few minutes", "[checkpointing]") {
  CheckpointSchedule schedule(CheckpointingOptions{});
  const auto interval = static_cast<int64_t>(oml::config::kDefaultCheckpointInterval);
  CHECK(due_steps(schedule, 3 * interval + 10) == std::vector<int64_t>{interval, 2 * interval, 3 * interval});
  const auto validated = schedule.at_epoch_end(4, true);
  CHECK(validated.compare_top_k);
  CHECK(validated.write_last);
  const auto not_validated = schedule.at_epoch_end(5, false);
  CHECK_FALSE(not_validated.compare_top_k);
  CHECK_FALSE(not_validated.write_last);  // a 1-batch epoch costs no checkpoint
}

TEST_CASE("every_n_epochs, every_n_train_steps and train_time_interval fire as Lightning's triggers",
          "[checkpointing]") {
  SECTION("every_n_epochs: at every n-th epoch's end, the best compared where it validated") {
    CheckpointingOptions options;
    options.every_n_epochs = 2;
    CheckpointSchedule schedule(options);
    CHECK(due_steps(schedule, 1000).empty());
    CHECK_FALSE(schedule.at_epoch_end(0, true).write_last);
    CHECK(schedule.at_epoch_end(1, true).write_last);
    CHECK(schedule.at_epoch_end(1, true).compare_top_k);
    CHECK(schedule.at_epoch_end(3, false).write_last);
    CHECK_FALSE(schedule.at_epoch_end(3, false).compare_top_k);
    options.every_n_epochs = 0;  // never by epochs, not even the best
    CHECK_FALSE(CheckpointSchedule(options).at_epoch_end(0, true).compare_top_k);
    CHECK_FALSE(CheckpointSchedule(options).at_epoch_end(0, true).write_last);
  }
  SECTION("every_n_train_steps: at steps divisible by n; validations still compare the best") {
    CheckpointingOptions options;
    options.every_n_train_steps = 40;
    CheckpointSchedule schedule(options);
    CHECK(due_steps(schedule, 130) == std::vector<int64_t>{40, 80, 120});
    CHECK(schedule.at_epoch_end(0, true).compare_top_k);
    CHECK_FALSE(schedule.at_epoch_end(0, true).write_last);
  }
  SECTION("train_time_interval: the first step that ends the interval, which restarts there") {
    CheckpointingOptions options;
    options.train_time_interval_s = 2.5;
    CHECK(due_steps(CheckpointSchedule(options), 10) == std::vector<int64_t>{3, 6, 9});
  }
}

TEST_CASE("save_top_k keeps best.ckpt, the k best or all, ranked as Lightning ranks them",
          "[checkpointing]") {
  SECTION("1: best.ckpt, replaced by strictly better values only") {
    BestCheckpoints best(1, /*maximise=*/true);
    CHECK(best.offer(0.5, 0, 10).file == "best.ckpt");
    CHECK_FALSE(best.offer(0.5, 1, 20).save);  // equal is no improvement
    CHECK_FALSE(best.offer(std::numeric_limits<double>::quiet_NaN(), 2, 30).save);
    const auto better = best.offer(0.7, 3, 40);
    CHECK(better.save);
    CHECK(better.is_best);
    CHECK_FALSE(better.removed);
    CHECK(*best.best() == 0.7);
  }
  SECTION("k: Lightning's names; a new one beats the worst, which is removed") {
    BestCheckpoints best(2, /*maximise=*/false);  // mode min: a loss
    CHECK(best.offer(3.0, 0, 5).file == "epoch=0-step=5.ckpt");
    const auto second = best.offer(4.0, 1, 10);
    CHECK(second.save);
    CHECK_FALSE(second.is_best);
    CHECK_FALSE(best.offer(5.0, 2, 15).save);  // worse than both kept
    const auto third = best.offer(2.0, 3, 20);
    CHECK(third.is_best);
    CHECK(third.removed == std::optional<std::string>("epoch=1-step=10.ckpt"));
    CHECK(best.kept() == std::vector<std::pair<std::string, double>>{{"epoch=0-step=5.ckpt", 3.0},
                                                                     {"epoch=3-step=20.ckpt", 2.0}});
  }
  SECTION("-1: every finite value is kept; 0: none") {
    BestCheckpoints all(-1, true);
    for (int i = 0; i < 5; ++i) CHECK(all.offer(0.1 * (5 - i), i, i).save);
    CHECK(all.kept().size() == 5);
    CHECK(*all.best() == Approx(0.5));
    BestCheckpoints none(0, true);
    CHECK_FALSE(none.offer(1.0, 0, 1).save);
    CHECK_FALSE(none.best());
  }
  SECTION("a resumed run continues the ranking, and never removes best.ckpt") {
    BestCheckpoints resumed(2, true);
    resumed.restore({}, 0.6);  // a checkpoint of a save_top_k 1 run: best.ckpt only
    CHECK(resumed.offer(0.7, 4, 40).is_best);
    const auto next = resumed.offer(0.9, 5, 50);
    CHECK(next.is_best);
    CHECK_FALSE(next.removed);  // best.ckpt (0.6) left the top 2: it is overwritten, not removed
    CHECK(resumed.kept() == std::vector<std::pair<std::string, double>>{{"epoch=4-step=40.ckpt", 0.7},
                                                                        {"epoch=5-step=50.ckpt", 0.9}});
    BestCheckpoints one(1, true);
    one.restore({{"epoch=1-step=2.ckpt", 0.4}, {"epoch=3-step=4.ckpt", 0.8}}, 0.8);
    CHECK_FALSE(one.offer(0.7, 5, 6).save);  // compared with the best, not the worst kept
  }
}

TEST_CASE("The checkpoint writer writes in the background, links the other names and removes the dropped",
          "[checkpointing][io]") {
  TempDir dir;
  std::vector<std::string> written;
  std::mutex mutex;
  {
    CheckpointWriter writer(dir / "checkpoints", [&](const fs::path& path) {
      const std::lock_guard<std::mutex> lock(mutex);
      written.push_back(path.filename().string());
      // The last file is the commit point: the others, and the removals, are done before it.
      if (path.filename() == "last.ckpt")
        written.back() += fs::exists(dir / "checkpoints" / "old.ckpt") ? "+old" : "";
    });
    writer.write([] { return CheckpointWriter::Job{small_checkpoint(1), {"old.ckpt", "last.ckpt"}, {}}; });
    writer.write([] {
      return CheckpointWriter::Job{small_checkpoint(2), {"best.ckpt", "last.ckpt"}, {"old.ckpt"}};
    });
    writer.wait();
  }
  CHECK(written == std::vector<std::string>{"old.ckpt", "last.ckpt+old", "best.ckpt", "last.ckpt"});
  CHECK(oml::io::load_checkpoint(dir / "checkpoints" / "last.ckpt").step == 2);
  CHECK(oml::io::load_checkpoint(dir / "checkpoints" / "best.ckpt").step == 2);
  CHECK(fs::equivalent(dir / "checkpoints" / "last.ckpt", dir / "checkpoints" / "best.ckpt"));  // one file
  CHECK_FALSE(fs::exists(dir / "checkpoints" / "old.ckpt"));
  // The next last.ckpt replaces that name only: best.ckpt keeps step 2.
  {
    CheckpointWriter writer(dir / "checkpoints", [](const fs::path&) {});
    writer.write([] { return CheckpointWriter::Job{small_checkpoint(3), {"last.ckpt"}, {}}; });
  }  // the destructor waits for the write in flight
  CHECK(oml::io::load_checkpoint(dir / "checkpoints" / "last.ckpt").step == 3);
  CHECK(oml::io::load_checkpoint(dir / "checkpoints" / "best.ckpt").step == 2);
}

TEST_CASE("A failed background write is reported at the next check and stops further writes",
          "[checkpointing][io]") {
  TempDir dir;
  // A file where the folder should be: the write fails as a full or read-only disk would (root
  // ignores permissions, so a read-only folder would not do).
  oml::test::write_file(dir / "checkpoints", "not a folder");
  CheckpointWriter writer(dir / "checkpoints", [](const fs::path&) {});
  writer.write([] { return CheckpointWriter::Job{small_checkpoint(1), {"last.ckpt"}, {}}; });
  CHECK_THROWS_WITH(writer.wait(), Contains("writing checkpoint '" +
                                            (dir / "checkpoints" / "last.ckpt").string() + "' failed") &&
                                       Contains("training stopped"));
  CHECK_THROWS_AS(writer.check(), oml::RuntimeError);
  bool snapshot_taken = false;
  CHECK_THROWS_AS(writer.write([&] {
    snapshot_taken = true;
    return CheckpointWriter::Job{small_checkpoint(2), {"last.ckpt"}, {}};
  }),
                  oml::RuntimeError);
  CHECK_FALSE(snapshot_taken);
}

TEST_CASE(
    "The kept best checkpoints round-trip in the resume state, and a name leaving the folder is refused",
    "[checkpointing][io]") {
  TempDir dir;
  oml::io::Checkpoint checkpoint = small_checkpoint(7);
  oml::io::ResumeState resume;
  resume.optimizer = torch::zeros({1}, torch::kUInt8);
  resume.scheduler = c10::impl::GenericDict(c10::StringType::get(), c10::AnyType::get());
  resume.rng = torch::zeros({1}, torch::kUInt8);
  // Saved in the order they were kept, which is not the names' order.
  resume.best_k_models = {{"epoch=4-step=40.ckpt", 0.5}, {"epoch=1-step=10.ckpt", 0.75}};
  checkpoint.resume = resume;
  oml::io::save_checkpoint(dir / "kept.ckpt", checkpoint);
  CHECK(oml::io::load_checkpoint(dir / "kept.ckpt").resume->best_k_models == resume.best_k_models);

  checkpoint.resume->best_k_models = {{"../../etc/passwd", 0.5}};
  oml::io::save_checkpoint(dir / "crafted.ckpt", checkpoint);
  CHECK_THROWS_WITH(oml::io::load_checkpoint(dir / "crafted.ckpt"),
                    Contains("resume.best_k_models") && Contains("'../../etc/passwd'") &&
                        Contains("not a file name of the run's checkpoints/ folder"));
}

}  // namespace checkpointing_tests
