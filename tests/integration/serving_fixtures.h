#pragma once
// What the tests of oml-index, oml-search and oml-serve share: a gallery and queries from the
// Fashion-MNIST subset, a small model with its predict config, and readers.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "oml/data/csv.h"
#include "oml/io/npy.h"
#include "oml/models/conv_net.h"
#include "pipeline_fixtures.h"
#include "support/support.h"

namespace oml::test {

namespace fs = std::filesystem;

/// `count` rows of the subset from row `first`, as a dataframe with absolute paths.
inline fs::path subset_rows(const fs::path& dir, const std::string& name, std::size_t first,
                            std::size_t count) {
  const auto records = oml::data::parse_csv(read_file(fashion_mnist_subset() / "df.csv"), "df.csv");
  const auto& header = records.front().fields;
  const auto column = [&](const std::string& key) {
    return static_cast<std::size_t>(std::find(header.begin(), header.end(), key) - header.begin());
  };
  std::ostringstream out;
  out << "label,path,split,is_query,is_gallery\n";
  for (std::size_t r = 1 + first; r < records.size() && r < 1 + first + count; ++r) {
    const auto& f = records[r].fields;
    out << f[column("label")] << ',' << (fashion_mnist_subset() / f[column("path")]).string()
        << ",validation,True,True\n";
  }
  write_file(dir / name, out.str());
  return dir / name;
}

/// A model file and the predict config that names it.
struct Model {
  fs::path weights;
  fs::path config;
};

/// A conv net with seeded random weights and a predict config naming it (and `backend`).
inline Model model(const fs::path& dir, const std::string& backend = "{name: exact}") {
  torch::manual_seed(17);
  oml::models::ConvNetOptions options;
  options.channels = {8, 16};
  options.feat_dim = 16;
  const oml::models::ConvNet net(options);
  Model m{dir / "model.pth", dir / "predict.yaml"};
  write_state_dict_file(m.weights, *net);
  write_file(m.config,
             "num_threads: 1\nnum_workers: 0\nbatch_size_inference: 64\nweights: " + m.weights.string() +
                 "\ntransforms_predict: {name: norm}\n"
                 "extractor: {name: conv_net, args: {channels: [8, 16], feat_dim: 16}}\n"
                 "retrieval_backend: " +
                 backend + "\n");
  return m;
}

/// oml-index build of `gallery` (a dataframe) through `m` into `out`.
inline CommandResult build_index(const Model& m, const fs::path& gallery, const fs::path& out,
                                 const std::string& extra = "") {
  return run_oml("oml-index", "build --config " + quote(m.config.string()) +
                                  " --set dataset_root=" + quote(gallery.parent_path().string()) +
                                  " --set dataframe_name=" + quote(gallery.filename().string()) + " --out " +
                                  quote(out.string()) + " " + extra);
}

/// A CSV file's records (the header first).
inline std::vector<std::vector<std::string>> csv_rows(const fs::path& file) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& r : oml::data::parse_csv(read_file(file), file.string())) rows.push_back(r.fields);
  return rows;
}

// A running oml-serve over `index`, stopped (SIGTERM) when it goes out of scope.
class Server {
 public:
  Server(const fs::path& index, const fs::path& logs, const std::string& extra = "") : port_(free_port()) {
    const std::string command = quote(command_path("oml-serve")) + " --index " + quote(index.string()) +
                                " --port " + std::to_string(port_) + " --threads 2 --workers 16 " + extra +
                                " >" + quote((logs / "serve.out").string()) + " 2>" +
                                quote((logs / "serve.err").string());
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::execl("/bin/bash", "bash", "-c", ("exec " + command).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    logs_ = logs;
    for (int i = 0; i < 600; ++i) {  // up to 60 s: the model loads first
      // Any answer will do (a server with --auth all answers 401 without the token).
      if (run("curl -s -o /dev/null " + url() + "/health").exit_code == 0) return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL("oml-serve exited: " << read_file(logs / "serve.err"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL("oml-serve did not answer /health: " << read_file(logs / "serve.err"));
  }
  ~Server() {
    if (pid_ > 0) stop(SIGTERM);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  /// True while the process runs (it has not exited or been killed).
  bool alive() {
    int status = 0;
    return pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
  }

  /// Sends `signal` and returns the exit status (128 + signal when killed by it).
  int stop(int signal) {
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  int port_;
  pid_t pid_ = -1;
  fs::path logs_;
};

// curl's body and status code.
struct Reply {
  int status = 0;
  nlohmann::json body;
  std::string text;
};

inline Reply call(const std::string& curl_args) {
  const auto r = run("curl -s -w '\\n%{http_code}' " + curl_args, 120);
  REQUIRE(r.exit_code == 0);
  const std::size_t cut = r.out.rfind('\n');
  Reply reply;
  reply.status = std::stoi(r.out.substr(cut + 1));
  reply.text = r.out.substr(0, cut);
  reply.body = nlohmann::json::parse(reply.text, nullptr, /*allow_exceptions=*/false);
  return reply;
}

// JSON equality with numbers compared to 1e-5.
inline bool same_json(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) return std::abs(a.get<double>() - b.get<double>()) <= 1e-5;
  if (a.type() != b.type()) return false;
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key()) || !same_json(it.value(), b.at(it.key()))) return false;
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (!same_json(a[i], b[i])) return false;
    }
    return true;
  }
  return a == b;
}

// The docs' example index: four 3-dimensional embeddings, no model.
inline fs::path example_index(const fs::path& dir) {
  oml::io::write_npy(
      dir / "example.npy",
      torch::tensor({0.0F, 0.0F, 1.0F, 0.0F, 0.6F, 0.8F, 1.0F, 0.0F, 0.0F, 0.0F, 1.0F, 0.0F}).view({4, 3}));
  write_file(dir / "example_items.csv",
             "path,label,category\nshoes/a.jpg,1,shoes\nshoes/b.jpg,1,shoes\nbags/c.jpg,2,bags\nhats/"
             "d.jpg,3,hats\n");
  const auto r = run_oml("oml-index", "build --embeddings " + quote((dir / "example.npy").string()) +
                                          " --items " + quote((dir / "example_items.csv").string()) +
                                          " --out " + quote((dir / "example_index").string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return dir / "example_index";
}

/// Sends `bytes` as they are to 127.0.0.1:`port` (no HTTP client in between to tidy them up) and
/// returns what the server answers until it closes the connection, or until `timeout_ms` passes
/// without a byte. With `half_close`, the sending side is shut after the bytes (a client that
/// sends no more).
inline std::string send_raw(int port, const std::string& bytes, int timeout_ms = 5000,
                            bool half_close = true) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  for (std::size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;  // the server may close early (a body over the limit)
    sent += static_cast<std::size_t>(n);
  }
  if (half_close) ::shutdown(fd, SHUT_WR);
  std::string answer;
  pollfd p{fd, POLLIN, 0};
  while (::poll(&p, 1, timeout_ms) > 0) {
    char buffer[65536];
    const ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    answer.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return answer;
}

/// The status code of a raw HTTP answer ("HTTP/1.1 400 Bad Request" -> 400), 0 when none.
inline int raw_status(const std::string& answer) {
  if (answer.rfind("HTTP/1.", 0) != 0 || answer.size() < 12) return 0;
  return std::atoi(answer.substr(9, 3).c_str());
}

/// The body of a raw HTTP answer (after the blank line).
inline std::string raw_body(const std::string& answer) {
  const std::size_t at = answer.find("\r\n\r\n");
  return at == std::string::npos ? "" : answer.substr(at + 4);
}

}  // namespace oml::test
