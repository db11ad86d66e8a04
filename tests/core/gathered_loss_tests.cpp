// ddp.gather_embeddings_for_loss (oml/losses/gathered_loss.h) on a real world of 2 ranks: two
// threads of this process, each with its own Gloo group over loopback (rank 0 hosts the
// rendezvous store), gradients averaged by the GradientSync the Trainer uses. Every rank's loss
// and the averaged gradients must equal one process's over the concatenated batch.
#include <torch/torch.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <exception>
#include <functional>
#include <thread>

#include "oml/config/document.h"
#include "oml/distributed/gradient_sync.h"
#include "oml/distributed/process_group.h"
#include "oml/losses/gathered_loss.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace gathered_loss_tests {

using Catch::Matchers::Contains;
namespace dist = oml::distributed;

namespace {

constexpr int64_t kInputs = 12;  // the "extractor" is one linear layer kInputs -> kFeatures
constexpr int64_t kFeatures = 8;
constexpr int64_t kClasses = 4;

// A TCP port nobody listens on right now (bound and released), for the rendezvous store.
int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  socklen_t len = sizeof(addr);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Runs body(group) on ranks 0 .. world-1 of a fresh Gloo world, one thread per rank, and
// rethrows the first rank's failure. Catch's assertions are not thread-safe: bodies only record.
void in_ranks(int world, const std::function<void(const std::shared_ptr<dist::ProcessGroup>&)>& body) {
  const int port = unused_port();
  std::vector<std::exception_ptr> failures(world);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < world; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        dist::World w;
        w.rank = rank;
        w.world_size = world;
        w.local_rank = rank;
        w.local_world_size = world;
        w.master_port = port;
        w.source = "test threads";
        body(dist::ProcessGroup::connect(w, {/*timeout_s=*/30.0}));
      } catch (...) {
        failures[rank] = std::current_exception();
      }
    });
  }
  for (auto& t : ranks) t.join();
  for (auto& f : failures) {
    if (f) std::rethrow_exception(f);
  }
}

std::shared_ptr<oml::losses::Criterion> criterion(const std::string& yaml) {
  oml::cli::register_builtins();
  const auto doc = oml::config::Document::from_string("criterion: " + yaml + "\n", "gathered.yaml");
  return oml::registries().losses.create(oml::config::parse_component(doc.root()["criterion"], "criterion"),
                                         {kFeatures, kClasses});
}

// One copy of the "extractor" and of the loss per process / rank, all with the same values.
struct Replica {
  torch::nn::Linear model{nullptr};
  std::shared_ptr<oml::losses::Criterion> loss;

  Replica(const std::string& yaml, const torch::nn::Linear& reference_model,
          const oml::losses::Criterion& reference_loss)
      : model(torch::nn::Linear(kInputs, kFeatures)), loss(criterion(yaml)) {
    torch::NoGradGuard no_grad;
    model->weight.copy_(reference_model->weight);
    model->bias.copy_(reference_model->bias);
    const auto theirs = reference_loss.named_parameters();
    for (auto& item : loss->named_parameters()) item.value().copy_(theirs[item.key()]);
  }

  dist::NamedTensors parameters() const {
    auto all = dist::named_trainable_parameters(*model, "model.");
    for (auto& p : dist::named_trainable_parameters(*loss, "criterion.")) all.push_back(p);
    return all;
  }
};

// What one process or rank ends a step with: the loss value and every parameter's gradient.
struct StepResult {
  double loss = 0;
  std::map<std::string, torch::Tensor> gradients;
};

StepResult record(double loss, const dist::NamedTensors& parameters) {
  StepResult r{loss, {}};
  for (const auto& [name, p] : parameters) {
    r.gradients[name] = p.grad().defined() ? p.grad().clone() : torch::zeros_like(p);
  }
  return r;
}

void check_same_step(const StepResult& got, const StepResult& expected) {
  CHECK(got.loss == Approx(expected.loss).epsilon(1e-5).margin(1e-6));
  REQUIRE(got.gradients.size() == expected.gradients.size());
  for (const auto& [name, g] : expected.gradients) {
    INFO(name);
    const double scale = std::max(1.0, g.abs().max().item<double>());
    CHECK((got.gradients.at(name) - g).abs().max().item<double>() <= 1e-5 * scale);
  }
}

// The loss `yaml` over `inputs` / `labels` split between 2 ranks at `split` (rank 0 takes rows
// [0, split), rank 1 the rest), with gathering and the GradientSync, against one process over
// all rows. Returns how many gradients were not zero (so that the comparison meant something).
int64_t check_two_ranks_equal_one_process(const std::string& yaml, const torch::Tensor& inputs,
                                          const torch::Tensor& labels, int64_t split) {
  torch::manual_seed(7);
  const torch::nn::Linear reference_model(kInputs, kFeatures);
  const auto reference_loss = criterion(yaml);

  Replica one(yaml, reference_model, *reference_loss);
  const auto out = one.loss->forward(one.model->forward(inputs), labels);
  out.loss.backward();
  const StepResult expected = record(out.loss.item<double>(), one.parameters());

  std::vector<Replica> replicas;
  for (int r = 0; r < 2; ++r) replicas.emplace_back(yaml, reference_model, *reference_loss);
  std::vector<StepResult> results(2);
  in_ranks(2, [&](const std::shared_ptr<dist::ProcessGroup>& group) {
    const int r = group->rank();
    Replica& mine = replicas[r];
    dist::GradientSync sync(group, mine.parameters());
    const int64_t begin = r == 0 ? 0 : split, end = r == 0 ? split : inputs.size(0);
    const auto embeddings = mine.model->forward(inputs.slice(0, begin, end));
    const auto step =
        oml::losses::loss_over_all_ranks(*mine.loss, *group, embeddings, labels.slice(0, begin, end));
    step.loss.backward();
    sync.finish();
    results[r] = record(step.loss.item<double>(), mine.parameters());
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r << ", rows [" << (r == 0 ? 0 : split) << ", " << (r == 0 ? split : inputs.size(0))
                 << ")");
    check_same_step(results[r], expected);
  }
  int64_t nonzero = 0;
  for (const auto& [name, g] : expected.gradients) nonzero += (g != 0).sum().item<int64_t>();
  return nonzero;
}

// 2B = 16 rows: labels 0..3 four times each, in an order that gives both ranks every label only
// for the even split.
torch::Tensor batch_inputs() {
  torch::manual_seed(11);
  return torch::randn({16, kInputs});
}
torch::Tensor batch_labels() {
  return torch::tensor({0, 1, 0, 2, 1, 3, 2, 0, 3, 1, 2, 3, 0, 1, 2, 3}, torch::kLong);
}

}  // namespace

TEST_CASE("Gathered losses on 2 ranks give one process's loss and gradients with batch 2B", "[losses][ddp]") {
  // triplet_with_miner with a miner (over the global batch), two PML pair losses, a proxy loss and
  // a classification loss with trainable class weights.
  const std::vector<std::string> losses{
      "{name: triplet_with_miner, args: {margin: 0.5, miner: {name: hard_triplets}}}",
      "{name: triplet_with_miner, args: {margin: 0.5, miner: {name: all_triplets, args: "
      "{max_output_triplets: "
      "100000}}}}",
      "{name: multi_similarity}",
      "{name: contrastive, args: {pos_margin: 0.1, neg_margin: 1.5}}",
      "{name: proxy_anchor}",
      "{name: arcface, args: {m: 0.3, s: 8}}",
  };
  const auto inputs = batch_inputs();
  const auto labels = batch_labels();
  for (const auto& yaml : losses) {
    for (int64_t split : {8, 11}) {  // batch B on each rank, and ranks with different batch sizes
      INFO(yaml << ", rank 0 holds " << split << " of 16 rows");
      CHECK(check_two_ranks_equal_one_process(yaml, inputs, labels, split) > 0);
    }
  }
}

TEST_CASE("A rank whose own batch has one label still trains on the gathered batch", "[losses][ddp]") {
  // Rank 0's 4 rows all have label 0: alone, the triplet loss finds no negative (a DataError).
  const auto labels = torch::tensor({0, 0, 0, 0, 1, 1, 2, 2, 1, 2, 3, 3}, torch::kLong);
  torch::manual_seed(5);
  const auto inputs = torch::randn({12, kInputs});
  const std::string yaml = "{name: triplet_with_miner, args: {margin: 0.5, miner: {name: hard_triplets}}}";
  CHECK_THROWS_AS(criterion(yaml)->forward(torch::randn({4, kFeatures}), labels.slice(0, 0, 4)),
                  oml::DataError);
  CHECK(check_two_ranks_equal_one_process(yaml, inputs, labels, 4) > 0);
}

TEST_CASE("gather_batch puts the ranks' rows in rank order and only this rank's rows carry a gradient",
          "[losses][ddp]") {
  std::vector<oml::losses::GatheredBatch> gathered(2);
  std::vector<torch::Tensor> local_gradients(2);
  in_ranks(2, [&](const std::shared_ptr<dist::ProcessGroup>& group) {
    const int r = group->rank();
    const int64_t rows = r == 0 ? 3 : 2;
    // bfloat16, as autocast makes them: gathered as float32.
    auto embeddings =
        torch::full({rows, 2}, static_cast<double>(r + 1), torch::kBFloat16).set_requires_grad(true);
    const auto labels = torch::full({rows}, 10 + r, torch::kInt);
    auto all = oml::losses::gather_batch(*group, embeddings, labels, /*gradient_scale=*/3.0);
    all.embeddings.sum().backward();
    local_gradients[r] = embeddings.grad();
    gathered[r] = std::move(all);
  });
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    const auto& g = gathered[r];
    CHECK(g.embeddings.scalar_type() == torch::kFloat);
    CHECK(g.labels.scalar_type() == torch::kLong);
    CHECK(torch::equal(g.embeddings.select(1, 0), torch::tensor({1.0f, 1.0f, 1.0f, 2.0f, 2.0f})));
    CHECK(torch::equal(g.labels, torch::tensor({10, 10, 10, 11, 11}, torch::kLong)));
    CHECK(g.begin == (r == 0 ? 0 : 3));
    CHECK(g.end == (r == 0 ? 3 : 5));
    // d(sum)/d(row) = 1 for each of this rank's rows, times the scale.
    REQUIRE(local_gradients[r].defined());
    CHECK(local_gradients[r].scalar_type() == torch::kBFloat16);
    CHECK(torch::equal(local_gradients[r].to(torch::kFloat), torch::full({r == 0 ? 3 : 2, 2}, 3.0f)));
  }
}

TEST_CASE("gather_batch refuses ranks whose embeddings differ in width, on every rank", "[losses][ddp]") {
  CHECK_THROWS_WITH(in_ranks(2,
                             [](const std::shared_ptr<dist::ProcessGroup>& group) {
                               const auto embeddings = torch::zeros({2, group->rank() == 0 ? 4 : 5});
                               oml::losses::gather_batch(*group, embeddings, torch::zeros({2}, torch::kLong));
                             }),
                    Contains("all_gather") && Contains("Float[*,5]") && Contains("Float[*,4]"));
}

TEST_CASE("With one process the gathered loss is the loss itself", "[losses][ddp]") {
  const auto group = dist::ProcessGroup::single();
  const std::string yaml = "{name: multi_similarity}";
  const auto loss = criterion(yaml);
  const auto embeddings = batch_inputs().slice(1, 0, kFeatures);
  const auto labels = batch_labels();
  CHECK(oml::losses::loss_over_all_ranks(*loss, *group, embeddings, labels).loss.item<double>() ==
        loss->forward(embeddings, labels).loss.item<double>());
}

}  // namespace gathered_loss_tests
