#pragma once
// TFRecord framing, the container of TensorBoard event files: each record is
//   uint64 length (little endian) | uint32 masked CRC-32C of the length bytes |
//   data | uint32 masked CRC-32C of the data
// with mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8. Readers reject a record whose
// checksums disagree, so a file cut short by a crash is readable up to its last whole record.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace oml::report {

/// CRC-32C (Castagnoli, the polynomial of iSCSI and TFRecord) of `size` bytes.
uint32_t crc32c(const void* data, std::size_t size);

/// The masked form stored in TFRecord files.
uint32_t masked_crc32c(const void* data, std::size_t size);

/// One framed record holding `data`.
std::string frame_record(const std::string& data);

/// The records of a TFRecord file, in order. A truncated last record is dropped (a crashed
/// writer); a checksum mismatch anywhere is a DataError naming the file and the byte offset.
std::vector<std::string> read_records(const std::filesystem::path& path);

}  // namespace oml::report
