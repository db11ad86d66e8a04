#pragma once
// SHA-256 (FIPS 180-4) of a file or a string, as lowercase hex — what `sha256sum` prints. Names
// the exact model file a saved index was built with (docs/serving.md#the-index-folder). Computed
// by OpenSSL's libcrypto.

#include <filesystem>
#include <string>
#include <string_view>

namespace oml {

/// SHA-256 of `bytes`, 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

/// SHA-256 of the file's content, streamed in 1 MiB blocks (never read whole); RuntimeError
/// naming the file when it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& file);

}  // namespace oml
