#include "oml/common/numbers.h"

#include <stdexcept>

namespace oml {

std::optional<int64_t> parse_int64(const std::string& text) {
  std::size_t used = 0;
  try {
    const long long value = std::stoll(text, &used);
    if (used == text.size() && !text.empty()) return static_cast<int64_t>(value);
  } catch (const std::exception&) {  // not a number, or out of range
  }
  return std::nullopt;
}

std::optional<double> parse_double(const std::string& text) {
  std::size_t used = 0;
  try {
    const double value = std::stod(text, &used);
    if (used == text.size() && !text.empty()) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace oml
