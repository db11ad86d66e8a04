#pragma once
// The CRC-32 that a zip archive's central directory records for each entry, to verify what
// LibTorch's zip reader returns: the reader in LibTorch 1.13 (miniz, built without its CRC
// checks) hands out flipped bytes of a damaged checkpoint as if they were the data.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace oml::io {

class ZipChecksums {
 public:
  /// Reads the central directory of `path` (zip and zip64). DataError naming the file when it
  /// cannot be found or is cut short, or when a record declares more bytes than the file can hold
  /// (checked here because LibTorch's reader allocates the declared size before reading).
  explicit ZipChecksums(const std::filesystem::path& path);
  /// The same for an archive in memory (`data`, `size` bytes); `name` stands for it in messages.
  ZipChecksums(const std::string& name, const char* data, std::size_t size);

  /// DataError naming the file and the record unless `data` has the CRC-32 the directory
  /// recorded for `record` (a name inside the archive's top folder, e.g. "data.pkl").
  void verify(const std::string& record, const void* data, std::size_t size) const;
  /// The size the directory declares for `record` once read (uncompressed), which is what
  /// LibTorch's reader allocates for it: DataError naming the file when `record` is not listed.
  uint64_t size(const std::string& record) const;

 private:
  /// Reads the central directory through `read_at(offset, size)` from an archive of `size` bytes.
  void read_directory(uint64_t size,
                      const std::function<std::vector<unsigned char>(uint64_t, uint64_t)>& read_at);

  struct Entry {
    uint32_t crc = 0;
    uint64_t size = 0;
  };
  const Entry& entry(const std::string& record) const;
  /// The 8-byte sizes of an entry whose 4-byte `size` or `compressed` field is 0xFFFFFFFF, from
  /// its zip64 extra field; DataError when the entry has none.
  void read_zip64_sizes(const unsigned char* extra, std::size_t extra_size, const std::string& name,
                        uint64_t& size, uint64_t& compressed) const;
  /// DataError unless record `name`'s declared size could come from the bytes it occupies in a
  /// file of `file_size` bytes (stored: equal; deflated: at most deflate's expansion).
  void check_declared_size(const std::string& name, uint64_t method, uint64_t size, uint64_t compressed,
                           uint64_t file_size) const;

  std::string file_;
  std::map<std::string, Entry> entries_;
};

}  // namespace oml::io
