// oml-serve as users use it (docs/serving.md#the-http-api): the real server on 127.0.0.1, queried
// with curl and loaded with ab. The docs' examples are executed as written; image answers equal
// oml-search's; bad input is a 4xx JSON error after which the server keeps serving; SIGTERM
// drains and exits 0, SIGKILL leaves the index whole.
#include <torch/torch.h>

#include <csignal>
#include <fstream>
#include <regex>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "oml/io/npy.h"
#include "serving_fixtures.h"

namespace serving_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

TEST_CASE("The HTTP API examples of docs/serving.md answer as written", "[serving][integration]") {
  TempDir dir;
  Server server(example_index(dir.path()), dir.path());
  // Each ```sh block whose command is curl, followed by a ```json block with its answer.
  const std::string doc = read_file(source_path("docs/serving.md"));
  const std::regex example("```sh\\n(curl [^\\n]*)\\n```\\n```json\\n([\\s\\S]*?)```");
  int examples = 0;
  for (std::sregex_iterator it(doc.begin(), doc.end(), example), end; it != end; ++it) {
    std::string command = (*it)[1];
    const nlohmann::json expected = nlohmann::json::parse((*it)[2].str());
    INFO(command);
    const std::string from = "http://127.0.0.1:8080";
    REQUIRE(command.find(from) != std::string::npos);
    command.replace(command.find(from), from.size(), server.url());
    const auto r = run(command);
    REQUIRE(r.exit_code == 0);
    INFO(r.out);
    CHECK(same_json(nlohmann::json::parse(r.out), expected));
    ++examples;
  }
  CHECK(examples == 6);
}

TEST_CASE("oml-serve answers images as oml-search does and survives bad input and load",
          "[serving][integration]") {
  TempDir dir;
  const Model m = model(dir.path());
  const fs::path gallery = subset_rows(dir.path(), "gallery.csv", 0, 200);
  const fs::path queries = subset_rows(dir.path(), "queries.csv", 200, 8);
  REQUIRE(build_index(m, gallery, dir / "index").exit_code == 0);
  const auto searched =
      run_oml("oml-search", "--index " + quote((dir / "index").string()) + " --dataframe " +
                                quote(queries.string()) + " --top-k 3 --out " + quote((dir / "s").string()));
  REQUIRE(searched.exit_code == 0);
  const auto expected = csv_rows(dir / "s" / "neighbours.csv");
  const auto query_rows = csv_rows(queries);

  Server server(dir / "index", dir.path(), "--max-wait-ms 20");
  const std::string url = server.url();
  for (std::size_t q = 0; q < 8; ++q) {
    const std::string image = query_rows[q + 1][1];
    INFO(image);
    // The image as the body, and base64 in JSON: the same neighbours as oml-search's.
    const Reply raw = call("-X POST -H 'Content-Type: image/png' --data-binary @" + quote(image) + " '" +
                           url + "/search?k=3'");
    REQUIRE(raw.status == 200);
    write_file(dir / "b64.json", "{\"image\": \"" + run("base64 -w0 " + quote(image)).out + "\", \"k\": 3}");
    const Reply json =
        call("-X POST --data-binary @" + quote((dir / "b64.json").string()) + " " + url + "/search");
    REQUIRE(json.status == 200);
    for (int r = 0; r < 3; ++r) {
      const auto& row = expected[1 + 3 * q + static_cast<std::size_t>(r)];
      CHECK(raw.body["neighbours"][r]["id"].get<int64_t>() == std::stoll(row[3]));
      CHECK(raw.body["neighbours"][r]["path"] == row[4]);
      CHECK(raw.body["neighbours"][r]["distance"].get<double>() == Approx(std::stod(row[7])).margin(1e-5));
      CHECK(json.body["neighbours"][r]["id"] == raw.body["neighbours"][r]["id"]);
    }
  }
  // /embed equals oml-predict's embedding of the same image (batch shapes differ: 1e-5).
  const auto predicted =
      run_oml("oml-predict",
              "--config " + quote(m.config.string()) + " --set dataset_root=" + quote(dir.path().string()) +
                  " --set dataframe_name=queries.csv --set save_dir=" + quote((dir / "pred").string()));
  REQUIRE(predicted.exit_code == 0);
  const at::Tensor embeddings = oml::io::read_npy(dir / "pred" / "embeddings.npy");
  const Reply embedded = call("-X POST -H 'Content-Type: image/png' --data-binary @" +
                              quote(query_rows[1][1]) + " " + url + "/embed");
  REQUIRE(embedded.status == 200);
  const auto values = embedded.body["embedding"].get<std::vector<float>>();
  CHECK(max_abs_diff(torch::tensor(values), embeddings[0]) < 1e-5);

  // Bad input: a 4xx JSON error each, and the server keeps serving.
  write_file(dir / "text.bin", "this is not an image");
  std::ofstream(dir / "big.bin", std::ios::binary) << std::string(50 * 1024 * 1024, 'x');
  const std::vector<std::pair<std::string, int>> bad = {
      {"-X POST -H 'Content-Type: image/png' --data-binary @" + quote((dir / "text.bin").string()) + " " +
           url + "/search",
       422},
      {"-X POST -H 'Content-Type: image/png' --data-binary @" + quote((dir / "big.bin").string()) + " " +
           url + "/search",
       413},
      {"-X POST -d '{\"embedding\": [1, 2, 3]}' " + url + "/search", 422},
      {"-X POST -d '{\"embedding\": [1, 2' " + url + "/search", 400},
      {"-X POST -d '{\"image\": \"!!!\"}' " + url + "/search", 400},
      {"-X POST -d '{\"embedding\": \"no\"}' " + url + "/search", 400},
      // A negative threshold is no Euclidean distance (only -q.g under distance: dot is).
      {"-X POST -H 'Content-Type: image/png' --data-binary @" + quote(query_rows[1][1]) + " '" + url +
           "/search?threshold=-1'",
       400},
      {"-X DELETE " + url + "/items/999999", 404},
      {"-X DELETE " + url + "/items/abc", 400},
      {url + "/search", 405},
      {url + "/nowhere", 404},
  };
  for (const auto& [args, status] : bad) {
    INFO(args);
    const Reply r = call(args);
    CHECK(r.status == status);
    CHECK(r.body.is_object());
    CHECK(r.body.contains("error"));
    CHECK(call(url + "/health").status == 200);
  }
  const Reply metrics = call(url + "/metrics");
  CHECK_THAT(metrics.text,
             Contains("oml_requests_total{endpoint=\"/search\",code=\"422\"} 2") &&
                 Contains("oml_request_duration_seconds_bucket{endpoint=\"/search\",le=\"+Inf\"}") &&
                 Contains("oml_index_items 200"));

  // A bounded load: 400 image searches from 8 clients, none failed.
  const std::string image = query_rows[1][1];
  // -l: batched forward passes give distances that differ in their last digits, so in length.
  const auto load =
      run("ab -l -q -n 400 -c 8 -T image/png -p " + quote(image) + " " + url + "/search?k=5", 300);
  INFO(load.out << load.err);
  REQUIRE(load.exit_code == 0);
  CHECK_THAT(load.out, Contains("Complete requests:      400") && Contains("Failed requests:        0"));
  CHECK(load.out.find("Non-2xx responses") == std::string::npos);

  // A change through the server is persisted; SIGTERM exits 0 and the folder has it.
  const Reply added =
      call("-X POST -H 'Content-Type: image/png' --data-binary @" + quote(image) + " " + url + "/embed");
  REQUIRE(added.status == 200);
  write_file(dir / "add.json", "{\"items\": [{\"embedding\": " + added.body["embedding"].dump() +
                                   ", \"label\": 9, \"path\": \"added.png\"}]}");
  const Reply created =
      call("-X POST --data-binary @" + quote((dir / "add.json").string()) + " " + url + "/items");
  CHECK(created.status == 201);
  CHECK(created.body["ids"] == nlohmann::json::array({200}));
  CHECK(server.stop(SIGTERM) == 0);
  const auto info = run_oml("oml-index", "info --index " + quote((dir / "index").string()));
  CHECK_THAT(info.out, Contains("items:       201 of dimension 16"));
}

TEST_CASE("oml-serve killed while it writes a change leaves the index whole",
          "[serving][integration][faults]") {
  TempDir dir;
  oml::io::write_npy(dir / "g.npy", torch::randn({20000, 64}));
  REQUIRE(run_oml("oml-index", "build --embeddings " + quote((dir / "g.npy").string()) + " --out " +
                                   quote((dir / "index").string()))
              .exit_code == 0);
  // A large addition (5000 items) takes long enough to be cut at every stage over the runs.
  std::string items = "{\"items\": [";
  const at::Tensor rows = torch::randn({5000, 64});
  for (int64_t i = 0; i < 5000; ++i) {
    if (i > 0) items += ",";
    items +=
        "{\"embedding\": " +
        nlohmann::json(std::vector<float>(rows[i].data_ptr<float>(), rows[i].data_ptr<float>() + 64)).dump() +
        "}";
  }
  write_file(dir / "add.json", items + "]}");
  int64_t expected = 20000;
  for (const int delay_ms : {200, 600, 1200}) {
    INFO("killed after " << delay_ms << " ms");
    Server server(dir / "index", dir.path());
    const pid_t client = ::fork();
    REQUIRE(client >= 0);
    if (client == 0) {
      ::execl("/bin/bash", "bash", "-c",
              ("curl -s -o /dev/null -X POST --data-binary @" + quote((dir / "add.json").string()) + " " +
               server.url() + "/items")
                  .c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    CHECK(server.stop(SIGKILL) == 128 + SIGKILL);
    ::waitpid(client, nullptr, 0);
    const auto info = run_oml("oml-index", "info --index " + quote((dir / "index").string()));
    INFO(info.err);
    REQUIRE(info.exit_code == 0);
    const bool added =
        info.out.find("items:       " + std::to_string(expected + 5000) + " ") != std::string::npos;
    CHECK((added || info.out.find("items:       " + std::to_string(expected) + " ") != std::string::npos));
    if (added) expected += 5000;
    REQUIRE(run_oml("oml-search", "--index " + quote((dir / "index").string()) + " --embeddings " +
                                      quote((dir / "g.npy").string()) + " --top-k 1 --out " +
                                      quote((dir / ("s" + std::to_string(delay_ms))).string()))
                .exit_code == 0);
  }
}

}  // namespace serving_tests
