// Config layer: typed reading, error places, overrides, interpolation, round trip.
#include <cmath>
#include <limits>

#include "oml/config/document.h"
#include "oml/config/error_list.h"
#include "oml/config/reader.h"
#include "oml/config/run_config.h"
#include "oml/metrics/metric_table.h"
#include "oml/registry/registries.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"

namespace config_tests {

using Catch::Matchers::Contains;
using oml::ConfigError;
using oml::UsageError;
using oml::config::Document;
using oml::config::MapReader;

namespace {
struct BalanceLikeOptions {
  int64_t n_labels = 0;
  int64_t n_instances = 4;
  std::optional<int64_t> epoch_size;
  std::vector<double> weights;
  std::string note = "none";
  bool flag = false;
};

BalanceLikeOptions read_options(const oml::config::Node& node) {
  BalanceLikeOptions o;
  MapReader r(node, "sampler 'balance' args");
  r.required("n_labels", o.n_labels)
      .optional("n_instances", o.n_instances)
      .optional("epoch_size", o.epoch_size)
      .optional("weights", o.weights)
      .optional("note", o.note)
      .optional("flag", o.flag);
  r.finish();
  return o;
}
}  // namespace

TEST_CASE("Typed options are read with defaults for absent keys", "[config]") {
  const auto doc =
      Document::from_string("args:\n  n_labels: 8\n  weights: [0.5, 1]\n  flag: yes\n", "x.yaml");
  const auto o = read_options(doc.root()["args"]);
  CHECK(o.n_labels == 8);
  CHECK(o.n_instances == 4);
  CHECK_FALSE(o.epoch_size.has_value());
  CHECK(o.weights == std::vector<double>{0.5, 1.0});
  CHECK(o.note == "none");
  CHECK(o.flag);
}

TEST_CASE("An unknown key names file, line, column and the accepted keys", "[config]") {
  const auto doc = Document::from_string("args:\n  n_labels: 8\n  n_instance: 4\n", "cfg.yaml");
  CHECK_THROWS_WITH(read_options(doc.root()["args"]),
                    Contains("cfg.yaml:3:3") && Contains("unknown key 'n_instance'") &&
                        Contains("did you mean 'n_instances'") && Contains("accepted keys:"));
}

TEST_CASE("A wrong type names the place and what was expected", "[config]") {
  const auto doc = Document::from_string("args:\n  n_labels: eight\n", "cfg.yaml");
  CHECK_THROWS_WITH(read_options(doc.root()["args"]), Contains("cfg.yaml:2:13") &&
                                                          Contains("args.n_labels") &&
                                                          Contains("expected an integer, got 'eight'"));
  const auto doc2 = Document::from_string("args:\n  n_labels: 1\n  weights: 3\n", "cfg.yaml");
  CHECK_THROWS_WITH(read_options(doc2.root()["args"]),
                    Contains("args.weights") && Contains("expected a list"));
  const auto doc3 = Document::from_string("args:\n  n_labels: 1\n  flag: maybe\n", "cfg.yaml");
  CHECK_THROWS_WITH(read_options(doc3.root()["args"]), Contains("expected true or false, got 'maybe'"));
}

TEST_CASE("Scalars read as PyYAML (so OmegaConf) reads them, and a leading zero is refused", "[config]") {
  const auto value = [](const std::string& yaml) {
    static std::vector<Document> keep;  // nodes refer to their document
    keep.push_back(Document::from_string("v: " + yaml + "\n", "s.yaml"));
    return keep.back().root()["v"];
  };
  // YAML 1.1's integers: underscores, hex, binary, a sign.
  CHECK(value("1_000").as<int64_t>() == 1000);
  CHECK(value("0x1F").as<int64_t>() == 31);
  CHECK(value("0b101").as<int64_t>() == 5);
  CHECK(value("-0x10").as<int64_t>() == -16);
  CHECK(value("+7").as<int64_t>() == 7);
  CHECK(value("0").as<int64_t>() == 0);
  CHECK(value("00").as<int64_t>() == 0);
  CHECK(value("-9223372036854775808").as<int64_t>() == std::numeric_limits<int64_t>::min());
  CHECK_THROWS_WITH(value("9223372036854775808").as<int64_t>(), Contains("is out of range"));
  CHECK_THROWS_WITH(value("0x").as<int64_t>(), Contains("expected an integer, got '0x'"));
  CHECK_THROWS_WITH(value("1.5").as<int64_t>(), Contains("expected an integer, got '1.5'"));
  CHECK_THROWS_WITH(value("_1").as<int64_t>(), Contains("expected an integer"));
  // 010 is 8 to OmegaConf (YAML 1.1's octal) and 10 to YAML 1.2: refused, saying both.
  CHECK_THROWS_WITH(value("010").as<int64_t>(), Contains("s.yaml:1:4") &&
                                                    Contains("got '010', an integer with a leading zero") &&
                                                    Contains("as the octal number 8 and YAML 1.2 as 10"));
  CHECK_THROWS_WITH(value("-09").as<int64_t>(), Contains("reads as text and YAML 1.2 as -9"));
  CHECK_THROWS_WITH(value("-010").as<int64_t>(), Contains("as the octal number -8 and YAML 1.2 as -10"));
  CHECK_THROWS_WITH(value("0_5").as<int64_t>(), Contains("YAML 1.2 as text"));
  CHECK_THROWS_WITH(value("010").as<double>(), Contains("an integer with a leading zero"));
  // Numbers: integer forms as above, plain decimals past int64 and floats by strtod.
  CHECK(value("1_000").as<double>() == 1000.0);
  CHECK(value("0x10").as<double>() == 16.0);
  CHECK(value("100000000000000000000").as<double>() == 1e20);
  CHECK(value("0.5").as<double>() == 0.5);
  CHECK(value("1e-3").as<double>() == 1e-3);
  CHECK(std::isinf(value(".INF").as<double>()));
  CHECK(std::isinf(value("+.inf").as<double>()));
  // YAML 1.1's booleans in every case PyYAML accepts.
  for (const std::string yes : {"yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE"})
    CHECK(value(yes).as<bool>());
  for (const std::string no : {"no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE"})
    CHECK_FALSE(value(no).as<bool>());
}

TEST_CASE("The run directory's name is one folder's, and loggers write inside the run directory",
          "[config]") {
  oml::cli::register_builtins();
  const auto error = [](const std::string& yaml) -> std::string {
    try {
      const auto document = Document::from_string(yaml, "run.yaml");
      oml::cli::Invocation invocation;
      invocation.command = "oml-train";
      invocation.load_config(document);
    } catch (const oml::Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  for (const std::string name : {"a/b", "../x", "/abs", "..", "\"a\\nb\""}) {  // the last: a newline
    INFO(name);
    CHECK_THAT(error("run_name: " + name + "\n"),
               Contains("run.yaml:1:") && Contains("run_name") && Contains("expected one folder's name"));
  }
  CHECK_THAT(error("run_name: " + std::string(300, 'r') + "\n"), Contains("at most 255 bytes"));
  CHECK_THAT(error("logs_folder: a/b\n"),
             Contains("logs_folder") && Contains("put parent folders in logs_root"));
  CHECK(error("run_name: exp-1.2_final\n") == "(no error)");
  // Lightning's save_dir inside the run directory ("." is OML's), never outside it: a resume cuts
  // the event files it finds there back to its checkpoint.
  CHECK(error("logger: {name: tensorboard, args: {save_dir: .}}\n") == "(no error)");
  for (const std::string dir : {"..", "/tmp/shared", "tb/../../x"}) {
    CHECK_THAT(error("logger: {name: tensorboard, args: {save_dir: '" + dir + "'}}\n"),
               Contains("logger.args.save_dir") && Contains("must be a folder inside the run directory"));
    CHECK_THAT(error("logger: {name: wandb, args: {save_dir: '" + dir + "'}}\n"),
               Contains("logger.args.save_dir") && Contains("must be a folder inside the run directory"));
  }
  CHECK_THAT(error("logger: {name: wandb, args: {id: a/b}}\n"),
             Contains("logger.args.id") && Contains("W&B's rule"));
  CHECK_THAT(error("logger: {name: wandb, args: {id: " + std::string(65, 'i') + "}}\n"),
             Contains("at most 64 characters"));
  CHECK(error("logger: {name: wandb, args: {id: run-1_a}}\n") == "(no error)");
}

TEST_CASE("A missing required key is an error naming the map", "[config]") {
  const auto doc = Document::from_string("args:\n  n_instances: 4\n", "cfg.yaml");
  CHECK_THROWS_WITH(read_options(doc.root()["args"]),
                    Contains("cfg.yaml:2:3") && Contains("missing required key 'n_labels'"));
}

TEST_CASE("Malformed YAML is a ConfigError with line and column", "[config]") {
  CHECK_THROWS_AS(Document::from_string("a: [1, 2\nb: 3\n", "bad.yaml"), ConfigError);
  CHECK_THROWS_WITH(Document::from_string("a: [1, 2\nb: 3\n", "bad.yaml"),
                    Contains("bad.yaml:") && Contains("malformed YAML"));
  CHECK_THROWS_WITH(Document::from_string("- 1\n- 2\n", "list.yaml"), Contains("expected a mapping"));
}

TEST_CASE("A missing config file is a ConfigError naming it", "[config]") {
  CHECK_THROWS_WITH(Document::from_file("/nonexistent/cfg.yaml"),
                    Contains("cannot open config file '/nonexistent/cfg.yaml'"));
}

TEST_CASE("Overrides keep YAML types and create intermediate maps", "[config]") {
  const auto doc = Document::from_string(
      "sampler:\n  name: balance\n  args: {n_labels: 8}\n", "c.yaml",
      {"sampler.args.n_labels=4", "sampler.args.extra=[1, 2]", "new.deep.key=true", "seed=7"});
  const auto root = doc.root();
  CHECK(root["sampler"]["args"]["n_labels"].as<int64_t>() == 4);
  CHECK(root["sampler"]["args"]["extra"].as<std::vector<int>>() == std::vector<int>{1, 2});
  CHECK(root["new"]["deep"]["key"].as<bool>());
  CHECK(root["seed"].as<int>() == 7);
  // Errors in overridden values point at the --set flag.
  CHECK_THROWS_WITH(Document::from_string("a: 1\n", "c.yaml", {"a=xyz"}).root()["a"].as<int>(),
                    Contains("--set a") && Contains("expected an integer"));
}

TEST_CASE("A folder given as the config file says so", "[config]") {
  oml::test::TempDir dir;
  CHECK_THROWS_WITH(Document::from_file(dir.path().string()), Contains("is a folder"));
}

TEST_CASE("Malformed overrides are usage errors", "[config]") {
  CHECK_THROWS_AS(Document::from_string("a: 1\n", "c.yaml", {"novalue"}), UsageError);
  CHECK_THROWS_WITH(Document::from_string("a: 1\n", "c.yaml", {"a.b=3"}), Contains("not a mapping"));
  CHECK_THROWS_WITH(Document::from_string("a: 1\n", "c.yaml", {"b=[1,"}), Contains("not valid YAML"));
  CHECK_THROWS_WITH(Document::from_string("a: 1\n", "c.yaml", {"a..b=1"}), Contains("empty key"));
  // A list index too large for any integer type is past the end (was std::out_of_range, exit 1).
  const std::string huge = "18446744073709551616";
  CHECK_THROWS_WITH(Document::from_string("l: [1]\n", "c.yaml", {"l." + huge + "=2"}),
                    Contains("index " + huge + " is past the end of the list"));
  CHECK_THROWS_WITH(Document::from_string("l: [{a: 1}]\n", "c.yaml", {"l." + huge + ".a=2"}),
                    Contains("past the end of the list"));
  CHECK_THROWS_WITH(Document::from_string("l: [1]\nx: ${l." + huge + "}\n", "c.yaml"),
                    Contains("refers to a key that does not exist"));
  // A list is indexed by number; `l.-1` once turned the list into a mapping.
  CHECK_THROWS_WITH(Document::from_string("l: [1, 2]\n", "c.yaml", {"l.-1=3"}),
                    Contains("--set l.-1") && Contains("'l' is a list of 2 items") && Contains("'-1'"));
  // A path longer than any config can nest (5000 parts took seconds).
  std::string long_path = "a";
  for (int i = 0; i < 5000; ++i) long_path += ".a";
  CHECK_THROWS_WITH(Document::from_string("a: 1\n", "c.yaml", {long_path + "=1"}),
                    Contains("5001 parts") && Contains("at most 64 levels"));
}

TEST_CASE("A list item set by --set is reported at the flag, not in the file", "[config]") {
  const auto listed = Document::from_string("seed: 1\nk: [1, 2]\n", "c.yaml", {"k=[1, x]"});
  CHECK_THROWS_WITH(listed.root()["k"].as<std::vector<int>>(),
                    Contains("--set k: k[1]") && !Contains("c.yaml"));
  const auto item = Document::from_string("seed: 1\nk: [1, 2]\n", "c.yaml", {"k.0=x"});
  CHECK_THROWS_WITH(item.root()["k"].as<std::vector<int>>(),
                    Contains("--set k.0: k[0]") && !Contains("c.yaml"));
  CHECK(item.root()["k"][1].where() == "c.yaml:2:8");  // the file's own item keeps its line
}

TEST_CASE("Interpolation splices scalars and copies whole nodes", "[config]") {
  const auto doc = Document::from_string(
      "root: /data\nname: fm\npath: ${root}/${name}/df.csv\nbs: 32\nbs_val: ${bs}\n"
      "base: {name: balance, args: {n_labels: 8}}\nsampler: ${base}\nchain: ${path}\n",
      "c.yaml");
  const auto root = doc.root();
  CHECK(root["path"].as<std::string>() == "/data/fm/df.csv");
  CHECK(root["bs_val"].as<int>() == 32);
  CHECK(root["sampler"]["args"]["n_labels"].as<int>() == 8);
  CHECK(root["chain"].as<std::string>() == "/data/fm/df.csv");
}

TEST_CASE("Interpolation sees overridden values", "[config]") {
  const auto doc = Document::from_string("bs: 32\nbs_val: ${bs}\n", "c.yaml", {"bs=64"});
  CHECK(doc.root()["bs_val"].as<int>() == 64);
}

TEST_CASE("${now:FORMAT} is the run's start time, formatted as Hydra's now resolver does", "[config]") {
  const std::time_t start = oml::config::run_start_time();
  std::tm local{};
  localtime_r(&start, &local);
  char expected[64];
  std::strftime(expected, sizeof(expected), "%Y-%m-%d_%H-%M-%S", &local);
  const auto doc =
      Document::from_string("postfix: run_${now:%Y-%m-%d_%H-%M-%S}\nlogs_root: logs/${now:%s}\n");
  CHECK(doc.root()["postfix"].as<std::string>() == std::string("run_") + expected);
  CHECK(doc.root()["logs_root"].as<std::string>() == "logs/" + std::to_string(start));
  CHECK(oml::config::run_start_time() == start);  // once per run
  CHECK_THROWS_WITH(Document::from_string("postfix: ${now:}\n", "c.yaml"),
                    Contains("c.yaml:1:10") && Contains("needs a strftime format"));
}

TEST_CASE("Bad interpolations are errors naming the key", "[config]") {
  CHECK_THROWS_WITH(Document::from_string("a: ${nope.key}\n", "c.yaml"),
                    Contains("c.yaml:1:4") && Contains("${nope.key} refers to a key that does not exist"));
  CHECK_THROWS_WITH(Document::from_string("a: ${b}\nb: ${a}\n", "c.yaml"), Contains("circular"));
  CHECK_THROWS_WITH(Document::from_string("m: {x: 1}\na: pre-${m}\n", "c.yaml"), Contains("not a scalar"));
}

TEST_CASE(
    "Interpolation is bounded: long chains, doubling text and doubling copies are errors, wide maps fast",
    "[config]") {
  // A chain of 10,000 references overflowed the stack (SIGSEGV); 100 links are the limit.
  auto chain = [](int links) {
    std::string text;
    for (int i = 0; i < links; ++i) text += "c" + std::to_string(i) + ": ${c" + std::to_string(i + 1) + "}\n";
    return text + "c" + std::to_string(links) + ": end\n";
  };
  const auto ok = Document::from_string(chain(99), "c.yaml");
  CHECK(ok.root()["c0"].as<std::string>() == "end");
  CHECK(ok.root()["c50"].as<std::string>() == "end");
  CHECK_THROWS_WITH(Document::from_string(chain(10000), "c.yaml"), Contains("c.yaml:") &&
                                                                       Contains("chain more than 100 deep") &&
                                                                       Contains("from c0 through c1"));
  // Each line doubles the text (2^40 characters at the end) or the copied list (2^40 values).
  std::string text = "k0: ab\n";
  std::string list = "k0: [a, b]\n";
  for (int i = 1; i <= 40; ++i) {
    const std::string prev = "${k" + std::to_string(i - 1) + "}";
    text += "k" + std::to_string(i) + ": " + prev + prev + "\n";
    list += "k" + std::to_string(i) + ": ['" + prev + "', '" + prev + "']\n";
  }
  CHECK_THROWS_WITH(Document::from_string(text, "c.yaml"), Contains("c.yaml:") && Contains("MiB of text"));
  CHECK_THROWS_WITH(Document::from_string(list, "c.yaml"),
                    Contains("c.yaml:") && Contains("past 200000 values"));
  // A value referenced from many places is resolved once; 20,000 keys of a map resolve in
  // linear time (30 s before, searching the map for each key).
  std::string wide = "base: ${b0}\nb0: ${b1}\nb1: x\n";
  for (int i = 0; i < 20000; ++i) wide += "w" + std::to_string(i) + ": ${base}/" + std::to_string(i) + "\n";
  const auto many = Document::from_string(wide, "c.yaml");
  CHECK(many.root()["w19999"].as<std::string>() == "x/19999");
  CHECK(many.root()["w0"].as<std::string>() == "x/0");
}

TEST_CASE("A config is one YAML document, and deep nesting is named as such", "[config]") {
  CHECK_THROWS_WITH(Document::from_string("seed: 1\n---\nseed: 2\n", "c.yaml"),
                    Contains("c.yaml:") && Contains("content after the first YAML document"));
  CHECK_THROWS_WITH(Document::from_string("seed: 1\n...\nbogus: 2\n", "c.yaml"),
                    Contains("content after the first YAML document"));
  CHECK(Document::from_string("---\nseed: 3\n", "c.yaml").root()["seed"].as<int>() == 3);
  CHECK_THROWS_AS(Document::from_string("seed: 1\n", "c.yaml", {"seed=1\n---\n2"}), UsageError);
  CHECK_THROWS_WITH(Document::from_string("seed: 1\n", "c.yaml", {"seed=1\n---\n2"}),
                    Contains("--set seed") && Contains("content after the first YAML document"));
  // A stray ',' made yaml-cpp's LoadAll start empty documents without end (out of memory).
  CHECK_THROWS_WITH(Document::from_string("seed: 1\n", "c.yaml", {"x=\t,"}),
                    Contains("--set x") && Contains("content after the first YAML document"));
  CHECK_THROWS_WITH(Document::from_string(",\n", "c.yaml"), Contains("c.yaml:1:1"));
  std::string deep = "x: ";
  for (int i = 0; i < 3000; ++i) deep += "{a: ";
  deep += "1";
  for (int i = 0; i < 3000; ++i) deep += "}";
  CHECK_THROWS_WITH(Document::from_string(deep + "\n", "c.yaml"),
                    Contains("c.yaml:1:") && Contains("nests deeper than") && !Contains("bad file"));
}

TEST_CASE("The run config rejects unknown top-level keys", "[config]") {
  const auto doc = Document::from_string("seed: 1\nmax_epoch: 3\n", "run.yaml");
  CHECK_THROWS_WITH(oml::config::parse_run_config(doc.root()), Contains("run.yaml:2:1") &&
                                                                   Contains("unknown key 'max_epoch'") &&
                                                                   Contains("did you mean 'max_epochs'"));
  // A misspelt key created by --set points at the flag, not at the file.
  const auto set = Document::from_string("seed: 1\n", "run.yaml", {"foo.bar.baz=1"});
  CHECK_THROWS_WITH(oml::config::parse_run_config(set.root()),
                    Contains("--set foo.bar.baz") && Contains("unknown key 'foo'") && !Contains("run.yaml:"));
  // `defaults:` is composed away before the run config is read (below).
  const auto hydra = Document::from_string("seed: 2\ndefaults:\n  - _self_\n", "run.yaml");
  CHECK(oml::config::parse_run_config(hydra.root()).seed == 2);
}

TEST_CASE("OML's hydra block: run.dir is the run directory, the rest is named in a notice", "[config]") {
  const auto doc = Document::from_string(
      "logs_root: logs/sop\npostfix: ml\nlogs_folder: 2026_${postfix}\nhydra_dir: "
      "${logs_root}/${logs_folder}/\n"
      "hydra:\n  run:\n    dir: ${hydra_dir}\n  searchpath:\n    - pkg://oml.configs\n  job:\n    chdir: "
      "True\n",
      "run.yaml");
  const auto c = oml::config::parse_run_config(doc.root());
  CHECK(c.logs_root == "logs/sop");
  CHECK(c.run_name == "2026_ml");
  REQUIRE(c.notices.size() == 2);
  CHECK_THAT(c.notices[0], Contains("hydra.job.chdir") && Contains("does not change the working directory"));
  CHECK_THAT(c.notices[1], Contains("hydra.job") && !Contains("searchpath"));  // oml.configs is ours
  const auto other_package = oml::config::parse_run_config(
      Document::from_string("hydra: {searchpath: [pkg://oml.configs, pkg://my.configs, file://x]}\n",
                            "run.yaml")
          .root());
  REQUIRE(other_package.notices.size() == 1);
  CHECK_THAT(other_package.notices[0], Contains("hydra.searchpath entry pkg://my.configs") &&
                                           !Contains("oml.configs") && !Contains("file://"));
  // Elsewhere than logs_root, and an explicit run_name wins.
  const auto other = oml::config::parse_run_config(
      Document::from_string("hydra: {run: {dir: /tmp/runs/x}}\n", "run.yaml").root());
  CHECK(other.logs_root == "/tmp/runs");
  CHECK(other.run_name == "x");
  CHECK(other.notices.empty());
  const auto named = oml::config::parse_run_config(
      Document::from_string("run_name: mine\nhydra: {run: {dir: /tmp/runs/x}}\n", "run.yaml").root());
  CHECK(named.run_name == "mine");
  CHECK_THROWS_WITH(oml::config::parse_run_config(Document::from_string("hydra: 3\n", "run.yaml").root()),
                    Contains("run.yaml:1:8") && Contains("Hydra's settings"));
}

TEST_CASE("Duplicate keys, recursive aliases and alias bombs are config errors with their place",
          "[config]") {
  CHECK_THROWS_WITH(
      Document::from_string("seed: 1\nmax_epochs: 2\nseed: 3\n", "run.yaml"),
      Contains("run.yaml:3:1") && Contains("'seed' is given twice") && Contains("first on line 1"));
  CHECK_THROWS_WITH(Document::from_string("optimizer: {name: adam, args: {lr: 1, lr: 2}}\n", "run.yaml"),
                    Contains("'lr' is given twice"));
  CHECK_THROWS_AS(Document::from_string("postfix: &a [*a]\n", "run.yaml"), oml::ConfigError);
  CHECK_THROWS_WITH(Document::from_string("postfix: &a [*a]\n", "run.yaml"), Contains("run.yaml:"));
  CHECK_THROWS_AS(Document::from_string("seed: 1\n", "run.yaml", {"postfix=&a [*a]"}), oml::UsageError);
  CHECK_THROWS_WITH(Document::from_string("seed: 1\n", "run.yaml", {"postfix=&a [*a]"}),
                    Contains("--set postfix"));
  // Nine levels of nine aliases each: 9^9 values from a few hundred bytes.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 9; ++level) {
    // Appended piece by piece: GCC 12 warns (falsely, -Wstringop-overflow) on "literal" + string.
    std::string prev = "*a";
    prev += std::to_string(level - 1);
    const std::string name = std::to_string(level);
    bomb += "a";
    bomb += name;
    bomb += ": &a";
    bomb += name;
    bomb += " [";
    bomb += prev;
    for (int i = 1; i < 9; ++i) bomb += ", " + prev;
    bomb += "]\n";
  }
  CHECK_THROWS_WITH(Document::from_string(bomb, "run.yaml"), Contains("more than") && Contains("aliases"));
}

TEST_CASE("YAML merge keys fill a mapping with the keys it does not set, first merged mapping first",
          "[config]") {
  const std::string text =
      "base: &o\n"
      "  name: adam\n"
      "  args: {lr: 1, momentum: 0.9}\n"
      "extra: &e {name: sgd, nesterov: true}\n"
      "one: {<<: *o, args: {lr: 2}}\n"
      "two:\n"
      "  <<: [*o, *e]\n"
      "  kind: two\n"
      "quoted: {'<<': 1}\n";
  const auto doc = Document::from_string(text, "m.yaml");
  const auto root = doc.root();
  CHECK(root["one"]["name"].as<std::string>() == "adam");
  CHECK(root["one"]["args"]["lr"].as<int>() == 2);
  CHECK(!root["one"]["args"]["momentum"].defined());  // a merge is one level deep, as in YAML
  CHECK(!root["one"]["<<"].defined());
  CHECK(root["two"]["name"].as<std::string>() == "adam");  // the first merged mapping wins
  CHECK(root["two"]["nesterov"].as<bool>());
  CHECK(root["two"]["kind"].as<std::string>() == "two");
  CHECK(root["quoted"]["<<"].as<int>() == 1);  // a quoted "<<" is an ordinary key
  // A merged value keeps the line it was written on.
  CHECK_THROWS_WITH(root["one"]["name"].as<int>(), Contains("m.yaml:2:9"));
  // Merges in --set values, and a merge key that is not a mapping.
  const auto set = Document::from_string("seed: 1\n", "m.yaml", {"x={<<: {a: 1}, b: 2}"});
  CHECK(set.root()["x"]["a"].as<int>() == 1);
  CHECK_THROWS_WITH(Document::from_string("a: {<<: 3}\n", "m.yaml"),
                    Contains("m.yaml:1:9") && Contains("merge key '<<' takes a mapping"));
  CHECK_THROWS_AS(Document::from_string("a: {<<: [{b: 1}, 2]}\n", "m.yaml"), oml::ConfigError);
  CHECK_THROWS_AS(Document::from_string("seed: 1\n", "m.yaml", {"x={<<: 3}"}), oml::UsageError);
}

TEST_CASE("An override changes one place, also when the file shares it through an alias or a merge key",
          "[config]") {
  const std::string text =
      "base: &o\n"
      "  name: adam\n"
      "  args: {lr: 1}\n"
      "alias: *o\n"
      "merged: {<<: *o}\n"
      "list: [*o, *o]\n";
  const auto doc = Document::from_string(
      text, "s.yaml",
      {"alias.args.lr=5", "merged.args.lr=6", "alias.name=sgd", "list.1.args.lr=7", "merged=3"});
  const auto root = doc.root();
  CHECK(root["base"]["args"]["lr"].as<int>() == 1);
  CHECK(root["base"]["name"].as<std::string>() == "adam");
  CHECK(root["alias"]["args"]["lr"].as<int>() == 5);
  CHECK(root["alias"]["name"].as<std::string>() == "sgd");
  CHECK(root["merged"].as<int>() == 3);
  CHECK(root["list"][std::size_t{0}]["args"]["lr"].as<int>() == 1);
  CHECK(root["list"][std::size_t{1}]["args"]["lr"].as<int>() == 7);
  CHECK(root.keys() == std::vector<std::string>{"base", "alias", "merged", "list"});  // order kept
  // Replacing an aliased value whole leaves the anchor too.
  const auto whole = Document::from_string(text, "s.yaml", {"alias=3"});
  CHECK(whole.root()["base"]["name"].as<std::string>() == "adam");
  // A value nobody shares keeps its line numbers.
  const auto plain = Document::from_string("a: {b: {c: 1}, d: x}\n", "s.yaml", {"a.b.c=2"});
  CHECK_THROWS_WITH(plain.root()["a"]["d"].as<int>(), Contains("s.yaml:1:19"));
}

TEST_CASE("The run config checks enumerations and ranges", "[config]") {
  auto parse = [](const std::string& text) {
    return oml::config::parse_run_config(Document::from_string(text, "run.yaml").root());
  };
  CHECK_THROWS_WITH(parse("pipeline: extractr\n"),
                    Contains("expected one of extractor, pairwise") && Contains("did you mean 'extractor'"));
  CHECK_THROWS_WITH(parse("valid_period: 0\n"),
                    Contains("valid_period") && Contains("expected a positive integer"));
  // 100000 loader threads once ended in std::terminate after gigabytes of thread stacks.
  CHECK_THROWS_WITH(parse("num_workers: 100000\n"),
                    Contains("num_workers") && Contains("expected 0 to 256") && Contains("100000"));
  CHECK_THROWS_WITH(parse("sampler: balance\n"), Contains("expected a component mapping"));
  CHECK_THROWS_WITH(parse("sampler: {args: {}}\n"), Contains("missing required key 'name'"));
  CHECK_THROWS_WITH(parse("sampler: {name: x, arg: {}}\n"), Contains("unknown key 'arg'"));
  CHECK_THROWS_WITH(parse("ddp: {timeout_s: -1}\n"), Contains("ddp.timeout_s"));
  // Infinity and NaN passed the `> 0` checks: a timeout that never came, a bucket per parameter.
  CHECK_THROWS_WITH(parse("ddp: {timeout_s: .inf}\n"), Contains("ddp.timeout_s") && Contains("at most"));
  CHECK_THROWS_WITH(parse("ddp: {timeout_s: .nan}\n"), Contains("ddp.timeout_s"));
  CHECK_THROWS_WITH(parse("ddp: {bucket_mb: .inf}\n"), Contains("ddp.bucket_mb") && Contains("at most"));
  CHECK(parse("ddp: {bucket_mb: 1000000, timeout_s: 10000000}\n").ddp.timeout_s == 10000000);
  CHECK_THROWS_WITH(parse("ddp: {gradient_compression: int8}\n"),
                    Contains("ddp.gradient_compression") && Contains("expected one of none, bf16, fp16") &&
                        Contains("'int8'"));
  CHECK_THROWS_WITH(parse("ddp: {gradient_compression: bf61}\n"), Contains("did you mean 'bf16'"));
}

TEST_CASE("profile: \"FROM:TO\" or one step; anything else names the key and the form", "[config]") {
  auto parse = [](const std::string& text) {
    return oml::config::parse_run_config(Document::from_string(text, "run.yaml").root());
  };
  CHECK_FALSE(parse("seed: 1\n").profile.has_value());
  const auto range = parse("profile: \"10:12\"\n").profile;
  REQUIRE(range.has_value());
  CHECK(range->from == 10);
  CHECK(range->to == 12);
  const auto unquoted = parse("profile: 3:4\n").profile;  // YAML 1.2: a string, not 3 * 60 + 4
  REQUIRE(unquoted.has_value());
  CHECK((unquoted->from == 3 && unquoted->to == 4));
  const auto one = parse("profile: 7\n").profile;
  REQUIRE(one.has_value());
  CHECK((one->from == 7 && one->to == 7));
  const auto overridden =
      oml::config::parse_run_config(Document::from_string("seed: 1\n", "run.yaml", {"profile=5:6"}).root());
  REQUIRE(overridden.profile.has_value());
  CHECK((overridden.profile->from == 5 && overridden.profile->to == 6));
  for (const std::string bad :
       {"\"0:3\"", "\"a:b\"", "\"3:\"", "\"-1:2\"", "\"2:3:4\"", "{from: 1}", "[1, 2]"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse("profile: " + bad + "\n"),
                      Contains("run.yaml:1:10") && Contains("profile") && Contains("expected \"FROM:TO\""));
  }
  CHECK_THROWS_WITH(parse("profile: \"5:2\"\n"),
                    Contains("profile") && Contains("the range ends before it starts: '5:2'"));
}

TEST_CASE("ddp.gradient_compression: none by default, bf16 and fp16 as written", "[config]") {
  auto parse = [](const std::string& text) {
    return oml::config::parse_run_config(Document::from_string(text, "run.yaml").root());
  };
  using oml::config::GradientCompression;
  CHECK(parse("seed: 1\n").ddp.gradient_compression == GradientCompression::none);
  CHECK(parse("ddp: {gradient_compression: none}\n").ddp.gradient_compression == GradientCompression::none);
  CHECK(parse("ddp: {gradient_compression: bf16}\n").ddp.gradient_compression == GradientCompression::bf16);
  CHECK(parse("ddp: {gradient_compression: fp16}\n").ddp.gradient_compression == GradientCompression::fp16);
  for (const std::string& name : oml::config::gradient_compression_names()) {
    CHECK(oml::config::name(*oml::config::from_name<GradientCompression>(
              name, oml::config::gradient_compression_names())) == name);
  }
  CHECK(!oml::config::from_name<GradientCompression>("bfloat16", oml::config::gradient_compression_names()));
}

TEST_CASE("ddp.gather_embeddings_for_loss: off by default, a boolean, refused by the pairwise pipeline",
          "[config][ddp]") {
  auto parse = [](const std::string& text) {
    return oml::config::parse_run_config(Document::from_string(text, "run.yaml").root());
  };
  CHECK_FALSE(parse("seed: 1\n").ddp.gather_embeddings_for_loss);
  CHECK(parse("ddp: {gather_embeddings_for_loss: true}\n").ddp.gather_embeddings_for_loss);
  CHECK_THROWS_WITH(parse("ddp: {gather_embeddings_for_loss: maybe}\n"),
                    Contains("ddp.gather_embeddings_for_loss"));
  // The pairwise pipeline's mistake is reported with the config's others, at the key.
  try {
    parse("pipeline: pairwise\nddp: {gather_embeddings_for_loss: true}\nbs_train: 0\n");
    FAIL("no error");
  } catch (const ConfigError& e) {
    std::string all = e.what();
    for (const auto& line : e.context()) all += "\n" + line;
    INFO(all);
    CHECK_THAT(all, Contains("2 problems") && Contains("bs_train"));
    CHECK_THAT(all, Contains("run.yaml:2:") && Contains("ddp.gather_embeddings_for_loss") &&
                        Contains("only pipeline: extractor gathers"));
  }
  CHECK_FALSE(
      parse("pipeline: pairwise\nddp: {gather_embeddings_for_loss: false}\n").ddp.gather_embeddings_for_loss);
}

TEST_CASE(
    "OML's top-level keys: accelerator gpu and auto, devices as a list, find_unused_parameters, tags, "
    "logs_folder",
    "[config]") {
  auto parse = [](const std::string& text) {
    return oml::config::parse_run_config(Document::from_string(text, "run.yaml").root());
  };
  const auto oml = parse(
      "accelerator: gpu\ndevices: [1, 3]\nfind_unused_parameters: true\ntags: [sop, vits16]\n"
      "logs_folder: 2026-11-25_sop\n");
  CHECK(oml.accelerator == oml::config::Accelerator::cuda);
  CHECK(oml.devices == 2);
  CHECK(oml.device_ids == std::vector<int64_t>{1, 3});
  CHECK(oml.find_unused_parameters);
  CHECK(oml.tags == std::vector<std::string>{"sop", "vits16"});
  CHECK(oml.run_name == "2026-11-25_sop");  // OML's run folder under logs_root
  CHECK(parse("accelerator: auto\ndevices: 3\n").accelerator == oml::config::Accelerator::automatic);
  CHECK(parse("logs_folder: f\nrun_name: r\n").run_name == "r");
  CHECK_THROWS_WITH(parse("devices: []\n"), Contains("non-empty list of GPU ids"));
  CHECK_THROWS_WITH(parse("devices: [0, 0]\n"), Contains("run.yaml:1:14") && Contains("appears twice"));
  CHECK_THROWS_WITH(parse("devices: [-1]\n"), Contains("GPU id >= 0"));
  CHECK_THROWS_WITH(parse("devices: 0\n"), Contains("expected 1 to 1024 ranks per machine, got 0"));
  // Once cast to int on the way to the launcher: 4294967297 ran one process, 100000 forked that many.
  CHECK_THROWS_WITH(parse("devices: 4294967297\n"), Contains("expected 1 to 1024"));
  CHECK_THROWS_WITH(parse("devices: 100000\n"), Contains("expected 1 to 1024"));
  CHECK_THROWS_WITH(parse("accelerator: tpu\n"), Contains("expected one of cpu, cuda, auto, gpu"));
}

TEST_CASE("precision takes Lightning's spellings, and 16 on the CPU says to use bf16", "[config]") {
  using oml::config::Precision;
  auto parse = [](const std::string& text) {
    return oml::config::parse_run_config(Document::from_string(text, "run.yaml").root());
  };
  CHECK(parse("seed: 1\n").precision == Precision::fp32);  // the default
  const std::vector<std::pair<std::string, Precision>> spellings{
      {"32", Precision::fp32},        {"'32'", Precision::fp32},       {"32-true", Precision::fp32},
      {"bf16", Precision::bf16},      {"bf16-mixed", Precision::bf16}, {"16", Precision::fp16},
      {"'16-mixed'", Precision::fp16}};
  for (const auto& [spelling, precision] : spellings) {
    INFO(spelling);
    // 16 needs a GPU: with accelerator cuda the config is valid (the device is checked later).
    CHECK(parse("accelerator: cuda\nprecision: " + spelling + "\n").precision == precision);
  }
  CHECK(parse("accelerator: gpu\nprecision: 16-mixed\n").precision == Precision::fp16);
  CHECK(parse("accelerator: auto\nprecision: 16\n").precision == Precision::fp16);
  CHECK(oml::config::precision_name(Precision::bf16) == "bf16");

  // The default accelerator is the CPU: 16 there is an error at the key, naming bf16.
  CHECK_THROWS_AS(parse("precision: 16\n"), ConfigError);
  CHECK_THROWS_WITH(parse("seed: 1\nprecision: 16\n"),
                    Contains("run.yaml:2:12") && Contains("precision") && Contains("use precision: bf16"));
  CHECK_THROWS_WITH(parse("accelerator: cpu\nprecision: 16-mixed\n"), Contains("needs accelerator: cuda"));
  CHECK_THROWS_WITH(parse("precision: bf17\n"),
                    Contains("run.yaml:1:12") &&
                        Contains("expected one of 32, 32-true, bf16, bf16-mixed, 16, 16-mixed") &&
                        Contains("did you mean 'bf16'"));
  CHECK_THROWS_WITH(parse("precision: bf16-true\n"), Contains("master weights in float32"));
  CHECK_THROWS_WITH(parse("precision: [16]\n"), Contains("expected a precision"));
}

TEST_CASE(
    "OML's keys for prediction and post-processing: bs, extractor_weights, postprocessor_weights, "
    "show_dataset_warnings, a pairwise config is the pairwise pipeline without saying so",
    "[config]") {
  auto parse = [](const std::string& text, std::vector<std::string> overrides = {}) {
    return oml::config::parse_run_config(Document::from_string(text, "run.yaml", overrides).root());
  };
  // OML's predict configs' batch size.
  CHECK(parse("bs: 64\n").batch_size_inference == 64);
  CHECK(parse("").batch_size_inference == 128);
  CHECK_THROWS_WITH(parse("bs: 0\n"), Contains("run.yaml:1:5: bs: expected a positive integer, got 0"));
  CHECK_THROWS_WITH(parse("bs: 8\nbatch_size_inference: 8\n"),
                    Contains("bs") && Contains("batch_size_inference"));
  // The weights keys OML's pairwise configs interpolate: a --set reaches every place naming them.
  const std::string pairwise =
      "extractor_weights: /path/to/extractor.ckpt\npostprocessor_weights: /path/to/postprocessor.ckpt\n"
      "extractor:\n  name: vit\n  args: {arch: vits16, weights: \"${extractor_weights}\"}\n"
      "postprocessor:\n  name: pairwise_reranker\n  args:\n    top_n: 5\n    use_fp16: true\n"
      "    pairwise_model:\n      name: concat_siamese\n      args:\n        weights: "
      "${postprocessor_weights}\n"
      "        extractor: {name: vit, args: {arch: vits16}}\n";
  const auto validate = parse(pairwise, {"extractor_weights=/w/e.ckpt", "postprocessor_weights=/w/p.ckpt"});
  CHECK(validate.extractor_weights == "/w/e.ckpt");
  CHECK(validate.postprocessor_weights == "/w/p.ckpt");
  CHECK(validate.extractor->args["weights"].as<std::string>() == "/w/e.ckpt");
  // The re-ranker's model named only inside the postprocessor (OML's postprocessor_validate.yaml)
  // is the pipeline's pairwise model, and such a config without a loss is the pairwise pipeline.
  REQUIRE(validate.pairwise_model);
  CHECK(validate.pairwise_model->name == "concat_siamese");
  CHECK(validate.pairwise_model->args["weights"].as<std::string>() == "/w/p.ckpt");
  CHECK(validate.pipeline == oml::config::Pipeline::pairwise);
  // An extractor config (a loss) stays the extractor pipeline; `pipeline:` always wins.
  CHECK(parse("criterion: {name: arcface}\npairwise_model: {name: linear_siamese}\n").pipeline ==
        oml::config::Pipeline::extractor);
  CHECK(parse("pipeline: extractor\npairwise_model: {name: linear_siamese}\n").pipeline ==
        oml::config::Pipeline::extractor);
  CHECK(parse("pairwise_model: {name: linear_siamese}\n").pipeline == oml::config::Pipeline::pairwise);
  CHECK(parse("").pipeline == oml::config::Pipeline::extractor);
  // OML's train.py flag for the dataframe's warnings.
  CHECK(parse("").show_dataset_warnings);
  CHECK_FALSE(parse("show_dataset_warnings: false\n").show_dataset_warnings);
}

TEST_CASE("A resolved config dumps to YAML that parses to the same typed config", "[config]") {
  const std::string text =
      "pipeline: extractor\nseed: 3\ndataset_root: /d\nlogs_root: ${dataset_root}/logs\n"
      "sampler: {name: balance, args: {n_labels: 8, n_instances: 4}}\n"
      "metric_args: {cmc_top_k: [1, 5, 10], fmr_vals: [0.01]}\nmax_steps: 100\n"
      "ddp: {shuffle_between_ranks: true}\nscheduling: {scheduler: {name: step, args: {step_size: 3}}, "
      "scheduler_interval: step}\n";
  const auto first = Document::from_string(text, "a.yaml", {"bs_train=16"});
  const auto second = Document::from_string(first.dump(), "dump.yaml");
  CHECK(second.dump() == first.dump());
  const auto a = oml::config::parse_run_config(first.root());
  const auto b = oml::config::parse_run_config(second.root());
  CHECK(b.seed == 3);
  CHECK(b.logs_root == "/d/logs");
  CHECK(b.bs_train == 16);
  oml::cli::register_builtins();
  CHECK(oml::metrics::configure_metrics(b.metric_args).overall_keys() ==
        oml::metrics::configure_metrics(a.metric_args).overall_keys());
  CHECK(b.max_steps == a.max_steps);
  CHECK(b.ddp.shuffle_between_ranks);
  REQUIRE(b.sampler.has_value());
  CHECK(b.sampler->name == "balance");
  CHECK(b.sampler->args["n_labels"].as<int>() == 8);
  CHECK(b.scheduling.scheduler_interval == oml::config::SchedulerInterval::step);
  CHECK(b.scheduling.scheduler->args["step_size"].as<int>() == 3);
}

TEST_CASE("A misspelt required key points at the misspelling", "[config]") {
  const auto doc = Document::from_string("args:\n  n_label: 8\n", "cfg.yaml");
  CHECK_THROWS_WITH(read_options(doc.root()["args"]),
                    Contains("missing required key 'n_labels'") && Contains("'n_label' at cfg.yaml:2:3"));
}

namespace {
std::string text_at(const oml::config::Node& node) { return node.as<std::string>(); }
}  // namespace

TEST_CASE("defaults: composes the shipped config groups, the config's own keys last", "[config][defaults]") {
  oml::test::TempDir dir;
  oml::test::write_file(dir / "train.yaml",
                        "seed: 3\n"
                        "optimizer:\n  args:\n    lr: 0.5\n"
                        "defaults:\n  - optimizer: adam\n  - sampler: balance\n");
  const auto doc = Document::from_file((dir / "train.yaml").string());
  const auto root = doc.root();
  CHECK_FALSE(root["defaults"].defined());
  CHECK(text_at(root["optimizer"]["name"]) == "adam");         // from configs/optimizer/adam.yaml
  CHECK(root["optimizer"]["args"]["lr"].as<double>() == 0.5);  // the file's own value wins
  CHECK(root["sampler"]["args"]["n_labels"].as<int>() == 2);   // OML's default for balance
  CHECK_THAT(root["sampler"]["args"]["n_labels"].where(), Contains("sampler/balance.yaml:3:"));
  CHECK_THAT(root["optimizer"]["args"]["lr"].where(), Contains("train.yaml:4:"));
  CHECK(oml::config::parse_run_config(root).seed == 3);

  // _self_ first: the groups win over the file.
  oml::test::write_file(
      dir / "self_first.yaml",
      "optimizer: {name: sgd, args: {lr: 0.5}}\ndefaults:\n  - _self_\n  - optimizer: adam\n");
  const auto first = Document::from_file((dir / "self_first.yaml").string()).root();
  CHECK(text_at(first["optimizer"]["name"]) == "adam");
  CHECK(first["optimizer"]["args"]["lr"].as<double>() == 0.00001);

  // --set group=option chooses another option (Hydra's command line); other --set keys apply
  // to the composed config, whatever the order of the list.
  const auto chosen =
      Document::from_file((dir / "self_first.yaml").string(), {"optimizer=sgd", "optimizer.args.lr=2"})
          .root();
  CHECK(text_at(chosen["optimizer"]["name"]) == "sgd");
  CHECK(chosen["optimizer"]["args"]["lr"].as<double>() == 2);
  CHECK(chosen["optimizer"]["args"]["lr"].where() == "--set optimizer.args.lr");
}

TEST_CASE("defaults: a config listed twice at each level is composed up to 1000 files, then refused once",
          "[config][defaults]") {
  oml::test::TempDir dir;
  // l0 lists l1 twice, l1 lists l2 twice, ...: 2^20 files to compose (31 levels took minutes).
  for (int i = 0; i < 20; ++i) {
    const std::string next = "/l" + std::to_string(i + 1);
    oml::test::write_file(dir / ("l" + std::to_string(i) + ".yaml"),
                          "defaults:\n  - " + next + "\n  - " + next + "\nk" + std::to_string(i) + ": 1\n");
  }
  oml::test::write_file(dir / "l20.yaml", "seed: 7\n");
  try {
    Document::from_file((dir / "l0.yaml").string());
    FAIL("composed 2^20 files");
  } catch (const oml::ConfigError& e) {
    CHECK_THAT(std::string(e.what()), Contains("defaults compose more than 1000 config files"));
    CHECK(dynamic_cast<const oml::config::ConfigErrors*>(&e) == nullptr);  // reported once
  }
  // Listed twice at a few levels it composes as before.
  const auto few = Document::from_file((dir / "l15.yaml").string());
  CHECK(few.root()["seed"].as<int>() == 7);
  CHECK(few.root()["k19"].as<int>() == 1);
}

TEST_CASE("defaults: a user's group folders come first, packages, headers, override, optional, nesting",
          "[config][defaults]") {
  oml::test::TempDir dir;
  std::filesystem::create_directories(dir / "optimizer");
  std::filesystem::create_directories(dir / "criterion");
  std::filesystem::create_directories(dir / "common");
  std::filesystem::create_directories(dir / "transforms");
  oml::test::write_file(dir / "optimizer" / "adam.yaml", "name: adam\nargs:\n  lr: 0.25\n");
  // An option file with a defaults list of its own: a shipped group placed inside it.
  oml::test::write_file(dir / "criterion" / "mine.yaml",
                        "defaults:\n  - /miner@args.miner: hard_triplets\nname: triplet_with_miner\n"
                        "args:\n  margin: 0.2\n");
  oml::test::write_file(dir / "common" / "paths.yaml", "# @package _global_\nlogs_root: /tmp/from_header\n");
  oml::test::write_file(dir / "train.yaml",
                        "defaults:\n"
                        "  - optimizer: sgd\n"
                        "  - override optimizer: adam\n"
                        "  - criterion: mine\n"
                        "  - transforms@transforms_val: norm_torch\n"
                        "  - optional logger: not_there\n"
                        "  - scheduler: null\n"
                        "  - common/paths\n"
                        "  - _self_\n");
  oml::test::write_file(dir / "transforms" / "norm_torch.yaml", "name: norm\nargs: {}\n");
  const auto root = Document::from_file((dir / "train.yaml").string()).root();
  CHECK(text_at(root["optimizer"]["name"]) == "adam");
  CHECK(root["optimizer"]["args"]["lr"].as<double>() == 0.25);  // the user's adam, not the shipped one
  CHECK(text_at(root["criterion"]["args"]["miner"]["name"]) == "hard_triplets");
  CHECK(root["criterion"]["args"]["margin"].as<double>() == 0.2);
  CHECK(text_at(root["transforms_val"]["name"]) == "norm");
  CHECK_FALSE(root["logger"].defined());
  CHECK_FALSE(root["scheduler"].defined());
  CHECK(text_at(root["logs_root"]) == "/tmp/from_header");
}

TEST_CASE("defaults: every mistake is reported at once, naming the entry and what exists",
          "[config][defaults]") {
  oml::test::TempDir dir;
  oml::test::write_file(dir / "bad.yaml",
                        "defaults:\n"
                        "  - optimizer: adamm\n"              // an unknown option
                        "  - optimiser: adam\n"               // an unknown group
                        "  - {sampler: balance, miner: x}\n"  // two entries in one
                        "  - override logger: tensorboard\n"  // nothing to override
                        "  - sampler: balance\n"
                        "  - sampler: category_balance\n");  // a group chosen twice
  const std::string file = (dir / "bad.yaml").string();
  try {
    Document::from_file(file);
    FAIL("no error");
  } catch (const ConfigError& e) {
    std::string all = e.what();
    for (const auto& line : e.context()) all += "\n" + line;
    INFO(all);
    CHECK_THAT(all, Contains("5 problems"));
    CHECK_THAT(all, Contains(file + ":2:5: defaults: no config 'optimizer/adamm.yaml'") &&
                        Contains("did you mean 'adam'"));
    CHECK_THAT(all, Contains(file + ":3:5: defaults: no config 'optimiser/adam.yaml'") &&
                        Contains("there is no group 'optimiser'") && Contains("did you mean 'optimizer'"));
    CHECK_THAT(all, Contains(file + ":4:5: defaults: an entry is `- group: option`"));
    CHECK_THAT(all, Contains(file + ":5:5: defaults: 'override logger' has no entry for the group 'logger'"));
    CHECK_THAT(all, Contains(file + ":7:5: defaults: the group 'sampler' is chosen twice (first at " + file +
                             ":6)"));
  }
  // A config that includes itself.
  oml::test::write_file(dir / "loop.yaml", "defaults:\n  - loop\n");
  CHECK_THROWS_WITH(Document::from_file((dir / "loop.yaml").string()), Contains("includes itself"));
  // A malformed option file names itself.
  std::filesystem::create_directories(dir / "sampler");
  oml::test::write_file(dir / "sampler" / "broken.yaml", "name: [balance\n");
  oml::test::write_file(dir / "uses_broken.yaml", "defaults:\n  - sampler: broken\n");
  CHECK_THROWS_WITH(Document::from_file((dir / "uses_broken.yaml").string()),
                    Contains("sampler/broken.yaml:") && Contains("malformed YAML"));
}

TEST_CASE("A SettingError from a layer without the config is placed at its key", "[config]") {
  const Document doc =
      Document::from_string("scheduling:\n  monitor_metric: OVERALL/x\nseed: 3\n", "run.yaml");
  const auto root = doc.root();
  // The key as written: its file:line:column and path.
  CHECK(std::string(oml::config::place_setting_error(
                        root, oml::SettingError("scheduling.monitor_metric", "not computed"))
                        .what()) == "run.yaml:2:19: scheduling.monitor_metric: not computed");
  // A key the config does not spell: the deepest spelled parent's place, and the key's path.
  CHECK(
      std::string(oml::config::place_setting_error(root, oml::SettingError("scheduling.scheduler", "needs x"))
                      .what()) == "run.yaml:2:3: scheduling.scheduler: needs x");
  CHECK_THAT(
      oml::config::place_setting_error(root, oml::SettingError("metric_for_checkpointing", "m")).what(),
      Contains("metric_for_checkpointing: m"));
  // placing_settings passes results through and places what its work throws.
  CHECK(oml::config::placing_settings(root, [] { return 7; }) == 7);
  CHECK_THROWS_AS(
      oml::config::placing_settings(root, []() -> int { throw oml::SettingError("seed", "bad"); }),
      ConfigError);
  CHECK_THROWS_WITH(
      oml::config::placing_settings(root, []() -> int { throw oml::SettingError("seed", "bad"); }),
      "run.yaml:3:7: seed: bad");
}

}  // namespace config_tests
