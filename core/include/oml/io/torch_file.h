#pragma once
// Files in PyTorch's own format (the zip container written by `torch.save`), read and written
// without Python: checkpoints, state dicts and embeddings that `torch.load` opens directly.
//
// Reading understands what torch.save writes for state dicts and plain containers: dicts,
// `collections.OrderedDict`, lists, tuples, numbers, strings, tensors (`_rebuild_tensor_v2`
// with persistent storages), `nn.Parameter`. Other Python objects (e.g. Lightning's
// hyper-parameter namespaces) are kept as a placeholder string "<python object module.name>"
// so that the rest of the file stays usable.

#include <ATen/core/ivalue.h>

#include <filesystem>
#include <string>

namespace oml::io {

/// Unpickles a torch.save / oml-cpp file. Throws DataError naming the file when it is not in the
/// zip format (e.g. torch.save(..., _use_new_zipfile_serialization=False)) or is corrupt.
c10::IValue read_torch_file(const std::filesystem::path& path);

/// Checks the zip archive in memory (`data`, `size` bytes; `name` stands for it in messages)
/// before LibTorch's own loader reads it (an optimizer's state): every record against its CRC-32
/// (LibTorch's reader does not check them), and every pickle read as read_torch_file would,
/// without its tensors' data (LibTorch's unpickler does not limit how deep values nest).
/// DataError naming `name` and the record at fault.
void check_torch_archive(const std::string& name, const char* data, size_t size);

/// Writes `value` (dicts with string keys, lists, tuples, numbers, strings, tensors) in the zip
/// format, atomically. Tensors are stored contiguous on the CPU.
void write_torch_file(const std::filesystem::path& path, const c10::IValue& value);
/// The bytes write_torch_file writes (InternalError when `value` holds what cannot be written).
std::string torch_file_bytes(const c10::IValue& value);

/// A single tensor (e.g. embeddings [N, D]) as `torch.save(tensor)` would write it.
void save_tensor(const std::filesystem::path& path, const at::Tensor& tensor);
/// Reads a file holding one tensor. DataError when the file holds something else.
at::Tensor load_tensor(const std::filesystem::path& path);

}  // namespace oml::io
