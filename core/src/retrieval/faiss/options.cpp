// The Faiss backends' args: reading, checking, describing (options.h).
#include "options.h"

#include "oml/common/error.h"
#include "oml/config/argument_error.h"
#include "oml/config/reader.h"

namespace oml::retrieval::detail {

void ChunkOptions::read(config::MapReader& reader) {
  reader.optional("add_chunk", add_chunk).optional("search_chunk", search_chunk);
}

void ChunkOptions::check(const std::string& who) const {
  config::check_argument(add_chunk >= 1, who, "add_chunk", "add_chunk must be >= 1, got ", add_chunk);
  config::check_argument(search_chunk >= 1, who, "search_chunk", "search_chunk must be >= 1, got ",
                         search_chunk);
}

void TuneOptions::read(config::MapReader& reader) {
  reader.optional("target_recall", target_recall).optional("tune_queries", tune_queries);
}

void TuneOptions::check(const std::string& who) const {
  config::check_argument(target_recall >= 0.0 && target_recall <= 1.0, who, "target_recall",
                         "target_recall must be in (0, 1] (or 0: the fixed defaults), got ", target_recall);
  config::check_argument(tune_queries >= 1, who, "tune_queries", "tune_queries must be >= 1, got ",
                         tune_queries);
}

void FlatOptions::read(config::MapReader& reader, const std::string& who) {
  chunks.read(reader);
  reader.finish();
  chunks.check(who);
}

void IvfOptions::read_lists(config::MapReader& reader) {
  chunks.read(reader);
  tune.read(reader);
  reader.optional("nlist", nlist).optional("nprobe", nprobe).optional("train_size", train_size);
}

void IvfOptions::check_lists(const std::string& who) const {
  chunks.check(who);
  tune.check(who);
  config::check_argument(nlist >= 0, who, "nlist", "nlist must be >= 1 (or 0: from the gallery size), got ",
                         nlist);
  config::check_argument(nprobe >= 0, who, "nprobe",
                         "nprobe must be >= 1 (or 0: chosen by target_recall), got ", nprobe);
  config::check_argument(nlist == 0 || nprobe <= nlist, who, "nprobe", "nprobe ", nprobe,
                         " is larger than nlist ", nlist, " (at most every list can be probed)");
  config::check_argument(train_size >= 0, who, "train_size",
                         "train_size must be >= nlist (or 0: from the gallery size), got ", train_size);
}

void IvfOptions::read(config::MapReader& reader, const std::string& who) {
  std::string scan = "blas";
  read_lists(reader);
  reader.optional("scan", scan);
  reader.finish();
  check_lists(who);
  config::check_argument(
      scan == "blas" || scan == "faiss", who, "scan",
      "scan must be 'blas' (the probed lists multiplied as blocks) or 'faiss' (Faiss's own "
      "vector-by-vector scan), got '",
      scan, "'");
  blas_scan = scan == "blas";
}

void HnswOptions::read(config::MapReader& reader, const std::string& who) {
  chunks.read(reader);
  tune.read(reader);
  reader.optional("M", M).optional("ef_construction", ef_construction).optional("ef_search", ef_search);
  reader.finish();
  chunks.check(who);
  tune.check(who);
  config::check_argument(M >= 2 && M <= kMaxHnswM, who, "M", "M must be in [2, ", kMaxHnswM, "], got ", M);
  config::check_argument(ef_construction >= 1, who, "ef_construction", "ef_construction must be >= 1, got ",
                         ef_construction);
  config::check_argument(ef_search >= 0, who, "ef_search",
                         "ef_search must be >= 1 (or 0: chosen by target_recall), got ", ef_search);
}

void IvfPqOptions::read(config::MapReader& reader, const std::string& who) {
  ivf.read_lists(reader);
  reader.optional("m", m).optional("nbits", nbits).optional("refine", refine);
  reader.finish();
  ivf.check_lists(who);
  config::check_argument(m >= 0, who, "m", "m must be >= 1 (or 0: D / 4), got ", m);
  config::check_argument(nbits >= 1 && nbits <= kMaxPqBits, who, "nbits", "nbits must be in [1, ", kMaxPqBits,
                         "], got ", nbits);
  config::check_argument(refine >= 0 && refine <= kMaxRefine, who, "refine", "refine must be in [1, ",
                         kMaxRefine, "] (1: no re-ranking; 0: 4, raised by target_recall), got ", refine);
}

std::string arg_path(const std::string& key) { return "retrieval_backend.args." + key; }

std::string param(const char* key, int64_t value) {
  std::string out(" ");
  out.append(key).append("=").append(value == 0 ? std::string("auto") : std::to_string(value));
  return out;
}

std::string tune_text(const TuneOptions& tune, bool chosen_by_it) {
  if (!tune.on() || !chosen_by_it) return "";
  return " target_recall=" + ::oml::detail::concat(tune.target_recall);
}

}  // namespace oml::retrieval::detail
