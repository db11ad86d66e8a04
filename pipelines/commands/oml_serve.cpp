// oml-serve: an HTTP/JSON server over a saved index folder and its model (docs/serving.md).
#include <boost/program_options.hpp>

#include "gallery/gallery_server.h"
#include "oml/common/error.h"
#include "shell/cli.h"

namespace po = boost::program_options;

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-serve";
  spec.summary =
      "serve a saved gallery index over HTTP/JSON: search, embed, add and remove items (docs/serving.md)";
  spec.usage =
      "  oml-serve --index DIR [--host 127.0.0.1] [--port 8080] [--auth-token-file FILE [--auth "
      "changes|all]]\n"
      "            [--max-batch 32] [--max-wait-ms 0] [--max-body-mb 16] [--max-items 1000]\n"
      "            [--max-image-pixels N] [--decode-memory-mb 2048] [--max-text-kb 64] [--max-audio-mb 16]\n"
      "            [--compact-min-mb 16] [--timeout-s 30]\n"
      "            [--threads 4] [--workers 64] [--top-k 10]";
  spec.needs_config = false;
  spec.add_options = [](po::options_description& o) {
    // clang-format off
    o.add_options()
      ("index", po::value<std::string>(), "the index folder (oml-index build)")
      ("host", po::value<std::string>()->default_value("127.0.0.1"), "the address to listen on")
      ("port", po::value<int>()->default_value(8080), "the port (0: a free one, printed)")
      ("auth-token-file", po::value<std::string>(),
       "a file whose first line is the bearer token that changes need (or set OML_SERVE_TOKEN)")
      ("auth", po::value<std::string>()->default_value("changes"),
       "which routes need the token: changes (POST /items, DELETE /items/{id}) or all")
      ("max-batch", po::value<int64_t>()->default_value(32), "most requests batched into one forward pass / search")
      ("max-wait-ms", po::value<double>()->default_value(0.0),
       "longest a request waits for others to batch with (0: none; requests that arrive while a batch runs form the next)")
      ("max-body-mb", po::value<double>()->default_value(16.0), "largest request body; larger: 413")
      ("max-items", po::value<int64_t>()->default_value(1000), "most items one POST /items adds; more: 413")
      ("max-image-pixels", po::value<int64_t>(),
       "images of more pixels are refused (413) before decoding (default: the index config's max_image_pixels, 89478485; 0: none)")
      ("decode-memory-mb", po::value<double>()->default_value(2048.0),
       "memory that concurrent image decodes and transforms may hold together; a request waits for its share")
      ("max-text-kb", po::value<double>()->default_value(64.0),
       "longest text a request may give (UTF-8 bytes), refused (413) before tokenizing; models read 512 tokens at most")
      ("max-audio-mb", po::value<double>()->default_value(16.0),
       "most float32 samples one audio request may decode to (MiB, all channels: 16 is 87 s of 48 kHz mono), refused (413) as the decoder passes it")
      ("compact-min-mb", po::value<double>()->default_value(16.0),
       "the change log is written into a new index version once it holds this many MiB and half the gallery's bytes")
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
