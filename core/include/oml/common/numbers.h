#pragma once
// Numbers read from text a user wrote (ids, labels, query parameters): the whole text or nothing.

#include <cstdint>
#include <optional>
#include <string>

namespace oml {

/// `text` as a base-10 integer; nullopt when it is empty, holds anything else, or is out of range.
std::optional<int64_t> parse_int64(const std::string& text);
/// `text` as a number (std::stod's syntax); nullopt as above.
std::optional<double> parse_double(const std::string& text);

}  // namespace oml
