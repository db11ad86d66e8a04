// oml-validate, pipeline: pairwise — the extractor's retrieval metrics before and after
// re-ranking with a trained pairwise model (docs/pairwise.md, docs/metrics.md#pairwise-re-ranking).
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/distributed/process_group.h"
#include "oml/io/atomic_file.h"
#include "oml/models/pairwise_model.h"
#include "runtime/embedding.h"
#include "runtime/pairwise_setup.h"
#include "runtime/pipeline_setup.h"
#include "runtime/run_context.h"
#include "runtime/run_dir.h"
#include "training/extractor_pipelines.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

int validate_pairwise(const cli::Invocation& /*invocation*/, const config::RunConfig& cfg) {
  CommandOutput output = validation_output(cfg.logs_root, cfg.run_name, cfg.postfix);
  output.check();
  RunContext ctx = start_run(cfg);
  const data::Dataframe dataframe = read_run_dataframe(cfg, /*require_items=*/true);
  check_same_dataframe(ctx, dataframe);  // machines given different files at one path
  const data::DataSplit& split = dataframe.validation();
  if (split.empty())
    throw DataError(dataframe.file() + ": has no rows with split 'validation'; validation needs some");
  check_pairwise_postprocessor(cfg);
  const metrics::MetricTable& metric_table = configured_metrics(cfg);
  auto model = build_pairwise_model(cfg, ctx);  // before the embeddings: config errors first

  // Every rank embeds its share (or reads the cache); rank 0 re-ranks and computes the metrics.
  const at::Tensor embeddings = extractor_embeddings(cfg, ctx, split, "validation");
  if (ctx.is_main()) {
    auto inputs = pairwise_inputs(cfg, *model, split, embeddings, parsed_components(cfg).transforms_val,
                                  "transforms_val");
    std::map<std::string, double> before;
    const auto metrics =
        pairwise_validation_metrics(cfg, ctx, metric_table, *model, inputs, embeddings, split, before)
            .metrics;
    output.claim({"metrics.json"});
    const fs::path file = output.folder() / "metrics.json";
    io::write_file_atomic(output.stage("metrics.json"), nlohmann::json(metrics).dump(2) + "\n");
    output.finish();
    print_metrics_table(metrics, "metrics after re-ranking (" + std::to_string(split.size()) +
                                     " validation rows; " + kBeforeRerankingPrefix + "* without):");
    log::info("metrics written to " + file.string());
  }
  ctx.group->barrier();
  return 0;
}

}  // namespace oml::pipelines
