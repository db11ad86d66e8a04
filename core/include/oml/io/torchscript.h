#pragma once
// Weights inside TorchScript archives (`torch.jit.save`), such as OpenAI's published CLIP models:
// only the tensors are read, the archive's code is never run.

#include <filesystem>
#include <string>

#include "oml/io/state_dict.h"

namespace oml::io {

/// Whether `path` is a TorchScript archive (a PyTorch zip file with a `constants.pkl` record),
/// not a torch.save file. False for anything else, files that are not zip files included.
bool is_torchscript_archive(const std::filesystem::path& path);

/// The parameters and buffers of the TorchScript module in `path` — of its submodule `submodule`
/// when given (e.g. "visual", CLIP's image tower) — on the CPU in the archive's dtypes, named
/// relative to that submodule. Every record is checked against its CRC-32 first. DataError naming
/// the file when it is damaged, TorchScript cannot load it, or it has no such submodule.
StateDict read_torchscript_state_dict(const std::filesystem::path& path, const std::string& submodule = "");

}  // namespace oml::io
