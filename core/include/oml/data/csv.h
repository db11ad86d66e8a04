#pragma once
// A small RFC 4180 CSV reader: comma-separated fields, optional double quotes (a quoted field
// may hold commas, newlines and doubled quotes ""), LF or CRLF line ends, an optional UTF-8
// byte-order mark. Every record remembers the 1-based line it starts on, for error messages.

#include <cstdint>
#include <string>
#include <vector>

namespace oml::data {

struct CsvRecord {
  int64_t line = 0;                 ///< 1-based line in the file where the record starts
  std::vector<std::string> fields;  ///< unquoted field values
};

/// Parses `text` into records; blank lines are skipped. Throws DataError naming `file` and the
/// line for an unterminated quoted field or characters after a closing quote.
std::vector<CsvRecord> parse_csv(const std::string& text, const std::string& file);

/// Quotes `field` when it holds a comma, quote, or line break (for writing CSV files).
std::string csv_escape(const std::string& field);

}  // namespace oml::data
