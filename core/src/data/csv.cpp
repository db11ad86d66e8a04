#include "oml/data/csv.h"

#include "oml/common/error.h"

namespace oml::data {

std::vector<CsvRecord> parse_csv(const std::string& text, const std::string& file) {
  std::vector<CsvRecord> records;
  std::size_t pos = 0;
  const std::size_t n = text.size();
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) pos = 3;
  int64_t line = 1;

  while (pos < n) {
    CsvRecord record;
    record.line = line;
    std::string field;
    bool record_done = false;
    while (!record_done) {
      field.clear();
      if (pos < n && text[pos] == '"') {
        const int64_t quote_line = line;
        ++pos;
        for (;;) {
          OML_CHECK(pos < n, DataError, file, ":", quote_line,
                    ": a quoted field is never closed (expected a closing '\"')");
          const char c = text[pos++];
          if (c == '"') {
            if (pos < n && text[pos] == '"') {
              field += '"';
              ++pos;
            } else {
              break;
            }
          } else {
            if (c == '\n') ++line;
            field += c;
          }
        }
        // After the closing quote only a separator or the end of the record may follow.
        if (pos < n && text[pos] == '\r') ++pos;
        OML_CHECK(pos >= n || text[pos] == ',' || text[pos] == '\n', DataError, file, ":", line,
                  ": unexpected character '", text[pos],
                  "' after a closing quote (expected ',' or a line end)");
      } else {
        while (pos < n && text[pos] != ',' && text[pos] != '\n') field += text[pos++];
        if (!field.empty() && field.back() == '\r') field.pop_back();
        OML_CHECK(field.find('\r') == std::string::npos, DataError, file, ":", line,
                  ": a carriage return inside a row: the file has CR-only (classic Mac) line endings; "
                  "save it with LF or CRLF line endings");
      }
      record.fields.push_back(field);
      if (pos >= n) {
        record_done = true;
      } else if (text[pos] == ',') {
        ++pos;
      } else {  // '\n'
        ++pos;
        ++line;
        record_done = true;
      }
    }
    const bool blank = record.fields.size() == 1 && record.fields[0].empty();
    if (!blank) records.push_back(std::move(record));
  }
  return records;
}

std::string csv_escape(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace oml::data
