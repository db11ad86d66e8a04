// The mistakes a new user makes first (issue 3, "Done means"): each is a DataError — exit code
// 2 in every command — whose message names the file and the row or image to fix.
#include <sys/stat.h>
#include <torch/torch.h>

#include <filesystem>

#include "oml/common/error.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/image.h"
#include "oml/data/loader.h"
#include "oml/data/transform.h"
#include "oml/io/npy.h"
#include "support/support.h"

namespace data_user_errors_tests {

using Catch::Matchers::Contains;
using oml::test::TempDir;
using oml::test::write_file;
namespace fs = std::filesystem;

namespace {

class Identity : public oml::data::Transform {
 public:
  at::Tensor apply(const at::Tensor& image, const oml::data::RandomKey&) const override {
    return image.permute({2, 0, 1}).to(torch::kFloat32);
  }
  std::string describe() const override { return "identity"; }
};

// Reads `csv` from a folder holding a.png and b.png; returns the DataError's full text.
std::string read_error(const std::string& csv) {
  TempDir dir;
  const auto png = oml::data::encode_image(torch::zeros({8, 8, 3}, torch::kUInt8), "a.png");
  write_file(dir / "a.png", png);
  write_file(dir / "b.png", png);
  write_file(dir / "df.csv", csv);
  try {
    oml::data::Dataframe::read(dir / "df.csv");
  } catch (const oml::DataError& e) {
    CHECK(e.exit_code() == 2);
    std::string text = e.what();
    for (const auto& line : e.context()) text += "\n" + line;
    CHECK_THAT(text, Contains((dir / "df.csv").string()));
    return text;
  }
  FAIL("expected a DataError for:\n" << csv);
  return "";
}

const std::string kHeader = "label,path,split,is_query,is_gallery\n";

}  // namespace

TEST_CASE("New-user dataframe mistakes are exit-2 errors naming the file, row and column", "[data][errors]") {
  CHECK_THAT(read_error("label,path,split,is_query\n0,a.png,train,\n"),
             Contains(":1: missing required column(s) is_gallery"));
  CHECK_THAT(read_error(kHeader + "0,a.png,test,True,True\n"), Contains(":2: column 'split': got 'test'"));
  CHECK_THAT(read_error(kHeader + "0,a.png,train,,\n0,b.png,train,True,\n"),
             Contains(":3: column 'is_query': got 'True'"));
  CHECK_THAT(read_error(kHeader + "0,a.png,validation,True,True\n1,b.png,validation,True,False\n"),
             Contains("line 3 (label 1)"));
  CHECK_THAT(read_error(kHeader + "0,a.png,train,,\n0,c.png,train,,\n"),
             Contains("1 image file(s) do not exist") && Contains("line 3: ") && Contains("c.png"));
  CHECK_THAT(read_error(""), Contains("the dataframe is empty"));
  CHECK_THAT(read_error("label,path,split,is_query,is_gallery,x_1,x_2,y_1,y_2\n0,a.png,train,,,4,2,0,1\n"),
             Contains(":2: columns x_1, x_2: got x_1=4, x_2=2, expected x_1 < x_2"));
}

TEST_CASE("A truncated JPEG in a dataset is an exit-2 error naming the image", "[data][errors]") {
  TempDir dir;
  const auto jpeg = oml::data::encode_image(torch::randint(0, 255, {64, 64, 3}).to(torch::kUInt8), "x.jpg");
  write_file(dir / "cut.jpg", jpeg.substr(0, jpeg.size() * 2 / 3));
  write_file(dir / "df.csv", kHeader + "0,cut.jpg,train,,\n");
  const auto df = oml::data::Dataframe::read(dir / "df.csv");  // exists: passes the up-front checks
  auto dataset = std::make_shared<oml::data::ImageDataset>(df.train(), std::make_shared<Identity>());
  oml::data::Loader loader(dataset, {{0}});
  try {
    loader.next();
    FAIL("expected a DataError");
  } catch (const oml::DataError& e) {
    CHECK(e.exit_code() == 2);
    CHECK_THAT(e.what(), Contains((dir / "cut.jpg").string()) && Contains("truncated"));
  }
}

TEST_CASE("A pipe or a device given as data is refused at once, and a huge image file is not read",
          "[data]") {
  TempDir dir;
  // Opening a FIFO for reading waits for a writer: oml-validate hung until it was killed.
  REQUIRE(::mkfifo((dir / "df.csv").c_str(), 0644) == 0);
  CHECK_THROWS_WITH(oml::data::Dataframe::read(dir / "df.csv"),
                    Contains("df.csv is not a regular file (a device or pipe)"));
  REQUIRE(::mkfifo((dir / "e.npy").c_str(), 0644) == 0);
  CHECK_THROWS_WITH(oml::io::read_npy_matrix(dir / "e.npy"), Contains("e.npy: not a regular file"));
  CHECK_THROWS_WITH(oml::data::Dataframe::read("/dev/zero"), Contains("not a regular file"));
  CHECK_THROWS_WITH(oml::data::read_file_bytes("/dev/zero"), Contains("/dev/zero is not a regular file"));
  // A valid PNG followed by 3 GB of zeros (sparse): refused by its size before it is read (it
  // was read whole into memory, then bad_alloc, exit 1).
  const fs::path big = dir / "big.png";
  write_file(big, oml::data::encode_image(torch::zeros({2, 2, 3}, torch::kUInt8), "x.png"));
  fs::resize_file(big, uint64_t{3} << 30);
  const oml::data::ImageLimits limits;
  CHECK(oml::data::max_image_file_bytes(limits) == uint64_t{89'478'485} * 16 + (uint64_t{64} << 20));
  CHECK_THROWS_WITH(
      oml::data::read_file_bytes(big.string(), oml::data::max_image_file_bytes(limits)),
      Contains("big.png is 3221225472 bytes, more than any image within the pixel limit takes"));
  oml::data::ImageLimits unlimited;
  unlimited.max_pixels = 0;
  CHECK(oml::data::max_image_file_bytes(unlimited) == 0);
}

}  // namespace data_user_errors_tests
