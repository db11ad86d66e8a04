#include "oml/report/tfrecord.h"

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>

#include "little_endian.h"
#include "oml/common/error.h"

namespace oml::report {

namespace {

using detail::get_le;
using detail::put_le;

// Reflected Castagnoli polynomial.
constexpr uint32_t kPolynomial = 0x82F63B78u;
constexpr uint32_t kMaskDelta = 0xa282ead8u;

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t crc = i;
      for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1u) ? kPolynomial : 0u);
      t[i] = crc;
    }
    return t;
  }();
  return table;
}

}  // namespace

uint32_t crc32c(const void* data, std::size_t size) {
  const auto& table = crc_table();
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xffffffffu;
  for (std::size_t i = 0; i < size; ++i) crc = table[(crc ^ bytes[i]) & 0xffu] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

uint32_t masked_crc32c(const void* data, std::size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

std::string frame_record(const std::string& data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out += data;
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

std::vector<std::string> read_records(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  OML_CHECK(in, DataError, "cannot open the TFRecord file '", path.string(), "'");
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  std::size_t at = 0;
  while (at + 12 <= bytes.size()) {
    const uint64_t length = get_le(bytes, at, 8);
    const uint32_t length_crc = static_cast<uint32_t>(get_le(bytes, at + 8, 4));
    OML_CHECK(length_crc == masked_crc32c(bytes.data() + at, 8), DataError, path.string(),
              ": the length checksum of the record at byte ", at, " does not match (corrupt file)");
    if (at + 12 + length + 4 > bytes.size()) break;  // cut short by a crash: keep what is whole
    const uint32_t data_crc = static_cast<uint32_t>(get_le(bytes, at + 12 + length, 4));
    OML_CHECK(data_crc == masked_crc32c(bytes.data() + at + 12, length), DataError, path.string(),
              ": the data checksum of the record at byte ", at, " does not match (corrupt file)");
    records.push_back(bytes.substr(at + 12, length));
    at += 12 + length + 4;
  }
  return records;
}

}  // namespace oml::report
