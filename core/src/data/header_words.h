#pragma once
// The whitespace-separated words of a Netpbm, PAM or PFM header, '#' comments skipped, read from
// the header area (the first 4096 bytes), each word at most 24 characters. Shared by
// read_image_header (image_header.cpp) and the PFM decoder (image.cpp), so both read one header
// the same way. Private to the data layer.

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <string>

namespace oml::data::detail {

class HeaderWords {
 public:
  HeaderWords(const std::string& b, std::size_t at) : b_(b), at_(at) {}
  // The next whitespace-separated word, or "" at the end of the header area.
  std::string next() {
    const std::size_t end = std::min<std::size_t>(b_.size(), 4096);
    while (at_ < end) {
      if (b_[at_] == '#') {
        while (at_ < end && b_[at_] != '\n') ++at_;
      } else if (std::isspace(static_cast<unsigned char>(b_[at_]))) {
        ++at_;
      } else {
        break;
      }
    }
    std::string word;
    while (at_ < end && !std::isspace(static_cast<unsigned char>(b_[at_])) && word.size() < 24)
      word += b_[at_++];
    return word;
  }

  /// The position just after the last word returned.
  std::size_t position() const { return at_; }

 private:
  const std::string& b_;
  std::size_t at_;
};

}  // namespace oml::data::detail
