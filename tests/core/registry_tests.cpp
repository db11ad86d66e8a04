// Registry layer: the Registry template, the process registries, plugin loading.
#include <regex>

#include "oml/config/document.h"
#include "oml/registry/plugin.h"
#include "oml/registry/registry.h"
#include "support/support.h"

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

ShapeRegistry make_registry() {
  ShapeRegistry r("shape");
  r.add(
      "square",
      [](const oml::config::Node& args, const oml::NoContext&) {
        auto s = std::make_shared<Square>();
        oml::config::MapReader reader(args, "shape 'square' args");
        reader.optional("side", s->side);
        reader.finish();
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
  CHECK_THROWS_AS(r.add("square", nullptr, "again", "plugin 'x' (/tmp/libx.so)"), oml::PluginError);
  CHECK_THROWS_WITH(
      r.add("square", nullptr, "again", "plugin 'x' (/tmp/libx.so)"),
      Contains("shape 'square' from plugin 'x' (/tmp/libx.so) clashes") && Contains("built-in"));
}

TEST_CASE("Component args are validated by the component's own reader", "[registry]") {
  const auto r = make_registry();
  const auto doc = Document::from_string("shape: {name: square, args: {sides: 3}}\n", "s.yaml");
  CHECK_THROWS_WITH(r.create(parse_component(doc.root()["shape"], "shape")),
                    Contains("unknown key 'sides'") && Contains("did you mean 'side'"));
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
  SECTION("no entry point") {
    CHECK_THROWS_WITH(oml::load_plugin(oml::test::fixture_path("libno_entry_plugin.so")),
                      Contains("not an oml-cpp plugin") && Contains("oml_plugin_info"));
  }
  SECTION("wrong API version") {
    CHECK_THROWS_WITH(oml::load_plugin(oml::test::fixture_path("libwrong_api_plugin.so")),
                      Contains("plugin API version 99") && Contains("provides version 1"));
  }
  SECTION("register function throws") {
    CHECK_THROWS_WITH(oml::load_plugin(oml::test::fixture_path("libthrowing_plugin.so")),
                      Contains("throwing_fixture") && Contains("cannot find my model files"));
  }
  SECTION("name clash") {
    oml::load_plugin(oml::test::fixture_path("libgood_plugin.so"));
    CHECK_THROWS_AS(oml::load_plugin(oml::test::fixture_path("libclash_plugin.so")), oml::PluginError);
  }
}
