// oml-convert run as a user runs it, on the packaged Fashion-MNIST and on tiny fake trees
// that follow the official layouts of CUB-200-2011, SOP, CARS196 and DeepFashion InShop.
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include "oml/data/dataframe.h"
#include "oml/data/image.h"
#include "support/support.h"

namespace convert_tests {

using Catch::Matchers::Contains;
using oml::test::quote;
using oml::test::run_oml;
using oml::test::TempDir;
using oml::test::write_file;
namespace fs = std::filesystem;

namespace {

const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";

void write_image(const fs::path& path, int64_t height = 40, int64_t width = 50) {
  write_file(path,
             oml::data::encode_image(torch::full({height, width, 3}, 90, torch::kUInt8), path.string()));
}

oml::test::CommandResult convert(const std::string& format, const fs::path& src, const fs::path& dst,
                                 const std::string& extra = "") {
  return run_oml("oml-convert",
                 format + " --src " + quote(src.string()) + " --dst " + quote(dst.string()) + " " + extra);
}

// Reads the output with every docs/contracts.md#dataframe check (files included) and decodes every image.
oml::data::Dataframe check_output(const fs::path& dst) {
  const auto df = oml::data::Dataframe::read(dst / "df.csv");
  for (const auto* split : {&df.train(), &df.validation()}) {
    for (const auto& path : split->paths)
      CHECK(oml::data::decode_image(oml::data::read_file_bytes(path), path).numel() > 0);
  }
  return df;
}

std::string idx_images(int count, int rows, int cols, int seed) {
  std::string out = {0, 0, 8, 3};
  for (int v : {count, rows, cols}) out += {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  for (int i = 0; i < count * rows * cols; ++i) out += char((i * 13 + seed) % 256);
  return out;
}

std::string idx_labels(const std::vector<int>& labels) {
  std::string out = {0, 0, 8, 1};
  const int n = static_cast<int>(labels.size());
  out += {char(n >> 24), char(n >> 16), char(n >> 8), char(n)};
  for (int label : labels) out += char(label);
  return out;
}

// A minimal MATLAB level-5 writer (uncompressed) for the CARS196 layout: a 1xN struct array
// `annotations` whose fields are a char array and 1x1 numeric arrays, as cars_annos.mat holds.
std::string mat_element(uint32_t type, const std::string& data) {
  std::string out(8, '\0');
  const uint32_t size = static_cast<uint32_t>(data.size());
  std::memcpy(&out[0], &type, 4);
  std::memcpy(&out[4], &size, 4);
  out += data;
  out.resize((out.size() + 7) / 8 * 8, '\0');
  return out;
}

template <class T>
std::string raw(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

std::string mat_matrix(uint32_t cls, const std::vector<int32_t>& dims, const std::string& name,
                       const std::string& body) {
  return mat_element(14, mat_element(6, raw(std::vector<uint32_t>{cls, 0})) + mat_element(5, raw(dims)) +
                             mat_element(1, name) + body);
}

std::string mat_text(const std::string& text) {
  std::vector<uint16_t> chars(text.begin(), text.end());
  return mat_matrix(4, {1, static_cast<int32_t>(text.size())}, "", mat_element(4, raw(chars)));
}

std::string mat_number(double value, bool as_uint8) {
  // MATLAB stores double-class values that fit in small integers with a compact type.
  const std::string data = as_uint8 ? mat_element(2, std::string(1, static_cast<char>(value)))
                                    : mat_element(9, raw(std::vector<double>{value}));
  return mat_matrix(6, {1, 1}, "", data);
}

struct CarsRow {
  std::string path;
  int x1, y1, x2, y2, label;
};

std::string cars_annos_mat(const std::vector<CarsRow>& rows) {
  const std::vector<std::string> fields{"relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2",
                                        "bbox_y2",          "class",   "test"};
  std::string names;
  for (const auto& field : fields) names += field + std::string(32 - field.size(), '\0');
  const uint32_t small_tag = (4u << 16) | 5u;  // small element: 4 bytes of miINT32
  std::string body(8, '\0');
  std::memcpy(&body[0], &small_tag, 4);
  const int32_t name_length = 32;
  std::memcpy(&body[4], &name_length, 4);
  body += mat_element(1, names);
  for (const auto& row : rows) {
    body += mat_text(row.path) + mat_number(row.x1, true) + mat_number(row.y1, false) +
            mat_number(row.x2, true) + mat_number(row.y2, false) + mat_number(row.label, true) +
            mat_number(0, true);
  }
  std::string header = "MATLAB 5.0 MAT-file, written by the oml-cpp tests";
  header.resize(116, ' ');
  header += std::string(8, '\0');
  header += std::string("\x00\x01", 2);
  header += "IM";
  return header + mat_matrix(2, {1, static_cast<int32_t>(rows.size())}, "annotations", body);
}

}  // namespace

TEST_CASE("oml-convert fashion-mnist converts the packaged dataset", "[convert][integration]") {
  if (!fs::exists(fs::path(kFashionMnist) / "train-images-idx3-ubyte.gz")) {
    WARN("skipped: " << kFashionMnist << " is not installed (apt-get install dataset-fashion-mnist)");
    return;
  }
  TempDir dir;
  const auto result = convert("fashion-mnist", kFashionMnist, dir / "fmnist", "--limit 300");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("300 train rows, 300 validation rows"));
  const auto df = check_output(dir / "fmnist");
  CHECK(df.train().size() == 300);
  CHECK(df.validation().size() == 300);
  CHECK(df.train().num_labels() == 10);
  for (std::size_t i = 0; i < df.validation().size(); ++i) {
    CHECK(df.validation().is_query[i]);
    CHECK(df.validation().is_gallery[i]);
  }
  const auto image = oml::data::decode_image(oml::data::read_file_bytes(df.train().paths[0]), "");
  CHECK(image.sizes() == std::vector<int64_t>{28, 28, 3});
}

// The whole dataset (70,000 PNGs): run on demand with
//   build/tests/oml_integration_tests "[fashion-mnist-full]"
TEST_CASE("oml-convert fashion-mnist writes all 70,000 rows, every file decodable",
          "[.][fashion-mnist-full]") {
  TempDir dir;
  const auto result = convert("fashion-mnist", kFashionMnist, dir / "fmnist");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  WARN(result.out);
  const auto df = check_output(dir / "fmnist");
  CHECK(df.size() == 70000);
  CHECK(df.train().size() == 60000);
  CHECK(df.validation().size() == 10000);
}

TEST_CASE("oml-convert fashion-mnist reads uncompressed IDX files and checks their headers",
          "[convert][integration]") {
  TempDir dir;
  const fs::path src = dir / "src";
  write_file(src / "train-images-idx3-ubyte", idx_images(3, 4, 5, 1));
  write_file(src / "train-labels-idx1-ubyte", idx_labels({0, 1, 1}));
  write_file(src / "t10k-images-idx3-ubyte", idx_images(2, 4, 5, 2));
  write_file(src / "t10k-labels-idx1-ubyte", idx_labels({3, 3}));
  const auto ok = convert("fashion-mnist", src, dir / "out");
  INFO(ok.err);
  REQUIRE(ok.exit_code == 0);
  const auto df = check_output(dir / "out");
  CHECK(df.train().original_labels == std::vector<int64_t>{0, 1, 1});
  const auto pixels = oml::data::decode_image(oml::data::read_file_bytes(df.train().paths[1]), "");
  CHECK(pixels.sizes() == std::vector<int64_t>{4, 5, 3});
  CHECK(pixels[0][0][0].item<int>() == (20 * 13 + 1) % 256);  // image 1 starts at pixel 20

  write_file(src / "t10k-labels-idx1-ubyte", idx_labels({3}));
  const auto mismatch = convert("fashion-mnist", src, dir / "out");
  CHECK(mismatch.exit_code == 2);
  CHECK_THAT(mismatch.err, Contains("holds 2 images but") && Contains("1 labels"));
  CHECK(fs::exists(dir / "out" / "df.csv"));  // the previous output is untouched
  fs::remove(src / "t10k-images-idx3-ubyte");
  CHECK_THAT(convert("fashion-mnist", src, dir / "out").err, Contains("t10k-images-idx3-ubyte"));

  // Headers whose sizes multiply past int64 (2^26 images of 2^19 x 2^19 wrapped to 0 bytes, and
  // matched a 16-byte file: a segfault), or announce images without pixels.
  const auto header_only = [](uint32_t count, uint32_t rows, uint32_t cols) {
    std::string out = {0, 0, 8, 3};
    for (uint32_t v : {count, rows, cols}) out += {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
    return out;
  };
  write_file(src / "t10k-labels-idx1-ubyte", idx_labels({3, 3}));
  write_file(src / "t10k-images-idx3-ubyte", idx_images(2, 4, 5, 2));
  for (const auto& [header, why] : std::vector<std::pair<std::string, std::string>>{
           {header_only(1u << 26, 1u << 19, 1u << 19),
            "images of 524288x524288 pixels; IDX images have 1 to 65535"},
           {header_only(4, 65535, 65535), "(17179344916 bytes) but it holds 16 bytes"},
           {header_only(0xFFFFFFFFu, 65535, 65535), "more than 2^63 bytes"},
           {header_only(2, 0, 5), "images of 0x5 pixels"}}) {
    write_file(src / "train-images-idx3-ubyte", header);
    const auto r = convert("fashion-mnist", src, dir / "crafted");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("train-images-idx3-ubyte") && Contains(why));
  }
}

TEST_CASE("oml-convert image-folder splits by label, deterministically by seed", "[convert][integration]") {
  TempDir dir;
  const fs::path src = dir / "src";
  for (const std::string label : {"ant", "bee", "cat", "dog", "eel", "fox"}) {
    for (int i = 0; i < 2; ++i) write_image(src / label / (std::to_string(i) + ".png"));
  }
  write_file(src / "notes.txt", "ignored");
  const auto first = convert("image-folder", src, dir / "a", "--val-fraction 0.5 --seed 3");
  INFO(first.err);
  REQUIRE(first.exit_code == 0);
  REQUIRE(convert("image-folder", src, dir / "b", "--val-fraction 0.5 --seed 3").exit_code == 0);
  CHECK(oml::test::read_file(dir / "a" / "df.csv") == oml::test::read_file(dir / "b" / "df.csv"));
  const auto df = check_output(dir / "a");
  CHECK(df.train().size() == 6);
  CHECK(df.validation().size() == 6);
  const std::set<int64_t> train(df.train().original_labels.begin(), df.train().original_labels.end());
  for (int64_t label : df.validation().labels) CHECK(train.count(label) == 0);
  CHECK_THAT(df.train().paths[0], Contains("/images/"));

  const auto all_train = convert("image-folder", src, dir / "c");
  REQUIRE(all_train.exit_code == 0);
  CHECK(oml::data::Dataframe::read(dir / "c" / "df.csv").train().num_labels() == 6);
  const auto bad = convert("image-folder", src, dir / "d", "--val-fraction 1.5");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("--val-fraction"));
}

TEST_CASE("oml-convert never replaces a --dst holding files it did not write, nor one overlapping --src",
          "[convert][integration]") {
  TempDir dir;
  const fs::path project = dir / "project", src = project / "raw";
  for (const std::string label : {"ant", "bee"}) {
    for (int i = 0; i < 2; ++i) write_image(src / label / (std::to_string(i) + ".png"));
  }
  write_file(project / "notes.md", "the user's own file");
  auto refused = [&](const fs::path& dst, const std::string& why) {
    const auto r = convert("image-folder", src, dst);
    INFO(dst.string() << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(why));
    CHECK(oml::test::read_file(project / "notes.md") == "the user's own file");
    CHECK(fs::exists(src / "ant" / "0.png"));
  };
  refused(project, "overlap");      // --dst around --src: would take the source and notes.md
  refused(src, "overlap");          // --dst is --src
  refused(src / "out", "overlap");  // --dst inside --src
  fs::create_directories(dir / "mine");
  write_file(dir / "mine" / "a.txt", "keep");
  refused(dir / "mine", "did not write");
  CHECK(oml::test::read_file(dir / "mine" / "a.txt") == "keep");

  // An empty folder, and then the converter's own earlier output, are replaced; the staging
  // folder of a killed conversion into it (pid 4194304: above Linux's largest pid) goes.
  fs::create_directories(dir / "out");
  write_file(dir / "out.tmp-4194304-0" / "images" / "x.png", "half a dataset");
  REQUIRE(convert("image-folder", src, dir / "out").exit_code == 0);
  CHECK(fs::exists(dir / "out" / ".oml-convert"));
  CHECK_FALSE(fs::exists(dir / "out.tmp-4194304-0"));
  const auto again = convert("image-folder", src, dir / "out");
  INFO(again.err);
  CHECK(again.exit_code == 0);
  check_output(dir / "out");
  // "out/" is the folder "out" (the staging folder and the swap once went inside it, and failed
  // after the whole conversion).
  const auto slash = convert("image-folder", src, (dir / "out").string() + "/");
  INFO(slash.err);
  CHECK(slash.exit_code == 0);
  check_output(dir / "out");
  for (const auto& entry : fs::directory_iterator(dir / "out")) {
    CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);
  }

  // What a user put into an earlier output since (their own dataframe, a training run's logs, a
  // file among the images, an empty folder) is never replaced with it: the marker lists what
  // the conversion wrote.
  const auto refused_since = [&](const fs::path& added, const std::string& shown) {
    const auto r = convert("image-folder", src, dir / "out");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("holds files oml-convert did not write") && Contains(shown) &&
                          Contains("move those out of the earlier output"));
    CHECK(fs::exists(added));
    fs::remove_all(added);
  };
  write_file(dir / "out" / "df_cleaned.csv", "label,path,split,is_query,is_gallery\n");
  refused_since(dir / "out" / "df_cleaned.csv", "df_cleaned.csv");
  write_file(dir / "out" / "logs" / "exp1" / "checkpoints" / "best.ckpt", "a run's checkpoint");
  refused_since(dir / "out" / "logs", "logs/exp1/checkpoints/best.ckpt");
  write_file(dir / "out" / "images" / "mine.png", "an image the user added");
  refused_since(dir / "out" / "images" / "mine.png", "images/mine.png");
  fs::create_directories(dir / "out" / "empty");
  refused_since(dir / "out" / "empty", "empty/");
  // Its own df.csv edited since is the user's now.
  const std::string converted_df = oml::test::read_file(dir / "out" / "df.csv");
  write_file(dir / "out" / "df.csv", converted_df + "# my edit\n");
  const auto edited = convert("image-folder", src, dir / "out");
  CHECK(edited.exit_code == 2);
  CHECK_THAT(edited.err, Contains("did not write or that changed since") && Contains("df.csv"));
  write_file(dir / "out" / "df.csv", converted_df);  // (a new mtime: still not what it wrote)
  fs::remove_all(dir / "out");
  CHECK(convert("image-folder", src, dir / "out").exit_code == 0);  // as converted again

  // A marker from before the listing: what those conversions wrote at the top level is theirs.
  write_file(dir / "out" / ".oml-convert", "written by oml-convert from raw; oml-convert may replace this\n");
  write_file(dir / "out" / "notes.md", "the user's");
  refused_since(dir / "out" / "notes.md", "notes.md");
  CHECK(convert("image-folder", src, dir / "out").exit_code == 0);

  // A link as --dst would be replaced by a folder: refused before any work.
  fs::create_directory_symlink(dir / "out", dir / "link");
  const auto link = convert("image-folder", src, dir / "link");
  CHECK(link.exit_code == 2);
  CHECK_THAT(link.err, Contains("is a symbolic link"));
  fs::create_directory_symlink(dir / "nowhere", dir / "dangling");
  CHECK(convert("image-folder", src, dir / "dangling").exit_code == 2);
}

TEST_CASE("oml-convert cub reads the CUB-200-2011 layout with boxes and the class split",
          "[convert][integration]") {
  TempDir dir;
  const fs::path root = dir / "CUB_200_2011";
  const std::vector<std::pair<std::string, int>> images{{"001.Albatross/a_1.jpg", 1},
                                                        {"001.Albatross/a_2.jpg", 1},
                                                        {"101.Wren/w_1.jpg", 101},
                                                        {"101.Wren/w_2.jpg", 101}};
  std::string list, labels, boxes, split;
  for (std::size_t i = 0; i < images.size(); ++i) {
    const std::string id = std::to_string(i + 1);
    write_image(root / "images" / images[i].first);
    list += id + " " + images[i].first + "\n";
    labels += id + " " + std::to_string(images[i].second) + "\n";
    boxes += id + " 3.0 4.0 20.0 10.0\n";
    split += id + " " + std::to_string(i % 2) + "\n";
  }
  write_file(root / "images.txt", list);
  write_file(root / "image_class_labels.txt", labels);
  write_file(root / "bounding_boxes.txt", boxes);
  write_file(root / "train_test_split.txt", split);
  const auto result = convert("cub", dir.path(), dir / "out");  // the archive's parent folder works too
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const auto df = check_output(dir / "out");
  CHECK(df.train().original_labels == std::vector<int64_t>{1, 1});
  CHECK(df.validation().labels == std::vector<int64_t>{101, 101});
  CHECK(*df.train().bboxes[0] == oml::data::BBox{3, 23, 4, 14});
  CHECK_THAT(df.validation().paths[0], Contains("images/101.Wren/w_1.jpg"));
  // OML's recipes ask for dataframe_name: df_with_bboxes.csv.
  CHECK(oml::test::read_file(dir / "out" / "df_with_bboxes.csv") ==
        oml::test::read_file(dir / "out" / "df.csv"));

  write_file(root / "bounding_boxes.txt", "1 3 4 20\n");
  const auto bad = convert("cub", root, dir / "out");
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("bounding_boxes.txt:1") && Contains("expected 5 fields"));
}

TEST_CASE("oml-convert sop reads Ebay_train/Ebay_test with categories", "[convert][integration]") {
  TempDir dir;
  const fs::path root = dir / "Stanford_Online_Products";
  write_file(
      root / "Ebay_train.txt",
      "image_id class_id super_class_id path\n1 1 1 bicycle_final/1_0.JPG\n2 1 1 bicycle_final/1_1.JPG\n"
      "3 2 2 chair_final/2_0.JPG\n");
  write_file(
      root / "Ebay_test.txt",
      "image_id class_id super_class_id path\n4 3 1 bicycle_final/3_0.JPG\n5 3 1 bicycle_final/3_1.JPG\n");
  for (const std::string name : {"bicycle_final/1_0.JPG", "bicycle_final/1_1.JPG", "chair_final/2_0.JPG",
                                 "bicycle_final/3_0.JPG", "bicycle_final/3_1.JPG"}) {
    write_image(root / name);
  }
  const auto result = convert("sop", root, dir / "out");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const auto df = check_output(dir / "out");
  CHECK(df.train().categories == std::vector<std::string>{"bicycle", "bicycle", "chair"});
  CHECK(df.train().labels == std::vector<int64_t>{0, 0, 1});
  CHECK(df.validation().size() == 2);
  CHECK(df.validation().label2category.at(3) == "bicycle");

  // A path in an index file that leaves the dataset's folder: the copy into --dst would have
  // written outside it (a file of the user's next to --dst was overwritten, exit 0).
  write_file(dir / "victim.txt", "the user's");
  for (const std::string& bad : std::vector<std::string>{"../victim.txt", "bicycle_final/../../victim.txt",
                                                         (dir / "victim.txt").string()}) {
    write_file(root / "Ebay_test.txt",
               "image_id class_id super_class_id path\n4 3 1 bicycle_final/3_0.JPG\n5 3 1 " + bad + "\n");
    const auto escape = convert("sop", root, dir / "out2");
    INFO(escape.err);
    CHECK(escape.exit_code == 2);
    CHECK_THAT(escape.err, Contains("Ebay_test.txt:3: image path '" + bad +
                                    "' is not a path inside the dataset's folder"));
    CHECK(oml::test::read_file(dir / "victim.txt") == "the user's");
    CHECK_FALSE(fs::exists(dir / "out2"));
  }
}

TEST_CASE("oml-convert cars reads the CSV export cars_annos.csv with the class split",
          "[convert][integration]") {
  TempDir dir;
  const fs::path root = dir / "cars";
  write_file(root / "cars_annos.csv",
             "relative_im_path,bbox_x1,bbox_y1,bbox_x2,bbox_y2,class,test\n"
             "car_ims/000001.jpg,1,2,30,20,1,0\ncar_ims/000002.jpg,0,0,49,39,98,1\n"
             "car_ims/000003.jpg,5,5,25,25,99,0\ncar_ims/000004.jpg,5,5,25,25,99,1\n");
  for (int i = 1; i <= 4; ++i) write_image(root / ("car_ims/00000" + std::to_string(i) + ".jpg"));
  const auto result = convert("cars", root, dir / "out");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const auto df = check_output(dir / "out");
  CHECK(df.train().original_labels == std::vector<int64_t>{1, 98});
  CHECK(df.validation().labels == std::vector<int64_t>{99, 99});
  CHECK(*df.train().bboxes[0] == oml::data::BBox{1, 30, 2, 20});
  fs::remove(root / "cars_annos.csv");
  const auto missing = convert("cars", root, dir / "out");
  CHECK(missing.exit_code == 2);
  CHECK_THAT(missing.err, Contains("cars_annos.csv"));
}

TEST_CASE("oml-convert cars refuses a MAT file nested deeper than annotations are, before its stack runs out",
          "[convert][integration]") {
  TempDir dir;
  const fs::path root = dir / "cars";
  // `annotations` as a cell holding a cell ... 2000 deep (30,000 overflowed the stack).
  std::string value = mat_text("car_ims/000001.jpg");
  for (int depth = 0; depth < 2000; ++depth) value = mat_matrix(1, {1, 1}, "", value);
  std::string header = "MATLAB 5.0 MAT-file, written by the oml-cpp tests";
  header.resize(116, ' ');
  header += std::string(8, '\0') + std::string("\x00\x01", 2) + "IM";
  write_file(root / "cars_annos.mat", header + mat_matrix(1, {1, 1}, "annotations", value));
  const auto r = convert("cars", root, dir / "out");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("cars_annos.mat: variable 'annotations{1}{1}") &&
                        Contains("structs and cells nested more than 64 levels deep"));
}

TEST_CASE("oml-convert cars reads cars_annos.mat (MATLAB 5 struct array)", "[convert][integration]") {
  TempDir dir;
  const fs::path root = dir / "cars";
  write_file(root / "cars_annos.mat", cars_annos_mat({{"car_ims/000001.jpg", 1, 2, 30, 20, 1},
                                                      {"car_ims/000002.jpg", 3, 4, 40, 35, 120},
                                                      {"car_ims/000003.jpg", 0, 0, 49, 39, 120}}));
  for (int i = 1; i <= 3; ++i) write_image(root / ("car_ims/00000" + std::to_string(i) + ".jpg"));
  const auto result = convert("cars", root, dir / "out");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const auto df = check_output(dir / "out");
  CHECK(df.train().original_labels == std::vector<int64_t>{1});
  CHECK(*df.train().bboxes[0] == oml::data::BBox{1, 30, 2, 20});
  CHECK(df.validation().labels == std::vector<int64_t>{120, 120});
  CHECK(*df.validation().bboxes[0] == oml::data::BBox{3, 40, 4, 35});
  CHECK_THAT(df.validation().paths[1], Contains("car_ims/000003.jpg"));

  write_file(root / "cars_annos.mat", "MATLAB 7.3 MAT-file" + std::string(200, ' '));
  const auto hdf5 = convert("cars", root, dir / "out");
  CHECK(hdf5.exit_code == 2);
  CHECK_THAT(hdf5.err, Contains("cars_annos.mat is not a little-endian MATLAB 5 MAT file"));
}

TEST_CASE("oml-convert inshop reads the partition and box lists with query/gallery roles",
          "[convert][integration]") {
  TempDir dir;
  const fs::path root = dir / "inshop";
  const std::vector<std::array<std::string, 3>> items{
      {"img/WOMEN/Dresses/id_00000002/02_1_front.jpg", "id_00000002", "train"},
      {"img/WOMEN/Dresses/id_00000002/02_2_side.jpg", "id_00000002", "train"},
      {"img/MEN/Denim/id_00000080/01_1_front.jpg", "id_00000080", "query"},
      {"img/MEN/Denim/id_00000080/01_2_side.jpg", "id_00000080", "gallery"}};
  std::string partition = "4\nimage_name item_id evaluation_status\n";
  std::string boxes = "4\nimage_name clothes_type pose_type x_1 y_1 x_2 y_2\n";
  for (const auto& item : items) {
    write_image(root / item[0]);
    partition += item[0] + "  " + item[1] + "  " + item[2] + "\n";
    boxes += item[0] + " 1 1 2 3 40 30\n";
  }
  write_file(root / "list_eval_partition.txt", partition);
  write_file(root / "list_bbox_inshop.txt", boxes);
  const auto result = convert("inshop", root, dir / "out");
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const auto df = check_output(dir / "out");
  CHECK(df.train().original_labels == std::vector<int64_t>{2, 2});
  CHECK(df.train().categories[0] == "WOMEN_Dresses");
  CHECK(df.validation().is_query == std::vector<bool>{true, false});
  CHECK(df.validation().is_gallery == std::vector<bool>{false, true});
  CHECK(*df.validation().bboxes[0] == oml::data::BBox{2, 40, 3, 30});
}

TEST_CASE("oml-convert rejects unknown formats and missing arguments with exit 2", "[convert][integration]") {
  TempDir dir;
  const auto unknown = run_oml("oml-convert", "cubb --src " + quote(dir.path().string()) + " --dst x");
  CHECK(unknown.exit_code == 2);
  CHECK_THAT(unknown.err, Contains("unknown dataset format 'cubb'") && Contains("did you mean 'cub'"));
  CHECK(run_oml("oml-convert", "cub --dst x").exit_code == 2);
  const auto wrong_src = convert("sop", dir.path(), dir / "out");
  CHECK(wrong_src.exit_code == 2);
  CHECK_THAT(wrong_src.err, Contains("Ebay_train.txt"));
  CHECK_FALSE(fs::exists(dir / "out"));
}

TEST_CASE("oml-convert debian-descriptions cuts apt's descriptions into a text retrieval dataset",
          "[convert][integration][text]") {
  TempDir dir;
  // Stanzas as apt's Translation-en has them: continuation lines start with a space, " ." is a
  // paragraph break. pkg-1 and pkg-1-dev share their first paragraph (left out: a second right
  // answer); tiny is too short to cut.
  std::string translations;
  const auto stanza = [&](const std::string& package, const std::string& body) {
    translations +=
        "Package: " + package + "\nDescription-md5: 0123\nDescription-en: a short summary\n" + body + "\n";
  };
  const auto words = [](int from, int count) {
    std::string out;
    for (int i = from; i < from + count; ++i) out += " w" + std::to_string(i) + (i % 7 == 6 ? "." : "");
    return out;
  };
  for (int p = 0; p < 10; ++p) {
    stanza("pkg-" + std::to_string(p), words(p * 100, 14) + "\n .\n" + words(p * 100 + 50, 16));
  }
  stanza("pkg-1-dev", words(100, 14) + "\n .\n" + words(900, 16));
  stanza("tiny", " only a few words here.");
  write_file(dir / "Translation-en", translations);

  auto r = convert("debian-descriptions", dir / "Translation-en", dir / "out", "--val-fraction 0.3 --seed 1");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("14 train rows, 6 validation rows, 10 labels"));
  oml::data::DataframeOptions options;
  options.accept_text_dataframes = true;
  const auto df = oml::data::Dataframe::read(dir / "out" / "df.csv", options);
  REQUIRE(df.validation().texts.size() == 6);
  // Each description's halves: the cut is after a sentence end, both at least 12 words.
  const std::string& first = df.train().texts[0];
  const std::string& second = df.train().texts[1];
  CHECK(first.back() == '.');
  CHECK(std::count(first.begin(), first.end(), ' ') + 1 >= 12);
  CHECK(std::count(second.begin(), second.end(), ' ') + 1 >= 12);
  bool whole = false;  // the halves give back one package's description, the paragraphs joined
  for (int p = 0; p < 10; ++p)
    whole |= " " + first + " " + second == words(p * 100, 14) + words(p * 100 + 50, 16);
  CHECK(whole);
  CHECK(df.train().labels[0] == df.train().labels[1]);
  for (std::size_t i = 0; i < df.validation().size(); ++i) CHECK(df.validation().is_query[i]);
  // The same seed gives the same split.
  r = convert("debian-descriptions", dir / "Translation-en", dir / "again", "--val-fraction 0.3 --seed 1");
  REQUIRE(r.exit_code == 0);
  CHECK(oml::test::read_file(dir / "out" / "df.csv") == oml::test::read_file(dir / "again" / "df.csv"));

  SECTION("no --val-fraction, or a file of no stanzas") {
    r = convert("debian-descriptions", dir / "Translation-en", dir / "x");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("needs --val-fraction"));
    write_file(dir / "empty", "nothing here\n");
    r = convert("debian-descriptions", dir / "empty", dir / "x", "--val-fraction 0.2");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("holds no Description-en or Description fields"));
    CHECK_FALSE(fs::exists(dir / "x"));
  }
}

}  // namespace convert_tests
