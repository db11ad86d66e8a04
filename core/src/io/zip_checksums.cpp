#include "zip_checksums.h"

#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "oml/common/error.h"

namespace oml::io {

namespace {

uint64_t little_endian(const unsigned char* bytes, int n) {
  uint64_t value = 0;
  for (int i = n - 1; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kZip64EndOfDirectory = 0x06064b50;
constexpr uint32_t kDirectoryEntry = 0x02014b50;

}  // namespace

ZipChecksums::ZipChecksums(const std::filesystem::path& path) : file_(path.string()) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  read_directory(file_size, [&](uint64_t offset, uint64_t size) {
    std::vector<unsigned char> bytes(size);
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
    if (!in) throw DataError(file_ + ": cannot read the zip container's directory");
    return bytes;
  });
}

ZipChecksums::ZipChecksums(const std::string& name, const char* data, std::size_t size) : file_(name) {
  read_directory(size, [&](uint64_t offset, uint64_t count) {
    return std::vector<unsigned char>(data + offset, data + offset + count);
  });
}

void ZipChecksums::read_directory(uint64_t file_size,
                                  const std::function<std::vector<unsigned char>(uint64_t, uint64_t)>& read) {
  auto read_at = [&](uint64_t offset, uint64_t size) {
    if (offset > file_size || size > file_size - offset) {
      throw DataError(file_ + ": damaged zip container: its directory points past the end of the file");
    }
    return read(offset, size);
  };
  // The end-of-directory record: 22 bytes plus a comment of at most 64 KiB, at the end.
  const uint64_t tail_size = std::min<uint64_t>(file_size, 22 + 65535);
  const std::vector<unsigned char> tail = read_at(file_size - tail_size, tail_size);
  int64_t end = -1;
  for (int64_t i = static_cast<int64_t>(tail.size()) - 22; i >= 0; --i) {
    if (little_endian(&tail[i], 4) == kEndOfDirectory) {
      end = i;
      break;
    }
  }
  if (end < 0)
    throw DataError(file_ + ": damaged zip container: no end-of-directory record (a cut-off file?)");
  uint64_t entries = little_endian(&tail[end + 10], 2);
  uint64_t directory_size = little_endian(&tail[end + 12], 4);
  uint64_t directory_offset = little_endian(&tail[end + 16], 4);
  if (entries == 0xFFFF || directory_size == 0xFFFFFFFF || directory_offset == 0xFFFFFFFF) {
    const uint64_t end_offset = file_size - tail_size + static_cast<uint64_t>(end);
    if (end_offset < 20) throw DataError(file_ + ": damaged zip64 container");
    const auto locator = read_at(end_offset - 20, 20);
    if (little_endian(locator.data(), 4) != kZip64Locator)
      throw DataError(file_ + ": damaged zip64 container");
    const auto end64 = read_at(little_endian(&locator[8], 8), 56);
    if (little_endian(end64.data(), 4) != kZip64EndOfDirectory)
      throw DataError(file_ + ": damaged zip64 container");
    entries = little_endian(&end64[32], 8);
    directory_size = little_endian(&end64[40], 8);
    directory_offset = little_endian(&end64[48], 8);
  }
  const std::vector<unsigned char> directory = read_at(directory_offset, directory_size);
  std::size_t at = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    if (at + 46 > directory.size() || little_endian(&directory[at], 4) != kDirectoryEntry) {
      throw DataError(file_ + ": damaged zip container: entry " + std::to_string(e) + " of its directory");
    }
    Entry entry;
    const uint64_t method = little_endian(&directory[at + 10], 2);
    entry.crc = static_cast<uint32_t>(little_endian(&directory[at + 16], 4));
    uint64_t compressed = little_endian(&directory[at + 20], 4);
    entry.size = little_endian(&directory[at + 24], 4);
    const std::size_t name_size = little_endian(&directory[at + 28], 2);
    const std::size_t extra_size = little_endian(&directory[at + 30], 2);
    const std::size_t skip = name_size + extra_size + little_endian(&directory[at + 32], 2);
    if (at + 46 + skip > directory.size()) throw DataError(file_ + ": damaged zip container directory");
    const std::string name(reinterpret_cast<const char*>(&directory[at + 46]), name_size);
    if (entry.size == 0xFFFFFFFF || compressed == 0xFFFFFFFF) {
      read_zip64_sizes(&directory[at + 46 + name_size], extra_size, name, entry.size, compressed);
    }
    check_declared_size(name, method, entry.size, compressed, file_size);
    // Records are read by their name inside the archive's top folder ("archive/data.pkl").
    const std::size_t slash = name.find('/');
    entries_[slash == std::string::npos ? name : name.substr(slash + 1)] = entry;
    at += 46 + skip;
  }
}

void ZipChecksums::read_zip64_sizes(const unsigned char* extra, std::size_t extra_size,
                                    const std::string& name, uint64_t& size, uint64_t& compressed) const {
  // Extra fields are (id, length, data) blocks. Zip64's (id 1) holds, in this order, the 8-byte
  // size and compressed size of those whose 4-byte field in the entry reads 0xFFFFFFFF.
  for (std::size_t at = 0; at + 4 <= extra_size;) {
    const uint64_t id = little_endian(extra + at, 2);
    const std::size_t length = little_endian(extra + at + 2, 2);
    if (at + 4 + length > extra_size) break;
    if (id == 1) {
      const unsigned char* field = extra + at + 4;
      const std::size_t needed = (size == 0xFFFFFFFF ? 8 : 0) + (compressed == 0xFFFFFFFF ? 8 : 0);
      if (length < needed) break;
      if (size == 0xFFFFFFFF) {
        size = little_endian(field, 8);
        field += 8;
      }
      if (compressed == 0xFFFFFFFF) compressed = little_endian(field, 8);
      return;
    }
    at += 4 + length;
  }
  throw DataError(file_ + ": damaged zip64 container: no size for '" + name + "'");
}

void ZipChecksums::check_declared_size(const std::string& name, uint64_t method, uint64_t size,
                                       uint64_t compressed, uint64_t file_size) const {
  // LibTorch's reader allocates the size the directory declares before it reads a byte, so a
  // small file declaring terabytes would be an allocation of terabytes. A record's bytes lie in
  // the file: stored (what torch.save and LibTorch write) they are the record itself, deflated
  // they expand at most ~1032-fold (deflate's limit).
  constexpr uint64_t kStored = 0, kDeflated = 8, kDeflateRatio = 1032;
  const auto refuse = [&](const std::string& why) {
    throw DataError(file_ + ": damaged zip container: record '" + name + "' declares " +
                    std::to_string(size) + " bytes, " + why);
  };
  if (compressed > file_size) {
    refuse("stored in " + std::to_string(compressed) + ", but the file is only " + std::to_string(file_size) +
           " bytes long");
  }
  if (method == kStored && size != compressed) {
    refuse("but it is stored uncompressed in " + std::to_string(compressed));
  }
  if (method == kDeflated && size / kDeflateRatio > compressed) {
    refuse("more than deflate can expand its " + std::to_string(compressed) + " compressed bytes to");
  }
}

const ZipChecksums::Entry& ZipChecksums::entry(const std::string& record) const {
  const auto found = entries_.find(record);
  if (found == entries_.end())
    throw DataError(file_ + ": record '" + record + "' is not in the zip directory");
  return found->second;
}

uint64_t ZipChecksums::size(const std::string& record) const { return entry(record).size; }

void ZipChecksums::verify(const std::string& record, const void* data, std::size_t size) const {
  const uint32_t expected = entry(record).crc;
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* bytes = static_cast<const Bytef*>(data);
  for (std::size_t done = 0; done < size;) {
    const auto chunk = static_cast<uInt>(std::min<std::size_t>(size - done, 1u << 30));
    crc = crc32(crc, bytes + done, chunk);
    done += chunk;
  }
  if (static_cast<uint32_t>(crc) != expected) {
    throw DataError(
        file_ + ": record '" + record +
        "' is damaged (its CRC-32 does not match the one the zip directory recorded); the file was "
        "corrupted after it was written — use another copy");
  }
}

}  // namespace oml::io
