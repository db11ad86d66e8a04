// The test suite's own machinery where a fault would only show as time: a Python reference
// export is made once per run when OML_TEST_REFERENCES names a folder, and the run's other
// processes read it instead of making it again (oml::test::reference_export, support.h).
#include <cstdlib>
#include <filesystem>

#include "support/support.h"

namespace test_support_tests {

using namespace oml::test;
namespace fs = std::filesystem;

TEST_CASE("A reference export is made once per run and read by the run's other processes", "[test_support]") {
  TempDir tmp;
  const fs::path shared = tmp / "references", counter = tmp / "runs.txt";
  const ScopedEnv references("OML_TEST_REFERENCES", shared.string());
  const fs::path& folder = reference_export("reference_probe.py", "export", {counter.string()});
  CHECK(folder.parent_path() == shared);
  CHECK(folder.filename().string().rfind("reference_probe.export.", 0) == 0);
  CHECK(read_file(folder / "probe.txt") == "made\n");
  // Made in a `.making-*` folder and renamed into place: nothing half-made is left beside it.
  for (const auto& entry : fs::directory_iterator(shared)) CHECK(entry.path() == folder);
  // This process asks again, and another process of the run (this binary, on the hidden case
  // below) asks for the same export: both take the folder as it is.
  CHECK(reference_export("reference_probe.py", "export", {counter.string()}) == folder);
  const auto child = run("OML_TEST_REFERENCE_COUNTER=" + quote(counter.string()) + " " +
                         quote(fs::read_symlink("/proc/self/exe").string()) + " '[.][reference_child]'");
  INFO(child.out << child.err);
  REQUIRE(child.exit_code == 0);
  CHECK(read_file(counter) == "ran\n");
}

TEST_CASE("reference_export in another process of the run", "[.][reference_child]") {
  const char* counter = std::getenv("OML_TEST_REFERENCE_COUNTER");
  REQUIRE(counter != nullptr);
  const fs::path& folder = reference_export("reference_probe.py", "export", {counter});
  CHECK(read_file(folder / "probe.txt") == "made\n");
}

}  // namespace test_support_tests
