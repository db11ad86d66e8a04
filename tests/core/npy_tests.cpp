// .npy reading and writing: round trips, the exact bytes NumPy expects, and bad files.
#include <torch/torch.h>

#include <fstream>
#include <string>

#include "oml/common/error.h"
#include "oml/io/mapped_file.h"
#include "oml/io/npy.h"
#include "support/support.h"

namespace npy_tests {

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

namespace {

// Resident pages of file mappings in this process (RssFile of /proc/self/status), in KB.
int64_t rss_file_kb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssFile:", 0) == 0) return std::stoll(line.substr(8));
  }
  return -1;
}

}  // namespace

TEST_CASE("A float32 .npy is memory-mapped, equal to the read one, and released pages leave the RSS",
          "[io]") {
  test::TempDir dir;
  const auto matrix = torch::randn({65536, 64});  // 16 MB
  io::write_npy(dir / "big.npy", matrix);
  {
    const at::Tensor mapped = io::map_npy_matrix(dir / "big.npy");
    CHECK(io::is_mapped(mapped));
    CHECK(io::is_mapped(mapped.narrow(0, 1000, 10)));
    CHECK_FALSE(io::is_mapped(matrix));
    REQUIRE(mapped.sizes() == matrix.sizes());
    const int64_t before = rss_file_kb();
    CHECK(torch::equal(mapped, matrix));  // touches every page
    const int64_t touched = rss_file_kb();
    CHECK(touched - before > 12 * 1024);
    io::release_mapped_rows(mapped, 0, mapped.size(0));
    CHECK(touched - rss_file_kb() > 12 * 1024);
    // Released pages read again from the file: the data are unchanged.
    CHECK(torch::equal(mapped.narrow(0, 60000, 100), matrix.narrow(0, 60000, 100)));
    // An in-memory tensor is never advised (it would be zeroed): release is a no-op for it.
    io::release_mapped_rows(matrix, 0, matrix.size(0));
    CHECK(matrix.abs().sum().item<double>() > 0.0);
  }
  // float64 files are read and converted; bad files fail as read_npy_matrix does.
  io::write_npy(dir / "double.npy", matrix.narrow(0, 0, 10).to(torch::kDouble));
  const at::Tensor converted = io::map_npy_matrix(dir / "double.npy");
  CHECK_FALSE(io::is_mapped(converted));
  CHECK(torch::equal(converted, matrix.narrow(0, 0, 10)));
  test::write_file(dir / "bad.npy", "not a numpy file");
  CHECK_THROWS_AS(io::map_npy_matrix(dir / "bad.npy"), DataError);
  io::write_npy(dir / "vector.npy", torch::zeros({5}));
  CHECK_THROWS_WITH(io::map_npy_matrix(dir / "vector.npy"), Contains("expected a [N, D] embedding matrix"));
}

TEST_CASE("gather_rows reads scattered rows of a mapping from its file, not through the mapping", "[io]") {
  test::TempDir dir;
  const auto matrix = torch::randn({65536, 64});  // 16 MB, 16 rows a page
  io::write_npy(dir / "big.npy", matrix);
  // Every 61st row, in no particular order: rows on a quarter of the pages, all over the file.
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < matrix.size(0); r += 61) rows.push_back((r * 7919) % matrix.size(0));
  const at::Tensor expected = matrix.index_select(0, torch::tensor(rows, torch::kLong));
  {
    const at::Tensor mapped = io::map_npy_matrix(dir / "big.npy");
    REQUIRE(io::is_mapped(mapped));
    std::vector<float> out(rows.size() * 64, -1.0f);
    const int64_t before = rss_file_kb();
    io::gather_rows(mapped, rows.data(), rows.size(), out.data());
    // Touching these rows through the mapping would fault in (at least) 64 KB around each.
    CHECK(rss_file_kb() - before < 2 * 1024);
    CHECK(torch::equal(torch::from_blob(out.data(), {static_cast<int64_t>(rows.size()), 64}), expected));
    // A view of the mapping reads its own rows.
    const at::Tensor tail = mapped.narrow(0, 65000, 536);
    const int64_t last = 535;
    std::vector<float> one(64);
    io::gather_rows(tail, &last, 1, one.data());
    CHECK(torch::equal(torch::from_blob(one.data(), {64}), matrix[65535]));
  }
  // An in-memory tensor is copied.
  std::vector<float> out(rows.size() * 64, -1.0f);
  io::gather_rows(matrix, rows.data(), rows.size(), out.data());
  CHECK(torch::equal(torch::from_blob(out.data(), {static_cast<int64_t>(rows.size()), 64}), expected));
}

}  // namespace npy_tests
