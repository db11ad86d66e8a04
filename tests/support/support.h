#pragma once
// Helpers shared by every test binary: temporary folders, files, running the real commands,
// and tensor comparisons.

#include <catch2/catch.hpp>

#include <filesystem>
#include <memory>
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

/// A folder that `fill` fills once per test process, shared by every later call from the same
/// place: for a Python reference, which costs seconds a call (importing torch, transformers or
/// OML) and which Catch would otherwise make again for each test case and each SECTION. Tests
/// only read it or add files under names of their own. Pass a lambda: each lambda is a type of
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
