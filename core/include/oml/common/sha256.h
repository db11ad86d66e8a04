#pragma once
// SHA-256 (FIPS 180-4) of a file or a string, as lowercase hex — what `sha256sum` prints. Names
// the exact model file a saved index was built with (docs/serving.md#the-index-folder).

#include <filesystem>
#include <string>

namespace oml {

/// SHA-256 of `bytes`, 64 lowercase hex digits.
std::string sha256_hex(const std::string& bytes);

/// SHA-256 of the file's content, read in blocks; RuntimeError naming the file when it cannot
/// be read.
std::string sha256_file_hex(const std::filesystem::path& file);

}  // namespace oml
