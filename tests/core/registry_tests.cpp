// Registry layer: the Registry template, the process registries, plugin loading.
#include <regex>

#include <sys/stat.h>

#include "oml/config/args_reader.h"
#include "oml/config/document.h"
#include "oml/config/error_list.h"
#include "oml/data/sampler.h"
#include "oml/models/extractor.h"
#include "oml/registry/parsed_components.h"
#include "oml/registry/plugin.h"
#include "oml/registry/registries.h"
#include "oml/registry/registry.h"
#include "runtime/pipeline_setup.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"

namespace registry_tests {

using Catch::Matchers::Contains;
using oml::config::Document;
using oml::config::parse_component;

namespace {
struct Shape {
  virtual ~Shape() = default;
  virtual double area() const = 0;
};
struct Square : Shape {
  double side = 1;
  double area() const override { return side * side; }
};
using ShapeRegistry = oml::Registry<std::shared_ptr<Shape>>;

struct SquareOptions {
  double side = 1;
};

ShapeRegistry make_registry() {
  ShapeRegistry r("shape");
  r.add(
      "square",
      [](oml::config::ArgsReader& reader) {
        SquareOptions o;
        reader.optional("side", o.side);
        reader.check(
            [&] { oml::config::check_argument(o.side > 0, "shape 'square'", "side", "side must be > 0"); });
        return o;
      },
      [](const SquareOptions& o, const oml::NoContext&) {
        auto s = std::make_shared<Square>();
        s->side = o.side;
        return std::shared_ptr<Shape>(s);
      },
      "a square");
  return r;
}
}  // namespace

TEST_CASE("A registry builds a component from its name and args", "[registry]") {
  const auto r = make_registry();
  const auto doc = Document::from_string("shape: {name: square, args: {side: 3}}\n", "s.yaml");
  const auto shape = r.create(parse_component(doc.root()["shape"], "shape"));
  CHECK(shape->area() == Approx(9.0));
  CHECK(r.names() == std::vector<std::string>{"square"});
  CHECK(r.infos().at(0).help == "a square");
  // The two phases apart: parse gives typed options, build makes the component from them.
  oml::config::ErrorList errors;
  const auto parsed = r.parse(parse_component(doc.root()["shape"], "shape"), errors);
  CHECK(errors.empty());
  REQUIRE(parsed.ok());
  CHECK(std::any_cast<SquareOptions>(parsed.options).side == 3.0);
  CHECK(r.build(parsed)->area() == Approx(9.0));
  CHECK(r.build(parsed) != r.build(parsed));  // every build a fresh component
}

TEST_CASE("A run config's components are parsed once, when it is loaded, and built from that parse",
          "[registry][config]") {
  oml::cli::register_builtins();
  // An extractor that counts its parses and builds the extractor nested in its args.
  using ExtractorParsed = decltype(oml::Registries::extractors)::Parsed;
  static int parses = 0;
  auto& extractors = oml::registries().extractors;
  if (!extractors.contains("parse_counting")) {
    extractors.add(
        "parse_counting",
        [](oml::config::ArgsReader& reader) {
          ++parses;
          return reader.nested(oml::registries().extractors, "extractor");
        },
        [](const ExtractorParsed& inner, const oml::NoContext&) {
          return oml::registries().extractors.build(inner);
        },
        // Not "built-in": the docs test lists the built-ins, and may run in the same process.
        "counts its parses (tests)", "tests/core/registry_tests.cpp");
  }
  const auto document = Document::from_string(
      "extractor: {name: parse_counting, args: {extractor: {name: conv_net, args: {in_channels: 1, feat_dim: "
      "8}}}}\n",
      "run.yaml");
  oml::cli::Invocation invocation;
  invocation.command = "oml-train";
  const int before = parses;
  const oml::config::RunConfig config = invocation.load_config(document);
  CHECK(parses == before + 1);
  REQUIRE(config.components != nullptr);
  REQUIRE(config.components->extractor.has_value());
  CHECK(config.components->extractor->ok());
  CHECK_FALSE(config.components->pairwise_model.has_value());  // a slot the config leaves out
  REQUIRE(config.components->metrics != nullptr);
  CHECK(&oml::pipelines::configured_metrics(config) == config.components->metrics.get());
  const auto first = oml::pipelines::build_extractor(config);
  const auto second = oml::pipelines::build_extractor(config);
  CHECK(parses == before + 1);  // built twice, parsed once
  CHECK(first != second);
  CHECK(first->feat_dim() == 8);
  // A config that was only parsed, not loaded, is no pipeline's input.
  CHECK_THROWS_AS(oml::pipelines::build_extractor(oml::config::parse_run_config(document.root())),
                  oml::InternalError);
  // check_components alone returns what it parsed, and every problem.
  CHECK(oml::cli::check_components(config).extractor->ok());
  CHECK(parses == before + 2);
  const auto typo =
      Document::from_string("extractor: {name: parse_counting, args: {extractr: {}}}\n", "typo.yaml");
  oml::config::ErrorList errors;
  const oml::ParsedComponents parsed =
      oml::cli::check_components(oml::config::parse_run_config(typo.root()), errors);
  CHECK_FALSE(errors.empty());
  REQUIRE(parsed.extractor.has_value());
  CHECK_FALSE(parsed.extractor->ok());
}

TEST_CASE("An unknown name lists the known names and the closest one", "[registry]") {
  const auto r = make_registry();
  const auto doc = Document::from_string("shape:\n  name: sqare\n", "s.yaml");
  CHECK_THROWS_AS(r.create(parse_component(doc.root()["shape"], "shape")), oml::ConfigError);
  CHECK_THROWS_WITH(r.create(parse_component(doc.root()["shape"], "shape")),
                    Contains("s.yaml:2:9") && Contains("unknown shape 'sqare'") &&
                        Contains("did you mean 'square'") && Contains("known shapes: square"));
}

TEST_CASE("Registering a name twice names both origins", "[registry]") {
  auto r = make_registry();
  const auto again = [&] {
    r.add(
        "square", oml::no_args,
        [](oml::NoOptions, const oml::NoContext&) { return std::shared_ptr<Shape>(); }, "again",
        "plugin 'x' (/tmp/libx.so)");
  };
  CHECK_THROWS_AS(again(), oml::PluginError);
  CHECK_THROWS_WITH(
      again(), Contains("shape 'square' from plugin 'x' (/tmp/libx.so) clashes") && Contains("built-in"));
}

TEST_CASE("Component args are validated by the component's own parse", "[registry]") {
  const auto r = make_registry();
  const auto doc = Document::from_string("shape: {name: square, args: {sides: 3}}\n", "s.yaml");
  CHECK_THROWS_WITH(r.create(parse_component(doc.root()["shape"], "shape")),
                    Contains("unknown key 'sides'") && Contains("did you mean 'side'"));
}

TEST_CASE("parse reports every problem, nested components and plugins too, and builds nothing",
          "[registry]") {
  // "frame" holds a nested shape; builds are counted. A plugin's parse runs like a built-in's.
  auto r = make_registry();
  int built = 0;
  struct FrameOptions {
    double width = 1;
    ShapeRegistry::Parsed inner;
  };
  r.add(
      "frame",
      [&](oml::config::ArgsReader& reader) {
        FrameOptions o;
        reader.optional("width", o.width);
        o.inner = reader.nested(r, "inner");
        return o;
      },
      [&](const FrameOptions& o, const oml::NoContext&) {
        ++built;
        return r.build(o.inner);
      },
      "a frame around a shape");
  r.add(
      "foreign",
      [](oml::config::ArgsReader& reader) {
        int sides = 3;
        reader.required("sides", sides);
        return sides;
      },
      [&](int, const oml::NoContext&) {
        ++built;
        return std::shared_ptr<Shape>(std::make_shared<Square>());
      },
      "from a plugin", "plugin 'x' (/tmp/libx.so)");
  const auto doc = Document::from_string(
      "a: {name: frame, args: {width: wide, inner: {name: square, args: {sid: 2}}, colour: red}}\n"
      "b: {name: frame, args: {inner: {name: circle}}}\n"
      "c: {name: foreign, args: {sids: 1}}\n"
      "d: {name: frame, args: {inner: {name: square, args: {side: 2}}}}\n"
      "e: {name: frame, args: {inner: {name: square, args: {side: -2}}}}\n"
      "f: {name: frame}\n",
      "s.yaml");
  oml::config::ErrorList errors;
  std::vector<ShapeRegistry::Parsed> parsed;
  for (const char* key : {"a", "b", "c", "d", "e", "f"}) {
    parsed.push_back(r.parse(parse_component(doc.root()[key], key), errors));
  }
  CHECK(built == 0);
  CHECK(!parsed[0].ok());
  CHECK(parsed[3].ok());
  CHECK(!parsed[4].ok());
  REQUIRE(errors.size() == 7);  // c's misspelt key is named once, by its missing-key error
  try {
    errors.throw_if_any();
  } catch (const oml::ConfigError& e) {
    std::string all;
    for (const auto& line : e.context()) all += line + "\n";
    INFO(all);
    CHECK_THAT(all, Contains("s.yaml:1:32: a.args.width: expected") &&
                        Contains("s.yaml:1:67: a.args.inner.args.sid: unknown key 'sid'") &&
                        Contains("s.yaml:1:77: a.args.colour: unknown key 'colour'") &&
                        Contains("s.yaml:2:39: b.args.inner.name: unknown shape 'circle'") &&
                        Contains("c.args: missing required key 'sides'") &&
                        Contains("is 'sids' at s.yaml:3") && !Contains("unknown key 'sids'") &&
                        Contains("(shape 'foreign' comes from plugin 'x' (/tmp/libx.so))") &&
                        Contains("e.args.inner.args.side: shape 'square': side must be > 0") &&
                        Contains("f.args: missing required key 'inner'"));
  }
  CHECK(r.build(parsed[3])->area() == Approx(4.0));
  CHECK(built == 1);
  // Building what its parse did not accept is a bug in the caller.
  CHECK_THROWS_AS(r.build(parsed[0]), oml::InternalError);
}

TEST_CASE("A value check after a key that read badly is not reported (it judged a default)", "[registry]") {
  const auto r = make_registry();
  const auto doc = Document::from_string("shape: {name: square, args: {side: [1, 2]}}\n", "s.yaml");
  oml::config::ErrorList errors;
  (void)r.parse(parse_component(doc.root()["shape"], "shape"), errors);
  CHECK(errors.size() == 1);
}

TEST_CASE("A plugin library registers its components under its origin", "[registry][plugins]") {
  const auto& plugin = oml::load_plugin(oml::test::fixture_path("libgood_plugin.so"));
  CHECK(plugin.name == "good_fixture");
  CHECK(plugin.version == "1.2.3");
  REQUIRE(oml::registries().samplers.contains("fixture_sampler"));
  bool found = false;
  for (const auto& info : oml::registries().samplers.infos()) {
    if (info.name == "fixture_sampler") {
      found = true;
      CHECK_THAT(info.origin, Contains("good_fixture") && Contains("libgood_plugin.so"));
    }
  }
  CHECK(found);
  // Loading the same library again is a no-op, not a clash.
  CHECK_NOTHROW(oml::load_plugin(oml::test::fixture_path("libgood_plugin.so")));
}

TEST_CASE("Plugin loading reports which step failed", "[registry][plugins]") {
  SECTION("missing file") {
    CHECK_THROWS_WITH(oml::load_plugin("/nonexistent/libnothing.so"),
                      Contains("plugin library '/nonexistent/libnothing.so' not found"));
  }
  SECTION("not a shared library") {
    oml::test::TempDir dir;
    oml::test::write_file(dir / "libfake.so", "not an ELF file");
    CHECK_THROWS_WITH(oml::load_plugin((dir / "libfake.so").string()),
                      Contains("cannot open plugin library"));
  }
  SECTION("not a library file: a folder, a FIFO (dlopen would wait on it for good)") {
    oml::test::TempDir dir;
    std::filesystem::create_directory(dir / "libdir.so");
    CHECK_THROWS_WITH(oml::load_plugin((dir / "libdir.so").string()),
                      Contains("libdir.so': it is a folder, not a shared library file"));
    REQUIRE(::mkfifo((dir / "libfifo.so").c_str(), 0644) == 0);
    CHECK_THROWS_WITH(oml::load_plugin((dir / "libfifo.so").string()),
                      Contains("libfifo.so': it is a FIFO, not a shared library file"));
  }
  SECTION("a truncated copy (the loader would die of SIGBUS mapping past its end)") {
    oml::test::TempDir dir;
    const std::string whole = oml::test::read_file(oml::test::fixture_path("libgood_plugin.so"));
    for (const std::size_t size :
         {std::size_t{40}, std::size_t{1000}, std::size_t{3000}, whole.size() / 2, whole.size() - 1}) {
      INFO(size);
      const auto cut = dir / ("libcut" + std::to_string(size) + ".so");
      oml::test::write_file(cut, whole.substr(0, size));
      CHECK_THROWS_WITH(oml::load_plugin(cut.string()),
                        Contains("cannot open plugin library '" + cut.string() + "'") &&
                            (Contains("the file is truncated: " + std::to_string(size) + " bytes") ||
                             Contains("without an ELF header")));
    }
  }
  SECTION("no entry point") {
    CHECK_THROWS_WITH(oml::load_plugin(oml::test::fixture_path("libno_entry_plugin.so")),
                      Contains("not an oml-cpp plugin") && Contains("oml_plugin_info"));
  }
  SECTION("wrong API version") {
    CHECK_THROWS_WITH(oml::load_plugin(oml::test::fixture_path("libwrong_api_plugin.so")),
                      Contains("plugin API version 99") &&
                          Contains("provides version " + std::to_string(OML_PLUGIN_API_VERSION)) &&
                          !Contains("two phases"));
  }
  SECTION("a plugin of API version 2 (one factory per component)") {
    CHECK_THROWS_AS(oml::load_plugin(oml::test::fixture_path("libold_api_plugin.so")), oml::PluginError);
    CHECK_THROWS_WITH(oml::load_plugin(oml::test::fixture_path("libold_api_plugin.so")),
                      Contains("plugin API version 2") &&
                          Contains("provides version " + std::to_string(OML_PLUGIN_API_VERSION)) &&
                          Contains("add(name, parse, build, help)") && Contains("docs/plugins.md"));
  }
  SECTION("register function throws") {
    CHECK_THROWS_WITH(oml::load_plugin(oml::test::fixture_path("libthrowing_plugin.so")),
                      Contains("throwing_fixture") && Contains("cannot find my model files"));
  }
  SECTION("register function throws what is not a std::exception") {
    CHECK_THROWS_WITH(oml::load_plugin(oml::test::fixture_path("libthrowing_int_plugin.so")),
                      Contains("throwing_fixture") && Contains("libthrowing_int_plugin.so") &&
                          Contains("not a std::exception"));
  }
  SECTION("name clash") {
    oml::load_plugin(oml::test::fixture_path("libgood_plugin.so"));
    CHECK_THROWS_AS(oml::load_plugin(oml::test::fixture_path("libclash_plugin.so")), oml::PluginError);
  }
}

namespace {
// A registry whose one component throws what its `throw:` arg names, in the phase its `in:` arg
// names (parse or build), registered from `origin`.
struct FaultyOptions {
  std::string what;
};

[[noreturn]] void throw_named(const std::string& what) {
  if (what == "argument") oml::config::fail_argument("shape 'faulty'", "side", "side must be > 0, got -1");
  if (what == "mismatch") oml::config::fail_fit("shape 'faulty'", "side", "side -1 does not fit the canvas");
  if (what == "config") throw oml::ConfigError("shape 'faulty': no sides");
  if (what == "data") throw oml::DataError("shape 'faulty': no data");
  if (what == "foreign") throw std::out_of_range("map::at\nbacktrace line");
  throw 42;
}

ShapeRegistry throwing_registry(const std::string& origin) {
  ShapeRegistry r("shape");
  r.add(
      "faulty",
      [](oml::config::ArgsReader& reader) {
        FaultyOptions o;
        std::string in = "build";
        reader.required("throw", o.what).optional("in", in).known({"side"});
        if (in == "parse") throw_named(o.what);
        return o;
      },
      [](const FaultyOptions& o, const oml::NoContext&) -> std::shared_ptr<Shape> { throw_named(o.what); },
      "throws", origin);
  return r;
}

// What `create` throws for `{name: faulty, args: {throw: <what>, in: <phase>, side: -1}}`.
template <class Check>
void check_thrown(const ShapeRegistry& r, const std::string& what, Check check,
                  const std::string& in = "build") {
  const auto doc = Document::from_string(
      "shape:\n  name: faulty\n  args: {throw: " + what + ", side: -1, in: " + in + "}\n", "s.yaml");
  try {
    r.create(parse_component(doc.root()["shape"], "shape"));
    FAIL("create did not throw");
  } catch (const oml::Error& e) {
    check(e);
  }
}

const std::string kPlugin = "plugin 'shapes' (/tmp/libshapes.so)";
}  // namespace

TEST_CASE("A plugin component's foreign exception becomes a plugin error naming the library",
          "[registry][plugins]") {
  const auto r = throwing_registry(kPlugin);
  for (const std::string in : {"build", "parse"}) {
    for (const char* what : {"foreign", "anything"}) {
      INFO(what << " in " << in);
      check_thrown(
          r, what,
          [&](const oml::Error& e) {
            CHECK(dynamic_cast<const oml::PluginError*>(&e) != nullptr);
            CHECK(e.exit_code() == 2);
            CHECK_THAT(e.what(),
                       Contains("shape 'faulty' from plugin 'shapes' (/tmp/libshapes.so) failed while " +
                                std::string(in == "build" ? "being built" : "reading its args")));
          },
          in);
    }
  }
  check_thrown(r, "foreign", [](const oml::Error& e) {
    CHECK_THAT(e.what(), Contains(": map::at") && !Contains("backtrace"));
  });
  check_thrown(r, "anything",
               [](const oml::Error& e) { CHECK_THAT(e.what(), Contains("not a std::exception")); });
}

TEST_CASE("oml errors from a plugin component keep their type and gain the plugin's name",
          "[registry][plugins]") {
  const auto r = throwing_registry(kPlugin);
  for (const std::string in : {"build", "parse"}) {
    INFO(in);
    check_thrown(
        r, "config",
        [](const oml::Error& e) {
          CHECK(dynamic_cast<const oml::ConfigError*>(&e) != nullptr);
          CHECK(e.exit_code() == 2);
          CHECK_THAT(e.what(), Contains("shape 'faulty': no sides"));
          REQUIRE(e.context().size() == 1);
          CHECK_THAT(e.context()[0],
                     Contains("shape 'faulty' comes from plugin 'shapes' (/tmp/libshapes.so)"));
        },
        in);
  }
  check_thrown(r, "data", [](const oml::Error& e) {
    CHECK(dynamic_cast<const oml::DataError*>(&e) != nullptr);
    REQUIRE(e.context().size() == 1);
    CHECK_THAT(e.context()[0], Contains("/tmp/libshapes.so"));
  });
}

TEST_CASE("Argument errors point at the argument in the config, for built-ins and plugins alike",
          "[registry]") {
  for (const std::string& origin : {std::string("built-in"), kPlugin}) {
    INFO(origin);
    // In the parse: a config error (the args alone are wrong).
    check_thrown(
        throwing_registry(origin), "argument",
        [&](const oml::Error& e) {
          CHECK(dynamic_cast<const oml::ConfigError*>(&e) != nullptr);
          CHECK_THAT(e.what(),
                     Contains("s.yaml:3:33: shape.args.side: shape 'faulty': side must be > 0, got -1"));
          CHECK(e.context().size() == (origin == kPlugin ? 1u : 0u));
        },
        "parse");
    // In the build: a data error (the args do not fit what the component meets), placed alike.
    check_thrown(throwing_registry(origin), "mismatch", [&](const oml::Error& e) {
      CHECK(dynamic_cast<const oml::DataError*>(&e) != nullptr);
      CHECK(dynamic_cast<const oml::ConfigError*>(&e) == nullptr);
      CHECK(e.exit_code() == 2);
      CHECK_THAT(e.what(), Contains("s.yaml:3:33: shape.args.side: shape 'faulty': side -1 does not fit"));
      CHECK(e.context().size() == (origin == kPlugin ? 1u : 0u));
    });
  }
  // An argument the config does not give (its default failed): the args mapping is the place.
  ShapeRegistry r("shape");
  r.add(
      "faulty",
      [](oml::config::ArgsReader& reader) -> oml::NoOptions {
        reader.take("colour");
        oml::config::fail_argument("shape 'faulty'", "side", "the default side does not fit");
      },
      [](oml::NoOptions, const oml::NoContext&) { return std::shared_ptr<Shape>(); }, "throws");
  const auto doc = Document::from_string("shape: {name: faulty, args: {colour: red}}\n", "s.yaml");
  CHECK_THROWS_WITH(r.create(parse_component(doc.root()["shape"], "shape")),
                    Contains("s.yaml:1:29: shape.args: shape 'faulty': the default side"));
}

TEST_CASE("A built-in component's foreign exception is an internal error", "[registry]") {
  check_thrown(throwing_registry("built-in"), "foreign", [](const oml::Error& e) {
    CHECK(dynamic_cast<const oml::InternalError*>(&e) != nullptr);
    CHECK(e.exit_code() == 1);
    CHECK_THAT(e.what(), Contains("built-in shape 'faulty' failed while being built: map::at"));
  });
  check_thrown(throwing_registry("built-in"), "config", [](const oml::Error& e) {
    CHECK(dynamic_cast<const oml::ConfigError*>(&e) != nullptr);
    CHECK(e.context().empty());
  });
}

TEST_CASE("A component in a loaded plugin library that throws a foreign exception is a plugin error",
          "[registry][plugins]") {
  oml::load_plugin(oml::test::fixture_path("libgood_plugin.so"));
  const auto doc = Document::from_string("sampler: {name: fixture_foreign_sampler}\n", "s.yaml");
  const auto spec = parse_component(doc.root()["sampler"], "sampler");
  CHECK_THROWS_AS(oml::registries().samplers.create(spec, oml::data::SamplerContext{}), oml::PluginError);
  CHECK_THROWS_WITH(oml::registries().samplers.create(spec, oml::data::SamplerContext{}),
                    Contains("sampler 'fixture_foreign_sampler' from plugin 'good_fixture'") &&
                        Contains("libgood_plugin.so") &&
                        Contains("failed while being built: no such file: weights.bin"));
}

TEST_CASE("A plugin's parse that throws a foreign exception is a plugin error, raised by the parse",
          "[registry][plugins]") {
  oml::load_plugin(oml::test::fixture_path("libgood_plugin.so"));
  const auto doc = Document::from_string("sampler: {name: fixture_foreign_parse}\n", "s.yaml");
  oml::config::ErrorList errors;
  CHECK_THROWS_WITH(
      oml::registries().samplers.parse(parse_component(doc.root()["sampler"], "sampler"), errors),
      Contains("sampler 'fixture_foreign_parse' from plugin 'good_fixture'") &&
          Contains("failed while reading its args: parse went wrong"));
}

TEST_CASE("A nested component's mistake does not hide its owner's, and a typo hides no value check's place",
          "[registry]") {
  oml::cli::register_builtins();
  const auto problems = [](const std::string& yaml) {
    const auto doc = Document::from_string("c: " + yaml + "\n", "n.yaml");
    oml::config::ErrorList errors;
    const auto spec = parse_component(doc.root()["c"], "c");
    if (spec.name == "norm_resize_center_crop") {
      (void)oml::registries().transforms.parse(spec, errors);
    } else {
      (void)oml::registries().losses.parse(spec, errors);
    }
    std::string all;
    try {
      errors.throw_if_any();
    } catch (const oml::ConfigError& e) {
      all = e.what();
      for (const auto& line : e.context()) all += "\n" + line;
    }
    return std::make_pair(errors.size(), all);
  };
  // The loss's own reduction and its miner's cap: both reported.
  const auto [count, text] = problems(
      "{name: triplet_with_miner, args: {reduction: avg, miner: {name: all_triplets, args: "
      "{max_output_triplets: "
      "0}}}}");
  INFO(text);
  CHECK(count == 2);
  CHECK_THAT(text,
             Contains("c.args.reduction: loss 'triplet_with_miner': reduction must be 'mean' or 'sum'") &&
                 Contains("c.args.miner.args.max_output_triplets"));
  // A misspelt key is reported as such, not as the default it left failing a value check.
  const auto [typo_count, typo] =
      problems("{name: norm_resize_center_crop, args: {im_size: 200, crop_sise: 180}}");
  INFO(typo);
  CHECK(typo_count == 1);
  CHECK_THAT(typo,
             Contains("unknown key 'crop_sise'") && Contains("did you mean 'crop_size'") && !Contains("224"));
}

}  // namespace registry_tests
