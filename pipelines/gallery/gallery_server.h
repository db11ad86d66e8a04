#pragma once
// oml-serve: an HTTP/JSON server over a saved index folder and its model
// (docs/serving.md#the-http-api), on Boost.Beast.
//
//   GET  /health            {"status": "ok", "items": N, "dimension": D, "backend": "..."}
//   GET  /metrics           Prometheus text: requests, latency histograms, index size
//   POST /search            {"embedding": [...]} or {"image": "<base64>"}, "k", "threshold"
//                           (or an image body, Content-Type image/*, ?k=&threshold=) -> neighbours
//   POST /embed             the same inputs -> {"embedding": [...]}
//   POST /items             {"embedding"|"image", "path", "label", "category"} or {"items": [...]}
//                           -> {"ids": [...]} (persisted before the answer)
//   DELETE /items/{id}      -> {"removed": id} (persisted before the answer)
//
// What a request may do and how it is answered is http_api.h's contract (no request stops the
// server; 4xx for a client's mistake, 401 without the token where one is asked). This file reads
// and writes connections: bodies over --max-body-mb are refused while they arrive, a connection
// idle past --timeout-s is closed. SIGTERM / SIGINT: stop accepting, finish the requests in
// flight (a change is written before its response), then exit 0.

#include <chrono>
#include <cstdint>
#include <string>

#include "gallery/http_api.h"
#include "shell/cli.h"

namespace oml::pipelines {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;   ///< 0: any free port (the chosen one is printed)
  int threads = 4;   ///< threads reading and writing connections
  int workers = 64;  ///< threads running requests (they wait on the batches)
  int64_t max_body_bytes = 16 * 1024 * 1024;
  std::chrono::seconds timeout{30};  ///< a connection's read or write
  ApiOptions api;                    ///< k, limits and credentials of the routes
};

/// Serves the index folder `--index` until SIGTERM / SIGINT; returns the exit code.
int serve_index(const cli::Invocation& invocation);

}  // namespace oml::pipelines
