#pragma once
// Internal: the args of the Faiss backends (faiss_flat, faiss_ivf, faiss_hnsw, faiss_ivf_pq;
// docs/metrics.md#retrieval-backends-retrieval_backend), one options struct per kind with its
// keys, their defaults (stated once, here) and its help text, and how a backend describes them.
//
// Compiled with or without Faiss in the build, so that a config is judged alike everywhere
// (register.cpp then refuses a kind when the build has no Faiss). Each kind's read() takes its
// keys, then finish() (unknown keys), then checks the values, so that a config's unknown keys
// are reported before its values are judged (a value check after a bad key is not reported:
// config/args_reader.h). Checks that need the gallery (nlist <= G, ...) are each kind's, when it
// plans its index.

#include <cstdint>
#include <string>

namespace oml::config {
class MapReader;
}  // namespace oml::config

namespace oml::retrieval::detail {

constexpr int64_t kMaxHnswM = 256;
constexpr int64_t kMaxPqBits = 16;
constexpr int64_t kMaxRefine = 64;
constexpr int64_t kDefaultRefine = 4;      // faiss_ivf_pq's refine when target_recall is off
constexpr int64_t kDefaultEfSearch = 128;  // faiss_hnsw's ef_search when target_recall is off
constexpr int64_t kMaxAutoNlist = 4096;
constexpr int64_t kMaxAutoNprobe = 16;
constexpr int64_t kFlatRefine = 2;

// Every Faiss backend's chunking: the gallery is added and the queries searched this many rows
// at a time, so a memory-mapped gallery is never copied whole.
struct ChunkOptions {
  int64_t add_chunk = 65536;
  int64_t search_chunk = 65536;

  void read(config::MapReader& reader);
  void check(const std::string& who) const;
};

// target_recall: a search parameter left at 0 (IVF's nprobe, HNSW's ef_search, IVF-PQ's refine)
// is chosen for each gallery as the smallest value, from the fixed default up, that reaches
// recall@k >= target_recall against the exact k-NN, measured on `tune_queries` gallery items (a
// seeded sample) searched as queries, each ignoring itself. Never below the fixed defaults: an
// average recall hides queries that lose everything (an HNSW search stuck in another cluster
// misses all its neighbours), and the defaults keep those rare — measured, docs/benchmarks.md.
// A function of the gallery, the args and the seed, never of the queries, so ranks that search
// shares of the queries choose alike. 0 = off: the fixed defaults of the help texts. How the
// values are searched: tuning.h.
struct TuneOptions {
  double target_recall = 0.95;
  int64_t tune_queries = 1000;

  void read(config::MapReader& reader);
  void check(const std::string& who) const;
  bool on() const { return target_recall > 0.0; }
};

// faiss_flat: exhaustive IndexFlatL2 (IndexFlatIP for dot).
struct FlatOptions {
  static constexpr const char* kHelp =
      "exhaustive Faiss IndexFlatL2 (IndexFlatIP for distance: dot) in float32, its 2 k best re-ranked by "
      "exact distances (a cross-check of "
      "exact); add_chunk, search_chunk";
  ChunkOptions chunks;

  void read(config::MapReader& reader, const std::string& who);
};

// faiss_ivf: IVF-Flat (0 = chosen from the gallery size, see resolve_ivf in ivf.h).
struct IvfOptions {
  static constexpr const char* kHelp =
      "IVF-Flat: nlist = 2 sqrt(G) (at most G / 39 and 4096), nprobe chosen to reach target_recall = 0.95 "
      "(recall@k on tune_queries = 1000 gallery items; target_recall 0: nlist / 16, at most 16), train_size "
      "= 40 nlist, scan = blas (probed lists as GEMM blocks; faiss: Faiss's own scan); approximate";
  ChunkOptions chunks;
  TuneOptions tune;
  int64_t nlist = 0;
  int64_t nprobe = 0;
  int64_t train_size = 0;
  bool blas_scan = true;  // scan the probed lists with GEMM (inverted_list_scan.h), not Faiss's loop

  // The IVF keys, shared with IVF-PQ (which has no `scan`).
  void read_lists(config::MapReader& reader);
  void check_lists(const std::string& who) const;

  void read(config::MapReader& reader, const std::string& who);
};

// faiss_hnsw: an HNSW graph.
struct HnswOptions {
  static constexpr const char* kHelp =
      "HNSW graph: M = 32, ef_construction = 64, ef_search chosen to reach target_recall = 0.95 (as "
      "faiss_ivf; target_recall 0: 128); approximate";
  ChunkOptions chunks;
  TuneOptions tune;
  int64_t M = 32;  // links per node
  int64_t ef_construction = 64;
  int64_t ef_search = 0;  // 0 = chosen by target_recall (128 without)

  void read(config::MapReader& reader, const std::string& who);
};

// faiss_ivf_pq: IVF with product quantisation.
struct IvfPqOptions {
  static constexpr const char* kHelp =
      "IVF with product quantisation: nlist, nprobe, target_recall as faiss_ivf, m = D / 4, nbits = 8, "
      "refine = 4 (re-rank refine x k candidates exactly; raised by target_recall when every list probed "
      "falls short); approximate, small index";
  IvfOptions ivf;
  int64_t m = 0;      // sub-quantizers, 0 = the largest divisor of D that is <= D / 4
  int64_t nbits = 8;  // bits per sub-quantizer code
  int64_t refine =
      0;  // re-rank refine x k candidates by exact distances (1 = off; 0 = 4, raised by target_recall)

  void read(config::MapReader& reader, const std::string& who);
};

// ---- How a backend shows its args (describe(), the log line of each search) ----------------

/// "retrieval_backend.args.<key>": where a SettingError about an arg points.
std::string arg_path(const std::string& key);

/// " key=value", or "=auto" for 0 (chosen from the data, before the gallery is known).
std::string param(const char* key, int64_t value);

/// " target_recall=0.95" where a parameter is left to it, else "".
std::string tune_text(const TuneOptions& tune, bool chosen_by_it);

}  // namespace oml::retrieval::detail
