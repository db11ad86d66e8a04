// oml-serve (gallery_server.h): Boost.Beast sessions on an io_context (reading and writing
// connections), requests run on a worker pool (where they wait on GalleryService's batches), the
// response posted back to the connection.
#include "gallery_server.h"

#include <torch/torch.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/version.hpp>

#include <array>
#include <atomic>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "gallery_service.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/numbers.h"
#include "oml/common/strings.h"

namespace oml::pipelines {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// A client's mistake, answered with `status` and a JSON error.
struct HttpError : std::runtime_error {
  HttpError(http::status status, const std::string& message) : std::runtime_error(message), status(status) {}
  http::status status;
};

// ---- Prometheus metrics ----------------------------------------------------------------------

constexpr std::array<double, 14> kLatencyBuckets = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                    0.1,    0.25,  0.5,    1.0,   2.5,  5.0,   10.0};

class ServerMetrics {
 public:
  void observe(const std::string& endpoint, unsigned status, double seconds) {
    const std::lock_guard<std::mutex> lock(mutex_);
    ++requests_[{endpoint, status}];
    Histogram& h = latency_[endpoint];
    for (std::size_t b = 0; b < kLatencyBuckets.size(); ++b) h.buckets[b] += seconds <= kLatencyBuckets[b];
    ++h.count;
    h.sum += seconds;
  }

  std::string text(int64_t items, int64_t dimension) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    out += "# HELP oml_requests_total Requests answered, by endpoint and HTTP status.\n";
    out += "# TYPE oml_requests_total counter\n";
    for (const auto& [key, n] : requests_) {
      out += "oml_requests_total{endpoint=\"" + key.first + "\",code=\"" + std::to_string(key.second) +
             "\"} " + std::to_string(n) + "\n";
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
      out += "oml_request_duration_seconds_sum{endpoint=\"" + endpoint + "\"} " +
             ::oml::detail::concat(h.sum) + "\n";
      out += "oml_request_duration_seconds_count{endpoint=\"" + endpoint + "\"} " + std::to_string(h.count) +
             "\n";
    }
    out += "# HELP oml_index_items Items in the served gallery.\n# TYPE oml_index_items gauge\n";
    out += "oml_index_items " + std::to_string(items) + "\n";
    out +=
        "# HELP oml_index_dimension Embedding dimension of the served gallery.\n# TYPE oml_index_dimension "
        "gauge\n";
    out += "oml_index_dimension " + std::to_string(dimension) + "\n";
    return out;
  }

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

// ---- request decoding ------------------------------------------------------------------------

std::string base64_decode(const std::string& text) {
  static const std::array<int, 256> table = [] {
    std::array<int, 256> t{};
    t.fill(-1);
    const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (std::size_t i = 0; i < alphabet.size(); ++i)
      t[static_cast<unsigned char>(alphabet[i])] = static_cast<int>(i);
    t['-'] = 62;  // the URL-safe alphabet too
    t['_'] = 63;
    return t;
  }();
  std::string out;
  out.reserve(text.size() * 3 / 4);
  uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    if (c == '=' || c == '\n' || c == '\r' || c == ' ') continue;
    const int v = table[static_cast<unsigned char>(c)];
    if (v < 0)
      throw HttpError(http::status::bad_request,
                      "\"image\" is not base64 (character '" + std::string(1, c) + "')");
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if (++count == 4) {
      out += static_cast<char>((bits >> 16) & 0xff);
      out += static_cast<char>((bits >> 8) & 0xff);
      out += static_cast<char>(bits & 0xff);
      bits = 0;
      count = 0;
    }
  }
  if (count == 3) {
    out += static_cast<char>((bits >> 10) & 0xff);
    out += static_cast<char>((bits >> 2) & 0xff);
  } else if (count == 2) {
    out += static_cast<char>((bits >> 4) & 0xff);
  } else if (count == 1) {
    throw HttpError(http::status::bad_request, "\"image\" is not base64 (truncated)");
  }
  return out;
}

// "/search?k=5&threshold=0.4" -> path "/search", {"k": "5", "threshold": "0.4"}.
std::pair<std::string, std::map<std::string, std::string>> split_target(const std::string& target) {
  const std::size_t q = target.find('?');
  std::map<std::string, std::string> params;
  if (q != std::string::npos) {
    std::string rest = target.substr(q + 1);
    std::size_t start = 0;
    while (start <= rest.size()) {
      const std::size_t amp = std::min(rest.find('&', start), rest.size());
      const std::string pair = rest.substr(start, amp - start);
      const std::size_t eq = pair.find('=');
      if (!pair.empty()) params[pair.substr(0, eq)] = eq == std::string::npos ? "" : pair.substr(eq + 1);
      start = amp + 1;
    }
  }
  return {target.substr(0, q), params};
}

nlohmann::json parse_json(const Request& request) {
  try {
    nlohmann::json body = nlohmann::json::parse(request.body());
    if (!body.is_object()) throw HttpError(http::status::bad_request, "the body must be a JSON object");
    return body;
  } catch (const nlohmann::json::parse_error& e) {
    throw HttpError(http::status::bad_request, std::string("malformed JSON: ") + e.what());
  }
}

bool is_image_body(const Request& request) {
  const std::string type(request[http::field::content_type]);
  return type.rfind("image/", 0) == 0 || type == "application/octet-stream";
}

double number(const nlohmann::json& value, const std::string& key) {
  if (!value.is_number()) throw HttpError(http::status::bad_request, "\"" + key + "\" must be a number");
  return value.get<double>();
}

double finite(double value, const std::string& key) {
  if (!std::isfinite(value))
    throw HttpError(http::status::bad_request, "\"" + key + "\" must be a finite number");
  return value;
}

double parse_number(const std::string& text, const std::string& key) {
  const std::optional<double> value = parse_double(text);
  if (!value) throw HttpError(http::status::bad_request, key + " must be a number, got '" + text + "'");
  return *value;
}

// ---- routes ----------------------------------------------------------------------------------

class Router {
 public:
  Router(GalleryService& service, const ServerOptions& options) : service_(service), options_(options) {}

  ServerMetrics& metrics() { return metrics_; }

  Response handle(const Request& request) {
    const auto start = std::chrono::steady_clock::now();
    const auto [path, params] = split_target(std::string(request.target()));
    std::string endpoint = endpoint_name(path);
    Response response;
    try {
      response = route(request, path, params);
    } catch (const HttpError& e) {
      response = error(request, e.status, e.what());
    } catch (const DataError& e) {
      response = error(request, http::status::unprocessable_entity, e.what());
    } catch (const UsageError& e) {
      response = error(request, http::status::bad_request, e.what());
    } catch (const ConfigError& e) {
      response = error(request, http::status::bad_request, e.what());
    } catch (const std::exception& e) {
      log::warn(std::string("oml-serve: ") + request.method_string().to_string() + " " + path + ": " +
                e.what());
      response = error(request, http::status::internal_server_error, e.what());
    }
    metrics_.observe(endpoint, response.result_int(),
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return response;
  }

  Response error(const Request& request, http::status status, const std::string& message) const {
    return json(request, status, {{"error", first_line(message)}});
  }

 private:
  static std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

  static std::string endpoint_name(const std::string& path) {
    if (path == "/search" || path == "/embed" || path == "/health" || path == "/metrics" || path == "/items")
      return path;
    if (path.rfind("/items/", 0) == 0) return "/items/{id}";
    return "other";
  }

  Response json(const Request& request, http::status status, const nlohmann::json& body) const {
    Response response(status, request.version());
    response.set(http::field::server, "oml-serve");
    response.set(http::field::content_type, "application/json");
    response.keep_alive(request.keep_alive());
    response.body() = body.dump() + "\n";
    response.prepare_payload();
    return response;
  }

  Response route(const Request& request, const std::string& path,
                 const std::map<std::string, std::string>& params) {
    const http::verb method = request.method();
    const auto only = [&](http::verb allowed) {
      if (method != allowed) {
        throw HttpError(http::status::method_not_allowed,
                        path + " takes " + std::string(http::to_string(allowed)) + ", not " +
                            std::string(request.method_string()));
      }
    };
    if (path == "/health") {
      only(http::verb::get);
      return json(request, http::status::ok,
                  {{"status", "ok"},
                   {"items", service_.size()},
                   {"dimension", service_.dimension()},
                   {"backend", service_.describe()},
                   {"model", service_.has_model()}});
    }
    if (path == "/metrics") {
      only(http::verb::get);
      Response response(http::status::ok, request.version());
      response.set(http::field::content_type, "text/plain; version=0.0.4");
      response.keep_alive(request.keep_alive());
      response.body() = metrics_.text(service_.size(), service_.dimension());
      response.prepare_payload();
      return response;
    }
    if (path == "/search" || path == "/embed") {
      only(http::verb::post);
      nlohmann::json body = is_image_body(request) ? nlohmann::json::object() : parse_json(request);
      const at::Tensor embedding = input_embedding(request, body);
      if (path == "/embed") {
        const std::vector<float> values(embedding.data_ptr<float>(),
                                        embedding.data_ptr<float>() + embedding.numel());
        return json(request, http::status::ok, {{"embedding", values}, {"dimension", embedding.numel()}});
      }
      int64_t k = options_.default_k;
      std::optional<double> threshold;  // nullopt: the calibrated one
      if (body.contains("k")) k = static_cast<int64_t>(number(body["k"], "k"));
      if (params.count("k")) k = static_cast<int64_t>(parse_number(params.at("k"), "k"));
      // NaN asks for no threshold (a distance may be negative: -q.g under distance: dot).
      constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
      if (body.contains("threshold"))
        threshold =
            body["threshold"].is_null() ? kNone : finite(number(body["threshold"], "threshold"), "threshold");
      if (params.count("threshold")) {
        threshold = params.at("threshold") == "none"
                        ? kNone
                        : finite(parse_number(params.at("threshold"), "threshold"), "threshold");
      }
      const SearchAnswer answer = service_.search(embedding, k, threshold);
      nlohmann::json neighbours = nlohmann::json::array();
      for (const Neighbour& n : answer.neighbours) {
        neighbours.push_back({{"id", n.id},
                              {"path", n.path},
                              {"label", n.label ? nlohmann::json(*n.label) : nlohmann::json(nullptr)},
                              {"category", n.category},
                              {"distance", n.distance}});
      }
      return json(
          request, http::status::ok,
          {{"neighbours", neighbours},
           {"answer", answer.known() ? "known" : "unknown"},
           {"threshold", answer.threshold ? nlohmann::json(*answer.threshold) : nlohmann::json(nullptr)}});
    }
    if (path == "/items") {
      only(http::verb::post);
      nlohmann::json body = parse_json(request);
      std::vector<nlohmann::json> entries;
      if (body.contains("items")) {
        if (!body["items"].is_array())
          throw HttpError(http::status::bad_request, "\"items\" must be an array");
        for (auto& item : body["items"]) {
          if (!item.is_object())
            throw HttpError(http::status::bad_request, "every entry of \"items\" must be an object");
          entries.push_back(item);
        }
      } else {
        entries.push_back(body);
      }
      std::vector<NewItem> items;
      for (nlohmann::json& entry : entries) {
        NewItem item;
        item.embedding = input_embedding(request, entry);
        if (entry.contains("path")) item.path = string_field(entry, "path");
        if (entry.contains("category")) item.category = string_field(entry, "category");
        if (entry.contains("label") && !entry["label"].is_null()) {
          if (!entry["label"].is_number_integer())
            throw HttpError(http::status::bad_request, "\"label\" must be an integer");
          item.label = entry["label"].get<int64_t>();
        }
        items.push_back(std::move(item));
      }
      const std::vector<int64_t> ids = service_.add(items);
      return json(request, http::status::created, {{"ids", ids}, {"items", service_.size()}});
    }
    if (path.rfind("/items/", 0) == 0) {
      only(http::verb::delete_);
      const std::string text = path.substr(7);
      const std::optional<int64_t> id = parse_int64(text);
      if (!id) throw HttpError(http::status::bad_request, "'" + text + "' is not an item id");
      if (!service_.remove(*id)) throw HttpError(http::status::not_found, "no item with id " + text);
      return json(request, http::status::ok, {{"removed", *id}, {"items", service_.size()}});
    }
    throw HttpError(http::status::not_found,
                    "no route " + path +
                        "; the API: GET /health, GET /metrics, POST /search, POST /embed, POST "
                        "/items, DELETE /items/{id}");
  }

  static std::string string_field(const nlohmann::json& body, const std::string& key) {
    if (!body[key].is_string())
      throw HttpError(http::status::bad_request, "\"" + key + "\" must be a string");
    return body[key].get<std::string>();
  }

  // The request's embedding: given ("embedding"), or of its image (a body of Content-Type
  // image/*, or base64 in "image").
  at::Tensor input_embedding(const Request& request, const nlohmann::json& body) {
    if (is_image_body(request)) return service_.embed(request.body());
    if (body.contains("embedding")) {
      const nlohmann::json& values = body.at("embedding");
      if (!values.is_array())
        throw HttpError(http::status::bad_request, "\"embedding\" must be an array of numbers");
      std::vector<float> v;
      v.reserve(values.size());
      for (const auto& x : values) {
        if (!x.is_number())
          throw HttpError(http::status::bad_request, "\"embedding\" must be an array of numbers");
        v.push_back(x.get<float>());
      }
      return torch::tensor(v, torch::kFloat);
    }
    if (body.contains("image")) {
      if (!body.at("image").is_string())
        throw HttpError(http::status::bad_request, "\"image\" must be a base64 string");
      return service_.embed(base64_decode(body.at("image").get<std::string>()));
    }
    throw HttpError(
        http::status::bad_request,
        "give \"embedding\": [numbers] or \"image\": \"<base64>\" (or send the image itself as the body, "
        "Content-Type image/jpeg or image/png)");
  }

  GalleryService& service_;
  const ServerOptions& options_;
  ServerMetrics metrics_;
};

// ---- connections -----------------------------------------------------------------------------

struct ServerState {
  Router* router = nullptr;
  asio::thread_pool* workers = nullptr;
  const ServerOptions* options = nullptr;
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> draining{false};
};

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, ServerState& state) : stream_(std::move(socket)), state_(state) {}

  void start() {
    asio::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::read, shared_from_this()));
  }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(static_cast<std::uint64_t>(state_.options->max_body_bytes));
    stream_.expires_after(state_.options->timeout);
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted) {
      return close();
    }
    if (ec == http::error::body_limit) {
      state_.router->metrics().observe("other", 413, 0.0);
      Request head;
      head.version(11);
      head.keep_alive(false);
      send(state_.router->error(head, http::status::payload_too_large,
                                "the request body is larger than the limit of " +
                                    std::to_string(state_.options->max_body_bytes) +
                                    " bytes (--max-body-mb)"));
      return;
    }
    if (ec) {
      state_.router->metrics().observe("other", 400, 0.0);
      Request head;
      head.version(11);
      head.keep_alive(false);
      send(state_.router->error(head, http::status::bad_request, "malformed HTTP request: " + ec.message()));
      return;
    }
    auto request = std::make_shared<Request>(parser_->release());
    ++state_.in_flight;
    // Requests wait on GalleryService's batches: they run on the worker pool, never on the
    // threads that read and write connections.
    asio::post(*state_.workers, [self = shared_from_this(), request] {
      Response response = self->state_.router->handle(*request);
      if (self->state_.draining) response.keep_alive(false);
      asio::post(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->send(std::move(response));
        --self->state_.in_flight;
      });
    });
  }

  void send(Response response) {
    response_ = std::make_shared<Response>(std::move(response));
    stream_.expires_after(state_.options->timeout);
    http::async_write(
        stream_, *response_,
        beast::bind_front_handler(&Session::on_write, shared_from_this(), response_->need_eof()));
  }

  void on_write(bool close_after, beast::error_code ec, std::size_t) {
    if (ec) return close();
    if (close_after || state_.draining) return close();
    response_.reset();
    read();
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<Response> response_;
  ServerState& state_;
};

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(asio::io_context& io, tcp::endpoint endpoint, ServerState& state)
      : io_(io), acceptor_(asio::make_strand(io)), state_(state) {
    beast::error_code ec;
    acceptor_.open(endpoint.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      throw UsageError("cannot listen on " + endpoint.address().to_string() + ":" +
                       std::to_string(endpoint.port()) + ": " + ec.message() + " (--host, --port)");
    }
  }

  int port() const { return acceptor_.local_endpoint().port(); }
  void start() { accept(); }
  void stop() {
    asio::post(acceptor_.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->acceptor_.close(ignored);
    });
  }

 private:
  void accept() {
    acceptor_.async_accept(asio::make_strand(io_),
                           beast::bind_front_handler(&Listener::on_accept, shared_from_this()));
  }
  void on_accept(beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!ec) std::make_shared<Session>(std::move(socket), state_)->start();
    accept();
  }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  ServerState& state_;
};

}  // namespace

int serve_index(const cli::Invocation& inv) {
  const auto& vars = inv.vars;
  OML_CHECK(vars.count("index"), UsageError, "--index DIR is required (the index folder to serve)");
  ServerOptions options;
  options.host = vars["host"].as<std::string>();
  options.port = vars["port"].as<int>();
  options.threads = vars["threads"].as<int>();
  options.workers = vars["workers"].as<int>();
  options.max_body_bytes = static_cast<int64_t>(vars["max-body-mb"].as<double>() * 1024 * 1024);
  options.timeout = std::chrono::seconds(vars["timeout-s"].as<int>());
  options.default_k = vars["top-k"].as<int64_t>();
  OML_CHECK(options.port >= 0 && options.port <= 65535, UsageError, "--port must be in [0, 65535], got ",
            options.port);
  OML_CHECK(options.threads >= 1 && options.workers >= 1, UsageError, "--threads and --workers must be >= 1");
  OML_CHECK(options.max_body_bytes >= 1024, UsageError, "--max-body-mb is too small (at least 1 KiB)");
  OML_CHECK(options.timeout.count() >= 1, UsageError, "--timeout-s must be >= 1");
  OML_CHECK(options.default_k >= 1, UsageError, "--top-k must be >= 1");
  ServiceOptions service_options;
  service_options.embed_batch.max_batch = vars["max-batch"].as<int64_t>();
  service_options.search_batch.max_batch = vars["max-batch"].as<int64_t>();
  service_options.embed_batch.max_wait =
      std::chrono::microseconds(static_cast<int64_t>(vars["max-wait-ms"].as<double>() * 1000));
  service_options.search_batch.max_wait = service_options.embed_batch.max_wait;
  OML_CHECK(service_options.embed_batch.max_batch >= 1, UsageError, "--max-batch must be >= 1");
  OML_CHECK(service_options.embed_batch.max_wait.count() >= 0, UsageError, "--max-wait-ms must be >= 0");

  boost::system::error_code address_error;
  const auto address = asio::ip::make_address(options.host, address_error);
  OML_CHECK(!address_error, UsageError, "--host '", options.host, "' is not an IP address");

  GalleryService service(inv, vars["index"].as<std::string>(), service_options);
  Router router(service, options);
  asio::thread_pool workers(static_cast<std::size_t>(options.workers));
  asio::io_context io(options.threads);
  ServerState state;
  state.router = &router;
  state.workers = &workers;
  state.options = &options;
  auto listener = std::make_shared<Listener>(
      io, tcp::endpoint(address, static_cast<unsigned short>(options.port)), state);
  listener->start();

  // SIGTERM / SIGINT: stop accepting, let the requests in flight finish, then stop.
  asio::signal_set signals(io, SIGINT, SIGTERM);
  asio::steady_timer drain(io);
  std::function<void(beast::error_code)> wait_drained = [&](beast::error_code) {
    if (state.in_flight == 0) {
      io.stop();
      return;
    }
    drain.expires_after(std::chrono::milliseconds(20));
    drain.async_wait(wait_drained);
  };
  signals.async_wait([&](beast::error_code ec, int signal) {
    if (ec) return;
    log::info(::oml::detail::concat("oml-serve: signal ", signal, ": finishing ", state.in_flight.load(),
                                    " requests in flight, then stopping"));
    state.draining = true;
    listener->stop();
    wait_drained({});
  });

  std::cout << "oml-serve: serving " << service.dir().string() << " (" << service.size() << " items, "
            << service.describe() << ") on http://" << options.host << ":" << listener->port() << std::endl;
  std::vector<std::thread> threads;
  for (int i = 1; i < options.threads; ++i) threads.emplace_back([&io] { io.run(); });
  io.run();
  for (std::thread& t : threads) t.join();
  workers.join();
  log::info("oml-serve: stopped");
  return 0;
}

}  // namespace oml::pipelines
