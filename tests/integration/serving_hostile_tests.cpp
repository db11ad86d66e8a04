// oml-serve against what clients on a network send (docs/serving.md#the-http-api): bytes
// that are not UTF-8, numbers no float holds, bodies nested or long past reason, raw requests
// no HTTP client would write. Every one gets a JSON error with a 4xx status (never a crash), and
// the server answers /health afterwards.
#include <torch/torch.h>

#include <string>
#include <vector>

#include "oml/data/image.h"
#include "serving_fixtures.h"

namespace serving_hostile_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

std::string repeat(const std::string& piece, std::size_t times) {
  std::string out;
  out.reserve(piece.size() * times);
  for (std::size_t i = 0; i < times; ++i) out += piece;
  return out;
}

// A raw HTTP/1.1 request with `body` and Content-Length, as written by hand.
std::string request(const std::string& method, const std::string& target, const std::string& body,
                    const std::string& content_type = "application/json") {
  return method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
}

struct Hostile {
  std::string what;
  std::string bytes;
  int status;  // the expected answer
};

// Sends each request, checks its status and that the answer is one JSON object with an "error",
// then that the server is alive and answers /health.
void check_refused(Server& server, const std::vector<Hostile>& cases) {
  for (const Hostile& c : cases) {
    INFO(c.what);
    const std::string answer = send_raw(server.port(), c.bytes);
    INFO(answer.substr(0, 400));
    CHECK(raw_status(answer) == c.status);
    const nlohmann::json body = nlohmann::json::parse(raw_body(answer), nullptr, /*allow_exceptions=*/false);
    CHECK(body.is_object());
    CHECK(body.contains("error"));
    REQUIRE(server.alive());
    REQUIRE(call(server.url() + "/health").status == 200);
  }
}

}  // namespace

TEST_CASE("oml-serve answers bodies that are not UTF-8 with 400 and keeps serving",
          "[serving][integration][hostile]") {
  TempDir dir;
  Server server(example_index(dir.path()), dir.path());
  const std::string not_utf8 = repeat(std::string("\xff\xfe\x00\x01", 4), 100);  // the reported crash
  check_refused(
      server, {
                  {"400 bytes of invalid UTF-8 as a JSON body", request("POST", "/search", not_utf8), 400},
                  {"the same to /items", request("POST", "/items", not_utf8), 400},
                  {"the same to /embed", request("POST", "/embed", not_utf8), 400},
                  {"invalid UTF-8 inside a JSON string",
                   request("POST", "/search", "{\"embedding\": [0, 0, 1], \"k\": \"\xc3\x28\"}"), 400},
                  {"an item path that is not UTF-8",
                   request("POST", "/items", "{\"embedding\": [0, 0, 1], \"path\": \"a\xff\xfe.jpg\"}"), 400},
                  {"a lone surrogate escaped in a string",
                   request("POST", "/items", "{\"embedding\": [0, 0, 1], \"path\": \"\\ud800\"}"), 400},
                  {"a route that is not UTF-8", request("GET", "/\xff\xfe\xfd", ""), 400},
                  {"a route whose escapes are not UTF-8", request("GET", "/%ff%fe", ""), 400},
                  {"an item id that is not UTF-8", request("DELETE", "/items/\xc0\xaf", ""), 400},
              });
  // Nothing was added by the refused requests.
  CHECK(call(server.url() + "/health").body["items"] == 4);
}

TEST_CASE("oml-serve refuses numbers no float holds, bodies nested or long past reason, and raw junk",
          "[serving][integration][hostile]") {
  TempDir dir;
  Server server(example_index(dir.path()), dir.path(), "--max-items 3");
  const std::string deep_array = repeat("[", 100000) + repeat("]", 100000);
  std::string deep_object;
  for (int i = 0; i < 5000; ++i) deep_object += "{\"a\":";
  deep_object += "1" + repeat("}", 5000);
  const std::string item = "{\"embedding\": [0, 0, 1]}";
  std::string four_items = "{\"items\": [" + item;
  for (int i = 0; i < 3; ++i) four_items += ", " + item;
  four_items += "]}";
  std::string long_embedding = "{\"embedding\": [0";
  for (int i = 0; i < 200000; ++i) long_embedding += ", 0";
  long_embedding += "]}";
  check_refused(
      server,
      {
          {"a number past double's range", request("POST", "/search", "{\"embedding\": [1e400, 0, 0]}"), 400},
          {"a number past float's range", request("POST", "/search", "{\"embedding\": [1e39, 0, 0]}"), 422},
          {"a k past int64", request("POST", "/search", "{\"embedding\": [0, 0, 1], \"k\": 1e300}"), 400},
          {"a fractional k", request("POST", "/search", "{\"embedding\": [0, 0, 1], \"k\": 2.5}"), 400},
          {"a negative k", request("POST", "/search", "{\"embedding\": [0, 0, 1], \"k\": -3}"), 400},
          {"a threshold past double's range",
           request("POST", "/search", "{\"embedding\": [0, 0, 1], \"threshold\": -1e999}"), 400},
          {"a label past int64",
           request("POST", "/items", "{\"embedding\": [0, 0, 1], \"label\": 18446744073709551615}"), 400},
          {"a fractional label", request("POST", "/items", "{\"embedding\": [0, 0, 1], \"label\": 1.5}"),
           400},
          {"a control character in a path",
           request("POST", "/items", "{\"embedding\": [0, 0, 1], \"path\": \"a\\nb.jpg\"}"), 400},
          {"a NUL in a category",
           request("POST", "/items", "{\"embedding\": [0, 0, 1], \"category\": \"\\u0000\"}"), 400},
          {"100000 nested arrays", request("POST", "/search", deep_array), 400},
          {"5000 nested objects", request("POST", "/search", deep_object), 400},
          {"more items than --max-items", request("POST", "/items", four_items), 413},
          {"an embedding of 200001 values", request("POST", "/search", long_embedding), 422},
          {"an empty body", request("POST", "/search", ""), 400},
          {"a JSON array body", request("POST", "/search", "[1, 2, 3]"), 400},
          {"a body cut short (Content-Length larger than what is sent)",
           "POST /search HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"embedding\": [0, 0", 400},
          {"a request line of junk", "GARBAGE\x01\x02\r\n\r\n", 400},
          {"a header line without a colon", "GET /health HTTP/1.1\r\nno colon here\r\n\r\n", 400},
          {"a Content-Length that is not a number", "POST /search HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
           400},
      });
  CHECK(call(server.url() + "/health").body["items"] == 4);
}

TEST_CASE("oml-serve percent-decodes query strings and paths and refuses unknown parameters",
          "[serving][integration][hostile]") {
  TempDir dir;
  Server server(example_index(dir.path()), dir.path());
  const std::string url = server.url();
  const std::string body = "-X POST -d '{\"embedding\": [0, 0, 1]}' ";
  // k=%32 is k=2; threshold=0%2E7 is 0.7 (item 1 lies at 0.632, item 3 at 1.414).
  Reply r = call(body + "'" + url + "/search?k=%32'");
  REQUIRE(r.status == 200);
  CHECK(r.body["neighbours"].size() == 2);
  r = call(body + "'" + url + "/search?threshold=0%2E7&k=4'");
  REQUIRE(r.status == 200);
  CHECK(r.body["neighbours"].size() == 2);
  CHECK(r.body["threshold"] == 0.7);
  // %2D1 is -1: no Euclidean distance (a 400, as a plain -1 is).
  r = call(body + "'" + url + "/search?threshold=%2D1'");
  CHECK(r.status == 400);
  CHECK(r.body["error"].get<std::string>().find("threshold") != std::string::npos);
  // '+' is a space in a query string (and a number may start with spaces).
  r = call(body + "'" + url + "/search?k=+2'");
  CHECK(r.status == 200);
  CHECK(r.body["neighbours"].size() == 2);
  // Malformed escapes, escapes of bytes that are not UTF-8, and unknown parameters.
  for (const char* target :
       {"/search?k=%G1", "/search?k=%2", "/search?k=%ff", "/search?top_k=3", "/search?k=2&kk=3"}) {
    INFO(target);
    r = call(body + "'" + url + target + "'");
    CHECK(r.status == 400);
    CHECK(r.body.contains("error"));
  }
  // A percent-encoded path: DELETE /items/%31 removes item 1.
  r = call("-X DELETE '" + url + "/items/%31'");
  CHECK(r.status == 200);
  CHECK(r.body["removed"] == 1);
  CHECK(call("-X DELETE '" + url + "/items/%31'").status == 404);
}

TEST_CASE("oml-serve refuses image bombs before decoding them, and keeps concurrent decodes in budget",
          "[serving][integration][hostile]") {
  TempDir dir;
  const Model m = model(dir.path());
  const fs::path gallery = subset_rows(dir.path(), "gallery.csv", 0, 50);
  REQUIRE(build_index(m, gallery, dir / "index").exit_code == 0);
  // A valid PNG of 12000 x 12000 zero pixels in a few hundred KiB; OpenCV's own limit (2^30
  // pixels) would decode it.
  write_file(dir / "bomb.png", png_bomb(12000, 12000));
  REQUIRE(fs::file_size(dir / "bomb.png") < 2 * 1024 * 1024);
  const std::string image = csv_rows(gallery)[1][1];
  {
    Server server(dir / "index", dir.path());
    const Reply bomb = call("-X POST -H 'Content-Type: image/png' --data-binary @" +
                            quote((dir / "bomb.png").string()) + " " + server.url() + "/search");
    CHECK(bomb.status == 413);
    CHECK_THAT(bomb.body["error"].get<std::string>(),
               Contains("12000x12000 = 144000000 pixels") && Contains("89478485"));
    write_file(dir / "bomb.json",
               "{\"image\": \"" + run("base64 -w0 " + quote((dir / "bomb.png").string())).out + "\"}");
    CHECK(
        call("-X POST --data-binary @" + quote((dir / "bomb.json").string()) + " " + server.url() + "/embed")
            .status == 413);
    CHECK(server.alive());
    CHECK(call("-X POST -H 'Content-Type: image/png' --data-binary @" + quote(image) + " " + server.url() +
               "/search")
              .status == 200);
  }
  {
    // --max-image-pixels below a 28x28 image, and a budget too small for any image.
    Server server(dir / "index", dir.path(), "--max-image-pixels 700");
    const Reply small = call("-X POST -H 'Content-Type: image/png' --data-binary @" + quote(image) + " " +
                             server.url() + "/search");
    CHECK(small.status == 413);
    CHECK_THAT(small.body["error"].get<std::string>(),
               Contains("28x28 = 784 pixels") && Contains("--max-image-pixels"));
  }
  {
    // A 28x28 greyscale PNG holds 784 x (1 + 3 + 12) = 12544 bytes while it is decoded and
    // transformed: 20 KiB fit it.
    Server server(dir / "index", dir.path(), "--decode-memory-mb 0.02");
    const Reply budget = call("-X POST -H 'Content-Type: image/png' --data-binary @" + quote(image) + " " +
                              server.url() + "/search");
    CHECK(budget.status == 200);
    const Reply over = call("-X POST -H 'Content-Type: image/png' --data-binary @" +
                            quote((dir / "bomb.png").string()) + " '" + server.url() + "/search'");
    CHECK(over.status == 413);
  }
}

TEST_CASE("Training, oml-index, oml-search and oml-predict refuse an image over max_image_pixels, exit 2",
          "[serving][integration][hostile]") {
  TempDir dir;
  const Model m = model(dir.path());
  // The subset's images are 28x28 = 784 pixels.
  const fs::path gallery = subset_rows(dir.path(), "gallery.csv", 0, 20);
  const std::string first = csv_rows(gallery)[1][1];
  auto r = build_index(m, gallery, dir / "index", "--set max_image_pixels=700");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(first) && Contains("28x28 = 784 pixels") && Contains("max_image_pixels"));
  CHECK_FALSE(fs::exists(dir / "index" / "CURRENT"));
  // An index whose config allows 800 pixels: oml-search embeds queries within the same limit.
  REQUIRE(build_index(m, gallery, dir / "index", "--set max_image_pixels=800").exit_code == 0);
  fs::create_directories(dir / "queries");
  write_file(dir / "queries" / "big.png",
             oml::data::encode_image(torch::zeros({30, 30, 3}, torch::kUInt8), "q.png"));
  r = run_oml("oml-search", "--index " + quote((dir / "index").string()) + " --images " +
                                quote((dir / "queries").string()) + " --out " + quote((dir / "s").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("big.png") && Contains("30x30 = 900 pixels"));
  r = run_oml("oml-predict",
              "--config " + quote(m.config.string()) + " --set max_image_pixels=700 --set data_dir=" +
                  quote((dir / "queries").string()) + " --set save_dir=" + quote((dir / "p").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("big.png") && Contains("900 pixels"));
  // Training: the loader's threads refuse the first image, and the run stops with exit 2.
  write_file(dir / "train.yaml", train_config(dir / "logs", "max_image_pixels: 700\n"));
  r = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("784 pixels") && Contains("max_image_pixels"));
}

TEST_CASE(
    "With a token, changes need Authorization: Bearer, compared whole, and --auth all guards every route",
    "[serving][integration][hostile][auth]") {
  TempDir dir;
  const fs::path index = example_index(dir.path());
  const std::string token = "3f9c2a7d1e8b4c6a9f0e2d7c5b1a8e4f";
  write_file(dir / "token", token + "\n");
  fs::permissions(dir / "token", fs::perms::owner_read | fs::perms::owner_write);
  const std::string add = "-X POST -d '{\"embedding\": [1, 1, 0], \"label\": 4}' ";
  const std::string bearer = "-H 'Authorization: Bearer " + token + "' ";
  fs::create_directories(dir / "changes");
  fs::create_directories(dir / "all");
  {
    Server server(index, dir / "changes", "--auth-token-file " + quote((dir / "token").string()));
    const std::string url = server.url();
    // Reading needs nothing; changing needs the token.
    CHECK(call("-X POST -d '{\"embedding\": [0, 0, 1]}' " + url + "/search").status == 200);
    CHECK(call(url + "/health").status == 200);
    const auto refused = run("curl -s -i " + add + url + "/items");
    CHECK(refused.out.find("401 Unauthorized") != std::string::npos);
    CHECK(refused.out.find("WWW-Authenticate: Bearer realm=\"oml-serve\"") != std::string::npos);
    for (const std::string& wrong :
         {"Bearer " + token.substr(0, 31), "Bearer " + token + "0", "Basic " + token,
          "Bearer " + std::string(32, 'x'), std::string("bearer")}) {
      INFO(wrong);
      CHECK(call(add + "-H 'Authorization: " + wrong + "' " + url + "/items").status == 401);
    }
    CHECK(call("-X DELETE " + url + "/items/0").status == 401);
    CHECK(call("-X DELETE -H 'Authorization: Bearer nope' " + url + "/items/0").status == 401);
    CHECK(call(url + "/health").body["items"] == 4);  // nothing refused was applied
    const Reply added = call(add + bearer + url + "/items");
    CHECK(added.status == 201);
    CHECK(call("-X DELETE " + bearer + url + "/items/0").status == 200);
    // The scheme is case-insensitive (RFC 7235).
    CHECK(call("-X DELETE -H 'Authorization: bearer " + token + "' " + url + "/items/1").status == 200);
  }
  {
    Server server(index, dir / "all", "--auth all --auth-token-file " + quote((dir / "token").string()));
    CHECK(call(server.url() + "/health").status == 401);
    CHECK(call(server.url() + "/metrics").status == 401);
    CHECK(call("-X POST -d '{\"embedding\": [0, 0, 1]}' " + server.url() + "/search").status == 401);
    CHECK(call(bearer + server.url() + "/health").status == 200);
    CHECK(call(bearer + "-X POST -d '{\"embedding\": [0, 0, 1]}' " + server.url() + "/search").status == 200);
    CHECK(call(bearer + server.url() + "/nowhere").status == 404);
    CHECK(call(server.url() + "/nowhere").status == 401);  // no route is shown without the token
  }
  // The token never reaches the logs.
  for (const char* logs : {"changes", "all"}) {
    CHECK(read_file(dir / logs / "serve.err").find(token) == std::string::npos);
    CHECK(read_file(dir / logs / "serve.out").find(token) == std::string::npos);
  }
}

TEST_CASE(
    "oml-serve's token comes from a file or OML_SERVE_TOKEN, and binding beyond loopback without one warns",
    "[serving][integration][hostile][auth]") {
  TempDir dir;
  const fs::path index = example_index(dir.path());
  const std::string serve = quote(command_path("oml-serve")) + " --index " + quote(index.string());
  write_file(dir / "short", "abc\n");
  auto r = run(serve + " --port 0 --auth-token-file " + quote((dir / "short").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("too short"));
  write_file(dir / "spaces", "a token with spaces in it\n");
  r = run(serve + " --port 0 --auth-token-file " + quote((dir / "spaces").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("RFC 6750"));
  write_file(dir / "empty", "\n");
  CHECK(run(serve + " --port 0 --auth-token-file " + quote((dir / "empty").string())).exit_code == 2);
  CHECK(run(serve + " --port 0 --auth-token-file " + quote((dir / "missing").string())).exit_code == 2);
  r = run(serve + " --port 0 --auth all");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--auth all needs a token"));
  r = run("OML_SERVE_TOKEN=0123456789abcdef0123 " + serve + " --port 0 --auth-token-file " +
          quote((dir / "short").string()));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("both --auth-token-file and OML_SERVE_TOKEN"));
  {
    // The environment's token guards changes as the file's does.
    oml::test::ScopedEnv token("OML_SERVE_TOKEN", "0123456789abcdef0123");
    Server server(index, dir.path());
    token.restore();  // the server read it at its start; the test's later commands must not
    CHECK(call("-X DELETE " + server.url() + "/items/0").status == 401);
    CHECK(call("-X DELETE -H 'Authorization: Bearer 0123456789abcdef0123' " + server.url() + "/items/0")
              .status == 200);
  }
  {
    Server server(index, dir.path(), "--host 0.0.0.0");
    CHECK(call(server.url() + "/health").status == 200);
  }
  CHECK_THAT(read_file(dir / "serve.err"), Contains("without a token"));
}

TEST_CASE("oml-serve refuses size flags that are not finite or past a petabyte, and waits past a minute",
          "[serving][integration][hostile]") {
  TempDir dir;
  const std::string serve = quote(command_path("oml-serve")) + " --index " +
                            quote(example_index(dir.path()).string()) + " --port 0 ";
  for (const std::string flag : {"max-body-mb", "decode-memory-mb", "compact-min-mb", "max-audio-mb"}) {
    INFO(flag);
    // 1e13 MiB in bytes does not fit an int64: it was cast as it was (undefined behaviour).
    const auto r = run(serve + "--" + flag + " 1e13");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("--" + flag + " must be between") && Contains("got 1e+13"));
    const auto negative = run(serve + "--" + flag + "=-1");
    CHECK(negative.exit_code == 2);
    CHECK_THAT(negative.err, Contains("got -1"));
  }
  const auto text = run(serve + "--max-text-kb 0");
  CHECK(text.exit_code == 2);
  CHECK_THAT(text.err, Contains("--max-text-kb must be between 0.001 and 1e+12, got 0"));
  const auto wait = run(serve + "--max-wait-ms 1e300");
  CHECK(wait.exit_code == 2);
  CHECK_THAT(wait.err, Contains("--max-wait-ms must be between 0 and 60000 (a minute), got 1e+300"));
}

TEST_CASE("A failure inside oml-serve's own code is one request's 500, logged, and the server goes on",
          "[serving][integration][hostile]") {
  TempDir dir;
  const fs::path index = example_index(dir.path());
  oml::test::ScopedEnv failpoints("OML_FAILPOINTS", "serve:search=throw");
  Server server(index, dir.path());
  failpoints.restore();
  for (int i = 0; i < 3; ++i) {
    const Reply r = call("-X POST -d '{\"embedding\": [0, 0, 1]}' " + server.url() + "/search");
    CHECK(r.status == 500);
    CHECK_THAT(r.body["error"].get<std::string>(), Contains("failpoint serve:search"));
  }
  CHECK(server.alive());
  CHECK(call(server.url() + "/health").status == 200);
  CHECK(call("-X POST -d '{\"embedding\": [1, 1, 0]}' " + server.url() + "/items").status == 201);
  CHECK_THAT(read_file(dir / "serve.err"), Contains("POST /search") && Contains("failpoint serve:search"));
  CHECK_THAT(call(server.url() + "/metrics").text,
             Contains("oml_requests_total{endpoint=\"/search\",code=\"500\"} 3"));
}

TEST_CASE("oml-serve answers Expect: 100-continue at once and refuses an announced oversized body unsent",
          "[serving][integration][hostile]") {
  TempDir dir;
  Server server(example_index(dir.path()), dir.path(), "--max-body-mb 2");
  // A client that waits for 100 Continue before sending the body (curl does above 1 MB).
  const std::string body = "{\"embedding\": [0, 0, 1]}";
  const std::string head = "POST /search HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  const std::string interim = send_raw(server.port(), head, 2000, /*half_close=*/false);
  CHECK(interim.rfind("HTTP/1.1 100 Continue\r\n", 0) == 0);
  // The whole exchange over one connection: 100, then the answer.
  const std::string answer = send_raw(server.port(), head + body);
  CHECK(answer.find("HTTP/1.1 200 OK") != std::string::npos);
  // An announced body over --max-body-mb: 413 before a byte of it is sent.
  const std::string too_large = send_raw(
      server.port(),
      "POST /items HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 3000000\r\n\r\n", 2000,
      /*half_close=*/false);
  CHECK(raw_status(too_large) == 413);
  // curl sends Expect for its 1.3 MB body: answered without its one-second wait.
  std::string items = "{\"items\": [";
  for (int i = 0; i < 1000; ++i) {
    items += (i > 0 ? ", " : "") +
             std::string("{\"embedding\": [0.123456789, 0.987654321, 0.5], \"path\": \"") +
             std::string(1200, 'p') + "\"}";
  }
  write_file(dir / "items.json", items + "]}");
  REQUIRE(fs::file_size(dir / "items.json") > 1024 * 1024);
  const auto timed = run("curl -s -o /dev/null -w '%{http_code} %{time_total}' -X POST --data-binary @" +
                         quote((dir / "items.json").string()) + " " + server.url() + "/items");
  INFO(timed.out);
  CHECK(timed.out.rfind("201 ", 0) == 0);
  CHECK(std::stod(timed.out.substr(4)) < 0.9);
  CHECK(server.alive());
}

}  // namespace serving_hostile_tests
