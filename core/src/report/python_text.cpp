#include "python_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <system_error>

namespace oml::report::detail {

namespace {

// The code points of UTF-8 text; a byte that starts no valid sequence reads as U+FFFD (YAML
// files are UTF-8, but a config value is never a reason to fail a logger).
std::vector<uint32_t> code_points(const std::string& text) {
  std::vector<uint32_t> out;
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    int extra = byte < 0x80           ? 0
                : (byte >> 5) == 0x6  ? 1
                : (byte >> 4) == 0xe  ? 2
                : (byte >> 3) == 0x1e ? 3
                                      : -1;
    uint32_t cp = extra == 0 ? byte : extra == 1 ? byte & 0x1fu : extra == 2 ? byte & 0x0fu : byte & 0x07u;
    bool valid = extra >= 0 && i + static_cast<std::size_t>(extra) < text.size() + (extra == 0 ? 1 : 0);
    for (int k = 1; valid && k <= extra; ++k) {
      const auto next = static_cast<unsigned char>(text[i + static_cast<std::size_t>(k)]);
      if ((next >> 6) != 0x2) valid = false;
      cp = (cp << 6) | (next & 0x3fu);
    }
    if (!valid) {
      out.push_back(0xfffd);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += static_cast<std::size_t>(extra) + 1;
  }
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

std::string hex_escape(const char* prefix, uint32_t value, int digits) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%s%0*x", prefix, digits, value);
  return buffer;
}

// Python's str.__repr__: single quotes unless the text has a single quote and no double one.
std::string python_string_repr(const std::string& text) {
  const bool has_single = text.find('\'') != std::string::npos;
  const bool has_double = text.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const uint32_t cp : code_points(text)) {
    if (cp == static_cast<uint32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
      out += hex_escape("\\x", cp, 2);  // the control characters Python does not print
    } else {
      append_utf8(out, cp);
    }
  }
  out.push_back(quote);
  return out;
}

// json.dumps' string form with ensure_ascii=True.
std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (const uint32_t cp : code_points(text)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (cp >= 0x20 && cp < 0x7f) {
          out.push_back(static_cast<char>(cp));
        } else if (cp < 0x10000) {
          out += hex_escape("\\u", cp, 4);
        } else {
          const uint32_t v = cp - 0x10000;
          out += hex_escape("\\u", 0xd800 + (v >> 10), 4);
          out += hex_escape("\\u", 0xdc00 + (v & 0x3ff), 4);
        }
    }
  }
  out.push_back('"');
  return out;
}

template <class Item>
std::string join_items(const nlohmann::json& value, const Item& item) {
  const bool object = value.is_object();
  std::string out(1, object ? '{' : '[');
  bool first = true;
  for (const auto& entry : value.items()) {
    if (!first) out += ", ";
    first = false;
    out += item(entry.key(), entry.value(), object);
  }
  out.push_back(object ? '}' : ']');
  return out;
}

}  // namespace

std::string python_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buffer[64];
  // The shortest scientific form that reads back as x: "d.ddde±XX".
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), x, std::chars_format::scientific);
  std::string text(buffer, result.ptr);
  std::string sign;
  if (text[0] == '-') {
    sign = "-";
    text.erase(0, 1);
  }
  const std::size_t e = text.find('e');
  std::string digits;
  for (std::size_t i = 0; i < e; ++i)
    if (text[i] != '.') digits.push_back(text[i]);
  const int exponent = std::atoi(text.c_str() + e + 1);
  const int point = exponent + 1;  // digits[0..point) before the decimal point
  std::string out = sign;
  if (point > -4 && point <= 16) {
    if (point <= 0) {
      out += "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
    } else if (static_cast<std::size_t>(point) < digits.size()) {
      out += digits.substr(0, static_cast<std::size_t>(point)) + "." +
             digits.substr(static_cast<std::size_t>(point));
    } else {
      out += digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0') + ".0";
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_text[16];
  std::snprintf(exp_text, sizeof(exp_text), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_text;
}

std::string python_repr(const nlohmann::json& value) {
  if (value.is_null()) return "None";
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_number_float()) return python_float_repr(value.get<double>());
  if (value.is_number()) return value.dump();
  if (value.is_string()) return python_string_repr(value.get<std::string>());
  return join_items(value, [](const std::string& key, const nlohmann::json& item, bool object) {
    return (object ? python_string_repr(key) + ": " : std::string()) + python_repr(item);
  });
}

std::string python_str(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : python_repr(value);
}

std::string python_json_dumps(const nlohmann::json& value) {
  if (value.is_null()) return "null";
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_float()) {
    const double x = value.get<double>();
    if (std::isnan(x)) return "NaN";
    if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
    return python_float_repr(x);
  }
  if (value.is_number()) return value.dump();
  if (value.is_string()) return json_string(value.get<std::string>());
  return join_items(value, [](const std::string& key, const nlohmann::json& item, bool object) {
    return (object ? json_string(key) + ": " : std::string()) + python_json_dumps(item);
  });
}

}  // namespace oml::report::detail
