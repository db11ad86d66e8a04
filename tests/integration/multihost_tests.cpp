// Several machines, made as Linux network namespaces on this one: every "host" is a namespace
// with its own loopback and an `eth0` (192.0.2.x/24, the documentation range, so nothing can
// leave), plugged by a veth pair into a bridge that lives in a hub namespace (the switch). One
// `oml-train`/`oml-validate`/`oml-predict` node runs in each host with --nnodes/--node-rank/
// --master-addr 192.0.2.1 and GLOO_SOCKET_IFNAME=eth0, as on real machines. Faults are made the
// way they happen: a switch port goes down (`ip -n HUB link set pI down`: packets vanish, no
// reset reaches anyone), or every process of a host is SIGKILLed.
//
// Each test asserts the exit codes, what each node printed, that every node ended within
// ddp.timeout_s + 30 s of the fault, that no process is left in any namespace, and that
// last.ckpt loads. Namespaces are always deleted (RAII, also when a REQUIRE throws). Where they
// cannot be made (not root, no `ip`), the tests say why and pass without running.
#include <torch/torch.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <thread>

#include "integration/pipeline_fixtures.h"
#include "oml/common/strings.h"
#include "oml/io/checkpoint.h"
#include "oml/io/npy.h"
#include "support/support.h"

namespace multihost_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

constexpr int kPort = 29500;  // free in every fresh namespace
constexpr const char* kInterface = "eth0";

// Runs a shell command quietly; true when it succeeded.
bool sh(const std::string& command) { return run(command, 60).exit_code == 0; }

// Why network namespaces cannot be made here, or nullopt when they can.
std::optional<std::string> namespaces_unavailable() {
  static const std::optional<std::string> reason = []() -> std::optional<std::string> {
    if (::geteuid() != 0) return "not root (network namespaces need CAP_SYS_ADMIN)";
    if (!sh("command -v ip")) return "no `ip` command (iproute2)";
    // Namespaces of test processes that were killed before their cleanup ran (a ctest timeout,
    // SIGKILL): named omlmh-<pid>-..., deleted here once that pid is gone.
    run("for ns in $(ip netns list | grep -o '^omlmh-[0-9]*-[^ ]*'); do pid=${ns#omlmh-}; pid=${pid%%-*}; "
        "[ -d /proc/$pid ] && continue; for p in $(ip netns pids $ns); do kill -9 $p; done; ip netns del "
        "$ns; done",
        60);
    const std::string probe = "omlmh-probe-" + std::to_string(::getpid());
    const auto r = run("ip netns add " + probe + " && ip netns del " + probe, 60);
    if (r.exit_code != 0) return "`ip netns add` failed: " + oml::trim(r.err);
    return std::nullopt;
  }();
  return reason;
}

#define OML_REQUIRE_NAMESPACES()                                          \
  if (const auto why = namespaces_unavailable()) {                        \
    WARN("skipped: network namespaces cannot be created here: " << *why); \
    return;                                                               \
  }

// N hosts joined by a switch. Host i is namespace ns(i) with eth0 = 192.0.2.(i+1)/24; its
// veth peer pI is a port of bridge br0 in the hub namespace.
class Hosts {
 public:
  explicit Hosts(int n) {
    static std::atomic<int> counter{0};
    const std::string prefix = "omlmh-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    hub_ = prefix + "-hub";
    for (int i = 0; i < n; ++i) names_.push_back(prefix + "-h" + std::to_string(i));
    try {
      create();
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~Hosts() { destroy(); }
  Hosts(const Hosts&) = delete;
  Hosts& operator=(const Hosts&) = delete;

  int size() const { return static_cast<int>(names_.size()); }
  const std::string& ns(int i) const { return names_.at(i); }
  static std::string address(int i) { return "192.0.2." + std::to_string(i + 1); }
  // Prefix that runs a command on host i, with Gloo on its network interface.
  std::string exec(int i) const {
    return "ip netns exec " + ns(i) + " env GLOO_SOCKET_IFNAME=" + kInterface + " ";
  }
  // The switch port of host i goes down: from then on its packets vanish in both directions.
  std::string cut_link(int i) const { return "ip -n " + hub_ + " link set p" + std::to_string(i) + " down"; }
  // Every process of host i is SIGKILLed, as when the machine dies.
  std::string kill_host(int i) const {
    return "for p in $(ip netns pids " + ns(i) + "); do kill -9 $p; done";
  }
  // "host 1: 1234 oml-train ..." for every process still running in a host; empty when none.
  std::string processes_left() const {
    std::string left;
    for (int i = 0; i < size(); ++i) {
      const auto r = run(
          "for p in $(ip netns pids " + ns(i) + "); do echo \"$p $(tr '\\0' ' ' </proc/$p/cmdline)\"; done",
          30);
      if (!oml::trim(r.out).empty()) left += "host " + std::to_string(i) + ": " + r.out;
    }
    return left;
  }
  // Waits up to `seconds` for every host to be empty (ranks die with their launcher, but the
  // kernel delivers that asynchronously); returns what is still there.
  std::string wait_until_empty(double seconds) const {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(int(seconds * 1000));
    std::string left = processes_left();
    while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      left = processes_left();
    }
    return left;
  }

 private:
  void create() {
    auto must = [](const std::string& command) {
      const auto r = run(command, 60);
      if (r.exit_code != 0) throw std::runtime_error("`" + command + "` failed: " + r.err);
    };
    must("ip netns add " + hub_);
    created_.push_back(hub_);
    must("ip -n " + hub_ + " link add br0 type bridge && ip -n " + hub_ + " link set br0 up");
    for (int i = 0; i < size(); ++i) {
      const std::string port = "p" + std::to_string(i);
      must("ip netns add " + ns(i));
      created_.push_back(ns(i));
      must("ip link add " + std::string(kInterface) + " netns " + ns(i) + " type veth peer name " + port +
           " netns " + hub_);
      must("ip -n " + hub_ + " link set " + port + " master br0 && ip -n " + hub_ + " link set " + port +
           " up");
      must("ip -n " + ns(i) + " addr add " + address(i) + "/24 dev " + kInterface + " && ip -n " + ns(i) +
           " link set " + kInterface + " up && ip -n " + ns(i) + " link set lo up");
    }
  }
  // Kills whatever still runs in the hosts, then deletes the namespaces (their veths go with
  // them). Never throws.
  void destroy() noexcept {
    for (const auto& name : created_) {
      run("for p in $(ip netns pids " + name +
              " 2>/dev/null); do kill -9 $p; done; sleep 0.2; ip netns del " + name,
          60);
    }
    created_.clear();
  }

  std::string hub_;
  std::vector<std::string> names_;
  std::vector<std::string> created_;
};

// How one node ended: its exit code (-1: still running when the test gave up on it), seconds
// from the fault (or from the start without one) to its end, and what it printed.
struct NodeEnd {
  int exit_code = -1;
  double seconds = -1;
  std::string out, err;
  bool ended() const { return exit_code >= 0; }
};

struct Fault {
  // Shell condition the fault waits for, e.g. "[ -f .../last.ckpt ]"; $NODES/errI is node I's
  // stderr so far.
  std::string wait_for;
  std::string action;  // the shell command that makes it
};

std::string describe(const std::vector<NodeEnd>& nodes) {
  std::ostringstream text;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    text << "---- node " << i << ": exit " << nodes[i].exit_code << " after " << nodes[i].seconds
         << " s\nstdout:\n"
         << nodes[i].out << "stderr:\n"
         << nodes[i].err;
  }
  return text.str();
}

// Starts commands[i] on host i (an empty command starts nothing there), makes the fault once its
// condition holds, and waits for every node (at most `limit_s` seconds in all).
std::vector<NodeEnd> run_nodes(const Hosts& hosts, const fs::path& dir,
                               const std::vector<std::string>& commands,
                               const std::optional<Fault>& fault = std::nullopt, int limit_s = 240) {
  // A fresh folder per call for the nodes' output and end times.
  static std::atomic<int> calls{0};
  const fs::path nodes_dir = dir / ("nodes" + std::to_string(calls++));
  fs::create_directories(nodes_dir);
  const std::string d = quote(nodes_dir.string());
  std::string script = "NODES=" + d + "\ndate +%s%N > " + d + "/t_start\n";
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (commands[i].empty()) continue;
    const std::string n = std::to_string(i);
    script += "( " + hosts.exec(static_cast<int>(i)) + commands[i] + " >" + d + "/out" + n + " 2>" + d +
              "/err" + n + "; echo \"$? $(date +%s%N)\" > " + d + "/end" + n + " ) &\n";
  }
  if (fault) {
    script += "for i in $(seq 2400); do if " + fault->wait_for + "; then break; fi; sleep 0.05; done\n" +
              fault->action + "\ndate +%s%N > " + d + "/t_fault\n";
  }
  script += "wait\n";
  run(script, limit_s);
  auto read_ns = [](const fs::path& path) -> std::optional<long long> {
    std::ifstream in(path);
    long long value = 0;
    if (in >> value) return value;
    return std::nullopt;
  };
  const auto t0 = read_ns(nodes_dir / (fault ? "t_fault" : "t_start"));
  std::vector<NodeEnd> nodes(commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i) {
    if (commands[i].empty()) continue;
    const std::string n = std::to_string(i);
    NodeEnd& node = nodes[i];
    if (fs::exists(nodes_dir / ("out" + n))) node.out = read_file(nodes_dir / ("out" + n));
    if (fs::exists(nodes_dir / ("err" + n))) node.err = read_file(nodes_dir / ("err" + n));
    std::ifstream end(nodes_dir / ("end" + n));
    int code = 0;
    long long t = 0;
    if (end >> code >> t) {
      node.exit_code = code;
      if (t0) node.seconds = static_cast<double>(t - *t0) / 1e9;
    }
  }
  return nodes;
}

// One line on stdout per fault: how long each node took to end (docs/benchmarks.md quotes it).
void print_times(const std::string& fault, const std::vector<NodeEnd>& nodes) {
  std::ostringstream line;
  line << "[multihost] " << fault << ":";
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].out.empty() && nodes[i].err.empty() && !nodes[i].ended()) continue;  // not started
    line << " node " << i << " exit " << nodes[i].exit_code << " after " << nodes[i].seconds << " s;";
  }
  std::cout << line.str() << std::endl;
}

// `oml-train ...` on node `node_rank` of `nnodes`, `per_node` ranks each, store on host 0.
std::string node_command(const std::string& command, int nnodes, int node_rank, int per_node,
                         const std::string& args) {
  return quote(command_path(command)) + " --nproc-per-node " + std::to_string(per_node) + " --nnodes " +
         std::to_string(nnodes) + " --node-rank " + std::to_string(node_rank) + " --master-addr " +
         Hosts::address(0) + " --master-port " + std::to_string(kPort) + " " + args;
}

std::vector<std::string> every_node(const std::string& command, int nnodes, int per_node,
                                    const std::string& args) {
  std::vector<std::string> commands;
  for (int i = 0; i < nnodes; ++i) commands.push_back(node_command(command, nnodes, i, per_node, args));
  return commands;
}

// A training run long enough for a fault to land mid-way: 200 short epochs, validation only at
// the end (or every epoch with `validate_every_epoch`), ddp.timeout_s = 10.
// 200 short epochs, validation at the end only, last.ckpt after every epoch (asked for: by default
// it waits for a validation).
std::string long_training(const TempDir& dir, const std::string& extra = "") {
  write_file(dir / "train.yaml",
             train_config(dir / "logs", "ddp: {timeout_s: 10}\nevery_n_epochs: 1\n" + extra));
  return "--config " + quote((dir / "train.yaml").string()) + " --set max_epochs=200 --set valid_period=1000";
}

std::string last_ckpt(const TempDir& dir) {
  return (dir / "logs" / "run" / "checkpoints" / "last.ckpt").string();
}

void check_last_ckpt_loads(const TempDir& dir) {
  const auto last = oml::io::load_checkpoint(last_ckpt(dir));
  CHECK(last.epoch >= 1);
  CHECK_FALSE(last.state_dict.empty());
}

constexpr double kTimeoutS = 10;

// Every node ended, with exit code 1, within ddp.timeout_s + 30 s of the fault.
void check_every_node_failed_in_time(const std::vector<NodeEnd>& nodes) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    INFO("node " << i);
    CHECK(nodes[i].ended());
    CHECK(nodes[i].exit_code == 1);
    CHECK(nodes[i].seconds >= 0);
    CHECK(nodes[i].seconds <= kTimeoutS + 30);
  }
}

}  // namespace

TEST_CASE("2 nodes x 1 and x 2 ranks train to the validation metrics of one node with the same world size",
          "[multihost][ddp][integration]") {
  OML_REQUIRE_NAMESPACES();
  for (const int per_node : {1, 2}) {
    INFO(per_node << " rank(s) per node");
    TempDir dir;
    write_file(dir / "train.yaml", train_config(dir / "logs", "ddp: {timeout_s: 60}\n"));
    const std::string config = "--config " + quote((dir / "train.yaml").string());
    const auto one = run_oml("oml-train", "--nproc-per-node " + std::to_string(2 * per_node) + " " + config +
                                              " --set run_name=one");
    INFO(one.err);
    REQUIRE(one.exit_code == 0);

    Hosts hosts(2);
    const auto nodes =
        run_nodes(hosts, dir.path(), every_node("oml-train", 2, per_node, config + " --set run_name=two"));
    INFO(describe(nodes));
    REQUIRE(nodes[0].exit_code == 0);
    REQUIRE(nodes[1].exit_code == 0);
    // Node 1's ranks are global ranks per_node.. 2*per_node-1.
    CHECK_THAT(nodes[1].out + nodes[1].err, Contains("[rank " + std::to_string(per_node) + "]"));
    const fs::path a = dir / "logs" / "one", b = dir / "logs" / "two";
    check_same_training_log(a / "train.jsonl", b / "train.jsonl", "step");
    REQUIRE(read_jsonl(b / "metrics.jsonl").size() == read_jsonl(a / "metrics.jsonl").size());
    check_same_metrics(best_metrics(a), best_metrics(b));
    CHECK(hosts.wait_until_empty(5).empty());
  }
}

TEST_CASE("oml-validate and oml-predict across 2 nodes equal one process", "[multihost][ddp][integration]") {
  OML_REQUIRE_NAMESPACES();
  TempDir dir;
  write_file(dir / "train.yaml", train_config(dir / "logs"));
  REQUIRE(run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()) + " --set max_epochs=1")
              .exit_code == 0);
  write_file(dir / "validate.yaml",
             validate_config(dir / "logs", dir / "logs" / "run" / "checkpoints" / "last.ckpt") +
                 "ddp: {timeout_s: 60}\n");
  const std::string config = "--config " + quote((dir / "validate.yaml").string());
  const auto one = run_oml("oml-validate", config + " --set run_name=one");
  INFO(one.err);
  REQUIRE(one.exit_code == 0);
  const std::string predict = config + " --set transforms_predict.name=norm --set save_dir=";
  const auto p1 = run_oml("oml-predict", predict + quote((dir / "p1").string()));
  INFO(p1.err);
  REQUIRE(p1.exit_code == 0);

  Hosts hosts(2);
  auto nodes = run_nodes(hosts, dir.path(), every_node("oml-validate", 2, 1, config + " --set run_name=two"));
  INFO(describe(nodes));
  REQUIRE(nodes[0].exit_code == 0);
  REQUIRE(nodes[1].exit_code == 0);
  check_same_metrics(metrics_json(dir / "logs" / "one" / "metrics.json"),
                     metrics_json(dir / "logs" / "two" / "metrics.json"));

  nodes =
      run_nodes(hosts, dir.path(), every_node("oml-predict", 2, 1, predict + quote((dir / "p2").string())));
  INFO(describe(nodes));
  REQUIRE(nodes[0].exit_code == 0);
  REQUIRE(nodes[1].exit_code == 0);
  const at::Tensor e1 = oml::io::read_npy_matrix(dir / "p1" / "embeddings.npy");
  const at::Tensor e2 = oml::io::read_npy_matrix(dir / "p2" / "embeddings.npy");
  REQUIRE(e1.sizes() == e2.sizes());
  CHECK(max_abs_diff(e1, e2) < 1e-5);
  CHECK(read_file(dir / "p1" / "embeddings.csv") == read_file(dir / "p2" / "embeddings.csv"));
  CHECK(hosts.wait_until_empty(5).empty());
}

TEST_CASE(
    "A link cut during training ends every node within ddp.timeout_s + 30 s, naming the cut-off machine",
    "[multihost][ddp][integration]") {
  OML_REQUIRE_NAMESPACES();
  TempDir dir;
  Hosts hosts(2);
  const auto nodes = run_nodes(hosts, dir.path(), every_node("oml-train", 2, 1, long_training(dir)),
                               Fault{"[ -f " + quote(last_ckpt(dir)) + " ]", hosts.cut_link(1)}, 150);
  INFO(describe(nodes));
  print_times("link cut during training", nodes);
  check_every_node_failed_in_time(nodes);
  // Node 0 still has the store: it names the machine whose heartbeat stopped.
  CHECK_THAT(nodes[0].err,
             Contains("[rank 0] oml-train: distributed error: rank 0: ") &&
                 Contains(" timed out after 10 s (ddp.timeout_s): node 1 (rank 1) stopped answering"));
  // Node 1 lost the store with the link.
  CHECK_THAT(nodes[1].err,
             Contains("[rank 1] oml-train: distributed error: rank 1: ") &&
                 Contains("and the rendezvous store at 192.0.2.1:29500 (hosted by node 0's launcher) "
                          "does not answer: node 0 is down or unreachable from this machine"));
  CHECK_THAT(nodes[1].err, Contains("the rendezvous store no longer answers this machine"));
  CHECK(hosts.wait_until_empty(5).empty());
  check_last_ckpt_loads(dir);
}

TEST_CASE("The store host killed with SIGKILL ends the other 2 of 3 nodes, naming the lost store",
          "[multihost][ddp][integration]") {
  OML_REQUIRE_NAMESPACES();
  TempDir dir;
  Hosts hosts(3);
  const auto nodes = run_nodes(hosts, dir.path(), every_node("oml-train", 3, 1, long_training(dir)),
                               Fault{"[ -f " + quote(last_ckpt(dir)) + " ]", hosts.kill_host(0)}, 150);
  INFO(describe(nodes));
  print_times("store host SIGKILLed", nodes);
  CHECK(nodes[0].exit_code == 128 + 9);
  for (int i : {1, 2}) {
    INFO("node " << i);
    CHECK(nodes[i].exit_code == 1);
    CHECK(nodes[i].seconds <= kTimeoutS + 30);
    CHECK_THAT(nodes[i].err,
               Contains("[rank " + std::to_string(i) + "] oml-train: distributed error: rank " +
                        std::to_string(i) + ": ") &&
                   Contains("the rendezvous store at 192.0.2.1:29500 (hosted by node 0's launcher) "
                            "does not answer: node 0 is down or unreachable from this machine"));
  }
  CHECK(hosts.wait_until_empty(5).empty());
  check_last_ckpt_loads(dir);
}

TEST_CASE("A node that never starts makes the rendezvous time out naming the missing node",
          "[multihost][ddp][integration]") {
  OML_REQUIRE_NAMESPACES();
  TempDir dir;
  Hosts hosts(2);
  auto commands = every_node("oml-train", 2, 2, long_training(dir));
  commands[1].clear();  // node 1 never starts
  const auto nodes = run_nodes(hosts, dir.path(), commands, std::nullopt, 150);
  INFO(describe(nodes));
  print_times("node never started", nodes);
  CHECK(nodes[0].exit_code == 1);
  CHECK(nodes[0].seconds <= kTimeoutS + 30);
  for (int rank : {0, 1}) {
    CHECK_THAT(nodes[0].err,
               Contains("[rank " + std::to_string(rank) + "] oml-train: distributed error: rank " +
                        std::to_string(rank) + ": rendezvous of 4 ranks through 192.0.2.1:29500 failed") &&
                   Contains("node 1 (ranks 2, 3) never arrived"));
  }
  CHECK(hosts.wait_until_empty(5).empty());
}

TEST_CASE(
    "A link cut during validation ends every node in sync_dicts' all_gather, naming the cut-off machine",
    "[multihost][ddp][integration]") {
  OML_REQUIRE_NAMESPACES();
  TempDir dir;
  Hosts hosts(2);
  // Validation every epoch. Rank 0 pauses before each sync_dicts merge (common/failpoint.h; a
  // validation has two), and the link goes down during epoch 2's first pause, once epoch 1's
  // last.ckpt is written, so the next collective is sync_dicts' all_gather. (Cut on the progress line of
  // epoch 2 instead, the link sometimes went down during the BatchNorm buffers' broadcast just before it.)
  const std::string args = long_training(dir) + " --set valid_period=1 --set bs_val=1";
  auto commands = every_node("oml-train", 2, 1, args);
  commands[0] = "env OML_FAILPOINTS=sync_dicts=pause:3 " + commands[0];
  const auto nodes =
      run_nodes(hosts, dir.path(), commands,
                Fault{"[ \"$(grep -c 'failpoint sync_dicts' $NODES/err0 2>/dev/null)\" -ge 3 ] 2>/dev/null",
                      hosts.cut_link(1)},
                150);
  INFO(describe(nodes));
  print_times("link cut during validation", nodes);
  check_every_node_failed_in_time(nodes);
  CHECK_THAT(
      nodes[0].err,
      Contains(
          "[rank 0] oml-train: distributed error: rank 0: all_gather timed out after 10 s (ddp.timeout_s): "
          "node 1 (rank 1) stopped answering"));
  CHECK_THAT(nodes[1].err,
             Contains("[rank 1] oml-train: distributed error: rank 1: all_gather timed out after 10 s "
                      "(ddp.timeout_s) and the rendezvous store at 192.0.2.1:29500"));
  CHECK(hosts.wait_until_empty(5).empty());
  check_last_ckpt_loads(dir);
}

TEST_CASE(
    "A link cut while node 0 writes a checkpoint ends every node, last.ckpt is whole and no temporary is "
    "left",
    "[multihost][ddp][integration]") {
  OML_REQUIRE_NAMESPACES();
  TempDir dir;
  Hosts hosts(2);
  // Rank 0 pauses inside every write of last.ckpt, after its temporary file is complete and before
  // the rename (common/failpoint.h); the link goes down during the second write, so a first
  // last.ckpt exists and is being replaced.
  auto commands = every_node("oml-train", 2, 1, long_training(dir));
  commands[0] = "env OML_FAILPOINTS=before_rename:last.ckpt=pause:4 " + commands[0];
  const auto nodes = run_nodes(
      hosts, dir.path(), commands,
      Fault{
          "[ \"$(grep -c 'failpoint before_rename:last.ckpt' $NODES/err0 2>/dev/null)\" -ge 2 ] 2>/dev/null",
          hosts.cut_link(1)},
      150);
  INFO(describe(nodes));
  print_times("link cut during a checkpoint write", nodes);
  check_every_node_failed_in_time(nodes);
  CHECK_THAT(nodes[0].err, Contains("failpoint before_rename:last.ckpt: pausing 4 s") &&
                               Contains("[rank 0] oml-train: distributed error: rank 0: ") &&
                               Contains("node 1 (rank 1) stopped answering"));
  CHECK_THAT(nodes[1].err, Contains("[rank 1] oml-train: distributed error: rank 1: ") &&
                               Contains("does not answer: node 0 is down or unreachable from this machine"));
  CHECK(hosts.wait_until_empty(5).empty());
  // The paused write was completed by its rename: epoch 2's checkpoint, whole, and nothing
  // half-written beside it.
  check_last_ckpt_loads(dir);
  CHECK(oml::io::load_checkpoint(last_ckpt(dir)).epoch >= 2);
  for (const auto& entry : fs::directory_iterator(fs::path(last_ckpt(dir)).parent_path())) {
    INFO(entry.path());
    CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);
  }
}

TEST_CASE("A node started with a different config, dataframe or world size is detected at the start (exit 2)",
          "[multihost][ddp][integration]") {
  OML_REQUIRE_NAMESPACES();
  TempDir dir;
  Hosts hosts(2);
  const std::string args = long_training(dir);
  SECTION("a different config: every rank stops with a config error naming the line") {
    auto commands = every_node("oml-train", 2, 1, args);
    commands[1] += " --set max_epochs=3";
    const auto nodes = run_nodes(hosts, dir.path(), commands, std::nullopt, 150);
    INFO(describe(nodes));
    print_times("different config", nodes);
    for (int i : {0, 1}) {
      CHECK(nodes[i].exit_code == 2);
      CHECK(nodes[i].seconds <= kTimeoutS + 30);
      CHECK_THAT(nodes[i].err,
                 Contains("[rank " + std::to_string(i) +
                          "] oml-train: config error: the resolved config of rank 1 differs from rank "
                          "0's (every rank, on every machine, must run the same config): line ") &&
                     Contains(" is `max_epochs: 3` on rank 1 but `max_epochs: 200` on rank 0"));
    }
  }
  SECTION("another plugin loaded (--plugin is no config key): every rank stops naming it") {
    auto commands = every_node("oml-train", 2, 1, args);
    commands[1] += " --plugin " + quote(oml::test::fixture_path("libgood_plugin.so"));
    const auto nodes = run_nodes(hosts, dir.path(), commands, std::nullopt, 150);
    INFO(describe(nodes));
    for (int i : {0, 1}) {
      CHECK(nodes[i].exit_code == 2);
      CHECK_THAT(nodes[i].err, Contains("is `# plugins loaded: good_fixture") &&
                                   Contains("on rank 1 but `# plugins loaded: none` on rank 0"));
    }
  }
  SECTION("a different dataframe at the same path: every rank stops with a data error naming it") {
    // Node 1's machine has an edited copy (one label changed) where node 0's has the original:
    // its own mount namespace shows the copy at the same path.
    const fs::path df = oml::test::fashion_mnist_subset() / "df.csv";
    std::string text = read_file(df);
    const std::size_t row = text.find('\n') + 1;
    const std::size_t comma = text.find(',', row);
    const std::string label = text.substr(row, comma - row) == "0" ? "1" : "0";
    text.replace(row, comma - row, label);  // the first row's label (the dataframe's first column)
    REQUIRE(text != read_file(df));
    write_file(dir / "edited.csv", text);
    auto commands = every_node("oml-train", 2, 1, args);
    commands[1] = "unshare -m sh -c " + quote("mount --bind " + quote((dir / "edited.csv").string()) + " " +
                                              quote(df.string()) + " && exec " + commands[1]);
    const auto nodes = run_nodes(hosts, dir.path(), commands, std::nullopt, 150);
    INFO(describe(nodes));
    print_times("different dataframe", nodes);
    for (int i : {0, 1}) {
      CHECK(nodes[i].exit_code == 2);
      CHECK(nodes[i].seconds <= kTimeoutS + 30);
      CHECK_THAT(nodes[i].err, Contains("[rank " + std::to_string(i) + "] oml-train: data error: " +
                                        df.string() + " holds other rows on rank 1 than on rank 0") &&
                                   Contains("every machine must read the same dataframe"));
    }
    CHECK(read_file(df) != text);  // the original, untouched outside node 1's namespace
  }
  SECTION("a different world size: that machine starts nothing, the others name it") {
    auto commands = every_node("oml-train", 2, 1, args);
    commands[1] = node_command("oml-train", 2, 1, 2, args);
    const auto nodes = run_nodes(hosts, dir.path(), commands, std::nullopt, 150);
    INFO(describe(nodes));
    print_times("different world size", nodes);
    CHECK(nodes[1].exit_code == 2);
    CHECK_THAT(nodes[1].err,
               Contains("oml-train: config error: launcher: node 1 was started for a world size of 4 "
                        "(--nnodes 2 x --nproc-per-node 2) but node 0 for 2 (--nnodes 2 x "
                        "--nproc-per-node 1); every machine must be started with the same --nnodes "
                        "and --nproc-per-node"));
    CHECK(nodes[0].exit_code == 1);
    CHECK(nodes[0].seconds <= kTimeoutS + 30);
    CHECK_THAT(nodes[0].err,
               Contains("[rank 0] oml-train: distributed error: rank 0: rendezvous of 2 ranks through "
                        "192.0.2.1:29500 failed: ") &&
                   Contains("node 1 (rank 1) never arrived: rank 2 did not start: node 1 was started "
                            "for a world size of 4"));
  }
  CHECK(hosts.wait_until_empty(5).empty());
}

}  // namespace multihost_tests
