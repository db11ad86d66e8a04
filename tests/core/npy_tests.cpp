// .npy reading and writing: round trips, the exact bytes NumPy expects, and bad files.
#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/io/npy.h"
#include "support/support.h"

using namespace oml;
using Catch::Matchers::Contains;

namespace {

// A version 1.0 file with the given header dict and raw data bytes.
std::string npy_bytes(const std::string& dict, const std::string& data) {
  std::string header = dict;
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  return out + header + data;
}

}  // namespace

TEST_CASE("Float32 matrices and int64 vectors survive a .npy round trip", "[io]") {
  test::TempDir dir;
  const auto matrix = torch::randn({7, 5});
  io::write_npy(dir / "embeddings.npy", matrix);
  const auto back = io::read_npy(dir / "embeddings.npy");
  CHECK(back.scalar_type() == torch::kFloat);
  CHECK(back.sizes() == matrix.sizes());
  CHECK(torch::equal(back, matrix));
  CHECK(torch::equal(io::read_npy_matrix(dir / "embeddings.npy"), matrix));

  const auto labels = torch::tensor(std::vector<int64_t>{3, -1, 1LL << 40});
  io::write_npy(dir / "labels.npy", labels);
  const auto labels_back = io::read_npy(dir / "labels.npy");
  CHECK(labels_back.scalar_type() == torch::kLong);
  CHECK(torch::equal(labels_back, labels));

  // A non-contiguous view is written in logical (C) order.
  io::write_npy(dir / "t.npy", matrix.t());
  CHECK(torch::equal(io::read_npy(dir / "t.npy"), matrix.t().contiguous()));
}

TEST_CASE("Written .npy files carry the header NumPy writes", "[io]") {
  test::TempDir dir;
  io::write_npy(dir / "e.npy", torch::zeros({2, 3}));
  const std::string bytes = test::read_file(dir / "e.npy");
  CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header_size =
      static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
  CHECK((10 + header_size) % 64 == 0);
  CHECK_THAT(bytes.substr(10, header_size),
             Contains("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
  CHECK(bytes.size() == 10 + header_size + 6 * 4);
}

TEST_CASE("Float64 embeddings are read as float32 matrices", "[io]") {
  test::TempDir dir;
  const auto matrix = torch::randn({4, 3}, torch::kDouble);
  io::write_npy(dir / "e.npy", matrix);
  const auto back = io::read_npy_matrix(dir / "e.npy");
  CHECK(back.scalar_type() == torch::kFloat);
  CHECK(torch::equal(back, matrix.to(torch::kFloat)));
}

TEST_CASE("Bad .npy files fail with a message naming the file and the problem", "[io]") {
  test::TempDir dir;
  const auto path = dir / "bad.npy";
  const std::string eight_floats(32, '\0');
  SECTION("not a .npy file") {
    test::write_file(path, "label,path\n1,a.jpg\n");
    CHECK_THROWS_WITH(io::read_npy(path), Contains("bad.npy") && Contains("magic"));
  }
  SECTION("truncated data") {
    test::write_file(path, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }",
                                     eight_floats.substr(0, 20)));
    CHECK_THROWS_WITH(io::read_npy(path), Contains("truncated") && Contains("needs 32 bytes"));
  }
  SECTION("a header claiming more data than any file holds, checked before allocating") {
    test::write_file(
        path,
        npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 10), }", eight_floats));
    CHECK_THROWS_AS(io::read_npy(path), DataError);
    CHECK_THROWS_WITH(io::read_npy(path),
                      Contains("needs 40000000000000 bytes") && Contains("the file has 32"));
    test::write_file(path, npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                                     "'shape': (99999999999999999999999, 10), }",
                                     eight_floats));
    CHECK_THROWS_WITH(io::read_npy(path), Contains("malformed shape"));
  }
  SECTION("extra bytes after the data") {
    test::write_file(
        path, npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }", eight_floats + "x"));
    CHECK_THROWS_WITH(io::read_npy(path), Contains("1 bytes after"));
  }
  SECTION("a big-endian dtype") {
    test::write_file(path,
                     npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (4, 2), }", eight_floats));
    CHECK_THROWS_WITH(io::read_npy(path), Contains("'>f4' is not supported"));
  }
  SECTION("half precision") {
    test::write_file(path,
                     npy_bytes("{'descr': '<f2', 'fortran_order': False, 'shape': (8, 2), }", eight_floats));
    CHECK_THROWS_AS(io::read_npy(path), DataError);
  }
  SECTION("Fortran order") {
    test::write_file(path,
                     npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (4, 2), }", eight_floats));
    CHECK_THROWS_WITH(io::read_npy(path), Contains("Fortran"));
  }
  SECTION("a vector where a matrix is expected") {
    test::write_file(path,
                     npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }", eight_floats));
    CHECK(io::read_npy(path).sizes() == torch::IntArrayRef{8});
    CHECK_THROWS_WITH(io::read_npy_matrix(path), Contains("expected a [N, D] embedding matrix"));
  }
  SECTION("int64 data where embeddings are expected") {
    test::write_file(path,
                     npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }", eight_floats));
    CHECK_THROWS_WITH(io::read_npy_matrix(path), Contains("expected float32 or float64"));
  }
  SECTION("a missing file") {
    CHECK_THROWS_WITH(io::read_npy(dir / "absent.npy"), Contains("absent.npy") && Contains("cannot open"));
  }
  SECTION("an unsupported dtype to write") {
    CHECK_THROWS_AS(io::write_npy(path, torch::zeros({2}, torch::kBool)), UsageError);
  }
}
