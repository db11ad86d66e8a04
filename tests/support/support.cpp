#include "support/support.h"

#include <sys/wait.h>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

namespace oml::test {

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "oml-test-XXXXXX").string();
  std::vector<char> buffer(tmpl.begin(), tmpl.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = buffer.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_file(const fs::path& path, const std::string& text) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string command_path(const std::string& name) { return std::string(OML_BIN_DIR) + "/" + name; }
std::string fixture_path(const std::string& name) { return std::string(OML_FIXTURE_DIR) + "/" + name; }
std::string source_path(const std::string& relative) { return std::string(OML_SOURCE_DIR) + "/" + relative; }

std::string quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

CommandResult run(const std::string& command_line, int timeout_s) {
  TempDir dir;
  const fs::path out = dir / "stdout", err = dir / "stderr";
  const std::string line = "timeout -k 5 " + std::to_string(timeout_s) + " bash -c " + quote(command_line) +
                           " >" + quote(out.string()) + " 2>" + quote(err.string()) + " </dev/null";
  const int status = std::system(line.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out);
  result.err = read_file(err);
  return result;
}

CommandResult run_oml(const std::string& command, const std::string& args, int timeout_s) {
  return run(quote(command_path(command)) + " " + args, timeout_s);
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

}  // namespace oml::test
