#pragma once
// The CRC-32 that a zip archive's central directory records for each entry, to verify what
// LibTorch's zip reader returns: the reader in LibTorch 1.13 (miniz, built without its CRC
// checks) hands out flipped bytes of a damaged checkpoint as if they were the data.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace oml::io {

class ZipChecksums {
 public:
  /// Reads the central directory of `path` (zip and zip64). DataError naming the file when it
  /// cannot be found or is cut short.
  explicit ZipChecksums(const std::filesystem::path& path);

  /// DataError naming the file and the record unless `data` has the CRC-32 the directory
  /// recorded for `record` (a name inside the archive's top folder, e.g. "data.pkl").
  void verify(const std::string& record, const void* data, std::size_t size) const;

 private:
  std::string file_;
  std::map<std::string, uint32_t> crc_;
};

}  // namespace oml::io
