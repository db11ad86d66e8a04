// docs/components.md is the user's list of built-in component names: every name it documents
// must be registered, and every built-in must be documented.
#include <fstream>
#include <regex>
#include <set>

#include "cli.h"
#include "oml/registry/registries.h"
#include "support/support.h"

namespace {
// Parses "## <kind>" headings and "| `name` | ..." table rows.
std::map<std::string, std::set<std::string>> documented_components() {
  std::ifstream in(oml::test::source_path("docs/components.md"));
  REQUIRE(in.good());
  std::map<std::string, std::set<std::string>> out;
  std::string line, kind;
  const std::regex heading(R"(^##\s+([a-z_]+)\s*$)");
  const std::regex row(R"(^\|\s*`([A-Za-z0-9_]+)`\s*\|)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, heading)) {
      kind = m[1];
      out[kind];
    } else if (!kind.empty() && std::regex_search(line, m, row)) {
      out[kind].insert(m[1]);
    }
  }
  return out;
}
}  // namespace

TEST_CASE("Every built-in component is documented and every documented one is registered",
          "[registry][docs]") {
  oml::cli::register_builtins();
  const auto documented = documented_components();
  std::size_t kinds = 0;
  oml::registries().for_each([&](const std::string& kind, const std::vector<oml::ComponentInfo>& infos) {
    ++kinds;
    INFO("kind: " << kind);
    REQUIRE(documented.count(kind) == 1);
    std::set<std::string> registered;
    for (const auto& info : infos) {
      if (info.origin == "built-in") registered.insert(info.name);
    }
    CHECK(registered == documented.at(kind));
  });
  CHECK(kinds == documented.size());
}
