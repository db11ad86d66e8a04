#pragma once
// Little-endian integers in byte strings, as TFRecord framing (tfrecord.cpp) and W&B's record log
// (wandb_run.cpp) store their lengths and checksums. Private to the report layer; needs nothing
// of LibTorch.

#include <cstddef>
#include <cstdint>
#include <string>

namespace oml::report::detail {

/// Appends the `bytes` low bytes of `value`, least significant first.
inline void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xffu));
}

/// The `bytes`-byte little-endian number at `in[at]` (the caller checks the bounds).
inline uint64_t get_le(const std::string& in, std::size_t at, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i)
    value |= static_cast<uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  return value;
}

}  // namespace oml::report::detail
