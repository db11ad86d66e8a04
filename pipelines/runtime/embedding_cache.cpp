#include "runtime/embedding_cache.h"

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <cstdio>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/distributed/from_rank0.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/models/extractor.h"
#include "runtime/run_context.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {

// 64-bit FNV-1a: cheap, stable across builds and machines (std::hash is neither).
class Fnv1a {
 public:
  void bytes(const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) {
      hash_ ^= p[i];
      hash_ *= 0x100000001b3ULL;
    }
  }
  void text(const std::string& s) {
    const uint64_t size = s.size();
    bytes(&size, sizeof(size));  // length first, so "ab"+"c" differs from "a"+"bc"
    bytes(s.data(), s.size());
  }
  void number(int64_t value) { bytes(&value, sizeof(value)); }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

std::string spec_text(const std::optional<config::ComponentSpec>& spec) {
  if (!spec) return "<none>";
  YAML::Emitter out;
  out << spec->node.yaml();
  return out.c_str();
}

}  // namespace

fs::path embeddings_cache_dir(const config::RunConfig& config) {
  if (!config.embeddings_cache_dir.empty()) return config.embeddings_cache_dir;
  return fs::path(config.logs_root) / "embeddings_cache";
}

std::string embeddings_cache_name(const CachedEmbeddingsRequest& request) {
  const config::RunConfig& config = *request.config;
  Fnv1a hash;
  hash.text("oml-cpp embeddings cache v1");
  hash.text(spec_text(config.extractor));
  hash.text(config.weights);
  // Embeddings computed under autocast differ in the last bits; fp32 keeps the names it had.
  if (config.precision != config::Precision::fp32)
    hash.text("precision " + config::precision_name(config.precision));
  for (const auto& [name, tensor] : io::state_dict(*request.extractor)) {
    hash.text(name);
    const at::Tensor values = tensor.to(torch::kCPU).contiguous();
    hash.text(std::string(values.dtype().name()));
    for (int64_t size : values.sizes()) hash.number(size);
    hash.bytes(values.data_ptr(), values.nbytes());
  }
  hash.text(spec_text(config.transforms_extraction ? config.transforms_extraction : config.transforms_val));
  const data::DataSplit& rows = request.dataset->meta();
  hash.number(static_cast<int64_t>(rows.size()));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows.has_paths()) hash.text(rows.paths[i]);
    if (rows.has_bboxes() && rows.bboxes[i]) {
      const data::BBox& box = *rows.bboxes[i];
      for (int64_t v : {box.x1, box.y1, box.x2, box.y2}) hash.number(v);
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(hash.value()));
  return "embeddings_" + request.split_name + "_" + hex + ".pt";
}

at::Tensor cached_embeddings(const CachedEmbeddingsRequest& request, const RunContext& context) {
  const fs::path dir = embeddings_cache_dir(*request.config);
  // Rank 0 names the file and says whether it exists, so every rank takes the same branch.
  const fs::path file =
      context.from_rank0(context.is_main() ? (dir / embeddings_cache_name(request)).string() : "");
  const bool exists =
      distributed::decision_from_rank0(*context.group, context.device, context.is_main() && fs::exists(file));
  const int64_t rows = request.dataset->size();

  if (exists) {
    at::Tensor embeddings = io::load_tensor(file);
    if (embeddings.dim() != 2 || embeddings.size(0) != rows) {
      throw DataError(file.string() + ": expected cached embeddings [" + std::to_string(rows) +
                      ", D]; delete the file to have it recomputed");
    }
    if (context.is_main()) log::info("using cached " + request.split_name + " embeddings " + file.string());
    return embeddings.to(torch::kFloat).contiguous();
  }

  const at::Tensor embeddings = embed_dataset(*request.extractor, request.dataset, context, request.embed);
  context.rank0_only([&] {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec)
      throw RuntimeError("cannot create the embeddings cache folder '" + dir.string() + "': " + ec.message());
    io::save_tensor(file, embeddings);
    log::info("cached " + request.split_name + " embeddings in " + file.string());
  });
  return embeddings;
}

}  // namespace oml::pipelines
