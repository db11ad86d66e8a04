// safetensors files (oml/io/safetensors.h): what the safetensors package writes reads back
// exactly, what oml-cpp writes the package reads, and every malformed file is a DataError naming
// the file (and the tensor where one is at fault).
#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/io/safetensors.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "support/support.h"

namespace safetensors_tests {

using Catch::Matchers::Contains;
using oml::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A safetensors file from its header text and data bytes (the length written as given).
std::string file_bytes(const std::string& header, const std::string& data, uint64_t length) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return out + header + data;
}
std::string file_bytes(const std::string& header, const std::string& data) {
  return file_bytes(header, data, header.size());
}

// The message of the DataError reading `bytes` throws ("" when it does not throw).
std::string read_error(const TempDir& dir, const std::string& bytes) {
  const auto path = dir / "bad.safetensors";
  oml::test::write_file(path, bytes);
  try {
    (void)oml::io::read_safetensors(path);
  } catch (const oml::DataError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("Every dtype the safetensors package writes reads back as torch.save holds it, and back",
          "[io][safetensors][pytorch]") {
  TempDir dir;
  oml::test::link_files(oml::test::reference_export("text_encoder_reference.py", "safetensors_write"),
                        dir.path());
  const auto content = oml::io::read_safetensors(dir / "dtypes.safetensors");
  const auto expected = oml::io::find_state_dict(oml::io::read_torch_file(dir / "dtypes.pt"), "dtypes.pt");
  REQUIRE(content.tensors.size() == expected.size());
  for (const auto& [name, tensor] : expected) {
    INFO(name);
    REQUIRE(content.tensors.count(name) == 1);
    const auto& read = content.tensors.at(name);
    CHECK(read.scalar_type() == tensor.scalar_type());
    CHECK(read.sizes() == tensor.sizes());
    CHECK(torch::equal(read, tensor));
  }
  CHECK(content.tensors.at("scalar").dim() == 0);
  CHECK(content.tensors.at("empty").sizes() == torch::IntArrayRef({0, 4}));
  CHECK(content.metadata ==
        std::map<std::string, std::string>{{"format", "pt"}, {"note", "written by safetensors"}});

  // Written by oml-cpp, read by safetensors.safe_open: the same names, dtypes, values, metadata.
  oml::io::write_safetensors(dir / "oml.safetensors", content.tensors, content.metadata);
  oml::test::run_reference("text_encoder_reference.py", "safetensors_check", dir.path());
}

TEST_CASE("A safetensors file oml-cpp writes reads back identically, its data 8-byte aligned",
          "[io][safetensors]") {
  TempDir dir;
  oml::io::StateDict tensors = {{"a.weight", torch::randn({3, 5})},
                                {"b", torch::arange(7, torch::kLong)},
                                {"c.half", torch::randn({2, 2}).to(torch::kHalf)},
                                {"d.transposed", torch::randn({4, 3}).t()},  // stored contiguous
                                {"e.bf16", torch::randn({6}).to(torch::kBFloat16)}};
  oml::io::write_safetensors(dir / "x.safetensors", tensors, {{"format", "pt"}});
  const std::string bytes = oml::test::read_file(dir / "x.safetensors");
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(bytes[i]);
  CHECK(header % 8 == 0);
  CHECK(bytes[8] == '{');
  const auto back = oml::io::read_safetensors(dir / "x.safetensors");
  CHECK(back.metadata.at("format") == "pt");
  REQUIRE(back.tensors.size() == tensors.size());
  for (const auto& [name, tensor] : tensors) {
    INFO(name);
    CHECK(back.tensors.at(name).scalar_type() == tensor.scalar_type());
    CHECK(torch::equal(back.tensors.at(name), tensor));
  }
  CHECK_THROWS_WITH(
      oml::io::write_safetensors(dir / "y.safetensors", {{"z", torch::randn({2}, torch::kComplexFloat)}}),
      Contains("'z'") && Contains("ComplexFloat"));
  CHECK_FALSE(fs::exists(dir / "y.safetensors"));
}

TEST_CASE("Malformed safetensors files are DataErrors naming the file and the tensor at fault",
          "[io][safetensors]") {
  TempDir dir;
  const std::string file = (dir / "bad.safetensors").string();
  const std::string floats8(8, '\0');  // two float32 values
  const std::string good = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  REQUIRE(read_error(dir, file_bytes(good, floats8)).empty());  // the base every case below breaks

  struct Case {
    const char* what;
    std::string bytes;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"shorter than the length", std::string(5, '\0'), {"less than the 8-byte header length"}},
      {"header longer than the file", file_bytes(good, floats8, 1000), {"truncated", "1000"}},
      {"not JSON", file_bytes(R"({"w": {"dtype": )", ""), {"not valid JSON"}},
      {"not starting with {", file_bytes(" " + good, floats8), {"does not start with '{'"}},
      {"no tensors at all (valid)", file_bytes("{}", ""), {}},
      {"a duplicate name",
       file_bytes(
           R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           floats8),
       {"'w' twice"}},
      {"an unknown dtype",
       file_bytes(R"({"w":{"dtype":"F7","shape":[2],"data_offsets":[0,8]}})", floats8),
       {"'w'", "unknown dtype 'F7'"}},
      {"an unsupported dtype",
       file_bytes(R"({"w":{"dtype":"U32","shape":[2],"data_offsets":[0,8]}})", floats8),
       {"'w'", "U32 is not supported"}},
      {"a negative dimension",
       file_bytes(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", floats8),
       {"'w'", "non-negative integer", "-2"}},
      {"a fractional dimension",
       file_bytes(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}})", floats8),
       {"'w'", "1.5"}},
      {"an empty shape whose other sizes overflow int64",
       file_bytes(
           R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"z":{"dtype":"F32","shape":[0,4611686018427387904,4611686018427387904],"data_offsets":[8,8]}})",
           floats8),
       {"'z'", "too large"}},
      // Printing a value nested 100,000 deep in a message overflowed the stack.
      {"metadata nested 100,000 deep",
       file_bytes(R"({"__metadata__":)" + std::string(100000, '[') + std::string(100000, ']') +
                      R"(,"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                  floats8),
       {"nests deeper than 16 levels"}},
      {"no shape",
       file_bytes(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", floats8),
       {"'w'", "no 'shape'"}},
      {"three offsets",
       file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", floats8),
       {"'w'", "[begin, end]"}},
      {"offsets backwards",
       file_bytes(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", floats8),
       {"'w'", "end before they begin"}},
      {"offsets not the shape's size",
       file_bytes(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", floats8),
       {"'w'", "hold 8 bytes", "takes 3 x 4"}},
      {"a gap",
       file_bytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", floats8),
       {"'w'", "gap"}},
      {"an overlap",
       file_bytes(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           floats8),
       {"'b'", "overlap"}},
      {"truncated data", file_bytes(good, floats8.substr(0, 5)), {"truncated", "need 8 bytes", "has 5"}},
      {"bytes after the data", file_bytes(good, floats8 + "xx"), {"2 bytes after the last tensor"}},
      {"metadata that is not strings",
       file_bytes(R"({"__metadata__":{"format":1},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                  floats8),
       {"__metadata__['format'] must be a string"}},
      {"a shape too large",
       file_bytes(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", floats8),
       {"'w'", "too large"}},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    const std::string message = read_error(dir, c.bytes);
    if (c.says.empty()) {
      CHECK(message.empty());
      continue;
    }
    CHECK_THAT(message, Contains(file));
    for (const auto& part : c.says) CHECK_THAT(message, Contains(part));
  }
  CHECK_THROWS_AS(oml::io::read_safetensors(dir / "missing.safetensors"), oml::DataError);
  oml::test::write_file(dir / "array.safetensors", file_bytes("[1, 2]", ""));
  CHECK_THROWS_AS(oml::io::read_safetensors(dir / "array.safetensors"), oml::DataError);
}

}  // namespace safetensors_tests
