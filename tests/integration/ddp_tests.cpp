// Real multi-process runs on loopback (Gloo), started through oml's launcher exactly as
// `oml-train --nproc-per-node N` starts them: collectives, sync_dicts, the Accumulator,
// gradient synchronisation and what happens when a rank fails.
#include <sstream>
#include <string>

#include <torch/torch.h>

#include "distributed_worker/scenarios.h"
#include "support/support.h"

namespace ddp_tests {

using Catch::Matchers::Contains;
using oml::test::CommandResult;
using oml::test::quote;
using oml::test::TempDir;
namespace dist = oml::distributed;

namespace {

CommandResult run_worker(const std::string& args, int timeout_s = 120) {
  return oml::test::run(quote(OML_DDP_WORKER) + " " + args, timeout_s);
}

std::string rank_file(const TempDir& dir, int rank, const std::string& ext = ".txt") {
  return oml::test::read_file(dir / ("rank" + std::to_string(rank) + ext));
}

std::string describe(const CommandResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

// Processes still alive whose command line carries `tag` (the run must leave none).
std::string survivors(const std::string& tag) {
  return oml::test::run("pgrep -af -- " + quote(tag) + " | grep -v pgrep || true").out;
}

// The lines rank `rank` wrote to the launcher's stderr ("[rank N] ..."), so that a failed check
// shows that rank's own words.
std::string rank_lines(const std::string& err, int rank) {
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  std::istringstream in(err);
  std::string line, lines;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) lines += line + "\n";
  }
  return lines;
}

template <class T>
void append(std::vector<T>& all, const dist::SyncValue& value) {
  const auto& v = std::get<std::vector<T>>(value);
  all.insert(all.end(), v.begin(), v.end());
}

// What every rank must receive in the "sync" scenario, built from the inputs directly.
dist::SyncDict expected_sync(int world) {
  std::map<std::string, std::vector<torch::Tensor>> tensors;
  std::vector<int64_t> labels;
  std::vector<double> scores;
  std::vector<std::string> paths;
  for (int r = 0; r < world; ++r) {
    const auto in = oml::test::ddp::sync_input(r);
    for (const char* key : {"embeddings", "indices", "empty_on_rank0"}) {
      tensors[key].push_back(std::get<torch::Tensor>(in.at(key)));
    }
    append(labels, in.at("labels"));
    append(scores, in.at("scores"));
    append(paths, in.at("paths"));
  }
  dist::SyncDict all{{"labels", labels}, {"scores", scores}, {"paths", paths}};
  for (auto& [key, parts] : tensors) all[key] = torch::cat(parts, 0);
  return all;
}

// The weights one process trains in the "train" scenario with batch 12: the reference the
// multi-rank runs of the same scenario are compared with.
std::vector<torch::Tensor> single_process_weights() {
  TempDir single;
  const auto one = run_worker("--scenario train --steps 6 --batch 12 --out " + quote(single.path().string()));
  INFO(describe(one));
  REQUIRE(one.exit_code == 0);
  std::vector<torch::Tensor> reference;
  torch::load(reference, (single / "rank0.pt").string());
  return reference;
}

}  // namespace

TEST_CASE("sync_dicts merges uneven tensors, numbers and strings in rank order on every rank", "[ddp]") {
  for (int world : {2, 3}) {
    TempDir dir;
    const auto r = run_worker("--nproc-per-node " + std::to_string(world) + " --scenario sync --out " +
                              quote(dir.path().string()));
    REQUIRE(r.exit_code == 0);
    const std::string expected = oml::test::ddp::dump(expected_sync(world));
    for (int rank = 0; rank < world; ++rank) CHECK(rank_file(dir, rank) == expected);
  }
}

TEST_CASE("sync_dicts merges uneven tensors of tens of megabytes exactly", "[ddp]") {
  for (int world : {2, 3}) {
    TempDir dir;
    const auto r = run_worker("--nproc-per-node " + std::to_string(world) + " --scenario sync_large --out " +
                              quote(dir.path().string()));
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    int64_t rows = 0;
    for (int rank = 0; rank < world; ++rank) rows += 40000 + 12345 * rank;
    const std::string n = std::to_string(rows), m = std::to_string(rows - 40000);
    for (int rank = 0; rank < world; ++rank) {
      CHECK(rank_file(dir, rank) == "embeddings equal [" + n + ", 64]\nempty_on_rank0 equal [" + m +
                                        ", 3]\nindices equal [" + n + "]\n");
    }
  }
}

TEST_CASE("sync_dicts with different keys or kinds fails on both of 2 ranks", "[ddp]") {
  TempDir dir;
  const auto r =
      run_worker("--nproc-per-node 2 --scenario mismatch --victim 0 --out " + quote(dir.path().string()));
  INFO(describe(r));
  CHECK(r.exit_code == 1);
  for (int rank = 0; rank < 2; ++rank) {
    CHECK_THAT(r.err,
               Contains("[rank " + std::to_string(rank) +
                        "] oml_ddp_worker: distributed error: sync_dicts: ranks passed different dicts: "
                        "key 'extra': missing on rank 1; strings on rank 0"));
  }
  CHECK_THAT(r.err, Contains("key 'indices': ints on rank 1; tensor Long[*] on rank 0"));
}

TEST_CASE("sync_dicts with different keys or kinds fails on every rank naming the key and the ranks",
          "[ddp]") {
  TempDir dir;
  const auto r =
      run_worker("--nproc-per-node 3 --scenario mismatch --victim 1 --out " + quote(dir.path().string()));
  INFO(describe(r));
  CHECK(r.exit_code == 1);
  for (int rank = 0; rank < 3; ++rank) {
    CHECK_THAT(r.err,
               Contains("[rank " + std::to_string(rank) +
                        "] oml_ddp_worker: distributed error: sync_dicts: ranks passed different dicts: "
                        "key 'extra': missing on ranks 0, 2; strings on rank 1"));
  }
  CHECK_THAT(r.err, Contains("key 'indices': ints on ranks 0, 2; tensor Long[*] on rank 1"));
}

TEST_CASE("The Accumulator drops padding duplicates and sorts by dataset index", "[ddp]") {
  // 7 items over 2 or 3 ranks: padding repeats items 0 (W=2) or 0 and 1 (W=3).
  std::string expected;
  {
    std::vector<int64_t> labels;
    std::vector<std::string> paths;
    for (int64_t i = 0; i < 7; ++i) {
      labels.push_back(i % 3);
      paths.push_back("img" + std::to_string(i) + ".jpg");
    }
    const auto idx = torch::arange(7, torch::kLong);
    expected = oml::test::ddp::dump(
        {{"indices", idx},
         {"embeddings", torch::stack({idx.to(torch::kFloat), -2.0 * idx.to(torch::kFloat)}, 1)},
         {"labels", labels},
         {"paths", paths}});
  }
  for (int world : {2, 3}) {
    TempDir dir;
    const auto r = run_worker("--nproc-per-node " + std::to_string(world) + " --scenario accumulator --out " +
                              quote(dir.path().string()));
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    for (int rank = 0; rank < world; ++rank) CHECK(rank_file(dir, rank) == expected);
  }
}

TEST_CASE("W ranks with batch B/W train the same weights as one process with batch B", "[ddp]") {
  const std::vector<torch::Tensor> reference = single_process_weights();

  for (int world : {2, 3}) {
    TempDir dir;
    // Tiny buckets: several all-reduces per step, launched from the hooks during backward;
    // the parameter check runs after every step.
    const auto r =
        run_worker("--nproc-per-node " + std::to_string(world) +
                   " --scenario train --steps 6 --batch 12 --bucket-mb 0.0002 --check-every 1 --out " +
                   quote(dir.path().string()));
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    std::vector<torch::Tensor> rank0;
    torch::load(rank0, (dir / "rank0.pt").string());
    REQUIRE(rank0.size() == reference.size());
    for (std::size_t i = 0; i < reference.size(); ++i) {
      CHECK(oml::test::max_abs_diff(rank0[i], reference[i]) < 1e-5);
      CHECK(!torch::equal(rank0[i], torch::zeros_like(rank0[i])));
    }
    for (int rank = 1; rank < world; ++rank) {
      std::vector<torch::Tensor> other;
      torch::load(other, (dir / ("rank" + std::to_string(rank) + ".pt")).string());
      for (std::size_t i = 0; i < reference.size(); ++i) CHECK(torch::equal(other[i], rank0[i]));  // bitwise
    }
    for (int rank = 0; rank < world; ++rank) {
      const std::string log = rank_file(dir, rank);
      CHECK_THAT(log, Contains("unused_grad_defined 0"));  // no gradient anywhere: stays undefined
      // Rank 0 alone produced 2 * [1, 2, 3]; the mean over W ranks sums to 12 / W everywhere.
      const double partial = std::stod(log.substr(log.find("partial_grad ") + 13));
      CHECK(partial == Approx(12.0 / world));
      CHECK(std::stoi(log.substr(log.find("buckets ") + 8)) >= 4);
    }
  }
}

TEST_CASE(
    "W ranks accumulating micro-batches train the same weights as one process, all-reducing once per step",
    "[ddp][accumulate]") {
  const std::vector<torch::Tensor> reference = single_process_weights();
  for (const auto& [world, accumulate] : std::vector<std::pair<int, int>>{{1, 2}, {2, 2}, {3, 2}, {2, 3}}) {
    INFO(world << " rank(s), " << accumulate << " micro-batches per step");
    TempDir dir;
    const auto r =
        run_worker("--nproc-per-node " + std::to_string(world) + " --scenario train --steps 6 --batch 12" +
                   " --accumulate " + std::to_string(accumulate) +
                   " --bucket-mb 0.0002 --check-every 1 --out " + quote(dir.path().string()));
    INFO(describe(r));
    REQUIRE(r.exit_code == 0);
    std::vector<torch::Tensor> rank0;
    torch::load(rank0, (dir / "rank0.pt").string());
    REQUIRE(rank0.size() == reference.size());
    for (std::size_t i = 0; i < reference.size(); ++i)
      CHECK(oml::test::max_abs_diff(rank0[i], reference[i]) < 1e-5);
    for (int rank = 0; rank < world; ++rank) {
      const std::string log = rank_file(dir, rank);
      CHECK_THAT(log, Contains("unused_grad_defined 0"));
      if (world > 1) {
        // One finish() (one round of bucket all-reduces) per optimizer step, none per micro-batch.
        CHECK_THAT(log, Contains("synchronised_steps 6"));
        const double partial = std::stod(log.substr(log.find("partial_grad ") + 13));
        CHECK(partial == Approx(12.0 / world));
      }
    }
  }
}

TEST_CASE("A compressed all-reduce gives the float32 mean within the 16-bit type's rounding", "[ddp]") {
  using oml::test::ddp::compressed_input;
  for (const std::string compression : {"bf16", "fp16"}) {
    const auto wire = compression == "bf16" ? torch::kBFloat16 : torch::kHalf;
    // Unit roundoff of the type (8 and 11 significant bits); fp16 also loses values below its
    // normal range to subnormal spacing 2^-24.
    const double u = compression == "bf16" ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    const double subnormal = compression == "bf16" ? 0.0 : std::ldexp(1.0, -24);
    for (int world : {2, 3}) {
      TempDir dir;
      const auto r = run_worker("--nproc-per-node " + std::to_string(world) +
                                " --scenario compressed_mean --compression " + compression + " --out " +
                                quote(dir.path().string()));
      INFO(compression << ", " << world << " ranks\n" << describe(r));
      REQUIRE(r.exit_code == 0);
      std::vector<std::vector<torch::Tensor>> results(world);
      for (int rank = 0; rank < world; ++rank) {
        torch::load(results[rank], (dir / ("rank" + std::to_string(rank) + ".pt")).string());
        REQUIRE(results[rank].size() == static_cast<std::size_t>(oml::test::ddp::kCompressedCases));
      }
      for (int c = 0; c < oml::test::ddp::kCompressedCases; ++c) {
        INFO("case " << c);
        const int64_t numel = compressed_input(0, c).numel();
        torch::Tensor exact = torch::zeros({numel}, torch::kDouble);
        torch::Tensor abs_sum = torch::zeros({numel}, torch::kDouble);
        torch::Tensor emulated = torch::zeros({numel});
        for (int rank = 0; rank < world; ++rank) {
          const torch::Tensor x = compressed_input(rank, c);
          exact += x.to(torch::kDouble) / world;
          abs_sum += x.abs().to(torch::kDouble) / world;
          emulated += (x / world).to(wire).to(torch::kFloat);  // rounded once, summed in float32
        }
        emulated = emulated.to(wire).to(torch::kFloat);  // the mean rounded once more
        const torch::Tensor got = results[0][c];
        // What the algorithm promises, bit for bit, and the same on every rank.
        CHECK(torch::equal(got, emulated));
        for (int rank = 1; rank < world; ++rank) CHECK(torch::equal(results[rank][c], got));
        // Two roundings away from the exact mean at most (plus float32 summation).
        const torch::Tensor bound = abs_sum * (2.0 * u + u * u + 1e-6) + subnormal * (world + 1);
        const torch::Tensor error = (got.to(torch::kDouble) - exact).abs();
        CHECK((error <= bound).all().item<bool>());
        CHECK(error.max().item<double>() > 0.0);  // the values really travelled in 16 bits
        CHECK(torch::equal(got.narrow(0, 0, 7), torch::zeros({7})));
      }
    }
  }
}

TEST_CASE("Every rank gets rank 0's decisions and named values bit for bit, whatever it passed itself",
          "[ddp]") {
  using namespace oml::test::ddp;
  std::ostringstream expected;
  for (int round = 0; round < 2; ++round) {
    expected << "round " << round << " decision " << from_rank0_decision(0, round) << "\n"
             << dump_bits(from_rank0_input(0, round));
  }
  for (int world : {2, 3}) {
    TempDir dir;
    const auto r = run_worker("--nproc-per-node " + std::to_string(world) + " --scenario from_rank0 --out " +
                              quote(dir.path().string()));
    INFO(world << " ranks\n" << describe(r));
    REQUIRE(r.exit_code == 0);
    for (int rank = 0; rank < world; ++rank) CHECK(rank_file(dir, rank) == expected.str());
  }
  // The reference itself holds what the scenario is about.
  CHECK_THAT(expected.str(),
             Contains("decision 1") && Contains("decision 0") && Contains("\"\" fff0000000000000"));
}

TEST_CASE("Training with gradient compression keeps the ranks identical and close to float32", "[ddp]") {
  const std::vector<torch::Tensor> reference = single_process_weights();
  for (const std::string compression : {"bf16", "fp16"}) {
    for (int world : {2, 3}) {
      TempDir dir;
      // Tiny buckets: several compressed buckets per step on the communication thread.
      const auto r = run_worker("--nproc-per-node " + std::to_string(world) +
                                " --scenario train --steps 6 --batch 12 --bucket-mb 0.0002 --check-every 1 "
                                "--compression " +
                                compression + " --out " + quote(dir.path().string()));
      INFO(compression << ", " << world << " ranks\n" << describe(r));
      REQUIRE(r.exit_code == 0);
      std::vector<torch::Tensor> rank0;
      torch::load(rank0, (dir / "rank0.pt").string());
      REQUIRE(rank0.size() == reference.size());
      double largest = 0.0;
      for (std::size_t i = 0; i < reference.size(); ++i) {
        const double diff = oml::test::max_abs_diff(rank0[i], reference[i]);
        CHECK(diff < 2e-2);
        largest = std::max(largest, diff);
      }
      CHECK(largest > 0.0);  // compressed gradients are not the float32 ones
      for (int rank = 1; rank < world; ++rank) {
        std::vector<torch::Tensor> other;
        torch::load(other, (dir / ("rank" + std::to_string(rank) + ".pt")).string());
        for (std::size_t i = 0; i < reference.size(); ++i) CHECK(torch::equal(other[i], rank0[i]));
      }
      for (int rank = 0; rank < world; ++rank) {
        const std::string log = rank_file(dir, rank);
        CHECK_THAT(log, Contains("unused_grad_defined 0"));
        // 2 * [1, 2, 3] / W summed: 4/W + ... exact in both types for W = 2; within rounding for 3.
        const double partial = std::stod(log.substr(log.find("partial_grad ") + 13));
        CHECK(partial == Approx(12.0 / world).epsilon(1e-2));
      }
    }
  }
}

TEST_CASE("A rank killed with SIGKILL ends the job promptly, naming the rank, with its exit code", "[ddp]") {
  TempDir dir;
  const std::string tag = "oml-kill-" + dir.path().filename().string();
  // A timeout of 300 s: finishing within the test's 60 s proves the connection drop was used.
  const auto r = run_worker("--nproc-per-node 3 --scenario kill --victim 1 --timeout 300 --tag " + tag, 60);
  INFO(describe(r));
  CHECK(r.exit_code == 128 + 9);
  CHECK_THAT(r.err, Contains("oml_ddp_worker: distributed error: rank 1 was killed by signal 9 (SIGKILL)"));
  for (int rank : {0, 2}) {
    CHECK_THAT(rank_lines(r.err, rank),
               Contains("[rank " + std::to_string(rank) + "] oml_ddp_worker: distributed error: rank " +
                        std::to_string(rank) + ": all_reduce failed because rank 1 was killed by signal 9"));
  }
  CHECK(survivors(tag).empty());
}

TEST_CASE("A rank that throws ends the others, and the launcher returns its exit code", "[ddp]") {
  TempDir dir;
  const std::string tag = "oml-throw-" + dir.path().filename().string();
  const auto r = run_worker("--nproc-per-node 3 --scenario throw --victim 2 --timeout 300 --tag " + tag, 60);
  INFO(describe(r));
  CHECK(r.exit_code == 2);  // a DataError
  CHECK_THAT(r.err, Contains("[rank 2] oml_ddp_worker: data error: df.csv, row 3"));
  CHECK_THAT(r.err, Contains("oml_ddp_worker: distributed error: rank 2 exited with code 2"));
  CHECK_THAT(
      rank_lines(r.err, 0),
      Contains("[rank 0] oml_ddp_worker: distributed error: rank 0: all_reduce failed because rank 2"));
  CHECK(survivors(tag).empty());
}

TEST_CASE("A stuck rank makes the others time out after ddp.timeout_s, and the launcher ends and names it",
          "[ddp]") {
  TempDir dir;
  const std::string tag = "oml-hang-" + dir.path().filename().string();
  const auto r = run_worker("--nproc-per-node 2 --scenario hang --victim 1 --timeout 3 --tag " + tag, 90);
  INFO(describe(r));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err,
             Contains("[rank 0] oml_ddp_worker: distributed error: rank 0: all_reduce timed out after 3"));
  // The summary names the stuck rank, not the one that gave up waiting for it.
  CHECK_THAT(r.err,
             Contains("oml_ddp_worker: distributed error: rank 1 is stuck: rank 0's all_reduce timed out "
                      "after 3 s (ddp.timeout_s) while it still ran; stopped every rank"));
  CHECK(survivors(tag).empty());
}

TEST_CASE("SIGINT to the launcher stops every rank and leaves no process behind", "[ddp]") {
  TempDir dir;
  const std::string tag = "oml-int-" + dir.path().filename().string();
  // The signal goes out once the launcher says it is launching (it forwards signals from then
  // on); before that, a background job of a non-interactive shell ignores SIGINT.
  const std::string err = (dir / "launcher.err").string();
  const auto r =
      oml::test::run(quote(OML_DDP_WORKER) + " --nproc-per-node 2 --scenario wait --tag " + tag + " 2>" +
                         quote(err) + " & pid=$!; for i in $(seq 600); do grep -q launching " + quote(err) +
                         " && break; sleep 0.1; done; sleep 1; kill -INT $pid; wait $pid; rc=$?; cat " +
                         quote(err) + " >&2; exit $rc",
                     120);
  INFO(describe(r));
  CHECK(r.exit_code == 128 + 2);
  CHECK_THAT(r.err, Contains("interrupted by signal 2 (SIGINT); stopped every rank"));
  CHECK(survivors(tag).empty());
}

TEST_CASE("Bad launcher flags are usage errors naming the flag", "[ddp]") {
  auto r = run_worker("--nproc-per-node 0 --scenario sync");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--nproc-per-node must be at least 1, got 0"));
  r = run_worker("--nproc-per-node 100000 --scenario sync");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--nproc-per-node must be at most 1024"));
  r = run_worker("--nproc-per-node 2 --nnodes 2 --scenario sync");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--master-port is required with --nnodes 2"));
  r = run_worker(
      "--nproc-per-node 2 --nnodes 2 --node-rank 2 --master-port 29999 --master-addr 127.0.0.1 --scenario "
      "sync");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--node-rank must be in [0, --nnodes=2), got 2"));
}

}  // namespace ddp_tests
