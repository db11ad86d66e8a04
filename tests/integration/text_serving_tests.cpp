// Texts through oml-predict, oml-index, oml-search and oml-serve, as a user runs them over a text
// model folder (the tiny BERT of tests/support/text_fixtures.h, random weights: nothing is
// downloaded): embeddings equal wherever a text is embedded (a dataframe, a file of lines, a
// request, batched with longer and shorter texts), an index that keeps its texts and pins its
// model's files, and the mistakes a user meets (an empty line, bytes that are not UTF-8, images
// sent to a text index, a model folder changed after the index was built).
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "integration/serving_fixtures.h"
#include "integration/text_run_fixtures.h"
#include "oml/io/npy.h"

namespace text_serving_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

// The validation texts of write_text_dataframe, in file order (labels 8-11, 3 texts each).
std::vector<std::string> validation_texts() {
  std::vector<std::string> texts;
  for (int label = 8; label < 12; ++label) {
    for (int item = 0; item < 3; ++item) texts.push_back(text_of(label, item));
  }
  return texts;
}

std::string lines(const std::vector<std::string>& texts) {
  std::string out;
  for (const std::string& text : texts) out += text + "\n";
  return out;
}

// A predict config over the run folder's model (its own weights) and dataframe.
fs::path write_predict_config(const TempDir& dir, const std::string& name, const fs::path& save_dir) {
  write_file(dir / name, text_validate_config(dir, {}) + "save_dir: " + save_dir.string() +
                             "\nbatch_size_inference: 4\nretrieval_backend: {name: exact}\n");
  return dir / name;
}

// The validation rows as their own dataframe: the gallery of the index tests.
fs::path write_gallery_dataframe(const fs::path& dir) {
  std::string csv = "label,text,split,is_query,is_gallery,category\n";
  for (int label = 8; label < 12; ++label) {
    for (int item = 0; item < 3; ++item)
      csv += std::to_string(label) + ',' + text_of(label, item) + ",validation,True,True,topic\n";
  }
  write_file(dir / "gallery.csv", csv);
  return dir / "gallery.csv";
}

// The run folder with the index of its gallery dataframe (the validation rows), built by
// oml-index through the folder's model: <dir>/index.
fs::path build_text_index(const TempDir& dir) {
  write_text_run(dir);
  const fs::path gallery = write_gallery_dataframe(dir / "data");
  const fs::path config = write_predict_config(dir, "predict.yaml", dir / "unused");
  const auto r =
      run_oml("oml-index", "build --config " + quote(config.string()) +
                               " --set dataset_root=" + quote(gallery.parent_path().string()) +
                               " --set dataframe_name=gallery.csv --out " + quote((dir / "index").string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return dir / "index";
}

// The predicted embeddings of `texts` (a file of lines) through the run folder's model.
at::Tensor predicted(const TempDir& dir, const std::vector<std::string>& texts, const std::string& name) {
  write_file(dir / (name + ".txt"), lines(texts));
  const fs::path config = write_predict_config(dir, name + ".yaml", dir / name);
  const auto r = run_oml("oml-predict", "--config " + quote(config.string()) +
                                            " --set data_dir=" + quote((dir / (name + ".txt")).string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return oml::io::read_npy_matrix(dir / name / "embeddings.npy");
}

// A JSON body in a file (curl --data-binary @file sends it as written).
std::string json_body(const TempDir& dir, const std::string& name, const nlohmann::json& body) {
  write_file(dir / name, body.dump());
  return "-H 'Content-Type: application/json' --data-binary @" + quote((dir / name).string());
}

// The index folder's current version's folder name.
std::string current_version(const fs::path& index) {
  std::string name = read_file(index / "CURRENT");
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  return name;
}

at::Tensor embedding_of(const nlohmann::json& reply) {
  return torch::tensor(reply.at("embedding").get<std::vector<float>>());
}

}  // namespace

TEST_CASE("oml-predict embeds a text dataframe and a file of lines alike", "[serving][integration][text]") {
  TempDir dir;
  write_text_run(dir);
  // A text with a comma, quotes and a line break: embeddings.csv quotes it as a dataframe cell.
  std::string csv = read_file(dir / "data" / "df.csv");
  csv += "8,\"a \"\"quoted\"\", two-line\ntext\",validation,True,True\n";
  write_file(dir / "data" / "df.csv", csv);
  const fs::path config = write_predict_config(dir, "predict.yaml", dir / "pred");
  const auto r = run_oml("oml-predict", "--config " + quote(config.string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const at::Tensor all = oml::io::read_npy_matrix(dir / "pred" / "embeddings.npy");
  REQUIRE(all.size(0) == 32 + 12 + 1);  // every row, in file order
  const auto rows = csv_rows(dir / "pred" / "embeddings.csv");
  REQUIRE(rows.size() == 46);
  CHECK(rows[0] == std::vector<std::string>{"index", "text"});
  CHECK(rows[1] == std::vector<std::string>{"0", text_of(0, 0)});
  CHECK(rows[45][1] == "a \"quoted\", two-line\ntext");

  // The same texts from a file of lines, in batches of other lengths (padded otherwise).
  const std::vector<std::string> texts = validation_texts();
  const at::Tensor from_lines = predicted(dir, texts, "lines");
  REQUIRE(from_lines.size(0) == 12);
  CHECK(max_abs_diff(from_lines, all.narrow(0, 32, 12)) < 1e-5);
  CHECK(csv_rows(dir / "lines" / "embeddings.csv")[3][1] == texts[2]);

  SECTION("a file with an empty line, or a line that is not UTF-8, is refused naming the line") {
    write_file(dir / "bad.txt", texts[0] + "\n\n" + texts[1] + "\n");
    auto bad = run_oml("oml-predict", "--config " + quote(config.string()) +
                                          " --set data_dir=" + quote((dir / "bad.txt").string()) +
                                          " --set save_dir=" + quote((dir / "bad").string()));
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Contains((dir / "bad.txt").string() + ":2: an empty or blank line"));
    write_file(dir / "bad.txt", texts[0] + "\ncaf\xE9\n");
    bad = run_oml("oml-predict", "--config " + quote(config.string()) +
                                     " --set data_dir=" + quote((dir / "bad.txt").string()) +
                                     " --set save_dir=" + quote((dir / "bad").string()));
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Contains((dir / "bad.txt").string() + ":2: not valid UTF-8"));
    CHECK_FALSE(fs::exists(dir / "bad" / "embeddings.npy"));
  }
  SECTION("data_dir a folder, for a text model, or transforms in a text run") {
    auto bad = run_oml("oml-predict", "--config " + quote(config.string()) +
                                          " --set data_dir=" + quote((dir / "data").string()) +
                                          " --set save_dir=" + quote((dir / "bad").string()));
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Contains("is a folder") && Contains("one per line"));
    bad = run_oml("oml-predict", "--config " + quote(config.string()) + " --set " +
                                     quote("transforms_predict={name: norm}") +
                                     " --set save_dir=" + quote((dir / "bad").string()));
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Contains("transforms_predict") && Contains("is an image setting"));
  }
}

TEST_CASE("oml-index and oml-search keep a text gallery's texts and find its items",
          "[serving][integration][text]") {
  TempDir dir;
  const fs::path index = build_text_index(dir);
  const fs::path gallery = dir / "data" / "gallery.csv";
  const std::string version = current_version(index);
  const nlohmann::json manifest = read_json(index / version / "manifest.json");
  CHECK(manifest.at("inputs") == "texts");
  CHECK(manifest.at("format_version") == 2);
  const auto& files = manifest.at("model").at("files");
  CHECK(files.contains((dir / "model" / "tokenizer.json").string()));
  CHECK(files.contains((dir / "model" / "config.json").string()));
  CHECK(files.contains((dir / "model" / "model.safetensors").string()));
  const auto items = csv_rows(index / version / "items.csv");
  CHECK(items[0] == std::vector<std::string>{"id", "text", "label", "category"});
  CHECK(items[1] == std::vector<std::string>{"0", text_of(8, 0), "8", "topic"});

  // Queries that are gallery texts find themselves first.
  const std::vector<std::string> texts = validation_texts();
  write_file(dir / "queries.txt", texts[4] + "\n" + texts[9] + "\n");
  auto r = run_oml("oml-search", "--index " + quote(index.string()) + " --texts " +
                                     quote((dir / "queries.txt").string()) + " --top-k 3 --out " +
                                     quote((dir / "found").string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto neighbours = csv_rows(dir / "found" / "neighbours.csv");
  CHECK(neighbours[0] == std::vector<std::string>{"query", "query_text", "rank", "id", "text", "label",
                                                  "category", "distance"});
  CHECK(neighbours[1][1] == texts[4]);
  CHECK(neighbours[1][3] == "4");
  CHECK(neighbours[1][4] == texts[4]);
  CHECK(std::abs(std::stod(neighbours[1][7])) < 1e-4);
  CHECK(neighbours[4][3] == "9");
  CHECK(csv_rows(dir / "found" / "answers.csv")[0][1] == "query_text");

  // Added texts are kept (through the change log, then a compaction) and found.
  write_file(dir / "more.txt", "a brand new sentence about nothing\n");
  r = run_oml("oml-index",
              "add --index " + quote(index.string()) + " --texts " + quote((dir / "more.txt").string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  r = run_oml("oml-search", "--index " + quote(index.string()) + " --texts " +
                                quote((dir / "more.txt").string()) + " --top-k 1 --out " +
                                quote((dir / "found_added").string()));
  REQUIRE(r.exit_code == 0);
  neighbours = csv_rows(dir / "found_added" / "neighbours.csv");
  CHECK(neighbours[1][3] == "12");
  CHECK(neighbours[1][4] == "a brand new sentence about nothing");
  r = run_oml("oml-index", "compact --index " + quote(index.string()));
  REQUIRE(r.exit_code == 0);
  CHECK(csv_rows(index / current_version(index) / "items.csv")[13][1] ==
        "a brand new sentence about nothing");
  r = run_oml("oml-index", "info --index " + quote(index.string()));
  CHECK_THAT(r.out, Contains("items are:   texts") && Contains("13 of dimension"));

  // A labelled text dataframe calibrates the open-set threshold.
  r = run_oml("oml-index", "calibrate --index " + quote(index.string()) + " --target-fmr 0.1 --dataframe " +
                               quote(gallery.string()));
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("calibration items"));

  SECTION("images for a text index, texts for an image one") {
    const auto bad =
        run_oml("oml-search", "--index " + quote(index.string()) + " --images " + quote(dir.path().string()) +
                                  " --out " + quote((dir / "x").string()));
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Contains("holds texts") && Contains("--texts FILE"));
  }
  SECTION("a model file changed after the build") {
    std::string tokenizer = read_file(dir / "model" / "tokenizer.json");
    write_file(dir / "model" / "tokenizer.json", tokenizer + "\n");
    const auto bad = run_oml("oml-search", "--index " + quote(index.string()) + " --texts " +
                                               quote((dir / "queries.txt").string()) + " --out " +
                                               quote((dir / "x").string()));
    CHECK(bad.exit_code == 2);
    CHECK_THAT(bad.err, Contains("tokenizer.json has changed since the index was built"));
    CHECK_FALSE(fs::exists(dir / "x" / "neighbours.csv"));
  }
}

TEST_CASE("oml-serve embeds, searches and adds texts as oml-predict embeds them",
          "[serving][integration][text]") {
  TempDir dir;
  const fs::path index = build_text_index(dir);
  const std::vector<std::string> texts = validation_texts();
  const std::string added = "a sentence that only the server has seen";
  std::vector<std::string> asked = texts;
  asked.push_back(added);
  const at::Tensor expected = predicted(dir, asked, "expected");

  {
    // Requests arriving together are batched (up to 50 ms), padded to their longest text.
    Server server(index, dir.path(), "--max-wait-ms 50 --max-batch 8 --max-text-kb 1");
    const Reply health = call(server.url() + "/health");
    CHECK(health.body.at("inputs") == "texts");
    std::vector<std::thread> clients;
    std::vector<Reply> replies(6);
    for (std::size_t i = 0; i < replies.size(); ++i) {
      const std::string body =
          json_body(dir, "embed" + std::to_string(i) + ".json", {{"text", texts[i * 2]}});
      clients.emplace_back([&, i, body] { replies[i] = call(body + " " + server.url() + "/embed"); });
    }
    for (auto& client : clients) client.join();
    for (std::size_t i = 0; i < replies.size(); ++i) {
      INFO(replies[i].text);
      REQUIRE(replies[i].status == 200);
      CHECK(max_abs_diff(embedding_of(replies[i].body), expected[static_cast<int64_t>(i * 2)]) < 1e-5);
    }

    Reply found =
        call(json_body(dir, "search.json", {{"text", texts[7]}, {"k", 2}}) + " " + server.url() + "/search");
    REQUIRE(found.status == 200);
    CHECK(found.body.at("neighbours")[0].at("id") == 7);
    CHECK(found.body.at("neighbours")[0].at("text") == texts[7]);
    CHECK_FALSE(found.body.at("neighbours")[0].contains("path"));

    const Reply add =
        call(json_body(dir, "add.json", {{"text", added}, {"label", 99}}) + " " + server.url() + "/items");
    INFO(add.text);
    REQUIRE(add.status == 201);
    CHECK(add.body.at("ids")[0] == 12);

    // Mistakes: each answered, none fatal.
    CHECK(call(json_body(dir, "b1.json", {{"text", "  "}}) + " " + server.url() + "/embed").status == 422);
    CHECK(call(json_body(dir, "b2.json", {{"text", 5}}) + " " + server.url() + "/embed").status == 400);
    CHECK(call(json_body(dir, "b3.json", {{"text", std::string(2000, 'a')}}) + " " + server.url() + "/embed")
              .status == 413);
    const Reply image =
        call(json_body(dir, "b4.json", {{"image", "aGVsbG8="}}) + " " + server.url() + "/search");
    CHECK(image.status == 400);
    CHECK_THAT(image.text, Contains("holds texts"));
    CHECK(call(json_body(dir, "b5.json", {{"text", "x"}, {"path", "a.jpg"}}) + " " + server.url() + "/items")
              .status == 400);
    CHECK(call(json_body(dir, "b6.json", {{"text", "x"}, {"image", "aGVsbG8="}}) + " " + server.url() +
               "/embed")
              .status == 400);
    CHECK(server.alive());
  }
  // Restarted, the server reads the added text back from the change log.
  Server server(index, dir.path());
  const Reply found =
      call(json_body(dir, "again.json", {{"text", added}, {"k", 1}}) + " " + server.url() + "/search");
  REQUIRE(found.status == 200);
  CHECK(found.body.at("neighbours")[0].at("id") == 12);
  CHECK(found.body.at("neighbours")[0].at("text") == added);
  CHECK(found.body.at("neighbours")[0].at("label") == 99);
  CHECK(std::abs(found.body.at("neighbours")[0].at("distance").get<double>()) < 1e-4);
}

TEST_CASE("Texts sent to an image index are refused, and the server goes on",
          "[serving][integration][text]") {
  TempDir dir;
  const Model m = model(dir.path());
  const fs::path gallery = subset_rows(dir.path(), "gallery.csv", 0, 8);
  const auto r = build_index(m, gallery, dir / "index");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  write_file(dir / "q.txt", "a text\n");
  const auto bad =
      run_oml("oml-search", "--index " + quote((dir / "index").string()) + " --texts " +
                                quote((dir / "q.txt").string()) + " --out " + quote((dir / "x").string()));
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("holds images") && Contains("--images FOLDER"));
  Server server(dir / "index", dir.path());
  const Reply reply = call(json_body(dir, "t.json", {{"text", "a text"}}) + " " + server.url() + "/search");
  CHECK(reply.status == 400);
  CHECK_THAT(reply.text, Contains("holds images"));
  CHECK(call(json_body(dir, "i.json", {{"text", "x"}, {"embedding", std::vector<float>(16, 0.1F)}}) + " " +
             server.url() + "/items")
            .status == 400);
  CHECK(server.alive());
}

}  // namespace text_serving_tests
