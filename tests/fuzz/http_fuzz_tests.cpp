// Fuzzing oml-serve's HTTP surface: mutated raw requests go from bytes through Beast's request
// parser to the API's routes, JSON handling, base64 and image decoding, and the search, embed,
// add and remove calls of a real GalleryService over a small index with a model (what a
// connection does, without the socket: HttpApi::answer_bytes). And the image header readers
// alone, on mutated files of every format they size, and the audio decoder with the server's
// limits (mutated WAV files: libsndfile also sniffs FLAC, OGG, AIFF and the rest from them).
//
// The property (http_api.h's contract): every answer is a status below 500 with a JSON body
// that parses — a 500 or an answer that is not JSON is a failure, as is any exception, crash,
// hang or memory growth the harness sees. A 2xx counts as accepted, a 4xx as rejected.
#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>

#include "fuzz/fuzz.h"
#include "gallery/gallery_service.h"
#include "gallery/http_api.h"
#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/data/audio.h"
#include "oml/data/audio_dataset.h"
#include "oml/data/csv.h"
#include "oml/data/image.h"
#include "oml/models/conv_net.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"
#include "support/text_fixtures.h"

namespace http_fuzz_tests {

using namespace oml;

namespace {

std::string request(const std::string& method, const std::string& target, const std::string& body,
                    const std::string& content_type = "application/json") {
  return method + " " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: " + content_type +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string base64(const std::string& bytes) {
  static const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += alphabet[(v >> 18) & 63];
    out += alphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? alphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? alphabet[v & 63] : '=';
  }
  return out;
}

const std::vector<std::string>& http_dictionary() {
  static const std::vector<std::string> tokens{"\r\n",
                                               "\r\n\r\n",
                                               ": ",
                                               "HTTP/1.1",
                                               "HTTP/1.0",
                                               "GET ",
                                               "POST ",
                                               "DELETE ",
                                               "PUT ",
                                               "/search",
                                               "/embed",
                                               "/items",
                                               "/items/",
                                               "/health",
                                               "/metrics",
                                               "?k=",
                                               "&threshold=",
                                               "none",
                                               "%",
                                               "%2D",
                                               "%ff",
                                               "%00",
                                               "+",
                                               "Content-Length: ",
                                               "Content-Type: application/json",
                                               "Content-Type: image/png",
                                               "Transfer-Encoding: chunked",
                                               "Authorization: Bearer ",
                                               "Connection: close",
                                               "Expect: 100-continue",
                                               "{",
                                               "}",
                                               "[",
                                               "]",
                                               ":",
                                               ",",
                                               "\"",
                                               "\\u0000",
                                               "\\ud800",
                                               "\\\"",
                                               "null",
                                               "true",
                                               "false",
                                               "\"embedding\"",
                                               "\"image\"",
                                               "\"items\"",
                                               "\"k\"",
                                               "\"threshold\"",
                                               "\"label\"",
                                               "\"path\"",
                                               "\"text\"",
                                               "\u00e9",
                                               "\u200b",
                                               "\t",
                                               "\n",
                                               "\xe4\xb8\xad",
                                               "\xf0\x9f\x98\x80",
                                               "\"category\"",
                                               "1e400",
                                               "-1e400",
                                               "1e39",
                                               "1e-400",
                                               "NaN",
                                               "Infinity",
                                               "\xff",
                                               "\xc3\x28",
                                               "\xed\xa0\x80",
                                               "\xf4\x90\x80\x80",
                                               "iVBORw0KGgo",
                                               "=",
                                               "==",
                                               "-_"};
  return tokens;
}

// oml-index build of <dir>/predict.yaml into <dir>/index, then that index served (as oml-serve
// does, without a socket) with `options`.
std::pair<std::unique_ptr<pipelines::GalleryService>, std::unique_ptr<pipelines::HttpApi>> build_and_serve(
    const fuzz::ScratchDir& dir, const pipelines::ServiceOptions& options) {
  const auto built =
      test::run_oml("oml-index", "build --config " + test::quote((dir / "predict.yaml").string()) +
                                     " --out " + test::quote((dir / "index").string()));
  if (built.exit_code != 0) throw std::runtime_error("oml-index build failed: " + built.err);
  cli::Invocation invocation;
  invocation.command = "oml-serve";
  auto service = std::make_unique<pipelines::GalleryService>(invocation, dir / "index", options);
  pipelines::ApiOptions api_options;
  api_options.max_items = 50;
  auto api = std::make_unique<pipelines::HttpApi>(*service, api_options);
  return {std::move(service), std::move(api)};
}

// A real service over an index of 24 Fashion-MNIST images embedded by a small conv net.
struct Served {
  fuzz::ScratchDir dir;
  std::unique_ptr<pipelines::GalleryService> service;
  std::unique_ptr<pipelines::HttpApi> api;
  std::string image;  // a 28x28 PNG of the gallery

  Served() {
    cli::register_builtins();
    torch::manual_seed(3);
    models::ConvNetOptions options;
    options.channels = {4, 8};
    options.feat_dim = 8;
    const models::ConvNet net(options);
    test::write_state_dict_file(dir / "model.pth", *net);
    const auto rows = data::parse_csv(test::read_file(test::fashion_mnist_subset() / "df.csv"), "df.csv");
    std::string df = "label,path,split,is_query,is_gallery\n";
    for (std::size_t r = 1; r <= 24; ++r) {
      df += rows[r].fields[0] + "," + (test::fashion_mnist_subset() / rows[r].fields[1]).string() +
            ",validation,True,True\n";
    }
    test::write_file(dir / "df.csv", df);
    image = test::read_file(test::fashion_mnist_subset() / rows[1].fields[1]);
    test::write_file(dir / "predict.yaml",
                     "num_threads: 1\nnum_workers: 0\nweights: " + (dir / "model.pth").string() +
                         "\ntransforms_predict: {name: norm}\ndataset_root: " + dir.path().string() +
                         "\nextractor: {name: conv_net, args: {channels: [4, 8], feat_dim: 8}}\n");
    pipelines::ServiceOptions service_options;
    service_options.decode_memory_bytes = int64_t{64} * 1024 * 1024;
    std::tie(service, api) = build_and_serve(dir, service_options);
  }
};

// A real service over an index of 12 texts embedded by the tiny BERT of text_fixtures.h.
struct ServedTexts {
  fuzz::ScratchDir dir;
  std::unique_ptr<pipelines::GalleryService> service;
  std::unique_ptr<pipelines::HttpApi> api;

  ServedTexts() {
    cli::register_builtins();
    test::write_tiny_text_model(dir / "model");
    const auto& words = test::tiny_text_words();
    std::string df = "label,text,split,is_query,is_gallery\n";
    for (std::size_t i = 0; i < 12; ++i) {
      df += std::to_string(i % 4) + ",the " + words[i] + " and " + words[(i * 5) % words.size()] +
            ",validation,True,True\n";
    }
    test::write_file(dir / "df.csv", df);
    test::write_file(dir / "predict.yaml",
                     "num_threads: 1\nnum_workers: 0\ndataset_root: " + dir.path().string() +
                         "\nextractor: {name: hf_text_encoder, args: {model_dir: " +
                         (dir / "model").string() + ", pooling: mean}}\n");
    pipelines::ServiceOptions service_options;
    service_options.max_text_bytes = 4096;
    std::tie(service, api) = build_and_serve(dir, service_options);
  }
};

// What every answer of HttpApi must be (the property of both targets).
void check_answer(const std::optional<pipelines::HttpResponse>& answer) {
  if (!answer) return;  // closed unanswered, as the server does
  const unsigned status = answer->result_int();
  const std::string& body = answer->body();
  if (status >= 500) throw InternalError("HTTP " + std::to_string(status) + ": " + body);
  const auto type = answer->find(boost::beast::http::field::content_type);
  if (type == answer->end())
    throw InternalError("HTTP " + std::to_string(status) + " without a Content-Type");
  if (type->value() == "application/json") {
    const auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded() || !json.is_object())
      throw InternalError("HTTP " + std::to_string(status) + " with a body that is not JSON");
    if (status >= 400)
      throw DataError("HTTP " + std::to_string(status) + ": " +
                      json.value("error", std::string("(no error)")));
  }
}

}  // namespace

TEST_CASE("Mutated HTTP requests to oml-serve are answered below 500 with JSON", "[fuzz][http]") {
  Served served;
  fuzz::Target target;
  target.name = "http";
  target.extension = ".http";
  const std::string png = served.image;
  const std::string e = "[0.1, -0.2, 0.3, 0, 1, 2, 3, 4]";
  // A body holding bytes that are not UTF-8, a NUL among them: sized by the array, less its own
  // terminator (a hand-counted length read past the literal).
  static constexpr char kNotUtf8[] = "{\"embedding\": \"\xff\xfe\x00\x01\"}";
  const std::string kNotUtf8Body(kNotUtf8, sizeof kNotUtf8 - 1);
  target.seeds = {
      request("GET", "/health", ""),
      request("GET", "/metrics", ""),
      request("POST", "/search", "{\"embedding\": " + e + ", \"k\": 3}"),
      request("POST", "/search?k=%32&threshold=0%2E5", "{\"embedding\": " + e + "}"),
      request("POST", "/search", "{\"embedding\": " + e + ", \"threshold\": null}"),
      request("POST", "/search?k=2", png, "image/png"),
      request("POST", "/embed", "{\"image\": \"" + base64(png) + "\"}"),
      request("POST", "/embed", png, "image/png"),
      request("POST", "/items",
              "{\"embedding\": " + e + ", \"label\": 3, \"path\": \"a.png\", \"category\": \"c\"}"),
      request("POST", "/items",
              "{\"items\": [{\"embedding\": " + e + "}, {\"image\": \"" + base64(png) + "\"}]}"),
      request("DELETE", "/items/3", ""),
      request("DELETE", "/items/%31%30", ""),
      // Numbers at the limits, bytes that are not UTF-8, bodies cut short, nesting, bombs.
      request("POST", "/search",
              "{\"embedding\": [1e308, -1e308, 4.9e-324, -0, 1e400, 0, 0, 0], \"k\": 1e300}"),
      request("POST", "/items", "{\"embedding\": " + e + ", \"label\": 18446744073709551616}"),
      request("POST", "/search", kNotUtf8Body),
      request("POST", "/items", "{\"embedding\": " + e + ", \"path\": \"\xc3\x28\"}"),
      "POST /search HTTP/1.1\r\nContent-Length: 64\r\n\r\n{\"embedding\": [0.1",
      request("POST", "/search", std::string(200, '[') + std::string(200, ']')),
      request("POST", "/search", oml::test::png_claiming(30000, 30000), "image/png"),
      request("POST", "/embed", "{\"image\": \"" + base64(oml::test::png_claiming(100000, 100000)) + "\"}"),
      "POST /search HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"emb\r\n0\r\n\r\n",
  };
  target.dictionary = http_dictionary();
  target.describe = [](const std::string& input) { return "request: " + valid_utf8(input.substr(0, 300)); };
  target.entry_points = {{"oml-serve", [&](const std::string& bytes) {
                            check_answer(served.api->answer_bytes(bytes, 1024 * 1024));
                          }}};
  fuzz::check(target, 4.0);
}

TEST_CASE("Mutated HTTP requests to a text index's oml-serve are answered below 500 with JSON",
          "[fuzz][http_text]") {
  ServedTexts served;
  fuzz::Target target;
  target.name = "http_text";
  target.extension = ".http";
  target.seeds = {
      request("POST", "/search", "{\"text\": \"the red bicycle\", \"k\": 3}"),
      request("POST", "/embed",
              "{\"text\": \"caf\\u00e9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 \\t\\u0000\"}"),
      request("POST", "/items", "{\"text\": \"a new line\\nof text\", \"label\": 2, \"category\": \"c\"}"),
      request("POST", "/items",
              "{\"items\": [{\"text\": \"one\"}, {\"text\": \"two\", \"embedding\": [0]}]}"),
      request("POST", "/search", "{\"text\": \"" + std::string(3000, 'w') + "\"}"),
      request("POST", "/search", "{\"text\": \"\\ud800\"}"),
      request("POST", "/search", "{\"text\": \"\"}"),
      request("POST", "/search", "{\"text\": [\"a\"]}"),
      request("POST", "/search", "{\"text\": \"a\", \"image\": \"iVBORw0KGgo=\"}"),
      request("POST", "/embed", "\x89PNG\r\n", "image/png"),
      request("DELETE", "/items/12", ""),
      request("GET", "/health", ""),
  };
  target.dictionary = http_dictionary();
  target.describe = [](const std::string& input) { return "request: " + valid_utf8(input.substr(0, 300)); };
  target.entry_points = {{"oml-serve", [&](const std::string& bytes) {
                            check_answer(served.api->answer_bytes(bytes, 1024 * 1024));
                          }}};
  fuzz::check(target, 4.0);
}

TEST_CASE("Mutated image files end in a decoded image or a DataError", "[fuzz][image]") {
  fuzz::Target target;
  target.name = "image";
  target.extension = ".img";
  torch::manual_seed(1);
  const at::Tensor pixels = torch::randint(0, 256, {13, 17, 3}, torch::kUInt8);
  for (const char* ext : {".png", ".jpg", ".bmp", ".webp", ".tiff", ".ppm", ".pgm"}) {
    const at::Tensor image = std::string(ext) == ".pgm" ? pixels.select(2, 0).contiguous() : pixels;
    target.seeds.push_back(data::encode_image(image, std::string("x") + ext));
  }
  target.seeds.push_back("P7\nWIDTH 3\nHEIGHT 2\nDEPTH 3\nMAXVAL 255\nTUPLTYPE RGB\nENDHDR\n" +
                         std::string(18, '\x7f'));
  target.seeds.push_back("PF\n2 2\n-1.0\n" + std::string(48, '\0'));
  target.seeds.push_back(oml::test::png_claiming(20000, 20000));
  target.dictionary = {"\xff\xd8\xff",
                       "\xff\xc0",
                       "\xff\xda",
                       "\xff\xd9",
                       "IHDR",
                       "IDAT",
                       "IEND",
                       "BM",
                       "RIFF",
                       "WEBP",
                       "VP8 ",
                       "VP8L",
                       "VP8X",
                       "II*\0",
                       "MM\0*",
                       "II+\0",
                       "P6\n",
                       "P7\n",
                       "PF\n",
                       "ENDHDR",
                       "WIDTH",
                       "HEIGHT",
                       "\xff\xff\xff\xff",
                       "\0\0\0\0",
                       "\x7f\xff"};
  data::ImageLimits limits;
  limits.max_pixels = 4'000'000;  // a fuzzer's image stays small: larger ones are refused unread
  // Decoding happens in memory: OpenCV decodes some formats (PFM among those accepted) only
  // through a temporary file, which it could leave behind; none may appear.
  oml::test::TempDir opencv_temp;
  const oml::test::ScopedEnv opencv_temp_path("OPENCV_TEMP_PATH", opencv_temp.path().string());
  target.entry_points = {{"decode_image", [&](const std::string& bytes) {
                            const auto no_file_left = [&] {
                              if (!std::filesystem::is_empty(opencv_temp.path()))
                                throw InternalError("decode_image left a file in OpenCV's temporary folder");
                            };
                            try {
                              const at::Tensor image = data::decode_image(bytes, "fuzzed image", limits);
                              if (image.dim() != 3 || image.size(2) != 3)
                                throw InternalError("decode_image returned " + std::to_string(image.dim()) +
                                                    " dims");
                            } catch (const DataError&) {
                              no_file_left();
                              throw;
                            }
                            no_file_left();
                          }}};
  fuzz::check(target, 3.0);
}

TEST_CASE("Mutated audio files end in an item or a DataError", "[fuzz][audio]") {
  fuzz::Target target;
  target.name = "audio";
  target.extension = ".wav";
  std::vector<float> wave(800);
  for (std::size_t i = 0; i < wave.size(); ++i) wave[i] = 0.5F * std::sin(0.05F * static_cast<float>(i));
  target.seeds.push_back(oml::test::wav_bytes(wave, 16000, 1));
  target.seeds.push_back(oml::test::wav_bytes(wave, 22050, 2));
  target.seeds.push_back(oml::test::wav_bytes(wave, 8000, 4));
  target.dictionary = {"RIFF",
                       "RIFX",
                       "RF64",
                       "WAVE",
                       "fmt ",
                       "data",
                       "fact",
                       "LIST",
                       "fLaC",
                       "OggS",
                       "ID3",
                       "\xff\xfb",
                       "FORM",
                       "AIFF",
                       "\x80\xbb\0\0",
                       "\x44\xac\0\0",
                       "\xff\xff\xff\xff",
                       "\0\0\0\0",
                       "\x01\0",
                       "\x03\0",
                       "\xfe\xff"};
  // What oml-serve applies to a request: a sample limit and a channel limit, a budget for the
  // resampling filter read from the header, the sample limit on the resampled audio, then the cut
  // to 0.1 s at 16 kHz as an index config's audio: would.
  data::AudioDecodeLimits limits;
  limits.max_samples = 1 << 20;
  limits.max_channels = 32;
  limits.setting = "the fuzz target's limit";
  data::AudioDatasetOptions options;
  options.max_num_seconds = 0.1;
  target.entry_points = {
      {"decode_audio", [&](const std::string& bytes) {
         const data::AudioHeader header = data::read_audio_header(bytes, "fuzzed audio", limits);
         if (data::resample_filter_bytes(header.sample_rate, options.sample_rate) > int64_t{256} << 20) {
           throw data::AudioTooLong("fuzzed audio: the filter is over the fuzz target's budget");
         }
         const data::Audio audio = data::decode_audio(bytes, "fuzzed audio", limits);
         const at::Tensor item = data::audio_item(audio, options, 0, "fuzzed audio", limits);
         if (item.dim() != 2 || item.size(0) != 1 || item.size(1) != 1600)
           throw InternalError("audio_item returned " + std::to_string(item.dim()) + " dims");
       }}};
  fuzz::check(target, 3.0);
}

}  // namespace http_fuzz_tests
