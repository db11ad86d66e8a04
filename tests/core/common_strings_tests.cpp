// The string helpers that messages rely on: valid_utf8 keeps every message printable and
// serialisable whatever bytes it quotes.
#include "oml/common/strings.h"
#include "support/support.h"

namespace common_strings_tests {

using oml::is_valid_utf8;
using oml::valid_utf8;

TEST_CASE("valid_utf8 keeps well-formed UTF-8 and replaces every ill-formed byte with U+FFFD",
          "[common][strings]") {
  const std::string replacement = "\xEF\xBF\xBD";
  // Well-formed: ASCII, 2-, 3- and 4-byte sequences at the edges of their ranges.
  for (const std::string& text :
       {std::string(""), std::string("plain"), std::string("\xC2\x80"), std::string("\xDF\xBF"),
        std::string("\xE0\xA0\x80"), std::string("\xED\x9F\xBF"), std::string("\xEE\x80\x80"),
        std::string("\xEF\xBF\xBF"), std::string("\xF0\x90\x80\x80"), std::string("\xF4\x8F\xBF\xBF"),
        std::string("caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80"), std::string("a\0b", 3)}) {
    INFO(text);
    CHECK(is_valid_utf8(text));
    CHECK(valid_utf8(text) == text);
  }
  // Ill-formed, each byte that starts no well-formed sequence replaced on its own.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\xff", replacement},                                      // never in UTF-8
      {"\x80", replacement},                                      // a lone continuation byte
      {"\xC0\xAF", replacement + replacement},                    // an overlong '/'
      {"\xC1\xBF", replacement + replacement},                    // overlong
      {"\xE0\x80\x80", replacement + replacement + replacement},  // overlong 3-byte
      {"\xED\xA0\x80", replacement + replacement + replacement},  // a surrogate (U+D800)
      {"\xF4\x90\x80\x80", replacement + replacement + replacement + replacement},  // past U+10FFFF
      {"\xF5\x80\x80\x80", replacement + replacement + replacement + replacement},
      {"\xC3", replacement},  // cut short at the end
      {"\xE6\x97", replacement + replacement},
      {"ab\xC3(cd", "ab" + replacement + "(cd"},  // cut short before ASCII
      {std::string("\xff\xfe\x00\x01", 4), replacement + replacement + std::string("\x00\x01", 2)},
  };
  for (const auto& [input, expected] : cases) {
    INFO(input);
    CHECK_FALSE(is_valid_utf8(input));
    CHECK(valid_utf8(input) == expected);
    CHECK(is_valid_utf8(valid_utf8(input)));
  }
}

}  // namespace common_strings_tests
