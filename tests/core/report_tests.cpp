// Run reports (docs/reports.md): TFRecord framing and CRC-32C, TensorBoard event files read
// back record by record, the `logger:` config key, retrieval grids (colours, crops, worst
// queries), SVG charts and the HTML report.
#include <torch/torch.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <regex>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/config/run_config.h"
#include "oml/data/image.h"
#include "oml/registry/parsed_components.h"
#include "oml/report/html_report.h"
#include "oml/report/retrieval_grid.h"
#include "oml/report/svg_chart.h"
#include "oml/report/tensorboard_writer.h"
#include "oml/report/tfrecord.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"

namespace report_tests {

using namespace oml;
using Catch::Matchers::Contains;
using oml::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// An RGB image of one colour, with an optional differently coloured rectangle.
at::Tensor solid(int64_t h, int64_t w, std::array<uint8_t, 3> rgb) {
  at::Tensor image = torch::empty({h, w, 3}, torch::kUInt8);
  for (int c = 0; c < 3; ++c) image.select(2, c).fill_(rgb[c]);
  return image;
}

std::array<int, 3> pixel(const at::Tensor& image, int64_t x, int64_t y) {
  const auto px = image.index({y, x});
  return {px[0].item<int>(), px[1].item<int>(), px[2].item<int>()};
}

}  // namespace

TEST_CASE("CRC-32C gives the published check value and TFRecord masks it", "[report]") {
  const std::string check = "123456789";
  CHECK(report::crc32c(check.data(), check.size()) == 0xE3069283u);
  const uint32_t crc = 0xE3069283u;
  CHECK(report::masked_crc32c(check.data(), check.size()) == ((crc >> 15) | (crc << 17)) + 0xa282ead8u);
}

TEST_CASE("TFRecord records round-trip, a cut-off tail is dropped and a flipped byte is an error",
          "[report]") {
  TempDir dir;
  const fs::path file = dir / "records";
  const std::string framed = report::frame_record("first") + report::frame_record(std::string(300, 'x'));
  REQUIRE(framed.size() == (12 + 5 + 4) + (12 + 300 + 4));
  CHECK(static_cast<unsigned char>(framed[0]) == 5);  // little-endian length
  write_bytes(file, framed);
  CHECK(report::read_records(file) == std::vector<std::string>{"first", std::string(300, 'x')});

  write_bytes(file, framed.substr(0, framed.size() - 7));  // a writer killed mid-record
  CHECK(report::read_records(file) == std::vector<std::string>{"first"});

  std::string corrupt = framed;
  corrupt[14] ^= 0x01;  // inside the first record's data
  write_bytes(file, corrupt);
  CHECK_THROWS_WITH(report::read_records(file), Contains("data checksum") && Contains("byte 0"));
}

TEST_CASE("A TensorBoard event file starts with brain.Event:2 and holds the logged scalars and images",
          "[report]") {
  TempDir dir;
  fs::path path;
  const std::string png = data::encode_image(solid(4, 6, {255, 0, 0}), "x.png");
  {
    report::TensorBoardWriter writer(dir / "tb");
    path = writer.path();
    writer.log_scalar("train/loss", 0.75, 1);
    writer.log_scalar("train/loss", 0.5, 2);
    writer.log_scalar("OVERALL/cmc/1", 0.25, 2);
    writer.log_image("retrieval/worst_cmc_1", report::EncodedImage{png, 4, 6, 3}, 2);
    // Each record is flushed as written: a reader sees all of them before the writer closes.
    CHECK(report::read_records(path).size() == 5);
  }
  CHECK(std::regex_match(path.filename().string(), std::regex(R"(events\.out\.tfevents\.\d{10}\..+)")));
  CHECK(report::find_event_files(dir / "tb") == std::vector<fs::path>{path});

  const auto events = report::read_event_file(path);
  REQUIRE(events.size() == 5);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(events[0].wall_time > 1.6e9);
  CHECK(events[1].tag == "train/loss");
  CHECK(events[1].step == 1);
  CHECK(events[1].scalar == Approx(0.75));
  CHECK(events[2].scalar == Approx(0.5));
  CHECK(events[3].tag == "OVERALL/cmc/1");
  CHECK(events[3].step == 2);
  REQUIRE(events[4].image.has_value());
  CHECK(events[4].tag == "retrieval/worst_cmc_1");
  CHECK(events[4].image->height == 4);
  CHECK(events[4].image->width == 6);
  CHECK(events[4].image->channels == 3);
  CHECK(events[4].image->png == png);
}

TEST_CASE("logger: defaults to tensorboard, null and none turn it off, unknown names list the known ones",
          "[report][config]") {
  cli::register_builtins();
  auto parse = [](const std::string& text) {
    return config::parse_run_config(config::Document::from_string(text, "run.yaml").root());
  };
  const auto absent = parse("seed: 1\n");
  REQUIRE(absent.logger.has_value());
  CHECK(absent.logger->name == "tensorboard");
  CHECK_FALSE(parse("logger: null\n").logger.has_value());
  CHECK(parse("logger: {name: none}\n").logger->name == "none");

  TempDir dir;
  report::LoggerContext context;  // a new run, not resumed
  context.run_dir = dir.path();
  CHECK(dynamic_cast<report::TensorBoardWriter*>(report::make_run_logger(absent.logger, context).get()) !=
        nullptr);
  CHECK(report::find_event_files(dir / "tensorboard").size() == 1);
  CHECK(dynamic_cast<report::NullLogger*>(
      report::make_run_logger(parse("logger: {name: none}\n").logger, context).get()));
  CHECK(dynamic_cast<report::NullLogger*>(
      report::make_run_logger(std::optional<config::ComponentSpec>(), context).get()));
  // Only the writing rank creates files.
  TempDir other;
  report::LoggerContext other_context;
  other_context.run_dir = other.path();
  CHECK(
      dynamic_cast<report::NullLogger*>(report::make_run_logger(absent.logger, other_context, false).get()));
  CHECK(report::find_event_files(other / "tensorboard").empty());

  const auto subdir = parse("logger: {name: tensorboard, args: {subdir: ''}}\n");
  report::make_run_logger(subdir.logger, context);
  CHECK(report::find_event_files(dir.path()).size() == 1);
  // Lightning's name for it, as OML's test configs write it.
  TempDir lightning;
  report::LoggerContext lightning_context;
  lightning_context.run_dir = lightning.path();
  report::make_run_logger(parse("logger: {name: tensorboard, args: {save_dir: .}}\n").logger,
                          lightning_context);
  CHECK(report::find_event_files(lightning.path()).size() == 1);

  const auto typo = parse("logger: {name: tensorbord}\n");
  CHECK_THROWS_WITH(cli::check_components(typo), Contains("tensorboard") && Contains("tensorbord"));
  const auto bad_args = parse("logger: {name: tensorboard, args: {dir: x}}\n");
  CHECK_THROWS_AS(report::make_run_logger(bad_args.logger, context), ConfigError);
}

TEST_CASE("worst_queries takes the lowest values first and keeps query order on ties", "[report]") {
  CHECK(report::worst_queries({1, 0, 0.5, 0, 1}, 3) == std::vector<int64_t>{1, 3, 2});
  CHECK(report::worst_queries({1, 0}, 5) == std::vector<int64_t>{1, 0});
  CHECK(report::worst_queries({}, 5).empty());
}

TEST_CASE(
    "A retrieval grid frames right items green, wrong ones red, crops boxes and adds missed ground truth",
    "[report]") {
  TempDir dir;
  // Rows 0..3: the query (label 7, its box is the white square), a wrong item, a right item,
  // and a right item that is not retrieved.
  at::Tensor query = solid(40, 40, {0, 0, 0});
  query.narrow(0, 10, 20).narrow(1, 10, 20).fill_(255);
  data::encode_image(query, "q.png");
  write_bytes(dir / "q.png", data::encode_image(query, "q.png"));
  write_bytes(dir / "a.png", data::encode_image(solid(30, 60, {0, 0, 255}), "a.png"));
  write_bytes(dir / "b.png", data::encode_image(solid(60, 30, {0, 255, 0}), "b.png"));
  write_bytes(dir / "c.png", data::encode_image(solid(32, 32, {255, 255, 0}), "c.png"));
  data::DataSplit split;
  split.paths = {(dir / "q.png").string(), (dir / "a.png").string(), (dir / "b.png").string(),
                 (dir / "c.png").string()};
  split.lines = {2, 3, 4, 5};
  split.bboxes = {data::BBox{10, 30, 10, 30}, std::nullopt, std::nullopt, std::nullopt};

  retrieval::RetrievalResults results;
  results.offsets = {0, 2};
  results.retrieved = {0, 1};  // gallery positions
  results.distances = {0.25f, 0.5f};
  results.n_gt = {2};
  results.query_labels = {7};
  results.gallery_labels = {3, 7, 7};
  results.query_ids = {0};
  results.gallery_ids = {1, 2, 3};

  report::RetrievalGridOptions options;
  options.top_k = 2;
  options.max_extra_gt = 2;
  options.cell = 64;
  const report::EncodedImage grid = report::draw_retrieval_grid(results, {0}, split, options, {"cmc/1 = 0"});
  const at::Tensor image = data::decode_image(grid.png, "grid.png");
  CHECK(image.size(0) == grid.height);
  CHECK(image.size(1) == grid.width);
  // Layout: margin 8, row header 20, cells of 64 px; query, gap 14, two retrieved (4 px apart),
  // gap 14, missed ground truth.
  const int64_t top = 8 + 20;
  const int64_t query_x = 8, first_x = query_x + 64 + 14, second_x = first_x + 64 + 4,
                extra_x = second_x + 64 + 14;
  CHECK(pixel(image, first_x + 1, top + 1) == std::array<int, 3>{215, 40, 40});    // wrong label: red
  CHECK(pixel(image, second_x + 1, top + 1) == std::array<int, 3>{40, 160, 40});   // right label: green
  CHECK(pixel(image, extra_x + 1, top + 1) == std::array<int, 3>{235, 165, 0});    // missed ground truth
  CHECK(pixel(image, extra_x + 32, top + 32) == std::array<int, 3>{255, 255, 0});  // its image
  // The query cell shows the box's content (white) only: no black border from outside the box.
  CHECK(pixel(image, query_x + 32, top + 32) == std::array<int, 3>{255, 255, 255});
  CHECK(pixel(image, query_x + 6, top + 6) == std::array<int, 3>{255, 255, 255});
  CHECK(grid.width == 8 * 2 + 5 * 64 + 4 * 4 + 2 * 14);

  CHECK(report::queries_with_ids(results, {0}) == std::vector<int64_t>{0});
  CHECK_THROWS_WITH(report::queries_with_ids(results, {0, 2, 9}),
                    Contains("2, 9") && Contains("not queries"));
  data::DataSplit no_paths = split;
  no_paths.paths.clear();
  CHECK_THROWS_AS(report::draw_retrieval_grid(results, {0}, no_paths, options), DataError);
}

TEST_CASE("Charts pick round ticks and draw one polyline per series, and base64 follows RFC 4648",
          "[report]") {
  const std::vector<double> ticks = report::nice_ticks(0, 1, 5);
  REQUIRE(ticks.size() == 6);
  for (std::size_t i = 0; i < ticks.size(); ++i) CHECK(ticks[i] == Approx(0.2 * static_cast<double>(i)));
  CHECK(report::nice_ticks(0.13, 0.91, 4).front() == Approx(0.2));
  const std::string svg = report::svg_line_chart({{"loss", {1, 2, 3}, {3, 2, 1}}, {"<b>", {1, 2}, {1, NAN}}},
                                                 {"loss & lr", "step"});
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK_THAT(svg, Contains("loss &amp; lr") && Contains("&lt;b&gt;"));
  std::size_t lines = 0;
  for (std::size_t at = svg.find("<polyline"); at != std::string::npos; at = svg.find("<polyline", at + 1))
    ++lines;
  CHECK(lines == 2);
  CHECK_THAT(report::svg_line_chart({}, {"empty", "step"}), Contains("no data"));
  CHECK(report::base64("") == "");
  CHECK(report::base64("f") == "Zg==");
  CHECK(report::base64("fo") == "Zm8=");
  CHECK(report::base64("foobar") == "Zm9vYmFy");
}

TEST_CASE("Ticks and charts end quickly and stay bounded for adversarial ranges", "[report]") {
  // Metric values that differ by a few ulps once made the tick loop spin forever.
  const double a = 0.34399999999999975, b = 0.3439999999999997;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::pair<double, double>> ranges = {{b, a},
                                                   {0.344, 0.344},
                                                   {1.0, std::nextafter(1.0, 2.0)},
                                                   {0, 1e-310},
                                                   {-1e308, 1e308},
                                                   {1e300, 2e300},
                                                   {-5e-324, 5e-324},
                                                   {0, inf},
                                                   {-inf, inf},
                                                   {nan, 1},
                                                   {1, nan},
                                                   {2, 1},
                                                   {-1e-12, 1e-12},
                                                   {1e15, 1e15 + 1},
                                                   {-3, 7}};
  // Ulp-apart ranges around many magnitudes.
  for (double v = 1e-300; v < 1e300; v *= 1e7)
    ranges.emplace_back(v, std::nextafter(std::nextafter(v, inf), inf));
  for (const auto& [low, high] : ranges) {
    INFO(low << " .. " << high);
    for (int count : {0, 1, 5, 6}) {
      const std::vector<double> ticks = report::nice_ticks(low, high, count);
      CHECK(ticks.size() <= 2 * static_cast<std::size_t>(std::max(1, count)) + 2);
      for (std::size_t i = 0; i < ticks.size(); ++i) {
        CHECK(std::isfinite(ticks[i]));
        if (i > 0) CHECK(ticks[i] > ticks[i - 1]);
      }
    }
    const std::string svg =
        report::svg_line_chart({{"metric", {1, 2}, {low, high}}}, {"adversarial", "step"});
    CHECK(svg.size() < 100000);
  }
}

TEST_CASE("report.html holds the curves, every metric, the best checkpoint per category and the latest grids",
          "[report]") {
  TempDir dir;
  const fs::path run = dir / "run";
  fs::create_directories(report::grid_folder(run, 1));
  fs::create_directories(report::grid_folder(run, 2));
  oml::test::write_file(run / "config.yaml", "seed: 1\nnote: '<script>'\n");
  oml::test::write_file(
      run / "train.jsonl",
      "{\"epoch\":0,\"step\":1,\"loss\":1.0,\"lr\":0.001,\"samples_per_s\":10,\"active_tri\":0.5}\n"
      "{\"epoch\":1,\"step\":2,\"loss\":0.5,\"lr\":0.0005,\"samples_per_s\":12,\"active_tri\":0.25}\n");
  oml::test::write_file(run / "metrics.jsonl",
                        "{\"epoch\":0,\"step\":1,\"metrics\":{\"OVERALL/cmc/1\":0.5,\"shoes/cmc/"
                        "1\":0.4,\"OVERALL/map/5\":0.3}}\n"
                        "{\"epoch\":1,\"step\":2,\"metrics\":{\"OVERALL/cmc/1\":0.75,\"shoes/cmc/"
                        "1\":0.625,\"OVERALL/map/5\":0.35}}\n"
                        "{\"epoch\":2,\"step\":3,\"metrics\":{\"OVERALL/cmc/1\":0.75,\"shoes/cmc/"
                        "1\":0.1,\"OVERALL/map/5\":0.1}}\n");
  write_bytes(report::grid_folder(run, 1) / "worst_cmc_1.png",
              data::encode_image(solid(2, 2, {9, 9, 9}), "x.png"));
  const std::string latest = data::encode_image(solid(3, 3, {1, 2, 3}), "x.png");
  write_bytes(report::grid_folder(run, 2) / "worst_cmc_1.png", latest);

  report::RunReportOptions options;
  options.run_dir = run;
  const fs::path path = report::write_run_report(options);
  CHECK(path == run / "report.html");
  const std::string html = read_bytes(path);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  // Train curves: loss, lr, samples_per_s, active_tri; metric charts: cmc/1 and map/5.
  std::size_t charts = 0;
  for (std::size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++charts;
  CHECK(charts == 6);
  for (const char* title : {">loss<", ">lr<", ">active_tri<", ">cmc/1<", ">map/5<"})
    CHECK_THAT(html, Contains(title));
  // The best record is the first with the highest cmc/1 (epoch 2), as training selects it.
  CHECK_THAT(html, Contains("0.7500 after epoch 2, step 2"));
  CHECK_THAT(html, Contains("<td>shoes</td><td>0.6250</td>"));
  CHECK_THAT(html, Contains("data:image/png;base64," + report::base64(latest)));
  CHECK_THAT(html, Contains("From epoch_002"));
  CHECK_THAT(html, Contains("note: &#39;&lt;script&gt;&#39;"));
  CHECK(html.find("<script") == std::string::npos);

  // A run that has not logged anything yet still gets a page.
  TempDir empty;
  options.run_dir = empty.path();
  CHECK_THAT(report::render_run_report(options), Contains("train.jsonl has no steps yet"));
}

}  // namespace report_tests
