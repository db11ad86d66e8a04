// The single-process parts of oml::distributed: reading the World from the environment,
// sync_dicts and rank 0's records with one rank, deduplication by dataset index, and the
// launcher's worker test.
#include <torch/torch.h>

#include <cmath>
#include <map>

#include "oml/common/error.h"
#include "oml/distributed/detail/failure_record.h"
#include "oml/distributed/from_rank0.h"
#include "oml/distributed/gradient_sync.h"
#include "oml/distributed/launcher.h"
#include "oml/distributed/process_group.h"
#include "oml/distributed/sync_dicts.h"
#include "oml/distributed/world.h"
#include "support/support.h"

namespace distributed_tests {

using Catch::Matchers::Contains;
namespace dist = oml::distributed;

namespace {
dist::Environment env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string usage_error_of(const std::map<std::string, std::string>& vars) {
  try {
    dist::world_from_environment(env_of(vars));
  } catch (const oml::UsageError& e) {
    return e.what();
  }
  return "(no error)";
}
}  // namespace

TEST_CASE("No variables mean a single process that needs no process group", "[ddp]") {
  const auto world = dist::world_from_environment(env_of({}));
  CHECK(world.world_size == 1);
  CHECK(world.rank == 0);
  CHECK(!world.is_distributed());
  CHECK(dist::describe(world) == "single process");
}

TEST_CASE("torchrun's variables give rank, local rank and the store address", "[ddp]") {
  const auto world = dist::world_from_environment(env_of({{"RANK", "3"},
                                                          {"WORLD_SIZE", "4"},
                                                          {"LOCAL_RANK", "1"},
                                                          {"LOCAL_WORLD_SIZE", "2"},
                                                          {"MASTER_ADDR", "node0"},
                                                          {"MASTER_PORT", "29500"},
                                                          {"TORCHELASTIC_USE_AGENT_STORE", "True"}}));
  CHECK(world.rank == 3);
  CHECK(world.world_size == 4);
  CHECK(world.local_rank == 1);
  CHECK(world.local_world_size == 2);
  CHECK(world.master_addr == "node0");
  CHECK(world.master_port == 29500);
  CHECK(world.launcher_hosts_store);
  CHECK(dist::describe(world) == "rank 3 of 4 (local 1 of 2, store node0:29500)");
}

TEST_CASE("srun's variables are used when RANK and WORLD_SIZE are not set", "[ddp]") {
  const auto world = dist::world_from_environment(env_of({{"SLURM_PROCID", "5"},
                                                          {"SLURM_NTASKS", "8"},
                                                          {"SLURM_LOCALID", "1"},
                                                          {"SLURM_NTASKS_PER_NODE", "4(x2)"},
                                                          {"MASTER_ADDR", "10.0.0.1"},
                                                          {"MASTER_PORT", "1234"}}));
  CHECK(world.source == "SLURM");
  CHECK(world.rank == 5);
  CHECK(world.world_size == 8);
  CHECK(world.local_rank == 1);
  CHECK(world.local_world_size == 4);
  CHECK(!world.launcher_hosts_store);
}

TEST_CASE("Bad world variables are usage errors naming the variable and the expectation", "[ddp]") {
  const std::map<std::string, std::string> good{
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& key, const std::string& value) {
    auto vars = good;
    vars[key] = value;
    return vars;
  };
  auto without = [&](const std::string& key) {
    auto vars = good;
    vars.erase(key);
    return vars;
  };
  CHECK_THAT(usage_error_of(with("RANK", "one")),
             Contains("environment variable RANK='one' is not an integer"));
  CHECK_THAT(usage_error_of(with("RANK", "2")), Contains("RANK=2 must be in [0, WORLD_SIZE=2)"));
  CHECK_THAT(usage_error_of(with("RANK", "-1")), Contains("RANK=-1 must be in [0, WORLD_SIZE=2)"));
  CHECK_THAT(usage_error_of(with("WORLD_SIZE", "0")), Contains("WORLD_SIZE=0 must be at least 1"));
  CHECK_THAT(usage_error_of(with("WORLD_SIZE", "2x")), Contains("WORLD_SIZE='2x' is not an integer"));
  CHECK_THAT(usage_error_of(without("WORLD_SIZE")), Contains("WORLD_SIZE is not set (RANK is set"));
  CHECK_THAT(usage_error_of(without("MASTER_ADDR")), Contains("MASTER_ADDR is not set"));
  CHECK_THAT(usage_error_of(without("MASTER_PORT")), Contains("MASTER_PORT is not set"));
  CHECK_THAT(usage_error_of(with("MASTER_PORT", "70000")), Contains("MASTER_PORT=70000 must be a TCP port"));
  CHECK_THAT(usage_error_of(with("LOCAL_RANK", "5")),
             Contains("LOCAL_RANK=5 must be in [0, local world size 2)"));
  CHECK_THAT(usage_error_of({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}),
             Contains("SLURM_PROCID=4 must be in [0, SLURM_NTASKS=4)"));
}

TEST_CASE("Workers of a launcher, torchrun or a multi-task srun never launch again", "[ddp]") {
  CHECK(dist::is_worker_process(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}})));
  CHECK(dist::is_worker_process(env_of({{"SLURM_NTASKS", "4"}})));
  CHECK(!dist::is_worker_process(env_of({{"SLURM_NTASKS", "1"}})));
  CHECK(!dist::is_worker_process(env_of({})));
}

TEST_CASE("A failure record survives its wire form, and other bytes are no record", "[ddp]") {
  using dist::detail::FailureRecord;
  const FailureRecord record{12, "was killed by signal 9 (SIGKILL)\nand more"};
  const auto decoded = FailureRecord::decode(record.encode());
  REQUIRE(decoded);
  CHECK(decoded->rank == 12);
  CHECK(decoded->what == record.what);
  CHECK(decoded->describe() == "rank 12 was killed by signal 9 (SIGKILL)\nand more");
  CHECK(FailureRecord{2, "stopped with an error"}.describe() == "rank 2 stopped with an error");
  // The format of older builds, foreign bytes and broken ranks are not records.
  for (const std::string bytes :
       {"rank 2 stopped with an error", "", "oml-failure 1\n", "oml-failure 1\n2", "oml-failure 1\n-1\nx",
        "oml-failure 1\n2x\nx", "oml-failure 2\n2\nx", "oml-failure 1\n99999999999\nx"}) {
    INFO(bytes);
    CHECK_FALSE(FailureRecord::decode(bytes));
  }
  CHECK(FailureRecord::decode("oml-failure 1\n0\n")->what.empty());
}

TEST_CASE("Collectives and sync_dicts of a single process return the input unchanged", "[ddp]") {
  auto group = dist::ProcessGroup::connect(dist::World{});
  CHECK(group->size() == 1);
  torch::Tensor t = torch::tensor({1.0f, 2.0f});
  group->all_reduce(t);
  group->broadcast(t);
  group->barrier();
  CHECK(torch::equal(t, torch::tensor({1.0f, 2.0f})));
  const auto parts = group->all_gather(t);
  REQUIRE(parts.size() == 1);
  CHECK(torch::equal(parts[0], t));
  CHECK(group->all_gather_bytes("abc") == std::vector<std::string>{"abc"});
  const dist::SyncDict dict{{"x", t}, {"names", std::vector<std::string>{"a", "b"}}};
  const auto merged = dist::sync_dicts(*group, dict);
  CHECK(std::get<std::vector<std::string>>(merged.at("names")) == std::vector<std::string>{"a", "b"});
  const c10::Device cpu(c10::DeviceType::CPU);
  CHECK(dist::decision_from_rank0(*group, cpu, true));
  CHECK_FALSE(dist::decision_from_rank0(*group, cpu, false));
  const std::map<std::string, double> values{{"OVERALL/cmc/1", 0.1 + 0.2}, {"", -0.0}};
  const auto received = dist::values_from_rank0(*group, cpu, values);
  CHECK(received == values);
  CHECK(std::signbit(received.at("")));
}

TEST_CASE("Deduplication keeps the first row of each index and sorts every value by index", "[ddp]") {
  // Rows as two ranks deliver them: rank 0 [4, 0, 2], rank 1 [1, 3, 4(padding, different row)].
  const dist::SyncDict merged{
      {"indices", torch::tensor({4, 0, 2, 1, 3, 4}, torch::kLong)},
      {"embeddings", torch::tensor({40.0f, 0.0f, 20.0f, 10.0f, 30.0f, -1.0f}).unsqueeze(1)},
      {"labels", std::vector<int64_t>{14, 10, 12, 11, 13, -1}},
      {"scores", std::vector<double>{0.4, 0.0, 0.2, 0.1, 0.3, -1.0}},
      {"paths", std::vector<std::string>{"e", "a", "c", "b", "d", "dup"}}};
  const auto result = dist::dedupe_and_sort_by_index(merged, "indices");
  CHECK(torch::equal(std::get<torch::Tensor>(result.at("indices")), torch::arange(5, torch::kLong)));
  CHECK(torch::equal(std::get<torch::Tensor>(result.at("embeddings")),
                     torch::tensor({0.0f, 10.0f, 20.0f, 30.0f, 40.0f}).unsqueeze(1)));
  CHECK(std::get<std::vector<int64_t>>(result.at("labels")) == std::vector<int64_t>{10, 11, 12, 13, 14});
  CHECK(std::get<std::vector<double>>(result.at("scores")) == std::vector<double>{0.0, 0.1, 0.2, 0.3, 0.4});
  CHECK(std::get<std::vector<std::string>>(result.at("paths")) ==
        std::vector<std::string>{"a", "b", "c", "d", "e"});
}

TEST_CASE("The Accumulator concatenates batches and syncs a single process to sorted unique rows", "[ddp]") {
  dist::Accumulator acc("indices");
  acc.update({{"indices", std::vector<int64_t>{2, 0}}, {"emb", torch::tensor({{2.0f}, {0.0f}})}});
  acc.update({{"indices", std::vector<int64_t>{1, 2}}, {"emb", torch::tensor({{1.0f}, {9.0f}})}});
  CHECK(acc.size() == 4);
  CHECK(torch::equal(std::get<torch::Tensor>(acc.local().at("emb")),
                     torch::tensor({{2.0f}, {0.0f}, {1.0f}, {9.0f}})));
  auto group = dist::ProcessGroup::single();
  const auto all = acc.sync(*group);
  CHECK(std::get<std::vector<int64_t>>(all.at("indices")) == std::vector<int64_t>{0, 1, 2});
  CHECK(torch::equal(std::get<torch::Tensor>(all.at("emb")), torch::tensor({{0.0f}, {1.0f}, {2.0f}})));
  CHECK_THROWS_AS(acc.update({{"indices", std::vector<int64_t>{5}}}), oml::InternalError);  // key missing
}

TEST_CASE("GradientSync in a single process leaves gradients exactly as backward made them", "[ddp]") {
  torch::nn::Linear layer(3, 2);
  dist::GradientSync sync(dist::ProcessGroup::single(), dist::named_trainable_parameters(*layer, "layer."));
  const auto x = torch::ones({4, 3});
  layer(x).sum().backward();
  const auto before = layer->weight.grad().clone();
  sync.finish();
  CHECK(torch::equal(layer->weight.grad(), before));
  CHECK(torch::equal(before, torch::full({2, 3}, 4.0f)));
  // The config checks ddp.bucket_mb; a library caller passing 0 is told which option field.
  CHECK_THROWS_WITH(dist::GradientSync(dist::ProcessGroup::single(), {}, {/*bucket_mb=*/0.0}),
                    Contains("GradientSyncOptions::bucket_mb must be > 0"));
}

TEST_CASE("With one rank nothing is communicated, so compression rounds nothing", "[ddp]") {
  for (const auto compression :
       {dist::GradientCompression::none, dist::GradientCompression::bf16, dist::GradientCompression::fp16}) {
    auto group = dist::ProcessGroup::single();
    torch::Tensor t = torch::tensor({1.0f / 3.0f, 1e-6f, 70000.0f});
    const torch::Tensor before = t.clone();
    dist::all_reduce_mean(*group, t, compression);
    CHECK(torch::equal(t, before));
    torch::nn::Linear layer(3, 2);
    dist::GradientSync sync(group, dist::named_trainable_parameters(*layer, "layer."),
                            {25.0, 0, compression});
    layer(torch::full({4, 3}, 1.0f / 3.0f)).sum().backward();
    const torch::Tensor grad = layer->weight.grad().clone();
    sync.finish();
    CHECK(torch::equal(layer->weight.grad(), grad));
  }
}

}  // namespace distributed_tests
