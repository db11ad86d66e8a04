// oml-serve's routes (http_api.h): parsing a request's target, body and credentials, calling
// GalleryService, and answering in JSON.
#include "gallery/http_api.h"

#include <torch/torch.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <vector>

#include "gallery/gallery_service.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/numbers.h"
#include "oml/common/strings.h"
#include "oml/data/audio.h"
#include "oml/data/image.h"

namespace oml::pipelines {

namespace {

namespace http = boost::beast::http;

// A client's mistake, answered with `status` and a JSON error.
struct HttpError : std::runtime_error {
  HttpError(http::status status, const std::string& message) : std::runtime_error(message), status(status) {}
  http::status status;
};

[[noreturn]] void bad_request(const std::string& message) {
  throw HttpError(http::status::bad_request, message);
}

std::array<unsigned char, 32> sha256(const std::string& text) {
  std::array<unsigned char, 32> digest{};
  unsigned int length = 0;
  if (EVP_Digest(text.data(), text.size(), digest.data(), &length, EVP_sha256(), nullptr) != 1 ||
      length != 32)
    throw RuntimeError("libcrypto could not compute a SHA-256 digest");
  return digest;
}

// ---- request decoding ------------------------------------------------------------------------

// Standard or URL-safe base64, with or without padding, with line breaks and spaces anywhere (as
// clients wrap it), decoded by libcrypto's EVP_DecodeBlock once normalised to the standard form.
// `field` names the JSON field in errors ("image", "audio").
std::string base64_decode(const std::string& text, const std::string& field) {
  const std::string quoted = "\"" + field + "\"";
  std::string clean;
  clean.reserve(text.size() + 3);
  for (const char c : text) {
    if (c == '\n' || c == '\r' || c == ' ' || c == '\t') continue;
    if (c == '-') {
      clean += '+';
    } else if (c == '_') {
      clean += '/';
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '=') {
      clean += c;
    } else {
      bad_request(quoted + " is not base64 (character " + std::to_string(static_cast<unsigned char>(c)) +
                  ")");
    }
  }
  const std::size_t data_end = clean.find('=');
  if (data_end != std::string::npos &&
      (clean.find_first_not_of('=', data_end) != std::string::npos || clean.size() - data_end > 2))
    bad_request(quoted + " is not base64 ('=' inside it)");
  const std::size_t symbols = data_end == std::string::npos ? clean.size() : data_end;
  if (symbols % 4 == 1) bad_request(quoted + " is not base64 (truncated)");
  clean.resize(symbols);
  const std::size_t padding = (4 - symbols % 4) % 4;
  clean.append(padding, '=');
  std::string out(clean.size() / 4 * 3, '\0');
  const int written =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                      reinterpret_cast<const unsigned char*>(clean.data()), static_cast<int>(clean.size()));
  if (written < 0) bad_request(quoted + " is not base64");
  out.resize(static_cast<std::size_t>(written) - padding);  // EVP_DecodeBlock counts the padding's zero bytes
  return out;
}

struct Target {
  std::string path;
  std::map<std::string, std::string> params;
};

// "/search?k=5&threshold=0.4" -> path "/search", {"k": "5", "threshold": "0.4"}, percent-decoded.
Target split_target(const std::string& target) {
  const std::size_t q = target.find('?');
  Target out;
  const std::optional<std::string> path = percent_decode(target.substr(0, q), /*plus_is_space=*/false);
  if (!path) bad_request("the request path is not percent-encoded UTF-8");
  out.path = *path;
  if (q == std::string::npos) return out;
  for (const std::string& pair : split(target.substr(q + 1), '&')) {
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const auto name = percent_decode(pair.substr(0, eq), /*plus_is_space=*/true);
    const auto value =
        percent_decode(eq == std::string::npos ? "" : pair.substr(eq + 1), /*plus_is_space=*/true);
    if (!name || !value) bad_request("the query string is not percent-encoded UTF-8");
    out.params[*name] = *value;
  }
  return out;
}

nlohmann::json parse_json(const HttpRequest& request) {
  // The parser calls back at every value with its depth: deeper than the API's bodies go is
  // refused while parsing (before a large nested body is built).
  const nlohmann::json::parser_callback_t depth_limit = [](int depth, nlohmann::json::parse_event_t,
                                                           nlohmann::json&) {
    if (depth > kMaxJsonDepth)
      bad_request("the JSON body is nested deeper than " + std::to_string(kMaxJsonDepth));
    return true;
  };
  nlohmann::json body;
  try {
    body = nlohmann::json::parse(request.body(), depth_limit);
  } catch (const nlohmann::json::exception& e) {
    // parse_error (syntax, invalid UTF-8 in a string) and out_of_range (a number such as 1e400
    // that no double holds): the client's mistake either way. e.what() quotes the bytes last
    // read, which may be anything: error() makes the message valid UTF-8.
    bad_request(std::string("malformed JSON: ") + e.what());
  }
  if (!body.is_object()) bad_request("the body must be a JSON object");
  return body;
}

bool is_image_body(const HttpRequest& request) {
  const std::string type(request[http::field::content_type]);
  return type.rfind("image/", 0) == 0 || type == "application/octet-stream";
}

bool is_audio_body(const HttpRequest& request) {
  return std::string(request[http::field::content_type]).rfind("audio/", 0) == 0;
}

double number(const nlohmann::json& value, const std::string& key) {
  if (!value.is_number()) bad_request("\"" + key + "\" must be a number");
  return value.get<double>();
}

double finite(double value, const std::string& key) {
  if (!std::isfinite(value)) bad_request("\"" + key + "\" must be a finite number");
  return value;
}

// An integral value in [lowest, highest] (k, label): 5 and 5.0 are accepted; 5.5, 1e300 are not.
int64_t integer(double value, const std::string& key, double lowest, double highest) {
  if (!(value >= lowest && value <= highest) || value != std::floor(value)) {
    bad_request("\"" + key + "\" must be an integer in [" +
                ::oml::detail::concat(static_cast<int64_t>(lowest)) + ", " +
                ::oml::detail::concat(static_cast<int64_t>(highest)) + "]");
  }
  return static_cast<int64_t>(value);
}

double query_number(const std::string& text, const std::string& key) {
  const std::optional<double> value = parse_double(text);
  if (!value) bad_request(key + " must be a number, got '" + text + "'");
  return *value;
}

// Item records end up in items.csv and in every answer: one line of printable text each.
std::string item_text(const nlohmann::json& body, const std::string& key, std::size_t max_bytes) {
  if (!body[key].is_string()) bad_request("\"" + key + "\" must be a string");
  std::string text = body[key].get<std::string>();
  if (text.size() > max_bytes)
    bad_request("\"" + key + "\" is longer than " + std::to_string(max_bytes) + " bytes");
  if (std::any_of(text.begin(), text.end(),
                  [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    bad_request("\"" + key + "\" contains a control character");
  return text;
}

std::string endpoint_name(const std::string& path) {
  if (path == "/search" || path == "/embed" || path == "/health" || path == "/metrics" || path == "/items")
    return path;
  if (path.rfind("/items/", 0) == 0) return "/items/{id}";
  return "other";
}

HttpResponse json_response(unsigned version, bool keep_alive, http::status status,
                           const nlohmann::json& body) {
  HttpResponse response(status, version);
  response.set(http::field::server, "oml-serve");
  response.set(http::field::content_type, "application/json");
  response.keep_alive(keep_alive);
  // error_handler_t::replace: a string that is not valid UTF-8 is written with U+FFFD in place
  // of the bad bytes rather than throwing (every string is valid by now; this is the last guard).
  response.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  response.prepare_payload();
  return response;
}

HttpResponse error_response(unsigned version, bool keep_alive, http::status status,
                            const std::string& message) {
  return json_response(version, keep_alive, status, {{"error", valid_utf8(first_line(message))}});
}

// The last resort, built without anything that could fail on the request's content.
HttpResponse internal_error(unsigned version) noexcept {
  HttpResponse response(http::status::internal_server_error, version);
  try {
    response.set(http::field::content_type, "application/json");
    response.keep_alive(false);
    response.body() = "{\"error\": \"internal error\"}\n";
    response.prepare_payload();
  } catch (...) {  // nothing more can be done: an empty 500
  }
  return response;
}

}  // namespace

std::optional<std::string> percent_decode(const std::string& text, bool plus_is_space) {
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      const int high = hex(text[i + 1]), low = hex(text[i + 2]);
      if (high < 0 || low < 0) return std::nullopt;
      out += static_cast<char>(high * 16 + low);
      i += 2;
    } else if (plus_is_space && text[i] == '+') {
      out += ' ';
    } else {
      out += text[i];
    }
  }
  if (!is_valid_utf8(out)) return std::nullopt;
  return out;
}

// ---- metrics ------------------------------------------------------------------------------------

void ServerMetrics::observe(const std::string& endpoint, unsigned status, double seconds) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{endpoint, status}];
  Histogram& h = latency_[endpoint];
  for (std::size_t b = 0; b < kLatencyBuckets.size(); ++b) h.buckets[b] += seconds <= kLatencyBuckets[b];
  ++h.count;
  h.sum += seconds;
}

std::string ServerMetrics::text(int64_t items, int64_t dimension) const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  out += "# HELP oml_requests_total Requests answered, by endpoint and HTTP status.\n";
  out += "# TYPE oml_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += "oml_requests_total{endpoint=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " +
           std::to_string(n) + "\n";
  }
  out += "# HELP oml_request_duration_seconds Time from a request read to its response ready.\n";
  out += "# TYPE oml_request_duration_seconds histogram\n";
  for (const auto& [endpoint, h] : latency_) {
    for (std::size_t b = 0; b < kLatencyBuckets.size(); ++b) {
      out += "oml_request_duration_seconds_bucket{endpoint=\"" + endpoint + "\",le=\"" +
             ::oml::detail::concat(kLatencyBuckets[b]) + "\"} " + std::to_string(h.buckets[b]) + "\n";
    }
    out += "oml_request_duration_seconds_bucket{endpoint=\"" + endpoint + "\",le=\"+Inf\"} " +
           std::to_string(h.count) + "\n";
    out += "oml_request_duration_seconds_sum{endpoint=\"" + endpoint + "\"} " + ::oml::detail::concat(h.sum) +
           "\n";
    out +=
        "oml_request_duration_seconds_count{endpoint=\"" + endpoint + "\"} " + std::to_string(h.count) + "\n";
  }
  out += "# HELP oml_index_items Items in the served gallery.\n# TYPE oml_index_items gauge\n";
  out += "oml_index_items " + std::to_string(items) + "\n";
  out +=
      "# HELP oml_index_dimension Embedding dimension of the served gallery.\n# TYPE oml_index_dimension "
      "gauge\n";
  out += "oml_index_dimension " + std::to_string(dimension) + "\n";
  return out;
}

// ---- routes -------------------------------------------------------------------------------------

HttpApi::HttpApi(GalleryService& service, ApiOptions options)
    : service_(service), options_(std::move(options)) {
  if (!options_.token.empty()) token_digest_ = sha256(options_.token);
}

HttpResponse HttpApi::refuse(const boost::system::error_code& error, int64_t body_limit) noexcept {
  try {
    const bool too_large = error == http::error::body_limit;
    const http::status status = too_large ? http::status::payload_too_large : http::status::bad_request;
    metrics_.observe("other", static_cast<unsigned>(status), 0.0);
    return error_response(11, /*keep_alive=*/false, status,
                          too_large ? "the request body is larger than the limit of " +
                                          std::to_string(body_limit) + " bytes (--max-body-mb)"
                                    : "malformed HTTP request: " + error.message());
  } catch (...) {
    return internal_error(11);
  }
}

std::optional<HttpResponse> HttpApi::answer_bytes(const std::string& bytes, int64_t body_limit) noexcept {
  try {
    http::request_parser<http::string_body> parser;
    parser.body_limit(static_cast<std::uint64_t>(body_limit));
    parser.eager(true);
    boost::system::error_code error;
    std::size_t used = 0;
    while (used < bytes.size() && !parser.is_done()) {
      const std::size_t n = parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), error);
      if (error == http::error::need_more) {
        error = {};
        if (n == 0) break;  // the rest of the bytes do not complete a piece: the connection closes
      }
      if (error) return refuse(error, body_limit);
      used += n;
    }
    if (!parser.is_done()) {
      if (used == 0 && !parser.got_some()) return std::nullopt;  // nothing read: closed unanswered
      parser.put_eof(error);                                     // the client closed mid-request
      if (error) return refuse(error, body_limit);
      if (!parser.is_done()) return refuse(http::error::partial_message, body_limit);
    }
    return handle(parser.release());
  } catch (...) {
    return internal_error(11);
  }
}

HttpResponse HttpApi::handle(const HttpRequest& request) noexcept {
  const auto start = std::chrono::steady_clock::now();
  std::string endpoint = "other";
  HttpResponse response;
  const auto answer_error = [&](http::status status, const std::string& message) {
    response = error_response(request.version(), request.keep_alive(), status, message);
  };
  try {
    try {
      const Target target = split_target(std::string(request.target()));
      endpoint = endpoint_name(target.path);
      authorize(request, target.path);
      response = route(request, target.path, target.params);
    } catch (const HttpError& e) {
      answer_error(e.status, e.what());
      if (e.status == http::status::unauthorized) {
        response.set(http::field::www_authenticate, "Bearer realm=\"oml-serve\"");
        response.prepare_payload();
      }
    } catch (const data::ImageTooLarge& e) {
      answer_error(http::status::payload_too_large, e.what());
    } catch (const TextTooLong& e) {
      answer_error(http::status::payload_too_large, e.what());
    } catch (const data::AudioTooLong& e) {
      answer_error(http::status::payload_too_large, e.what());
    } catch (const DataError& e) {
      answer_error(http::status::unprocessable_entity, e.what());
    } catch (const UsageError& e) {
      answer_error(http::status::bad_request, e.what());
    } catch (const ConfigError& e) {
      answer_error(http::status::bad_request, e.what());
    } catch (const std::exception& e) {
      log::warn(valid_utf8("oml-serve: " + std::string(request.method_string()) + " " + endpoint + ": " +
                           e.what()));
      answer_error(http::status::internal_server_error, e.what());
    } catch (...) {
      log::warn(valid_utf8("oml-serve: " + std::string(request.method_string()) + " " + endpoint +
                           ": an exception of unknown type"));
      answer_error(http::status::internal_server_error, "internal error");
    }
    metrics_.observe(endpoint, response.result_int(),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return response;
  } catch (...) {  // answering itself failed (memory): the request still gets an answer
    return internal_error(request.version());
  }
}

void HttpApi::authorize(const HttpRequest& request, const std::string& path) const {
  if (options_.token.empty()) return;
  const bool changes = path == "/items" || path.rfind("/items/", 0) == 0;
  if (options_.auth_scope == AuthScope::changes && !changes) return;
  const auto header = request.find(http::field::authorization);
  if (header == request.end())
    throw HttpError(http::status::unauthorized, "this route needs Authorization: Bearer <token>");
  const std::string value(header->value());
  const std::string scheme = "Bearer ";
  if (value.size() <= scheme.size() ||
      !std::equal(scheme.begin(), scheme.end(), value.begin(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
      })) {
    throw HttpError(http::status::unauthorized, "this route needs Authorization: Bearer <token>");
  }
  // Digests of equal length compared in constant time: neither the token's length nor the
  // position of a first wrong byte shows in the time of a refusal.
  const std::array<unsigned char, 32> given = sha256(value.substr(scheme.size()));
  if (CRYPTO_memcmp(given.data(), token_digest_.data(), given.size()) != 0)
    throw HttpError(http::status::unauthorized, "the bearer token is not the server's");
}

namespace {

// "text": a string (the JSON parser has checked it is UTF-8; line breaks and tabs are text).
std::string text_field(const nlohmann::json& body) {
  if (!body.at("text").is_string()) bad_request("\"text\" must be a string");
  return body.at("text").get<std::string>();
}

// The request's embedding: given ("embedding"), or of its image (a body of Content-Type
// image/*, or base64 in "image"), of its text ("text", an index of texts), or of its audio
// (base64 in "audio", or a body of Content-Type audio/*: an index of audio). "text" with
// "embedding" is a record (POST /items); two inputs to embed are refused.
at::Tensor input_embedding(GalleryService& service, const HttpRequest& request, const nlohmann::json& body) {
  const int inputs = body.contains("text") + body.contains("image") + body.contains("audio") +
                     is_image_body(request) + is_audio_body(request);
  if (inputs > 1) bad_request("give one of \"text\", \"image\" and \"audio\" (or a body that is one)");
  // A text beside an embedding is the item's record; an image or a clip beside one would be
  // silently unused.
  if (body.contains("embedding") && inputs == 1 && !body.contains("text"))
    bad_request("give \"embedding\" or the input to embed (\"image\", \"audio\" or the body), not both");
  if (is_image_body(request)) return service.embed(request.body());
  if (is_audio_body(request)) return service.embed_audio(request.body());
  if (body.contains("embedding")) {
    const nlohmann::json& values = body.at("embedding");
    if (!values.is_array()) bad_request("\"embedding\" must be an array of numbers");
    if (static_cast<int64_t>(values.size()) != service.dimension()) {
      throw DataError("the embedding has " + std::to_string(values.size()) +
                      " values, the index holds embeddings of dimension " +
                      std::to_string(service.dimension()));
    }
    std::vector<float> v;
    v.reserve(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (!values[i].is_number()) bad_request("\"embedding\" must be an array of numbers");
      const double x = values[i].get<double>();
      if (std::abs(x) > FLT_MAX) {
        throw DataError("embedding value " + std::to_string(i) + " (" + ::oml::detail::concat(x) +
                        ") is beyond float32's range");
      }
      v.push_back(static_cast<float>(x));
    }
    return torch::tensor(v, torch::kFloat);
  }
  if (body.contains("image")) {
    if (!body.at("image").is_string()) bad_request("\"image\" must be a base64 string");
    return service.embed(base64_decode(body.at("image").get<std::string>(), "image"));
  }
  if (body.contains("text")) return service.embed_text(text_field(body));
  if (body.contains("audio")) {
    if (!body.at("audio").is_string()) bad_request("\"audio\" must be a base64 string");
    return service.embed_audio(base64_decode(body.at("audio").get<std::string>(), "audio"));
  }
  if (service.inputs() == RowInput::texts)
    bad_request("give \"embedding\": [numbers] or \"text\": \"...\" (this index holds texts)");
  if (service.inputs() == RowInput::audio) {
    bad_request(
        "give \"embedding\": [numbers] or \"audio\": \"<base64>\" (or send the audio file itself as the "
        "body, Content-Type audio/wav, audio/flac, ...; this index holds audio)");
  }
  bad_request(
      "give \"embedding\": [numbers] or \"image\": \"<base64>\" (or send the image itself as the body, "
      "Content-Type image/jpeg or image/png)");
}

void known_params(const std::map<std::string, std::string>& params, const std::set<std::string>& known,
                  const std::string& path) {
  for (const auto& entry : params) {
    if (!known.count(entry.first)) {
      bad_request(path + " takes " +
                  (known.empty() ? std::string("no query parameters")
                                 : "the query parameters " +
                                       join(std::vector<std::string>(known.begin(), known.end()))) +
                  ", not '" + entry.first + "'");
    }
  }
}

}  // namespace

HttpResponse HttpApi::route(const HttpRequest& request, const std::string& path,
                            const std::map<std::string, std::string>& params) {
  const unsigned version = request.version();
  const bool keep_alive = request.keep_alive();
  const http::verb method = request.method();
  const auto only = [&](http::verb allowed) {
    if (method != allowed) {
      throw HttpError(http::status::method_not_allowed, path + " takes " +
                                                            std::string(http::to_string(allowed)) + ", not " +
                                                            std::string(request.method_string()));
    }
  };
  if (path == "/health") {
    only(http::verb::get);
    known_params(params, {}, path);
    return json_response(version, keep_alive, http::status::ok,
                         {{"status", "ok"},
                          {"items", service_.size()},
                          {"dimension", service_.dimension()},
                          {"backend", service_.describe()},
                          {"model", service_.has_model()},
                          {"inputs", inputs_name(service_.inputs())}});
  }
  if (path == "/metrics") {
    only(http::verb::get);
    known_params(params, {}, path);
    HttpResponse response(http::status::ok, version);
    response.set(http::field::content_type, "text/plain; version=0.0.4");
    response.keep_alive(keep_alive);
    response.body() = metrics_.text(service_.size(), service_.dimension());
    response.prepare_payload();
    return response;
  }
  if (path == "/search" || path == "/embed") {
    only(http::verb::post);
    known_params(params,
                 path == "/search" ? std::set<std::string>{"k", "threshold"} : std::set<std::string>{}, path);
    // An image or audio file as the body has no JSON: its parameters are in the query string.
    const bool file_body = is_image_body(request) || is_audio_body(request);
    nlohmann::json body = file_body ? nlohmann::json::object() : parse_json(request);
    const double max_k = static_cast<double>(service_.max_k());
    int64_t k = options_.default_k;
    std::optional<double> threshold;  // nullopt: the calibrated one
    // NaN asks for no threshold (a distance may be negative: -q.g under distance: dot).
    constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
    if (path == "/search") {
      if (body.contains("k")) k = integer(number(body["k"], "k"), "k", 1, max_k);
      if (params.count("k")) k = integer(query_number(params.at("k"), "k"), "k", 1, max_k);
      if (body.contains("threshold"))
        threshold =
            body["threshold"].is_null() ? kNone : finite(number(body["threshold"], "threshold"), "threshold");
      if (params.count("threshold")) {
        threshold = params.at("threshold") == "none"
                        ? kNone
                        : finite(query_number(params.at("threshold"), "threshold"), "threshold");
      }
    }
    if (body.contains("text") && body.contains("embedding"))
      bad_request("give \"text\" or \"embedding\", not both");
    const at::Tensor embedding = input_embedding(service_, request, body);
    if (path == "/embed") {
      const std::vector<float> values(embedding.data_ptr<float>(),
                                      embedding.data_ptr<float>() + embedding.numel());
      return json_response(version, keep_alive, http::status::ok,
                           {{"embedding", values}, {"dimension", embedding.numel()}});
    }
    const SearchAnswer answer = service_.search(embedding, k, threshold);
    nlohmann::json neighbours = nlohmann::json::array();
    const bool texts = service_.inputs() == RowInput::texts;
    for (const Neighbour& n : answer.neighbours) {
      neighbours.push_back({{"id", n.id},
                            {item_column(service_.inputs()), texts ? n.text : n.path},
                            {"label", n.label ? nlohmann::json(*n.label) : nlohmann::json(nullptr)},
                            {"category", n.category},
                            {"distance", n.distance}});
    }
    return json_response(
        version, keep_alive, http::status::ok,
        {{"neighbours", neighbours},
         {"answer", answer.known() ? "known" : "unknown"},
         {"threshold", answer.threshold ? nlohmann::json(*answer.threshold) : nlohmann::json(nullptr)}});
  }
  if (path == "/items") {
    only(http::verb::post);
    known_params(params, {}, path);
    nlohmann::json body = parse_json(request);
    std::vector<const nlohmann::json*> entries;
    if (body.contains("items")) {
      const nlohmann::json& items = body["items"];
      if (!items.is_array()) bad_request("\"items\" must be an array");
      if (items.empty()) bad_request("\"items\" is empty");
      if (static_cast<int64_t>(items.size()) > options_.max_items) {
        throw HttpError(http::status::payload_too_large, "\"items\" holds " + std::to_string(items.size()) +
                                                             " items; one request adds at most " +
                                                             std::to_string(options_.max_items) +
                                                             " (--max-items)");
      }
      for (const nlohmann::json& item : items) {
        if (!item.is_object()) bad_request("every entry of \"items\" must be an object");
        entries.push_back(&item);
      }
    } else {
      entries.push_back(&body);
    }
    std::vector<NewItem> items;
    for (const nlohmann::json* entry : entries) {
      NewItem item;
      // An item's record is what the index keeps in items.csv: a path, or a text index's text.
      const bool texts = service_.inputs() == RowInput::texts;
      if (texts && entry->contains("path"))
        bad_request("this index holds texts: an item is its \"text\", not a \"path\"");
      if (!texts && entry->contains("text")) {
        bad_request("this index holds " + std::string(inputs_name(service_.inputs())) +
                    ": an item has a \"path\", not a \"text\"");
      }
      item.embedding = input_embedding(service_, request, *entry);
      if (entry->contains("path")) item.path = item_text(*entry, "path", 4096);
      if (entry->contains("text")) item.text = text_field(*entry);
      if (entry->contains("category")) item.category = item_text(*entry, "category", 1024);
      if (entry->contains("label") && !(*entry)["label"].is_null()) {
        const nlohmann::json& label = (*entry)["label"];
        if (!label.is_number_integer()) bad_request("\"label\" must be an integer");
        if (label.is_number_unsigned() &&
            label.get<uint64_t>() > uint64_t{std::numeric_limits<int64_t>::max()})
          bad_request("\"label\" must fit a signed 64-bit integer");
        item.label = label.get<int64_t>();
      }
      items.push_back(std::move(item));
    }
    const std::vector<int64_t> ids = service_.add(items);
    return json_response(version, keep_alive, http::status::created,
                         {{"ids", ids}, {"items", service_.size()}});
  }
  if (path.rfind("/items/", 0) == 0) {
    only(http::verb::delete_);
    known_params(params, {}, path);
    const std::string text = path.substr(7);
    const std::optional<int64_t> id = parse_int64(text);
    if (!id) bad_request("'" + text + "' is not an item id");
    if (!service_.remove(*id)) throw HttpError(http::status::not_found, "no item with id " + text);
    return json_response(version, keep_alive, http::status::ok,
                         {{"removed", *id}, {"items", service_.size()}});
  }
  throw HttpError(http::status::not_found,
                  "no route " + path +
                      "; the API: GET /health, GET /metrics, POST /search, POST /embed, POST /items, DELETE "
                      "/items/{id}");
}

}  // namespace oml::pipelines
