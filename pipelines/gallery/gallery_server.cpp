// oml-serve (gallery_server.h): Boost.Beast sessions on an io_context (reading and writing
// connections), requests run on a worker pool (where they wait on GalleryService's batches), the
// response posted back to the connection.
#include "gallery/gallery_server.h"

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

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "gallery/gallery_service.h"
#include "gallery/http_api.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"

namespace oml::pipelines {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// ---- connections -----------------------------------------------------------------------------

struct ServerState {
  HttpApi* api = nullptr;
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
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  // The header is read. A client that sent `Expect: 100-continue` (curl does for bodies over
  // 1 MB) waits for an interim answer before it sends the body — a second, by curl's default —
  // so it gets one at once; or the final 413 at once when the body it announces is over the limit.
  void on_header(beast::error_code ec, std::size_t bytes) {
    if (ec) return on_read(ec, bytes);
    const auto expect = parser_->get().find(http::field::expect);
    const bool continue_expected =
        expect != parser_->get().end() && beast::iequals(expect->value(), "100-continue");
    const auto length = parser_->content_length();
    if (length && *length > static_cast<std::uint64_t>(state_.options->max_body_bytes)) {
      return on_read(http::error::body_limit, bytes);
    }
    if (!continue_expected) return read_body();
    interim_ = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
    http::async_write(stream_, *interim_,
                      [self = shared_from_this()](beast::error_code write_ec, std::size_t) {
                        if (write_ec) return self->close();
                        self->read_body();
                      });
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     beast::bind_front_handler(&Session::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == asio::error::operation_aborted) {
      return close();
    }
    if (ec) {
      send(state_.api->refuse(ec, state_.options->max_body_bytes));
      return;
    }
    auto request = std::make_shared<Request>(parser_->release());
    ++state_.in_flight;
    // Requests wait on GalleryService's batches: they run on the worker pool, never on the
    // threads that read and write connections. handle() answers every failure itself (http_api.h).
    asio::post(*state_.workers, [self = shared_from_this(), request] {
      Response response = self->state_.api->handle(*request);
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
  std::shared_ptr<http::response<http::empty_body>> interim_;
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

// The bearer token: from --auth-token-file (its first line) or OML_SERVE_TOKEN; "" when neither.
std::string read_token(const cli::Invocation& inv) {
  const char* env = std::getenv("OML_SERVE_TOKEN");
  const bool from_env = env != nullptr && *env != '\0';
  if (!inv.vars.count("auth-token-file")) return from_env ? trim(env) : "";
  OML_CHECK(!from_env, UsageError,
            "both --auth-token-file and OML_SERVE_TOKEN are set: give the token one way");
  const std::string file = inv.vars["auth-token-file"].as<std::string>();
  std::ifstream in(file);
  OML_CHECK(in.good(), UsageError, "--auth-token-file: cannot read ", file);
  std::string token;
  std::getline(in, token);
  token = trim(token);
  OML_CHECK(!token.empty(), UsageError, "--auth-token-file: ", file,
            " is empty (its first line is the token)");
  struct stat info {};
  if (::stat(file.c_str(), &info) == 0 && (info.st_mode & 077) != 0) {
    log::warn("oml-serve: " + file + " can be read by other users (chmod 600 it)");
  }
  return token;
}

// RFC 6750's token characters: what a client can put after "Bearer " as it is.
void check_token(const std::string& token) {
  const bool ok = !token.empty() && std::all_of(token.begin(), token.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string("-._~+/=").find(c) != std::string::npos;
  });
  OML_CHECK(ok, UsageError,
            "the bearer token may hold letters, digits and - . _ ~ + / = only (RFC 6750); generate one with "
            "`openssl rand -hex 32`");
  OML_CHECK(token.size() >= 16, UsageError, "the bearer token is too short (", token.size(),
            " characters; at least 16: `openssl rand -hex 32` makes one)");
}

// A number flag, finite and within [least, most] (`most_note` says what `most` is), so that its
// cast to an integer cannot overflow.
double bounded_flag(const cli::Invocation& inv, const std::string& flag, double least, double most,
                    const std::string& most_note = "") {
  const double value = inv.vars[flag].as<double>();
  OML_CHECK(std::isfinite(value) && value >= least && value <= most, UsageError, "--", flag,
            " must be between ", least, " and ", most, most_note, ", got ", value);
  return value;
}

// A size flag given in `unit`s (KiB or MiB) as bytes, within [least, most] units (most is at most a
// petabyte), so that the budgets' sums cannot overflow either.
int64_t size_flag(const cli::Invocation& inv, const std::string& flag, double unit, double least,
                  double most) {
  return static_cast<int64_t>(bounded_flag(inv, flag, least, most) * unit);
}

}  // namespace

int serve_index(const cli::Invocation& inv) {
  const auto& vars = inv.vars;
  OML_CHECK(vars.count("index"), UsageError, "--index DIR is required (the index folder to serve)");
  ServerOptions options;
  options.host = vars["host"].as<std::string>();
  options.port = vars["port"].as<int>();
  options.threads = vars["threads"].as<int>();
  options.workers = vars["workers"].as<int>();
  options.max_body_bytes = size_flag(inv, "max-body-mb", 1024.0 * 1024.0, 0.001, 1e9);
  options.timeout = std::chrono::seconds(vars["timeout-s"].as<int>());
  options.api.default_k = vars["top-k"].as<int64_t>();
  options.api.max_items = vars["max-items"].as<int64_t>();
  options.api.token = read_token(inv);
  const std::string scope = vars["auth"].as<std::string>();
  OML_CHECK(scope == "changes" || scope == "all", UsageError, "--auth takes changes or all, not '", scope,
            "'");
  options.api.auth_scope = scope == "all" ? AuthScope::all : AuthScope::changes;
  OML_CHECK(options.port >= 0 && options.port <= 65535, UsageError, "--port must be in [0, 65535], got ",
            options.port);
  OML_CHECK(options.threads >= 1 && options.workers >= 1, UsageError, "--threads and --workers must be >= 1");
  OML_CHECK(options.timeout.count() >= 1, UsageError, "--timeout-s must be >= 1");
  OML_CHECK(options.api.default_k >= 1, UsageError, "--top-k must be >= 1");
  OML_CHECK(options.api.max_items >= 1, UsageError, "--max-items must be >= 1");
  if (!options.api.token.empty()) check_token(options.api.token);
  OML_CHECK(scope != "all" || !options.api.token.empty(), UsageError,
            "--auth all needs a token (--auth-token-file FILE or OML_SERVE_TOKEN)");
  ServiceOptions service_options;
  service_options.embed_batch.max_batch = vars["max-batch"].as<int64_t>();
  service_options.search_batch.max_batch = vars["max-batch"].as<int64_t>();
  const double max_wait_ms = bounded_flag(inv, "max-wait-ms", 0, 60000, " (a minute)");
  service_options.embed_batch.max_wait = std::chrono::microseconds(static_cast<int64_t>(max_wait_ms * 1000));
  service_options.search_batch.max_wait = service_options.embed_batch.max_wait;
  if (vars.count("max-image-pixels"))
    service_options.max_image_pixels = vars["max-image-pixels"].as<int64_t>();
  service_options.decode_memory_bytes = size_flag(inv, "decode-memory-mb", 1024.0 * 1024.0, 0.001, 1e9);
  service_options.compact_min_bytes = size_flag(inv, "compact-min-mb", 1024.0 * 1024.0, 1e-6, 1e9);
  service_options.max_text_bytes = size_flag(inv, "max-text-kb", 1024.0, 0.001, 1e12);
  service_options.max_audio_bytes = size_flag(inv, "max-audio-mb", 1024.0 * 1024.0, 0.001, 1e9);
  OML_CHECK(service_options.embed_batch.max_batch >= 1, UsageError, "--max-batch must be >= 1");
  OML_CHECK(!service_options.max_image_pixels || *service_options.max_image_pixels >= 0, UsageError,
            "--max-image-pixels must be 0 (no limit) or a positive number of pixels");

  boost::system::error_code address_error;
  const auto address = asio::ip::make_address(options.host, address_error);
  OML_CHECK(!address_error, UsageError, "--host '", options.host, "' is not an IP address");
  if (!address.is_loopback() && options.api.token.empty()) {
    log::warn("oml-serve: listening on " + options.host +
              " without a token: anyone who reaches it can add and delete items (--auth-token-file FILE)");
  }

  GalleryService service(inv, vars["index"].as<std::string>(), service_options);
  HttpApi api(service, options.api);
  asio::thread_pool workers(static_cast<std::size_t>(options.workers));
  asio::io_context io(options.threads);
  ServerState state;
  state.api = &api;
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
