#pragma once
// oml-serve's HTTP API without sockets (docs/serving.md#the-http-api): a request as Boost.Beast
// parsed it in, the response out. gallery_server.cpp reads and writes connections around it; the
// fuzz tests feed it bytes directly.
//
// The contract every request gets, whatever its bytes:
//   - handle() never throws and never ends the process. A client's mistake is a 4xx JSON error
//     ({"error": "..."}: 400 malformed, 401 credentials, 404 unknown route or id, 405 method, 413
//     too large, 422 an embedding or image that does not fit); a failure of the server's own is a
//     500, logged, and the server goes on.
//   - Every answer is valid JSON: what a message quotes from the request (bytes a parser stopped
//     at, a path, a value) is made valid UTF-8 first, so it can always be serialised.
//   - Bodies are parsed with bounds: nesting deeper than kMaxJsonDepth, more than
//     ApiOptions::max_items items, numbers that no double holds, strings that are not UTF-8 are
//     refused before any work.
//   - With a token (ApiOptions::token), the routes that change the index — or, with
//     AuthScope::all, every route — need `Authorization: Bearer <token>`, compared in constant time.

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/system/error_code.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace oml::pipelines {

class GalleryService;

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

/// Which routes need the token.
enum class AuthScope {
  changes,  ///< POST /items, DELETE /items/{id}
  all,      ///< every route, /health and /metrics included
};

struct ApiOptions {
  int64_t default_k = 10;    ///< k when a search gives none
  int64_t max_items = 1000;  ///< items one POST /items may add (more: 413)
  std::string token;         ///< the bearer token; empty: no credentials asked
  AuthScope auth_scope = AuthScope::changes;
};

/// JSON nested deeper than this is refused (the API's deepest body is {"items": [{"embedding": []}]}).
constexpr int kMaxJsonDepth = 16;

/// Prometheus counters and latency histograms of the answered requests.
class ServerMetrics {
 public:
  static constexpr std::array<double, 14> kLatencyBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                             0.1,    0.25,  0.5,    1.0,   2.5,  5.0,   10.0};

  void observe(const std::string& endpoint, unsigned status, double seconds);
  /// The Prometheus text exposition (version 0.0.4).
  std::string text(int64_t items, int64_t dimension) const;

 private:
  struct Histogram {
    std::array<int64_t, kLatencyBuckets.size()> buckets{};
    int64_t count = 0;
    double sum = 0.0;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, unsigned>, int64_t> requests_;
  std::map<std::string, Histogram> latency_;
};

class HttpApi {
 public:
  HttpApi(GalleryService& service, ApiOptions options);

  /// The answer to `request` (the contract above). Thread-safe.
  HttpResponse handle(const HttpRequest& request) noexcept;

  /// The answer to bytes Beast could not read as a request (`error`, not end of stream or a
  /// timeout): 413 for a body over `body_limit`, 400 for anything else malformed; it closes the
  /// connection. Counted under the endpoint "other".
  HttpResponse refuse(const boost::system::error_code& error, int64_t body_limit) noexcept;

  /// What a connection that sends `bytes` and then closes is answered: the first request in them
  /// read by Beast as the server reads it (bodies up to `body_limit`), then handle() or refuse().
  /// nullopt when the bytes hold no request at all (the server closes without answering). For
  /// the fuzz tests, which feed the API bytes without sockets.
  std::optional<HttpResponse> answer_bytes(const std::string& bytes, int64_t body_limit) noexcept;

  ServerMetrics& metrics() { return metrics_; }

 private:
  HttpResponse route(const HttpRequest& request, const std::string& path,
                     const std::map<std::string, std::string>& params);
  /// Throws a 401 unless the request carries the token (or needs none).
  void authorize(const HttpRequest& request, const std::string& path) const;

  GalleryService& service_;
  ApiOptions options_;
  std::array<unsigned char, 32> token_digest_{};  // SHA-256 of options_.token
  ServerMetrics metrics_;
};

/// `text` with %XY escapes decoded (and, in a query string, '+' as a space). nullopt for a
/// malformed escape or a result that is not valid UTF-8.
std::optional<std::string> percent_decode(const std::string& text, bool plus_is_space);

}  // namespace oml::pipelines
