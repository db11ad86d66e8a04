#pragma once
// Helpers shared by every test binary: temporary folders, files, running the real commands,
// and tensor comparisons.

#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "oml/common/error.h"

namespace at {
class Tensor;
}  // namespace at
namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace oml::test {

namespace fs = std::filesystem;

/// A fresh folder under the system temp dir, removed (recursively) when destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

/// Sets (or, given no value, unsets) one environment variable while it lives, and puts back what
/// was there before when it goes, also when an assertion fails in between: a test process runs
/// many cases, and a variable left set (OPENCV_TEMP_PATH naming a removed folder) would change
/// the cases after it. `restore()` puts it back early, for a setting only a child process's start
/// must see.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value);
  ~ScopedEnv() { restore(); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  void restore();

 private:
  std::string name_;
  std::optional<std::string> saved_;
  bool restored_ = false;
};

/// A folder that `fill` fills once per test process, shared by every later call from the same
/// place, which the process's tests may add files to under names of their own: for work that
/// costs seconds (several Python calls, a command run) and that Catch would otherwise do again
/// for each test case and each SECTION. (One reference script's export, which tests only read,
/// is reference_export's, shared across processes too.) Pass a lambda: each lambda is a type of
/// its own, and so each call site gets its own folder.
template <class Fill>
const TempDir& filled_once(Fill fill) {
  static const std::unique_ptr<TempDir> dir = [&] {
    auto made = std::make_unique<TempDir>();
    fill(*made);
    return made;
  }();
  return *dir;
}

void write_file(const fs::path& path, const std::string& text);
std::string read_file(const fs::path& path);

/// Path of a built command ("oml-train") or fixture library ("libgood_plugin.so").
std::string command_path(const std::string& name);
std::string fixture_path(const std::string& name);
std::string source_path(const std::string& relative);
/// The Python interpreter of the reference packages (the pinned torch and torchvision wheels in
/// scripts/setup.sh's virtual environment), quoted for the shell.
std::string python();

struct CommandResult {
  int exit_code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

/// Runs a shell command line (arguments must already be quoted), capturing stdout and stderr.
/// The command is killed after `timeout_s` (exit code 124 then).
CommandResult run(const std::string& command_line, int timeout_s = 300);

/// Runs one of the built commands: run_oml("oml-train", "--config x.yaml").
CommandResult run_oml(const std::string& command, const std::string& args, int timeout_s = 300);

/// Quotes a string for the shell.
std::string quote(const std::string& text);

/// Runs the Python reference `tests/python/<script> COMMAND DIR ARGS...` (every reference script
/// takes its folder that way) with the reference environment's interpreter, and REQUIREs that it
/// succeeds, naming the script, its arguments and its output when it does not.
CommandResult run_reference(const std::string& script, const std::string& command, const fs::path& dir,
                            const std::vector<std::string>& args = {}, int timeout_s = 600);

/// The folder of an export: `tests/python/<script> COMMAND DIR ARGS...` for a reference that reads
/// nothing the test wrote (random weights and inputs, and what PyTorch, PML or OML compute of
/// them). A reference costs seconds a call (importing torch, transformers or OML), so it is made
/// once per test process and shared by every later call with the same arguments — and, when
/// OML_TEST_REFERENCES names a folder, once for every test process given that folder, kept
/// there under the digest of tests/python/, the pinned wheels and the arguments: scripts/test.sh makes one
/// for its run, and .ci/run one for both LibTorches' runs, whose Python is the same. Read-only, as other
/// processes read it too: a test that adds files of its own (for a `check` command) works in a TempDir of its
/// own with the export's files linked in (link_files).
const fs::path& reference_export(const std::string& script, const std::string& command,
                                 const std::vector<std::string>& args = {});

/// Symbolic links in `to` (made if missing) to every file and folder directly in `from`, under the
/// same names.
void link_files(const fs::path& from, const fs::path& to);

/// The first 300 train and 300 test images of the packaged Fashion-MNIST, converted with
/// oml-convert once per build tree (build/tests/data/fashion_mnist_300) and shared by every test
/// process: ctest runs each test case in a process of its own, several at a time, so the first
/// one converts under a file lock and the others wait for it and reuse the result (reconverted
/// when oml-convert was rebuilt). Read-only: tests must not write into it.
const fs::path& fashion_mnist_subset();
/// The same for the first `limit` train and `limit` test images (build/tests/data/fashion_mnist_<limit>).
fs::path fashion_mnist_subset(int limit);

/// An oml::Error's message with its context lines (the "while ..." notes added on the way up),
/// one per line: what a command would print.
std::string error_text(const oml::Error& error);

/// max |a - b| (both converted to double on CPU).
double max_abs_diff(const at::Tensor& a, const at::Tensor& b);

/// `module`'s parameters and buffers written as a published plain state dict
/// (`torch.save(model.state_dict())`: unprefixed names, no other entries).
void write_state_dict_file(const fs::path& path, const torch::nn::Module& module);

/// The records of a PyTorch zip archive (a torch.save file, a checkpoint, the TorchScript archive
/// of an optimizer state) in archive order, without the "version" record the writer adds.
using ZipRecords = std::vector<std::pair<std::string, std::string>>;
ZipRecords read_zip_records(const std::string& archive);
/// `records` written as an archive again, with valid CRCs: damage the zip layer cannot see.
std::string write_zip_records(const ZipRecords& records);

/// A valid greyscale PNG of `width` x `height` zero pixels — a decompression bomb: its IDAT is a
/// few hundred bytes per megapixel (zlib's streaming deflate, without the pixels in memory).
std::string png_bomb(uint32_t width, uint32_t height);
/// A PNG whose header claims `width` x `height` greyscale pixels over an empty IDAT: what a
/// bomb's header says, without its data (a reader that trusts it allocates the claimed size).
std::string png_claiming(uint32_t width, uint32_t height);

/// A 16-bit PCM WAV file of `samples` (interleaved frames x `channels`, in [-1, 1], clipped) at
/// `rate` Hz. `claimed_channels` > 0 writes that channel count into the header instead (a
/// hostile header; the data stays as given).
std::string wav_bytes(const std::vector<float>& samples, int rate, int channels, int claimed_channels = 0);

}  // namespace oml::test
