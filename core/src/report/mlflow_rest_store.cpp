// An MLflow tracking server over its REST API (https://mlflow.org/docs/latest/rest-api.html), with
// libcurl: experiments/get-by-name and create, runs/create, get, update and log-batch, and artifacts
// through the server's proxy (`mlflow server --serve-artifacts`: PUT
// /api/2.0/mlflow-artifacts/artifacts/<path>, what MLflow's MlflowArtifactsRepository does for a run
// whose artifact_uri is mlflow-artifacts:/...). A run whose artifacts live in a local folder (a
// server started with a local --default-artifact-root and no proxy) gets them copied there, as
// MLflow's client does; other artifact stores (s3:, gs:, ...) are not written.
//
// Credentials as MLflow's client reads them: MLFLOW_TRACKING_TOKEN (a bearer token),
// MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD (basic auth), MLFLOW_TRACKING_INSECURE_TLS,
// MLFLOW_TRACKING_SERVER_CERT_PATH.
#include <curl/curl.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mlflow_store.h"
#include "oml/common/strings.h"

namespace oml::report::mlflow {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A server that does not accept the connection in this time counts as unreachable; a request
// without an answer in kRequestTimeoutMs is retried. Uploads give up when stalled for 30 s.
constexpr long kConnectTimeoutMs = 3000;
constexpr long kRequestTimeoutMs = 30000;
constexpr long kStalledUploadSeconds = 30;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

bool env_true(const char* name) {
  const std::string value = env(name);
  return value == "true" || value == "True" || value == "TRUE" || value == "1";
}

size_t append_body(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

size_t read_file_chunk(char* buffer, size_t size, size_t count, void* file) {
  return std::fread(buffer, size, count, static_cast<FILE*>(file));
}

// JSON has no NaN or infinity; protobuf's JSON mapping (what the server parses) spells them so.
json metric_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "Infinity" : "-Infinity";
  return value;
}

json key_values(const KeyValues& items) {
  json out = json::array();
  for (const auto& [key, value] : items) out.push_back({{"key", key}, {"value", value}});
  return out;
}

RunInfo run_from(const json& info) {
  RunInfo run;
  run.run_id = info.value("run_id", "");
  run.experiment_id = info.value("experiment_id", "");
  run.artifact_uri = info.value("artifact_uri", "");
  run.status = info.value("status", "RUNNING");
  return run;
}

struct Response {
  long status = 0;
  std::string body;

  bool ok() const { return status >= 200 && status < 300; }
  /// MLflow's error_code ("RESOURCE_DOES_NOT_EXIST"), or "" when the body is not MLflow's error.
  std::string error_code() const {
    const json parsed = json::parse(body, nullptr, false);
    return parsed.is_object() ? parsed.value("error_code", "") : "";
  }
  std::string message() const {
    const json parsed = json::parse(body, nullptr, false);
    if (parsed.is_object() && parsed.contains("message")) return parsed.value("message", "");
    return first_line(body.substr(0, 300));
  }
};

class RestStore final : public Store {
 public:
  explicit RestStore(std::string uri) : uri_(std::move(uri)) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    base_ = uri_;
    while (ends_with(base_, "/")) base_.pop_back();
    curl_ = curl_easy_init();
    if (!curl_) throw StoreError("libcurl could not start a session", false);
  }
  ~RestStore() override { curl_easy_cleanup(curl_); }
  RestStore(const RestStore&) = delete;
  RestStore& operator=(const RestStore&) = delete;

  std::string where() const override { return uri_; }

  std::string experiment_id(const std::string& name, const std::string& artifact_location) override {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const Response found = get("experiments/get-by-name?experiment_name=" + escape(name));
      if (found.ok()) {
        const json experiment = json::parse(found.body).at("experiment");
        if (experiment.value("lifecycle_stage", "active") == "deleted") {
          throw StoreError("experiment '" + name + "' is deleted at " + uri_ +
                               ": restore it or choose another experiment_name",
                           false);
        }
        return experiment.value("experiment_id", "");
      }
      if (found.error_code() != "RESOURCE_DOES_NOT_EXIST") fail("experiments/get-by-name", found);
      json body{{"name", name}};
      if (!artifact_location.empty()) body["artifact_location"] = artifact_location;
      const Response created = post("experiments/create", body);
      if (created.ok()) return json::parse(created.body).value("experiment_id", "");
      // Another process created it in between: look it up again.
      if (created.error_code() != "RESOURCE_ALREADY_EXISTS") fail("experiments/create", created);
    }
    throw StoreError("experiment '" + name + "' could neither be found nor created at " + uri_, true);
  }

  RunInfo create_run(const std::string& experiment_id, const std::string& run_name, int64_t start_time,
                     const KeyValues& tags, const std::string& user) override {
    const json body{{"experiment_id", experiment_id},
                    {"run_name", run_name},
                    {"start_time", start_time},
                    {"user_id", user},
                    {"tags", key_values(tags)}};
    const Response r = post("runs/create", body);
    if (!r.ok()) fail("runs/create", r);
    return run_from(json::parse(r.body).at("run").at("info"));
  }

  std::optional<RunInfo> get_run(const std::string& run_id) override {
    const Response r = get("runs/get?run_id=" + escape(run_id));
    // Not there, or not even a run id (INVALID_PARAMETER_VALUE).
    if (r.status == 404 || r.error_code() == "RESOURCE_DOES_NOT_EXIST" ||
        r.error_code() == "INVALID_PARAMETER_VALUE")
      return std::nullopt;
    if (!r.ok()) fail("runs/get", r);
    return run_from(json::parse(r.body).at("run").at("info"));
  }

  void log_batch(const std::string& run_id, const Batch& batch) override {
    json metrics = json::array();
    for (const auto& m : batch.metrics) {
      metrics.push_back(
          {{"key", m.key}, {"value", metric_value(m.value)}, {"timestamp", m.timestamp}, {"step", m.step}});
    }
    const json body{{"run_id", run_id},
                    {"metrics", metrics},
                    {"params", key_values(batch.params)},
                    {"tags", key_values(batch.tags)}};
    const Response r = post("runs/log-batch", body);
    if (!r.ok()) fail("runs/log-batch", r);
  }

  void update_run(const std::string& run_id, const std::string& status, int64_t end_time) override {
    json body{{"run_id", run_id}, {"status", status}};
    if (end_time > 0) body["end_time"] = end_time;
    const Response r = post("runs/update", body);
    if (!r.ok()) fail("runs/update", r);
  }

  void log_artifact(const RunInfo& run, const fs::path& file, const std::string& artifact_path) override {
    const std::string& root = run.artifact_uri;
    std::string url;
    if (starts_with(root, "mlflow-artifacts:")) {
      // mlflow-artifacts:/<path> or mlflow-artifacts://<host:port>/<path>: the path under the proxy.
      std::string path = root.substr(std::string("mlflow-artifacts:").size());
      if (starts_with(path, "//")) {
        const auto slash = path.find('/', 2);
        path = slash == std::string::npos ? "" : path.substr(slash);
      }
      url = base_ + "/api/2.0/mlflow-artifacts/artifacts" + escape_path(path) + "/" +
            escape_path(artifact_path);
    } else if (starts_with(root, "http://") || starts_with(root, "https://")) {
      url = root + "/" + escape_path(artifact_path);
    } else if (is_local(root)) {
      copy_artifact(local_path(root, "/"), file, artifact_path);
      return;
    } else {
      throw StoreError("the run's artifact location " + root +
                           " is neither the server's artifact proxy (mlflow-artifacts:, `mlflow server "
                           "--serve-artifacts`) nor a local folder; oml-cpp does not write there",
                       false);
    }
    FILE* in = std::fopen(file.c_str(), "rb");
    if (!in) throw StoreError("cannot read " + file.string() + " to upload it", false);
    std::error_code error;
    const auto size = fs::file_size(file, error);
    const Response r = perform("PUT", url, "", in, error ? 0 : size);
    std::fclose(in);
    if (!r.ok()) fail("PUT " + url, r);
  }

  void cancel() override { cancelled_ = true; }

 private:
  Response get(const std::string& endpoint) { return perform("GET", api(endpoint), "", nullptr, 0); }
  Response post(const std::string& endpoint, const json& body) {
    return perform("POST", api(endpoint), body.dump(), nullptr, 0);
  }
  std::string api(const std::string& endpoint) const { return base_ + "/api/2.0/mlflow/" + endpoint; }

  std::string escape(const std::string& text) {
    char* escaped = curl_easy_escape(curl_, text.c_str(), static_cast<int>(text.size()));
    std::string out = escaped ? escaped : text;
    curl_free(escaped);
    return out;
  }

  // Each segment of a "/"-separated path escaped, the slashes kept.
  std::string escape_path(const std::string& path) {
    std::string out;
    std::size_t start = 0;
    while (start <= path.size()) {
      const auto slash = path.find('/', start);
      const std::string segment =
          path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
      out += escape(segment);
      if (slash == std::string::npos) break;
      out += '/';
      start = slash + 1;
    }
    return out;
  }

  static int progress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    return static_cast<RestStore*>(self)->cancelled_ ? 1 : 0;  // non-zero aborts the transfer
  }

  // One request; a failure to get an answer (no connection, a timeout, cancelled) is a transient
  // StoreError, an answer of any status is returned.
  Response perform(const std::string& method, const std::string& url, const std::string& body, FILE* upload,
                   curl_off_t upload_size) {
    if (cancelled_) throw StoreError("cancelled", true);
    curl_easy_reset(curl_);  // keeps the open connection
    Response response;
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS, kConnectTimeoutMs);
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &response.body);
    curl_easy_setopt(curl_, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl_, CURLOPT_XFERINFOFUNCTION, progress);
    curl_easy_setopt(curl_, CURLOPT_XFERINFODATA, this);
    curl_easy_setopt(curl_, CURLOPT_USERAGENT, "oml-cpp");
    // No "Expect: 100-continue" wait before a body: a proxy that does not answer it costs 1 s.
    struct curl_slist* headers = curl_slist_append(nullptr, "Expect:");
    const std::string token = env("MLFLOW_TRACKING_TOKEN");
    const std::string authorization = "Authorization: Bearer " + token;
    if (!token.empty()) headers = curl_slist_append(headers, authorization.c_str());
    const std::string user = env("MLFLOW_TRACKING_USERNAME");
    const std::string password = env("MLFLOW_TRACKING_PASSWORD");
    if (!user.empty()) {
      curl_easy_setopt(curl_, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
      curl_easy_setopt(curl_, CURLOPT_USERNAME, user.c_str());
      curl_easy_setopt(curl_, CURLOPT_PASSWORD, password.c_str());
    }
    if (env_true("MLFLOW_TRACKING_INSECURE_TLS")) {
      curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    const std::string ca = env("MLFLOW_TRACKING_SERVER_CERT_PATH");
    if (!ca.empty()) curl_easy_setopt(curl_, CURLOPT_CAINFO, ca.c_str());
    if (method == "POST") {
      headers = curl_slist_append(headers, "Content-Type: application/json");
      curl_easy_setopt(curl_, CURLOPT_POST, 1L);
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body.c_str());
      curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    }
    if (method == "PUT") {
      headers = curl_slist_append(headers, "Content-Type: application/octet-stream");
      curl_easy_setopt(curl_, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(curl_, CURLOPT_READFUNCTION, read_file_chunk);
      curl_easy_setopt(curl_, CURLOPT_READDATA, upload);
      curl_easy_setopt(curl_, CURLOPT_INFILESIZE_LARGE, upload_size);
      curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_LIMIT, 1L);
      curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_TIME, kStalledUploadSeconds);
    } else {
      curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, kRequestTimeoutMs);
    }
    curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
    const CURLcode code = curl_easy_perform(curl_);
    curl_slist_free_all(headers);
    if (code != CURLE_OK) {
      throw StoreError(cancelled_ ? std::string("cancelled") : std::string(curl_easy_strerror(code)), true);
    }
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &response.status);
    return response;
  }

  // An answer that is not a success: 408, 429 and 5xx may pass (transient), other codes will not.
  [[noreturn]] void fail(const std::string& what, const Response& r) const {
    const bool transient = r.status == 408 || r.status == 429 || r.status >= 500 || r.status < 200;
    throw StoreError(what + " answered HTTP " + std::to_string(r.status) + ": " + r.message(), transient);
  }

  std::string uri_;
  std::string base_;
  CURL* curl_ = nullptr;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

std::unique_ptr<Store> open_store(const std::string& tracking_uri, const fs::path& base) {
  if (starts_with(tracking_uri, "http://") || starts_with(tracking_uri, "https://"))
    return std::make_unique<RestStore>(tracking_uri);
  if (is_local(tracking_uri)) return open_file_store(tracking_uri, base);
  throw StoreError("tracking URI " + tracking_uri + " is neither http(s):// nor a local folder", false);
}

}  // namespace oml::report::mlflow
