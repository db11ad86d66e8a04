// The OML dataframe reader: every rule of docs/contracts.md#dataframe, each failing with the file, the
// 1-based line, the column and the expected value.
#include "oml/common/error.h"
#include "oml/data/csv.h"
#include "oml/data/dataframe.h"
#include "support/support.h"

namespace data_dataframe_tests {

using Catch::Matchers::Contains;
using oml::DataError;
using oml::data::Dataframe;
using oml::data::DataframeOptions;
using oml::test::TempDir;
using oml::test::write_file;
namespace fs = std::filesystem;

namespace {

// Parses without touching the disk (file checks off) unless a root is given.
Dataframe parse(const std::string& text) {
  DataframeOptions options;
  options.check_files = false;
  options.dataset_root = "/data";
  return Dataframe::parse(text, "df.csv", options);
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const DataError& e) {
    return e.what();
  }
  FAIL("expected a DataError for:\n" << text);
  return "";
}

const std::string kHeader = "label,path,split,is_query,is_gallery\n";

}  // namespace

TEST_CASE("The CSV parser handles quotes, embedded commas, newlines and CRLF", "[data][csv]") {
  const auto records = oml::data::parse_csv(
      "\xEF\xBB\xBF"
      "a,b\r\n\"x, y\",\"say \"\"hi\"\"\"\n\n\"two\nlines\",z\n",
      "t.csv");
  REQUIRE(records.size() == 3);
  CHECK(records[0].fields == std::vector<std::string>{"a", "b"});
  CHECK(records[1].fields == std::vector<std::string>{"x, y", "say \"hi\""});
  CHECK(records[1].line == 2);
  CHECK(records[2].fields == std::vector<std::string>{"two\nlines", "z"});
  CHECK(records[2].line == 4);
  CHECK_THROWS_WITH(oml::data::parse_csv("a,\"open\n", "t.csv"),
                    Contains("t.csv:1") && Contains("never closed"));
  // CR-only line endings once read as one long row ("column 'train' appears twice").
  CHECK_THROWS_WITH(oml::data::parse_csv("label,path,split\r1,a.jpg,train\r", "t.csv"),
                    Contains("t.csv:1") && Contains("CR-only"));
  CHECK(oml::data::parse_csv("label,path\r\n1,a.jpg\r\n", "t.csv").size() == 2);  // CRLF is fine
  CHECK(oml::data::csv_escape("a,b") == "\"a,b\"");
  CHECK(oml::data::csv_escape("plain") == "plain");
}

TEST_CASE("A valid dataframe is split, remapped and described column by column", "[data][dataframe]") {
  const auto df = parse(
      "label,path,split,is_query,is_gallery,category,sequence,x_1,x_2,y_1,y_2\n"
      "30,a.jpg,train,,,shoes,s1,,,,\n"
      "10,b.jpg,train,,,bags,s2,1,5,2,8\n"
      "30,c.jpg,train,,,shoes,s3,,,,\n"
      "7,d.jpg,validation,True,False,bags,q,,,,\n"
      "7,e.jpg,validation,0,1,bags,g,,,,\n"
      "8,f.jpg,validation,true,TRUE,shoes,g,,,,\n");
  const auto& train = df.train();
  CHECK(train.labels == std::vector<int64_t>{1, 0, 1});
  CHECK(train.original_labels == std::vector<int64_t>{30, 10, 30});
  CHECK(train.num_labels() == 2);
  CHECK(train.paths[0] == "/data/a.jpg");
  CHECK(train.lines == std::vector<int64_t>{2, 3, 4});
  CHECK(train.is_query.empty());
  CHECK(train.label2category == std::map<int64_t, std::string>{{0, "bags"}, {1, "shoes"}});
  REQUIRE(train.has_bboxes());
  CHECK_FALSE(train.bboxes[0].has_value());
  CHECK(*train.bboxes[1] == oml::data::BBox{1, 5, 2, 8});

  const auto& val = df.validation();
  CHECK(val.labels == std::vector<int64_t>{7, 7, 8});
  CHECK(val.is_query == std::vector<bool>{true, false, true});
  CHECK(val.is_gallery == std::vector<bool>{false, true, true});
  CHECK(val.sequences == std::vector<std::string>{"q", "g", "g"});
  CHECK(val.categories == std::vector<std::string>{"bags", "bags", "shoes"});
  CHECK(df.size() == 6);
}

TEST_CASE("Dataframes with only train or only validation rows are accepted", "[data][dataframe]") {
  const auto train_only = parse(kHeader + "1,a.jpg,train,,\n2,b.jpg,train,,\n");
  CHECK(train_only.validation().empty());
  CHECK(train_only.train().size() == 2);
  CHECK_FALSE(train_only.train().has_categories());
  const auto val_only = parse(kHeader + "1,a.jpg,validation,True,True\n");
  CHECK(val_only.train().empty());
  CHECK(val_only.validation().size() == 1);
}

TEST_CASE("Rule 1: a missing required column names the column and the header", "[data][dataframe]") {
  const auto message = error_of("label,path,split,is_query\n1,a.jpg,train,\n");
  CHECK_THAT(message, Contains("df.csv:1") && Contains("missing required column(s) is_gallery") &&
                          Contains("expected at least"));
  CHECK_THAT(error_of("label,pth,split,is_query,is_gallery\n1,a,train,,\n"), Contains("did you mean 'pth'"));
  CHECK_THAT(error_of("label,label,path,split,is_query,is_gallery\n"), Contains("appears twice"));
}

TEST_CASE("Rule 2: split values other than train/validation are rejected with the row", "[data][dataframe]") {
  CHECK_THAT(error_of(kHeader + "1,a.jpg,train,,\n1,b.jpg,test,True,True\n"),
             Contains("df.csv:3: column 'split': got 'test', expected 'train' or 'validation'"));
}

TEST_CASE("Rule 3: a train row with is_query or is_gallery set is rejected", "[data][dataframe]") {
  CHECK_THAT(error_of(kHeader + "1,a.jpg,train,True,\n"),
             Contains("df.csv:2: column 'is_query': got 'True', expected an empty cell on a train row"));
  CHECK_THAT(error_of(kHeader + "1,a.jpg,train,,False\n"), Contains("df.csv:2: column 'is_gallery'"));
}

TEST_CASE("Rule 4: validation rows need bool-like flags and are query or gallery", "[data][dataframe]") {
  CHECK_THAT(error_of(kHeader + "1,a.jpg,validation,yes,True\n"),
             Contains("df.csv:2: column 'is_query': got 'yes', expected True/False/1/0"));
  CHECK_THAT(error_of(kHeader + "1,a.jpg,validation,True,\n"), Contains("column 'is_gallery': got ''"));
  CHECK_THAT(error_of(kHeader + "1,a.jpg,validation,True,True\n1,b.jpg,validation,False,0\n"),
             Contains("df.csv:3") && Contains("both false"));
  // Flags as numbers: any decimal spelling of 1 or 0 (1.0 was taken, 1.00 refused).
  const auto flags = parse(kHeader + "1,a.jpg,validation,1.00,0.0\n1,b.jpg,validation,0,1e0\n").validation();
  CHECK(flags.is_query == std::vector<bool>{true, false});
  CHECK(flags.is_gallery == std::vector<bool>{false, true});
  CHECK_THAT(error_of(kHeader + "1,a.jpg,validation,2,True\n"), Contains("column 'is_query': got '2'"));
}

TEST_CASE("Rule 5: labels must be integers", "[data][dataframe]") {
  CHECK_THAT(error_of(kHeader + "cat,a.jpg,train,,\n"),
             Contains("df.csv:2: column 'label': got 'cat', expected an integer"));
  CHECK_THAT(error_of(kHeader + "1.5,a.jpg,train,,\n"), Contains("got '1.5'"));
  CHECK_THAT(error_of(kHeader + ",a.jpg,train,,\n"), Contains("column 'label': got ''"));
  CHECK(parse(kHeader + "3.0,a.jpg,train,,\n").train().original_labels == std::vector<int64_t>{3});
  // Decimal only: strtod's hex was read silently ("0x5" as 5, "0x1p2" as 4); pandas refuses it.
  CHECK_THAT(error_of(kHeader + "0x5,a.jpg,train,,\n"), Contains("column 'label': got '0x5'"));
  CHECK_THAT(error_of(kHeader + "0x1p2,a.jpg,train,,\n"), Contains("got '0x1p2'"));
  CHECK_THAT(error_of(kHeader + "inf,a.jpg,train,,\n"), Contains("got 'inf'"));
  // A cell is shown escaped and cut: a NUL ended the message, a 100 MB cell was a 100 MB message.
  CHECK_THAT(error_of(kHeader + std::string("5\0x", 3) + ",a.jpg,train,,\n"),
             Contains("got '5\\x00x', expected an integer"));
  CHECK_THAT(error_of(kHeader + std::string(5000, '7') + "x,a.jpg,train,,\n"),
             Contains("got '" + std::string(100, '7') + "... (5001 bytes)', expected an integer"));
}

TEST_CASE("A UTF-16 dataframe is named as such", "[data][dataframe]") {
  TempDir dir;
  std::string utf16 = "\xFF\xFE";
  for (const char c : kHeader) utf16 += std::string{c, '\0'};
  write_file(dir / "df.csv", utf16);
  CHECK_THROWS_WITH(Dataframe::read(dir / "df.csv"),
                    Contains("df.csv is UTF-16 text") && Contains("UTF-8 CSV"));
}

TEST_CASE("Rule 6: a query label absent from the gallery is rejected with its row", "[data][dataframe]") {
  const auto message = error_of(kHeader + "1,a.jpg,validation,True,True\n2,b.jpg,validation,True,False\n");
  CHECK_THAT(message, Contains("1 query row(s)") && Contains("line 3 (label 2)"));
}

TEST_CASE("Rule 7: missing image files are listed up front, first 20 and the total", "[data][dataframe]") {
  TempDir dir;
  write_file(dir / "present.png", "x");
  std::string csv = kHeader + "0,present.png,train,,\n";
  for (int i = 0; i < 25; ++i) csv += "0,missing_" + std::to_string(i) + ".png,train,,\n";
  write_file(dir / "df.csv", csv);
  try {
    Dataframe::read(dir / "df.csv");
    FAIL("expected a DataError");
  } catch (const DataError& e) {
    CHECK_THAT(e.what(), Contains("25 image file(s) do not exist") && Contains("the first 20"));
    REQUIRE(e.context().size() == 20);
    CHECK_THAT(e.context()[0], Contains("line 3") && Contains("missing_0.png"));
  }
  // Something else at the path is named as what it is.
  fs::create_directories(dir / "folder.png");
  write_file(dir / "dir.csv", kHeader + "0,folder.png,train,,\n0,/dev/zero,train,,\n");
  try {
    Dataframe::read(dir / "dir.csv");
    FAIL("expected a DataError");
  } catch (const DataError& e) {
    CHECK_THAT(e.what(), Contains("2 image file(s) do not exist or are not files"));
    REQUIRE(e.context().size() == 2);
    CHECK_THAT(e.context()[0], Contains("folder.png (a folder)"));
    CHECK_THAT(e.context()[1], Contains("/dev/zero (not a regular file: a device, pipe or socket)"));
  }
  write_file(dir / "ok.csv", kHeader + "0,present.png,train,,\n");
  CHECK(Dataframe::read(dir / "ok.csv").train().paths[0] == (dir / "present.png").string());
}

TEST_CASE("Rule 8: bounding boxes come as four columns and four ordered integers", "[data][dataframe]") {
  const std::string header = "label,path,split,is_query,is_gallery,x_1,x_2,y_1,y_2\n";
  CHECK_THAT(error_of("label,path,split,is_query,is_gallery,x_1,x_2\n"),
             Contains("all four columns") && Contains("but not y_1, y_2"));
  CHECK_THAT(error_of(header + "1,a.jpg,train,,,5,5,0,3\n"),
             Contains("df.csv:2: columns x_1, x_2: got x_1=5, x_2=5, expected x_1 < x_2"));
  CHECK_THAT(error_of(header + "1,a.jpg,train,,,0,5,4,3\n"), Contains("expected y_1 < y_2"));
  CHECK_THAT(error_of(header + "1,a.jpg,train,,,-1,5,0,3\n"), Contains("expected values >= 0"));
  CHECK_THAT(error_of(header + "1,a.jpg,train,,,1,5,,3\n"), Contains("all four values or none"));
  CHECK_THAT(error_of(header + "1,a.jpg,train,,,a,5,0,3\n"), Contains("column 'x_1': got 'a'"));
  CHECK(*parse(header + "1,a.jpg,train,,,1.0,5.0,0,3\n").train().bboxes[0] == oml::data::BBox{1, 5, 0, 3});
}

TEST_CASE("Rule 9: a label with several categories keeps its first category", "[data][dataframe]") {
  const auto df = parse("label,path,split,is_query,is_gallery,category\n1,a,train,,,x\n1,b,train,,,y\n");
  CHECK(df.train().label2category.at(0) == "x");
}

TEST_CASE("An empty CSV, a header without rows and ragged rows are clear errors", "[data][dataframe]") {
  CHECK_THAT(error_of(""), Contains("df.csv: the dataframe is empty"));
  CHECK_THAT(error_of("\n\n"), Contains("is empty"));
  CHECK_THAT(error_of(kHeader), Contains("header but no rows"));
  CHECK_THAT(error_of(kHeader + "1,a.jpg,train\n"), Contains("df.csv:2: the row has 3 fields, expected 5"));
  CHECK_THROWS_WITH(Dataframe::read("/no/such/df.csv"),
                    Contains("/no/such/df.csv") && Contains("no such file"));
}

TEST_CASE("Dataframes for precomputed embeddings may omit the path column", "[data][dataframe]") {
  DataframeOptions options;
  options.require_paths = false;
  const auto df = Dataframe::parse("label,split,is_query,is_gallery\n1,validation,1,1\n", "e.csv", options);
  CHECK_FALSE(df.validation().has_paths());
  CHECK(df.validation().labels == std::vector<int64_t>{1});
}

}  // namespace data_dataframe_tests
