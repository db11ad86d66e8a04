#pragma once
// oml-serve: an HTTP/JSON server over a saved index folder and its model
// (docs/serving.md#the-http-api), on Boost.Beast.
//
//   GET  /health            {"status": "ok", "items": N, "dimension": D, "backend": "..."}
//   GET  /metrics           Prometheus text: requests, latency histograms, batch sizes, index size
//   POST /search            {"embedding": [...]} or {"image": "<base64>"}, "k", "threshold"
//                           (or an image body, Content-Type image/*, ?k=&threshold=) -> neighbours
//   POST /embed             the same inputs -> {"embedding": [...]}
//   POST /items             {"embedding"|"image", "path", "label", "category"} or {"items": [...]}
//                           -> {"ids": [...]} (persisted as the folder's next version)
//   DELETE /items/{id}      -> {"removed": id} (persisted)
//
// Every error is a JSON body {"error": "..."} with a 4xx status for the client's mistakes (400
// malformed, 404 unknown route or id, 405 method, 413 too large, 422 wrong embedding size or not
// an image) and 500 otherwise; the server keeps serving. SIGTERM / SIGINT: stop accepting, finish
// the requests in flight (a change is written whole before its response), then exit 0.

#include <chrono>
#include <cstdint>
#include <string>

#include "cli.h"

namespace oml::pipelines {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;   ///< 0: any free port (the chosen one is printed)
  int threads = 4;   ///< threads reading and writing connections
  int workers = 64;  ///< threads running requests (they wait on the batches)
  int64_t max_body_bytes = 16 * 1024 * 1024;
  std::chrono::seconds timeout{30};  ///< a connection's read or write
  int64_t default_k = 10;
};

/// Serves the index folder `--index` until SIGTERM / SIGINT; returns the exit code.
int serve_index(const cli::Invocation& invocation);

}  // namespace oml::pipelines
