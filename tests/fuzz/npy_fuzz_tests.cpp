// Fuzzing the .npy reader: files written by io::write_npy, mutated at the byte level and in
// their header dict (shape, descr, fortran_order, the header length, the format version, the
// data's length), go through io::read_npy_matrix (oml-validate's `embeddings: x.npy`) and
// io::read_npy.
#include <torch/torch.h>

#include "fuzz/fuzz.h"
#include "oml/io/npy.h"
#include "support/support.h"

namespace npy_fuzz_tests {

using namespace oml;

namespace {

const std::vector<std::string>& header_tokens() {
  static const std::vector<std::string> tokens{"'descr'",
                                               "'fortran_order'",
                                               "'shape'",
                                               "'<f4'",
                                               "'<f8'",
                                               "'<i4'",
                                               "'<i8'",
                                               "'>f4'",
                                               "'|u1'",
                                               "'<f2'",
                                               "True",
                                               "False",
                                               "(",
                                               ")",
                                               "()",
                                               "(,)",
                                               "(0,)",
                                               "(-1,)",
                                               "(3, 4)",
                                               "(9223372036854775807,)",
                                               "(4294967296, 4294967296)",
                                               "L",
                                               "{",
                                               "}",
                                               ":",
                                               ",",
                                               " ",
                                               "\n",
                                               "\x93NUMPY",
                                               std::string("\x01\x00", 2),
                                               std::string("\x02\x00", 2),
                                               std::string("\x03\x00", 2),
                                               "\xff\xff",
                                               std::string("\0", 1)};
  return tokens;
}

// Values put in place of one entry of the header dict.
const std::vector<std::string> kShapes{
    "()",
    "(0,)",
    "(3,)",
    "(3, 4)",
    "(4, 3)",
    "(12,)",
    "(2, 2, 3)",
    "(-1, 4)",
    "(3, -4)",
    "(3, 4, 1)",
    "(3,",
    "3, 4",
    "[3, 4]",
    "(3L, 4L)",
    "( 3 , 4 )",
    "(3, 4,,)",
    "(,)",
    "(0, 9223372036854775807)",
    "(0, 999999999999999999, 999999999999999999)",
    "(999999999999999999, 999999999999999999)",
    "(4294967296, 4294967296, 4294967296)",
    "(1000000000000000000,)",
    "(9999999999999999999,)",
    "(0x3, 4)",
    "(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
    "1, "
    "1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 12)"};
const std::vector<std::string> kDescrs{"'<f4'", "'<f8'", "'<i4'", "'<i8'", "'>f4'",
                                       "'|u1'", "'<f2'", "'<c8'", "'|b1'", "'<U10'",
                                       "'O'",   "<f4",   "'<f4",  "''",    "[('a', '<f4')]"};
const std::vector<std::string> kFortran{"True", "False", "0", "1", "'False'", "false", ""};

struct NpyParts {
  int major = 1;
  std::string header;
  std::string data;
};

std::optional<NpyParts> split_npy(const std::string& bytes) {
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return std::nullopt;
  NpyParts parts;
  parts.major = static_cast<unsigned char>(bytes[6]);
  const std::size_t prefix = parts.major == 1 ? 10 : 12;
  if (bytes.size() < prefix) return std::nullopt;
  std::size_t length = 0;
  for (std::size_t i = prefix - 1; i >= 8; --i) length = (length << 8) | static_cast<unsigned char>(bytes[i]);
  if (prefix + length > bytes.size()) return std::nullopt;
  parts.header = bytes.substr(prefix, length);
  parts.data = bytes.substr(prefix + length);
  return parts;
}

// The header length is written as the format version says, or (`length`) as given.
std::string join_npy(const NpyParts& parts, std::optional<std::size_t> length = std::nullopt) {
  const std::size_t n = length.value_or(parts.header.size());
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(parts.major));
  out.push_back('\0');
  const int width = parts.major == 1 ? 2 : 4;
  for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + parts.header + parts.data;
}

// The span of the value of `'key':` in the header dict, up to the next ", '" or the closing brace.
std::optional<std::pair<std::size_t, std::size_t>> value_span(const std::string& header,
                                                              const std::string& key) {
  const std::size_t at = header.find("'" + key + "':");
  if (at == std::string::npos) return std::nullopt;
  std::size_t begin = at + key.size() + 3;
  while (begin < header.size() && header[begin] == ' ') ++begin;
  std::size_t end = header.find(", '", begin);
  if (end == std::string::npos) end = header.find('}', begin);
  if (end == std::string::npos) end = header.size();
  return std::make_pair(begin, end - begin);
}

std::string mutate_npy(fuzz::Mutator& m, const std::string& input, const std::vector<std::string>& corpus) {
  std::optional<NpyParts> parts = split_npy(input);
  if (!parts || m.chance(0.4)) return m.mutate(input, corpus);
  switch (m.below(6)) {
    case 0: {  // one entry of the dict replaced
      static const std::vector<std::string> keys{"shape", "descr", "fortran_order"};
      const std::string& key = m.pick(keys);
      const auto span = value_span(parts->header, key);
      if (!span) break;
      const std::string& value = key == "shape"   ? m.pick(kShapes)
                                 : key == "descr" ? m.pick(kDescrs)
                                                  : m.pick(kFortran);
      parts->header.replace(span->first, span->second, value);
      break;
    }
    case 1:  // the dict's text mutated
      parts->header = m.mutate(parts->header, {});
      break;
    case 2: {  // data cut short or made longer
      const std::size_t k = m.chance(0.5) ? 1 + m.below(8) : 1 + m.below(parts->data.size() + 1);
      if (m.chance(0.5)) {
        parts->data.resize(parts->data.size() > k ? parts->data.size() - k : 0);
      } else {
        parts->data.append(k, '\x01');
      }
      break;
    }
    case 3: {  // a header length that does not match
      static const std::size_t kLengths[] = {0, 1, 5, 63, 64, 65535, 0xffffffff};
      const std::size_t n =
          m.chance(0.5) ? kLengths[m.below(std::size(kLengths))] : parts->header.size() + m.below(16) - 8;
      return join_npy(*parts, n);
    }
    case 4: {  // another format version
      static const int kVersions[] = {0, 1, 2, 3, 4, 255};
      parts->major = kVersions[m.below(std::size(kVersions))];
      break;
    }
    default: {  // an entry dropped or given twice
      static const std::vector<std::string> entries{"'descr': '<f4', ", "'fortran_order': False, ",
                                                    "'shape': (3, 4), "};
      const std::string& entry = m.pick(entries);
      const std::size_t at = parts->header.find(entry.substr(0, entry.find(':')));
      if (at != std::string::npos && m.chance(0.5)) {
        const std::size_t end = parts->header.find(", '", at);
        parts->header.erase(at, end == std::string::npos ? std::string::npos : end + 2 - at);
      } else {
        parts->header.insert(1, entry);
      }
    }
  }
  return join_npy(*parts);
}

}  // namespace

TEST_CASE("Mutated .npy files end in exit 0 or 2", "[fuzz][npy]") {
  fuzz::ScratchDir dir;
  fuzz::Target target;
  target.name = "npy";
  target.extension = ".npy";
  // Seeds from our own writer, one per dtype, with empty, 1-D, 2-D and 3-D shapes.
  const std::vector<at::Tensor> arrays{torch::randn({3, 4}),           torch::randn({2, 2}, torch::kDouble),
                                       torch::arange(5, torch::kLong), torch::ones({2, 3, 1}, torch::kInt),
                                       torch::zeros({0, 4}),           torch::tensor(1.5)};
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const auto path = dir / ("seed" + std::to_string(i) + ".npy");
    io::write_npy(path, arrays[i]);
    target.seeds.push_back(fuzz::read_bytes(path));
  }
  // A version 2.0 file: a four-byte header length (NumPy writes it for headers over 64 KiB).
  NpyParts v2 = *split_npy(target.seeds.front());
  v2.major = 2;
  target.seeds.push_back(join_npy(v2));
  target.dictionary = header_tokens();
  target.mutate = mutate_npy;
  const auto file = dir / "embeddings.npy";
  target.entry_points = {{"read_npy_matrix",
                          [&](const std::string& bytes) {
                            fuzz::write_bytes(file, bytes);
                            io::read_npy_matrix(file);
                          }},
                         {"read_npy", [&](const std::string& bytes) {
                            fuzz::write_bytes(file, bytes);
                            io::read_npy(file);
                          }}};
  fuzz::check(target, 2.0);
}

}  // namespace npy_fuzz_tests
