#include "oml/io/torchscript.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/script.h>

#include <fstream>

#include "oml/common/error.h"
#include "zip_checksums.h"

namespace oml::io {
namespace {

bool starts_like_zip(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && magic[0] == 'P' && magic[1] == 'K' && magic[2] == 3 && magic[3] == 4;
}

}  // namespace

bool is_torchscript_archive(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path) || !starts_like_zip(path)) return false;
  try {
    // The directory first: the reader allocates the size of the archive's version record as its
    // directory declares it (ZipChecksums refuses sizes the file cannot hold).
    const ZipChecksums checksums(path);
    caffe2::serialize::PyTorchStreamReader reader(path.string());
    return reader.hasRecord("constants.pkl");
  } catch (const c10::Error&) {
    return false;  // damaged: read_torch_file reports it
  } catch (const DataError&) {
    return false;
  }
}

StateDict read_torchscript_state_dict(const std::filesystem::path& path, const std::string& submodule) {
  const std::string file = path.string();
  OML_CHECK(std::filesystem::is_regular_file(path), DataError, file, ": no such file");
  torch::jit::Module module;
  try {
    {
      // LibTorch's zip reader does not check the CRCs: a damaged archive would load with some
      // values changed. One record at a time, so that memory holds at most the largest one.
      const ZipChecksums checksums(path);  // before the reader, which reads a record (its version)
      caffe2::serialize::PyTorchStreamReader reader(file);
      for (const auto& record : reader.getAllRecords()) {
        at::DataPtr data;
        size_t size = 0;
        std::tie(data, size) = reader.getRecord(record);
        checksums.verify(record, data.get(), size);
      }
    }
    module = torch::jit::load(file, torch::kCPU);
  } catch (const c10::Error& e) {
    throw DataError(file + ": cannot load the TorchScript archive: " + e.what_without_backtrace());
  } catch (const DataError&) {
    throw;
  } catch (const std::exception& e) {
    // TorchScript's compiler reports problems in the archive's code as plain std::exceptions.
    throw DataError(file + ": cannot load the TorchScript archive: " + e.what());
  }
  if (!submodule.empty()) {
    OML_CHECK(module.hasattr(submodule) && module.attr(submodule).isModule(), DataError, file,
              ": the TorchScript module has no submodule '", submodule, "'");
    module = module.attr(submodule).toModule();
  }
  StateDict out;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) out.emplace(p.name, p.value.detach());
  for (const auto& b : module.named_buffers(/*recurse=*/true)) out.emplace(b.name, b.value.detach());
  return out;
}

}  // namespace oml::io
