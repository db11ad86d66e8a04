// docs/components.md is the user's list of built-in component names: every name it documents
// must be registered, and every built-in must be documented. Links between the docs, and the
// `docs/<page>.md#<anchor>` citations in sources, configs and tests, must point at a file and a
// heading that exist.
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "oml/registry/registries.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"

namespace docs_tests {

namespace fs = std::filesystem;

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

std::vector<std::string> read_lines(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

bool is_fence(const std::string& line) {
  const auto first = line.find_first_not_of(' ');
  return first != std::string::npos && line.compare(first, 3, "```") == 0;
}

// The anchors GitHub gives a page's headings: lower case, punctuation dropped (non-ASCII
// characters too: our headings use them only for symbols such as "×"), spaces turned into
// hyphens, "-1", "-2", ... appended to repeated ones. Headings inside code blocks do not count.
std::set<std::string> anchors_of(const fs::path& page) {
  static const std::regex heading(R"(^#{1,6}\s+(.*?)\s*$)");
  std::set<std::string> anchors;
  std::map<std::string, int> seen;
  bool in_code = false;
  for (const auto& line : read_lines(page)) {
    if (is_fence(line)) in_code = !in_code;
    std::smatch m;
    if (in_code || !std::regex_match(line, m, heading)) continue;
    std::string slug;
    for (const unsigned char c : m[1].str()) {
      if (std::isalnum(c) || c == '-' || c == '_') slug += static_cast<char>(std::tolower(c));
      if (c == ' ') slug += '-';
    }
    const int n = seen[slug]++;
    anchors.insert(n == 0 ? slug : slug + "-" + std::to_string(n));
  }
  return anchors;
}

// "" when `target` (a path relative to `base`, with an optional #anchor) resolves, else why not.
std::string check_target(const fs::path& base, const std::string& target, const fs::path& self) {
  const auto hash = target.find('#');
  const std::string file = target.substr(0, hash);
  const fs::path path = file.empty() ? self : (base / file).lexically_normal();
  if (!fs::exists(path)) return "no such file " + path.string();
  if (hash == std::string::npos) return "";
  const std::string anchor = target.substr(hash + 1);
  if (path.extension() != ".md" || !anchors_of(path).count(anchor))
    return "no heading with anchor #" + anchor + " in " + path.string();
  return "";
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

TEST_CASE("Links between the docs point at existing files and headings", "[docs]") {
  const fs::path root = oml::test::source_path("");
  std::vector<fs::path> pages{root / "README.md"};
  for (const auto& entry : fs::directory_iterator(root / "docs")) {
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  }
  const std::regex link(R"(\]\(([^)\s]+)\))");
  std::size_t checked = 0;
  for (const auto& page : pages) {
    bool in_code = false;
    int number = 0;
    for (const auto& line : read_lines(page)) {
      ++number;
      if (is_fence(line)) in_code = !in_code;
      if (in_code) continue;
      for (std::sregex_iterator it(line.begin(), line.end(), link), end; it != end; ++it) {
        const std::string target = (*it)[1];
        if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0) continue;
        ++checked;
        INFO(page.string() << ":" << number << ": " << target);
        CHECK(check_target(page.parent_path(), target, page) == "");
      }
    }
  }
  CHECK(checked > 50);
}

TEST_CASE("Citations of docs pages in sources, configs and tests resolve", "[docs]") {
  const fs::path root = oml::test::source_path("");
  const std::set<std::string> extensions{".h", ".cpp", ".yaml", ".txt", ".cmake", ".sh", ".proto"};
  const std::regex citation(R"(docs/[A-Za-z0-9_]+\.md(#[A-Za-z0-9_-]+)?)");
  std::size_t checked = 0;
  for (const char* folder :
       {"core", "plugins", "pipelines", "tests", "configs", "bench", "scripts", "cmake"}) {
    if (!fs::exists(root / folder)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / folder)) {
      if (!entry.is_regular_file() || !extensions.count(entry.path().extension().string())) continue;
      int number = 0;
      for (const auto& line : read_lines(entry.path())) {
        ++number;
        for (std::sregex_iterator it(line.begin(), line.end(), citation), end; it != end; ++it) {
          ++checked;
          INFO(entry.path().string() << ":" << number << ": " << it->str());
          CHECK(check_target(root, it->str(), root) == "");
        }
      }
    }
  }
  CHECK(checked > 30);
}

}  // namespace docs_tests
