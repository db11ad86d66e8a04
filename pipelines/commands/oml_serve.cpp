// oml-serve: an HTTP/JSON server over a saved index folder and its model (docs/serving.md).
#include <boost/program_options.hpp>

#include "../cli.h"
#include "../gallery_server.h"
#include "oml/common/error.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-serve";
  spec.summary =
      "serve a saved gallery index over HTTP/JSON: search, embed, add and remove items (docs/serving.md)";
  spec.usage =
      "  oml-serve --index DIR [--host 127.0.0.1] [--port 8080] [--max-batch 32] [--max-wait-ms 0]\n"
      "            [--max-body-mb 16] [--timeout-s 30] [--threads 4] [--workers 64] [--top-k 10]";
  spec.needs_config = false;
  spec.add_options = [](po::options_description& o) {
    // clang-format off
    o.add_options()
      ("index", po::value<std::string>(), "the index folder (oml-index build)")
      ("host", po::value<std::string>()->default_value("127.0.0.1"), "the address to listen on")
      ("port", po::value<int>()->default_value(8080), "the port (0: a free one, printed)")
      ("max-batch", po::value<int64_t>()->default_value(32), "most requests batched into one forward pass / search")
      ("max-wait-ms", po::value<double>()->default_value(0.0),
       "longest a request waits for others to batch with (0: none; requests that arrive while a batch runs form the next)")
      ("max-body-mb", po::value<double>()->default_value(16.0), "largest request body; larger: 413")
      ("timeout-s", po::value<int>()->default_value(30), "a connection's read or write time limit")
      ("threads", po::value<int>()->default_value(4), "threads reading and writing connections")
      ("workers", po::value<int>()->default_value(64), "threads running requests")
      ("top-k", po::value<int64_t>()->default_value(10), "neighbours when a request gives no k");
    // clang-format on
  };
  spec.run = [](const oml::cli::Invocation& inv) {
    OML_CHECK(!inv.config_path, UsageError, "oml-serve takes no --config: the index folder keeps its own");
    return oml::pipelines::serve_index(inv);
  };
  return oml::cli::run_command(argc, argv, spec);
}
