// oml-validate and oml-predict for extractors.
#include <torch/torch.h>

#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/data/csv.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/distributed/process_group.h"
#include "oml/io/atomic_file.h"
#include "oml/io/mapped_file.h"
#include "oml/io/npy.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/models/extractor.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/distance_space.h"
#include "oml/retrieval/postprocessor.h"
#include "runtime/embedding.h"
#include "runtime/pipeline_setup.h"
#include "runtime/progress.h"
#include "runtime/run_context.h"
#include "runtime/run_dir.h"
#include "runtime/run_inputs.h"
#include "training/extractor_pipelines.h"
#include "training/retrieval_grids.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {

at::Tensor read_embeddings_file(const config::RunConfig& cfg) {
  const fs::path path = cfg.embeddings;
  if (!fs::exists(path))
    cfg.source["embeddings"].fail("embeddings file '" + path.string() + "' does not exist");
  const std::string ext = path.extension().string();
  at::Tensor embeddings;
  if (ext == ".npy") {
    // Memory-mapped: a gallery larger than memory is streamed by the retrieval, not read whole.
    embeddings = io::map_npy_matrix(path);
  } else if (ext == ".pt" || ext == ".pth") {
    embeddings = io::load_tensor(path);
  } else {
    cfg.source["embeddings"].fail("expected a .npy or .pt file, got '" + path.string() + "'");
  }
  if (embeddings.dim() != 2) {
    throw DataError(path.string() + ": expected embeddings [N, D], got " + std::to_string(embeddings.dim()) +
                    " dimensions");
  }
  return embeddings.to(torch::kFloat).contiguous();
}

std::shared_ptr<const retrieval::Postprocessor> build_postprocessor(const config::RunConfig& cfg) {
  const auto& parsed = parsed_components(cfg).postprocessor;
  if (!parsed) return nullptr;
  retrieval::PostprocessorContext context;  // no pairwise model in extractor validation
  return registries().postprocessors.build(*parsed, context);
}

/// --visualize N, --visualize-metric M..., --query-ids 1,2,3, --visualize-top-k K.
GridRequest grid_request_from(const cli::Invocation& invocation) {
  const auto& vars = invocation.vars;
  GridRequest request;
  if (vars.count("visualize")) request.worst = vars["visualize"].as<int64_t>();
  OML_CHECK(request.worst >= 0, UsageError, "--visualize expects a number of queries >= 0, got ",
            request.worst);
  if (vars.count("visualize-metric"))
    request.metrics = vars["visualize-metric"].as<std::vector<std::string>>();
  if (vars.count("visualize-top-k")) request.top_k = vars["visualize-top-k"].as<int64_t>();
  OML_CHECK(request.top_k >= 1, UsageError, "--visualize-top-k expects a number >= 1, got ", request.top_k);
  if (vars.count("query-ids")) {
    for (const std::string& list : vars["query-ids"].as<std::vector<std::string>>()) {
      std::stringstream items(list);
      for (std::string item; std::getline(items, item, ',');) {
        if (item.empty()) continue;
        try {
          std::size_t used = 0;
          request.query_ids.push_back(std::stoll(item, &used));
          if (used != item.size()) throw std::invalid_argument(item);
        } catch (const std::logic_error&) {
          throw UsageError(
              "--query-ids expects comma-separated row numbers (0-based validation rows), got '" + item +
              "'");
        }
      }
    }
  }
  OML_CHECK(request.metrics.empty() || request.worst > 0, UsageError,
            "--visualize-metric needs --visualize N (how many worst queries to draw)");
  return request;
}

/// --retrieve K of oml-predict: every item is a query and a gallery item (never its own
/// neighbour); the backend's top K per item as neighbours.csv (query,rank,neighbour,distance; the
/// indices of embeddings.csv) and as [N, K] arrays (ids -1 and distance inf where an item has fewer).
void write_neighbours(CommandOutput& output, const at::Tensor& embeddings, int64_t k,
                      const config::RunConfig& cfg, const retrieval::RetrievalBackend& backend) {
  retrieval::ItemSet items;
  items.embeddings = embeddings;  // in the configured distance's space below
  const int64_t n = embeddings.size(0);
  items.labels.assign(static_cast<std::size_t>(n), 0);
  items.ids.resize(static_cast<std::size_t>(n));
  std::iota(items.ids.begin(), items.ids.end(), int64_t{0});
  retrieval::validate_item_set(items, "predicted");
  items = retrieval::to_engine_space(std::move(items), cfg.retrieval_distance);
  retrieval::KnnOptions options;
  options.top_k = k;
  options.measure = retrieval::engine_measure(cfg.retrieval_distance);
  options.on_progress = progress_callback("k-NN", "item");
  retrieval::RetrievalResults found = backend.search(items, items, options);
  found.check_consistent();
  retrieval::convert_distances(found, cfg.retrieval_distance);
  if (cfg.report_recall > 0 && !backend.exact()) {
    const auto recall = retrieval::measure_recall(found, items, items, options, cfg.report_recall,
                                                  static_cast<uint64_t>(cfg.seed));
    log::info(::oml::detail::concat("recall@", recall.k, " of ", backend.describe(), ": ", recall.recall,
                                    " (exact top-", recall.k, " of ", recall.queries, " random items)"));
  }
  // An item's list holds at most the n - 1 others: a K beyond that adds no column (10^8 once
  // allocated n x 10^8 entries of padding).
  const int64_t columns = std::max<int64_t>(1, std::min(k, n - 1));
  at::Tensor ids = at::full({n, columns}, -1, at::kLong);
  at::Tensor distances = at::full({n, columns}, std::numeric_limits<float>::infinity(), at::kFloat);
  auto id_rows = ids.accessor<int64_t, 2>();
  auto distance_rows = distances.accessor<float, 2>();
  for (int64_t q = 0; q < n; ++q) {
    for (int64_t i = 0; i < std::min(columns, found.size(q)); ++i) {
      id_rows[q][i] = found.retrieved[found.begin(q) + i];
      distance_rows[q][i] = found.distances[found.begin(q) + i];
    }
  }
  io::write_npy(output.stage("neighbours_ids.npy"), ids);
  io::write_npy(output.stage("neighbours_distances.npy"), distances);
  io::write_stream_atomic(output.stage("neighbours.csv"), [&](std::ostream& out) {
    out << "query,rank,neighbour,distance\n";
    char distance[32];
    for (int64_t q = 0; q < n; ++q) {
      for (int64_t i = 0; i < found.size(q); ++i) {
        std::snprintf(distance, sizeof(distance), "%.9g", found.distances[found.begin(q) + i]);
        out << q << ',' << i + 1 << ',' << found.retrieved[found.begin(q) + i] << ',' << distance << '\n';
      }
    }
  });
  log::info("found the " + std::to_string(columns) + " nearest neighbours of each item (" +
            backend.describe() + ")");
}

}  // namespace

int validate_extractor(const cli::Invocation& invocation, const config::RunConfig& cfg) {
  GridRequest grids = grid_request_from(invocation);  // bad options fail before any work
  grids.visualization = metrics::visualization_options(cfg.metric_args);
  grids.max_image_pixels = cfg.max_image_pixels;
  CommandOutput output = validation_output(cfg.logs_root, cfg.run_name, cfg.postfix);
  output.check();
  RunContext ctx = start_run(cfg);
  const bool precomputed = !cfg.embeddings.empty();
  const data::Dataframe dataframe = read_run_dataframe(cfg, /*require_items=*/!precomputed);
  check_same_dataframe(ctx, dataframe);  // machines given different files at one path
  const data::DataSplit& split = dataframe.validation();
  if (split.empty())
    throw DataError(dataframe.file() + ": has no rows with split 'validation'; validation needs some");
  auto postprocessor = build_postprocessor(cfg);
  const auto backend = build_retrieval_backend(cfg);
  const metrics::MetricTable& metric_table = configured_metrics(cfg);

  at::Tensor embeddings;
  if (precomputed) {
    embeddings = read_embeddings_file(cfg);
    if (embeddings.size(0) != static_cast<int64_t>(split.size())) {
      throw DataError(cfg.embeddings + ": has " + std::to_string(embeddings.size(0)) + " rows, but " +
                      dataframe.file() + " has " + std::to_string(split.size()) +
                      " validation rows; the embeddings must be the validation rows in dataframe order");
    }
  } else {
    auto extractor = build_extractor_with_weights(cfg, ctx);
    const RunInputs inputs = run_inputs(cfg, *extractor, dataframe, {"transforms_val"});
    if (inputs.kind != RowInput::images && (grids.worst > 0 || !grids.query_ids.empty())) {
      throw UsageError(
          "--visualize and --query-ids draw the images of the retrieved items, and this dataframe holds " +
          std::string(inputs.kind == RowInput::texts ? "texts" : "audio"));
    }
    auto dataset =
        run_dataset(cfg, inputs, dataframe, split, parsed_components(cfg).transforms_val, "transforms_val");
    EmbedOptions embedding = embed_options(cfg, cfg.bs_val, "validation");
    embedding.unit = inputs.unit();
    embeddings = embed_dataset(*extractor, dataset, ctx, embedding);
  }

  metrics::EmbeddingMetricsOptions options;
  options.metrics = metric_table;
  options.postprocessor = postprocessor.get();
  use_retrieval_backend(cfg, *backend, options);
  options.on_progress = progress_callback("k-NN", "query");
  options.group = ctx.group.get();  // every rank holds every row: they split the k-NN
  log_knn_split(ctx, metric_table, *backend);
  const auto result = metrics::compute_embedding_metrics(embedding_set(embeddings, split), options);
  if (ctx.is_main()) {
    const bool with_grids = grids.worst > 0 || !grids.query_ids.empty();
    output.claim(with_grids ? std::vector<std::string>{"metrics.json", "images/"}
                            : std::vector<std::string>{"metrics.json"});
    const fs::path& root = output.folder();
    io::write_file_atomic(output.stage("metrics.json"), nlohmann::json(result.metrics).dump(2) + "\n");
    std::vector<fs::path> drawn;
    if (with_grids) {
      const fs::path staged = output.stage("images/");
      for (const auto& path : save_grids(draw_grids(result, split, grids), staged))
        drawn.push_back(root / "images" / path.lexically_relative(staged));
    }
    output.finish();  // metrics.json and images/ in place together
    print_metrics_table(result.metrics, "metrics (" + std::to_string(split.size()) + " validation rows):");
    log::info("metrics written to " + (root / "metrics.json").string());
    for (const auto& path : drawn) log::info("retrieval grid written to " + path.string());
  }
  ctx.group->barrier();
  return 0;
}

int predict_extractor(const cli::Invocation& invocation, const config::RunConfig& cfg) {
  if (cfg.save_dir.empty()) cfg.source.fail("prediction needs 'save_dir' (where embeddings are written)");
  int64_t retrieve = 0;
  if (invocation.vars.count("retrieve")) {
    retrieve = invocation.vars["retrieve"].as<int64_t>();
    OML_CHECK(retrieve >= 1, UsageError, "--retrieve expects a number of neighbours >= 1, got ", retrieve);
  }
  const auto backend = build_retrieval_backend(cfg);
  CommandOutput output = prediction_output(cfg.save_dir);
  output.check();
  RunContext ctx = start_run(cfg);
  auto extractor = build_extractor_with_weights(cfg, ctx);
  const PredictionInput input = prediction_input(cfg, *extractor);
  EmbedOptions embed = embed_options(cfg, cfg.batch_size_inference, "prediction");
  embed.unit = input.inputs.unit();
  const at::Tensor embeddings = embed_dataset(*extractor, input.dataset, ctx, embed);

  if (ctx.is_main()) {
    std::vector<std::string> written{"embeddings.npy", "embeddings.pt", "embeddings.csv"};
    if (retrieve > 0)
      written.insert(written.end(), {"neighbours.csv", "neighbours_ids.npy", "neighbours_distances.npy"});
    output.claim(written);
    const fs::path& dir = output.folder();
    io::write_npy(output.stage("embeddings.npy"), embeddings);
    io::save_tensor(output.stage("embeddings.pt"), embeddings);
    std::ostringstream csv;
    csv << "index," << (input.inputs.kind == RowInput::texts ? "text" : "path") << "\n";
    const std::vector<std::string>& sources = input.sources();
    for (std::size_t i = 0; i < sources.size(); ++i) csv << i << "," << data::csv_escape(sources[i]) << "\n";
    io::write_file_atomic(output.stage("embeddings.csv"), csv.str());
    if (retrieve > 0) write_neighbours(output, embeddings, retrieve, cfg, *backend);
    output.finish();  // every file in place together
    log::info("wrote " + std::to_string(embeddings.size(0)) + " embeddings of size " +
              std::to_string(embeddings.size(1)) + " to " + dir.string() +
              " (embeddings.npy, embeddings.pt, embeddings.csv" +
              (retrieve > 0
                   ? ", and the neighbours: neighbours.csv, neighbours_ids.npy, neighbours_distances.npy)"
                   : ")"));
  }
  ctx.group->barrier();
  return 0;
}

}  // namespace oml::pipelines
