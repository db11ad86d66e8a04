// oml-index and oml-search (gallery_commands.h; docs/serving.md).
#include "gallery/gallery_commands.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <numeric>
#include <sstream>
#include <unordered_map>

#include "gallery/index_folder.h"
#include "gallery/search_reranking.h"
#include "oml/common/error.h"
#include "oml/common/failpoint.h"
#include "oml/common/logging.h"
#include "oml/common/numbers.h"
#include "oml/common/paths.h"
#include "oml/common/sha256.h"
#include "oml/common/strings.h"
#include "oml/config/document.h"
#include "oml/data/csv.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/io/atomic_file.h"
#include "oml/io/mapped_file.h"
#include "oml/io/npy.h"
#include "oml/metrics/open_set.h"
#include "oml/models/extractor.h"
#include "oml/retrieval/distance_space.h"
#include "oml/retrieval/gallery_index.h"
#include "runtime/embedding.h"
#include "runtime/pipeline_setup.h"
#include "runtime/progress.h"
#include "runtime/run_context.h"
#include "runtime/run_dir.h"
#include "runtime/run_inputs.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {

// Embeddings with their item records (ids not yet assigned).
struct Items {
  at::Tensor embeddings;  // [N, D] float32
  IndexedItems records;
  RowInput inputs = RowInput::images;
  data::DataSplit images;             // the rows' images (paths, boxes) when they were embedded from images
  std::vector<fs::path> model_files;  // a text model's files (TextInputSpec::model_files)
};

std::string option(const cli::Invocation& inv, const char* name) {
  return inv.vars.count(name) ? inv.vars[name].as<std::string>() : std::string();
}

std::string read_text_file(const fs::path& file) {
  std::error_code ec;
  if (fs::exists(file, ec) && !fs::is_regular_file(file, ec))  // a FIFO's open waits for a writer
    throw UsageError(file.string() + ": not a regular file (a folder, device or pipe)");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UsageError(file.string() + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// --embeddings FILE.npy, with --items CSV (a header naming any of path, label, category; a row per
// embedding) or without (no paths, no labels).
Items items_from_embeddings(const std::string& npy, const std::string& items_csv) {
  if (!fs::is_regular_file(npy)) throw UsageError("--embeddings " + npy + ": no such file");
  OML_CHECK(fs::path(npy).extension() == ".npy", UsageError, "--embeddings ", npy,
            ": expected a .npy file of float32 [N, D] (oml-predict writes one)");
  Items out;
  out.embeddings = io::map_npy_matrix(npy);
  const auto n = static_cast<std::size_t>(out.embeddings.size(0));
  out.records.resize_records(n);
  if (items_csv.empty()) return out;
  const std::vector<data::CsvRecord> records = data::parse_csv(read_text_file(items_csv), items_csv);
  OML_CHECK(!records.empty(), DataError, items_csv,
            ": empty; expected a header naming path, label and/or category");
  int path_column = -1, label_column = -1, category_column = -1;
  const std::vector<std::string>& header = records.front().fields;
  // Names as the dataframe reader takes them: trimmed ("path, label" is label), each once; other
  // columns (oml-predict's "index") are left alone, but a known name in another case is named.
  for (std::size_t c = 0; c < header.size(); ++c) {
    const std::string name = trim(header[c]);
    for (auto [known, column] : {std::pair<const char*, int*>{"path", &path_column},
                                 {"label", &label_column},
                                 {"category", &category_column}}) {
      if (name == known) {
        OML_CHECK(*column < 0, DataError, items_csv, ":1: column '", known, "' is given twice");
        *column = static_cast<int>(c);
      } else {
        std::string lower = name;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char ch) { return std::tolower(ch); });
        OML_CHECK(lower != known, DataError, items_csv, ":1: column '", name, "': did you mean '", known,
                  "'? (column names are lower case)");
      }
    }
  }
  OML_CHECK(path_column >= 0 || label_column >= 0 || category_column >= 0, DataError, items_csv,
            ":1: the header names none of the columns path, label, category");
  OML_CHECK(records.size() - 1 == n, DataError, items_csv, ": has ", records.size() - 1, " rows, ", npy,
            " has ", n, " embeddings; expected a row per embedding");
  for (std::size_t i = 0; i < n; ++i) {
    const data::CsvRecord& record = records[i + 1];
    OML_CHECK(record.fields.size() == header.size(), DataError, items_csv, ":", record.line, ": expected ",
              header.size(), " fields, got ", record.fields.size());
    if (path_column >= 0) out.records.paths[i] = record.fields[path_column];
    if (category_column >= 0) out.records.categories[i] = record.fields[category_column];
    if (label_column >= 0 && !record.fields[label_column].empty()) {
      const std::string& text = record.fields[label_column];
      const std::optional<int64_t> label = parse_int64(text);
      OML_CHECK(label.has_value(), DataError, items_csv, ":", record.line,
                ": column 'label' must be an integer, got '", text, "'");
      out.records.labels[i] = label;
    }
  }
  return out;
}

// The images or texts the config names (data_dir, or its dataframe's rows) through its model.
Items items_from_model(const config::RunConfig& cfg) {
  RunContext ctx = start_run(cfg);
  auto extractor = build_extractor_with_weights(cfg, ctx);
  const PredictionInput input = prediction_input(cfg, *extractor);
  EmbedOptions embed = embed_options(cfg, cfg.batch_size_inference, "embedding");
  embed.unit = input.inputs.unit();
  Items out;
  out.embeddings = embed_dataset(*extractor, input.dataset, ctx, embed);
  const data::DataSplit& rows = input.dataset->meta();
  const auto n = static_cast<std::size_t>(out.embeddings.size(0));
  out.records.resize_records(n);
  out.inputs = input.inputs.kind;
  if (input.inputs.kind == RowInput::texts) {
    out.records.texts = rows.texts;
    out.model_files = input.inputs.text->model_files;
  } else if (input.inputs.kind == RowInput::audio) {
    out.records.paths = rows.paths;
  } else {
    out.images = rows;
    out.records.paths = rows.paths;
  }
  for (std::size_t i = 0; i < n && i < input.rows.original_labels.size(); ++i) {
    out.records.labels[i] = input.rows.original_labels[i];
  }
  for (std::size_t i = 0; i < n && i < input.rows.categories.size(); ++i) {
    out.records.categories[i] = input.rows.categories[i];
  }
  return out;
}

// The config's model file, absolute ("" when the config names none: the extractor's own
// weights, e.g. a zoo name in its args).
std::string model_file(const config::RunConfig& cfg) {
  if (cfg.weights.empty() || !fs::is_regular_file(cfg.weights)) return cfg.weights;
  return fs::absolute(cfg.weights).lexically_normal().string();
}

// The options that give a command's items as files, one per kind of index: the kind, and what
// the option names.
struct FileOption {
  const char* name;
  RowInput inputs;
  const char* names;
};
constexpr FileOption kFileOptions[] = {{"images", RowInput::images, "FOLDER (of images)"},
                                       {"texts", RowInput::texts, "FILE (one text per line)"},
                                       {"audio", RowInput::audio, "FOLDER (of audio files)"}};

// The files of `option` (--images FOLDER, --texts FILE, --audio FOLDER), or the rows of
// `--dataframe` CSV when `option` is null, through the index's model. UsageError when the option
// is not the index's kind.
Items items_from_index_model(const cli::Invocation& inv, const IndexVersion& index, const FileOption* option,
                             const std::string& value, const std::string& dataframe) {
  const RowInput held = index.manifest.inputs;
  std::vector<std::string> overrides;
  if (option) {
    if (option->inputs != held) {
      std::string give;
      for (const FileOption& other : kFileOptions) {
        if (other.inputs == held) give = std::string("--") + other.name + " " + other.names;
      }
      throw UsageError(
          "--" + std::string(option->name) + " " + value + ": " + index.dir.string() + " holds " +
          inputs_name(held) +
          (index.manifest.has_model ? ", embedded by a model that reads them" : " (it has no model)") +
          ": give " + give + " or --dataframe CSV");
    }
    overrides.push_back("data_dir=" + value);
  } else {
    const fs::path file = fs::absolute(dataframe);
    overrides.push_back("data_dir=''");
    overrides.push_back("dataset_root=" + file.parent_path().string());
    overrides.push_back("dataframe_name=" + file.filename().string());
  }
  return items_from_model(index_model_config(inv, index, overrides));
}

// The items a command adds or searches: --embeddings (with --items), --images, --texts, --audio
// or --dataframe.
Items input_items(const cli::Invocation& inv, const IndexVersion& index) {
  const std::string embeddings = option(inv, "embeddings");
  const std::string dataframe = option(inv, "dataframe");
  int given = !embeddings.empty() + !dataframe.empty();
  const FileOption* files = nullptr;
  for (const FileOption& candidate : kFileOptions) {
    if (option(inv, candidate.name).empty()) continue;
    files = &candidate;
    ++given;
  }
  OML_CHECK(given == 1, UsageError,
            "give the items as exactly one of --embeddings FILE.npy, --images FOLDER, --texts FILE, "
            "--audio FOLDER, --dataframe CSV");
  if (!embeddings.empty()) {
    Items items = items_from_embeddings(embeddings, option(inv, "items"));
    items.inputs = index.manifest.inputs;
    return items;
  }
  OML_CHECK(option(inv, "items").empty(), UsageError,
            "--items goes with --embeddings (a dataframe has its own columns)");
  return items_from_index_model(inv, index, files, files ? option(inv, files->name) : std::string(),
                                dataframe);
}

void check_dimension(const Items& items, const IndexVersion& index, const std::string& what) {
  OML_CHECK(items.embeddings.size(1) == index.manifest.dimension, DataError, what, " have dimension ",
            items.embeddings.size(1), ", the index ", index.dir.string(), " holds embeddings of dimension ",
            index.manifest.dimension);
}

fs::path required_path(const cli::Invocation& inv, const char* name, const char* what) {
  const std::string value = option(inv, name);
  OML_CHECK(!value.empty(), UsageError, "--", name, " is required (", what, ")");
  return value;
}

std::vector<int64_t> parse_ids(const std::string& text, const std::string& source) {
  std::vector<int64_t> ids;
  std::string token;
  std::istringstream in(text);
  while (std::getline(in, token, text.find('\n') != std::string::npos ? '\n' : ',')) {
    const std::string t = trim(token);
    if (t.empty()) continue;
    const std::optional<int64_t> id = parse_int64(t);
    OML_CHECK(id.has_value(), UsageError, source, ": '", t,
              "' is not an item id (an integer of items.csv's id column)");
    ids.push_back(*id);
  }
  return ids;
}

}  // namespace

config::RunConfig index_model_config(const cli::Invocation& inv, const IndexVersion& index,
                                     std::vector<std::string> overrides) {
  const IndexManifest& m = index.manifest;
  OML_CHECK(
      m.has_model, UsageError, index.dir.string(),
      " was built from embeddings, without a model to embed images, texts or audio with: give embeddings");
  if (!m.weights.empty()) {
    if (!fs::is_regular_file(m.weights)) {
      throw DataError(index.dir.string() + ": its model file " + m.weights +
                      " is gone; images cannot be embedded as the gallery was (give embeddings, or build the "
                      "index again)");
    }
    if (!m.weights_sha256.empty() && sha256_file_hex(m.weights) != m.weights_sha256) {
      throw DataError(index.dir.string() + ": its model file " + m.weights +
                      " has changed since the index was built (sha256 " + m.weights_sha256 +
                      "); embeddings of new images would not match the gallery's: build the index again");
    }
    overrides.insert(overrides.begin(), "weights=" + m.weights);
  }
  for (const auto& [file, sha256] : m.model_files) {
    if (!fs::is_regular_file(file)) {
      throw DataError(index.dir.string() + ": its model's file " + file +
                      " is gone; texts cannot be embedded as the gallery was (build the index again)");
    }
    if (sha256_file_hex(file) != sha256) {
      throw DataError(index.dir.string() + ": its model's file " + file +
                      " has changed since the index was built (sha256 " + sha256 +
                      "); embeddings of new texts would not match the gallery's: build the index again");
    }
  }
  const config::Document document =
      config::Document::from_string(index.config_yaml, (index.version / "config.yaml").string(), overrides);
  return inv.load_config(document);
}

namespace {

void apply_changes(LoadedIndex& loaded, const ChangeSummary& changes) {
  loaded.log_bytes = changes.valid_bytes;
  loaded.log_records = changes.records;
  IndexManifest& manifest = loaded.version.manifest;
  // All additions, then all removals: the same gallery as the records one by one (change_log.h),
  // at the cost of one of each (faiss_hnsw's graph is built again once, not per removal).
  if (!changes.added.ids.empty()) {
    loaded.index->add(changes.added.item_set(changes.added_rows));  // logged as the index searches them
    loaded.version.items.append(changes.added);
    manifest.next_id = std::max(manifest.next_id, changes.added.ids.back() + 1);
  }
  if (!changes.removed_ids.empty()) {
    std::unordered_map<int64_t, int64_t> position;
    for (std::size_t i = 0; i < loaded.version.items.size(); ++i)
      position[loaded.version.items.ids[i]] = static_cast<int64_t>(i);
    std::vector<int64_t> positions;
    for (const int64_t id : changes.removed_ids)
      positions.push_back(position.at(id));  // read_change_log checked
    std::sort(positions.begin(), positions.end());
    loaded.index->remove(positions);
    loaded.version.items.remove(positions);
  }
  manifest.items = loaded.index->size();
}

}  // namespace

namespace {

// Readers take no lock: a compaction may make the next version current while one is read, and
// then removes the version it replaced with its log. A read counts only when CURRENT named the
// same version before and after it (versions only go up, so it named it throughout); otherwise it
// is read again, so an acknowledged change is never missed.
template <class Read>
auto read_consistently(const fs::path& dir, Read&& read) -> decltype(read()) {
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    const std::string before = current_version(dir);
    try {
      auto out = read();
      if (current_version(dir) == before) return out;
    } catch (const Error&) {
      // A file of the version read was removed under the read: that is the race, not damage.
      if (current_version(dir) == before) throw;
    }
    OML_CHECK(attempt < kAttempts, DataError, dir.string(), ": a new version was made current ", kAttempts,
              " times while it was being read (compactions in quick succession); try again");
  }
}

// The version CURRENT names, with its change log applied.
LoadedIndex load_current_version(const cli::Invocation& inv, const fs::path& dir, bool into_memory) {
  LoadedIndex out;
  out.version = read_index_folder(dir);
  if (into_memory) out.version.embeddings = out.version.embeddings.clone();
  const config::Document document =
      config::Document::from_string(out.version.config_yaml, (out.version.version / "config.yaml").string());
  const config::RunConfig cfg = inv.load_config(document);
  out.backend = build_retrieval_backend(cfg);
  out.distance = cfg.retrieval_distance;
  // embeddings.npy holds the rows as the index searches them (index_build): no second normalising.
  retrieval::ItemSet gallery = out.version.items.item_set(out.version.embeddings);
  // Built from finite rows: a NaN now is damage, which would silently drop the item from every list.
  retrieval::validate_item_set(gallery, (out.version.version / "embeddings.npy").c_str());
  out.index = out.backend->load_index(std::move(gallery), out.version.index_file(),
                                      out.version.manifest.search_parameters,
                                      retrieval::engine_measure(out.distance));
  failpoint("index:before_log");  // a compaction here removes the log this reader is about to read
  const ChangeSummary changes = read_change_log(change_log_path(dir, out.version.version.filename().string()),
                                                version_number_of(out.version.version),
                                                out.version.manifest.dimension, out.version.items);
  apply_changes(out, changes);
  return out;
}

}  // namespace

LoadedIndex load_index(const cli::Invocation& inv, const fs::path& dir, bool into_memory) {
  return read_consistently(dir, [&] { return load_current_version(inv, dir, into_memory); });
}

std::unique_ptr<ChangeLogWriter> open_change_log(const LoadedIndex& loaded) {
  return std::make_unique<ChangeLogWriter>(
      change_log_path(loaded.version.dir, loaded.version.version.filename().string()),
      version_number_of(loaded.version.version), loaded.log_bytes);
}

void compact(LoadedIndex& loaded) {
  const std::string name = write_next_version(loaded.version.dir, next_contents(loaded));
  loaded.version.version = loaded.version.dir / name;
  loaded.log_bytes = 0;
  loaded.log_records = 0;
}

bool compaction_due(const LoadedIndex& loaded, int64_t log_bytes, int64_t min_bytes) {
  const at::Tensor& rows = loaded.index->gallery().embeddings;
  return compaction_due(log_bytes, rows.defined() ? rows.numel() * 4 : 0, min_bytes);
}

retrieval::RetrievalResults LoadedIndex::search(retrieval::ItemSet queries,
                                                const retrieval::KnnOptions& options) const {
  retrieval::KnnOptions measured = options;
  measured.measure = retrieval::engine_measure(distance);
  retrieval::RetrievalResults found =
      index->search(retrieval::to_engine_space(std::move(queries), distance), measured);
  found.check_consistent();
  retrieval::convert_distances(found, distance);
  return found;
}

void LoadedIndex::add(retrieval::ItemSet rows) {
  index->add(retrieval::to_engine_space(std::move(rows), distance));
}

IndexContents next_contents(const LoadedIndex& loaded) {
  IndexContents contents;
  contents.manifest = loaded.version.manifest;
  contents.items = loaded.version.items;
  contents.config_yaml = loaded.version.config_yaml;
  contents.index = loaded.index.get();
  return contents;
}

// --- oml-index build / add / remove / info -------------------------------------------------------

int index_build(const cli::Invocation& inv) {
  const fs::path out = required_path(inv, "out", "the index folder to write");
  check_new_index_folder(out);  // before the embedding, not only when writing
  const int64_t k = inv.vars["k"].as<int64_t>();
  OML_CHECK(k >= 1, UsageError, "--k expects the number of neighbours searches ask for (>= 1), got ", k);
  const std::string embeddings = option(inv, "embeddings");
  // A gallery of embeddings needs no model: without --config, the defaults (the exact backend).
  OML_CHECK(
      inv.config_path || !embeddings.empty(), UsageError,
      "--config FILE is required to embed images, texts or audio (its model, transforms and data); a gallery "
      "given as --embeddings needs none");
  const config::Document document = inv.config_path
                                        ? inv.load_document()
                                        : config::Document::from_string("{}", "<defaults>", inv.overrides);
  const config::RunConfig cfg = inv.load_config(document);
  OML_CHECK(embeddings.empty() || (option(inv, "images").empty() && option(inv, "dataframe").empty()),
            UsageError,
            "give the gallery as --embeddings or through the config (data_dir or the dataframe), not both");
  OML_CHECK(!embeddings.empty() || option(inv, "items").empty(), UsageError,
            "--items goes with --embeddings");
  const auto backend = build_retrieval_backend(cfg);

  IndexContents contents;
  Items items;
  if (!embeddings.empty()) {
    items = items_from_embeddings(embeddings, option(inv, "items"));
  } else {
    items = items_from_model(cfg);
    contents.manifest.has_model = true;
    contents.manifest.inputs = items.inputs;
    contents.manifest.weights = model_file(cfg);
    if (!contents.manifest.weights.empty() && fs::is_regular_file(contents.manifest.weights)) {
      contents.manifest.weights_sha256 = sha256_file_hex(contents.manifest.weights);
    }
    for (const fs::path& file : items.model_files) {
      const std::string path = fs::absolute(file).lexically_normal().string();
      contents.manifest.model_files[path] = sha256_file_hex(path);
    }
  }
  const int64_t n = items.embeddings.size(0);
  OML_CHECK(n > 0, DataError, "the gallery is empty: nothing to index");
  items.records.ids.resize(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) items.records.ids[static_cast<std::size_t>(i)] = i;
  retrieval::ItemSet gallery = items.records.item_set(items.embeddings);
  retrieval::validate_item_set(gallery, "gallery");
  retrieval::KnnOptions options;
  options.top_k = k;
  options.measure = retrieval::engine_measure(cfg.retrieval_distance);
  // The index (and embeddings.npy, its rows) in the engine's space (unit rows under cosine).
  const std::unique_ptr<retrieval::GalleryIndex> index =
      backend->build_index(retrieval::to_engine_space(std::move(gallery), cfg.retrieval_distance), options);

  contents.manifest.next_id = n;
  contents.manifest.tuned = index->tuned_recall();
  contents.manifest.tuned_for_k = contents.manifest.tuned ? k : 0;
  contents.items = std::move(items.records);
  contents.config_yaml = document.dump();
  contents.index = index.get();
  create_index_folder(out, std::move(contents));
  std::cout << "oml-index: " << out.string() << ": " << n << " items of dimension "
            << index->gallery().embeddings.size(1) << ", " << index->describe() << std::endl;
  return 0;
}

int index_add(const cli::Invocation& inv) {
  const fs::path dir = required_path(inv, "index", "the index folder to change");
  const IndexWriteLock lock(dir);
  LoadedIndex loaded = load_index(inv, dir);
  Items items = input_items(inv, loaded.version);
  check_dimension(items, loaded.version, "the added embeddings");
  const int64_t n = items.embeddings.size(0);
  OML_CHECK(n > 0, DataError, "no items to add");
  IndexManifest& manifest = loaded.version.manifest;
  for (int64_t i = 0; i < n; ++i) items.records.ids.push_back(manifest.next_id + i);
  const int64_t first = loaded.index->size();
  loaded.add(items.records.item_set(items.embeddings.contiguous()));
  // Logged as the index holds them (unit rows under cosine), before anything else is changed.
  const auto log = open_change_log(loaded);
  log->append_add(items.records, loaded.index->gallery().embeddings.narrow(0, first, n));
  manifest.next_id += n;
  loaded.version.items.append(items.records);
  std::cout << "oml-index: added " << n << " items (ids " << items.records.ids.front() << ".."
            << items.records.ids.back() << ") to " << dir.string() << ": " << loaded.index->size() << " items"
            << std::endl;
  if (compaction_due(loaded, log->bytes())) compact(loaded);
  return 0;
}

int index_remove(const cli::Invocation& inv) {
  const fs::path dir = required_path(inv, "index", "the index folder to change");
  std::vector<int64_t> ids;
  if (inv.vars.count("ids")) ids = parse_ids(inv.vars["ids"].as<std::string>(), "--ids");
  if (inv.vars.count("ids-file")) {
    const std::string file = inv.vars["ids-file"].as<std::string>();
    const std::vector<int64_t> more = parse_ids(read_text_file(file), file);
    ids.insert(ids.end(), more.begin(), more.end());
  }
  OML_CHECK(!ids.empty(), UsageError,
            "give the ids to remove with --ids 3,17 or --ids-file FILE (one per line)");
  const IndexWriteLock lock(dir);
  LoadedIndex loaded = load_index(inv, dir);
  std::unordered_map<int64_t, int64_t> position;
  for (std::size_t i = 0; i < loaded.version.items.size(); ++i) {
    position[loaded.version.items.ids[i]] = static_cast<int64_t>(i);
  }
  std::vector<int64_t> positions;
  for (const int64_t id : ids) {
    const auto found = position.find(id);
    OML_CHECK(found != position.end(), UsageError, "item id ", id, " is not in ", dir.string(),
              " (its ids are items.csv's id column; nothing was removed)");
    positions.push_back(found->second);
  }
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  if (loaded.index->remove_updates() == retrieval::IndexUpdates::kRebuild) {
    log::info(loaded.backend->name() + " cannot remove items in place: its index is built again over the " +
              std::to_string(loaded.index->size() - static_cast<int64_t>(positions.size())) +
              " remaining items");
  }
  std::vector<int64_t> removed_ids;
  for (const int64_t p : positions)
    removed_ids.push_back(loaded.version.items.ids[static_cast<std::size_t>(p)]);
  const auto log = open_change_log(loaded);
  log->append_remove(removed_ids);
  loaded.index->remove(positions);
  loaded.version.items.remove(positions);
  std::cout << "oml-index: removed " << positions.size() << " items from " << dir.string() << ": "
            << loaded.index->size() << " items" << std::endl;
  if (compaction_due(loaded, log->bytes())) compact(loaded);
  return 0;
}

int index_compact(const cli::Invocation& inv) {
  const fs::path dir = required_path(inv, "index", "the index folder to compact");
  const IndexWriteLock lock(dir);
  LoadedIndex loaded = load_index(inv, dir);
  if (loaded.log_records == 0) {
    std::cout << "oml-index: " << dir.string() << " has no logged changes; nothing to compact" << std::endl;
    return 0;
  }
  const int64_t records = loaded.log_records;
  compact(loaded);
  std::cout << "oml-index: " << dir.string() << ": " << records << " logged changes written into "
            << loaded.version.version.filename().string() << " (" << loaded.index->size() << " items)"
            << std::endl;
  return 0;
}

int index_calibrate(const cli::Invocation& inv) {
  const fs::path dir = required_path(inv, "index", "the index folder to calibrate");
  OML_CHECK(inv.vars.count("target-fmr"), UsageError,
            "--target-fmr F is required (the false match rate to allow, e.g. 0.001)");
  const double fmr = inv.vars["target-fmr"].as<double>();
  OML_CHECK(fmr > 0.0 && fmr < 1.0, UsageError, "--target-fmr must be in (0, 1), got ", fmr);
  const IndexWriteLock lock(dir);
  LoadedIndex loaded = load_index(inv, dir);
  Items items = input_items(inv, loaded.version);
  check_dimension(items, loaded.version, "the calibration embeddings");
  const int64_t n = items.embeddings.size(0);
  for (int64_t i = 0; i < n; ++i) {
    OML_CHECK(
        items.records.labels[static_cast<std::size_t>(i)].has_value(), DataError, "calibration item ", i,
        (items.records.source(static_cast<std::size_t>(i), items.inputs).empty()
             ? std::string()
             : " (" + items.records.source(static_cast<std::size_t>(i), items.inputs) + ")"),
        " has no label; calibration needs a labelled set (a dataframe's label column, or --items with a "
        "label column)");
    items.records.ids.push_back(i);
  }
  // Calibrated where the index searches, the threshold then in the distance's units (a monotone
  // map: the same pairs fall on each side of it).
  metrics::OpenSetThreshold t = metrics::calibrate_open_set(
      retrieval::to_engine_space(items.records.item_set(items.embeddings.contiguous()), loaded.distance), fmr,
      retrieval::engine_measure(loaded.distance));
  t.threshold = retrieval::from_engine_distance(t.threshold, loaded.distance);
  IndexContents contents = next_contents(loaded);
  contents.manifest.calibration = {
      {"target_fmr", t.fmr}, {"threshold", t.threshold},           {"expected_fnmr", t.fnmr},
      {"items", n},          {"positive_pairs", t.positive_pairs}, {"negative_pairs", t.negative_pairs}};
  write_next_version(dir, std::move(contents));
  std::cout << "oml-index: " << dir.string() << ": threshold " << t.threshold << " for fmr " << t.fmr
            << " (fnmr " << t.fnmr << " on " << n << " calibration items: " << t.positive_pairs
            << " positive, " << t.negative_pairs << " negative pairs)" << std::endl;
  return 0;
}

int index_info(const cli::Invocation& inv) {
  const fs::path dir = required_path(inv, "index", "the index folder");
  // The logged changes count without loading the index.
  const auto [version, changes] = read_consistently(dir, [&] {
    IndexVersion read = read_index_folder(dir);
    ChangeSummary logged =
        read_change_log(change_log_path(dir, read.version.filename().string()),
                        version_number_of(read.version), read.manifest.dimension, read.items);
    return std::make_pair(std::move(read), std::move(logged));
  });
  const IndexManifest& m = version.manifest;
  const std::string name = version.version.filename().string();
  const int64_t items = m.items + static_cast<int64_t>(changes.added.ids.size()) -
                        static_cast<int64_t>(changes.removed_ids.size());
  const int64_t next_id =
      changes.added.ids.empty() ? m.next_id : std::max(m.next_id, changes.added.ids.back() + 1);
  std::cout << "index:       " << dir.string() << " (" << name << ", " << m.created << ")\n"
            << "items:       " << items << " of dimension " << m.dimension << " (next id " << next_id << ")\n"
            << "changes:     " << changes.records << " logged since " << name << " (" << changes.valid_bytes
            << " bytes; oml-index compact writes them into a new version)\n"
            << "backend:     " << m.backend << "\n";
  if (m.tuned) {
    std::cout << "recall:      " << m.tuned->recall << " at k=" << m.tuned->k << " (target_recall, "
              << m.tuned->queries << " gallery items searched as queries)\n";
  }
  std::cout << "model:       "
            << (m.has_model ? (m.weights.empty() ? std::string("the config's extractor") : m.weights)
                            : std::string("none (built from embeddings)"))
            << "\n"
            << "items are:   " << inputs_name(m.inputs) << "\n";
  for (const auto& [file, sha256] : m.model_files)
    std::cout << "model file:  " << file << " (sha256 " << sha256 << ")\n";
  if (m.calibration.is_object()) std::cout << "calibration: " << m.calibration.dump() << "\n";
  std::cout << "written by:  oml-cpp " << m.oml_cpp_version << ", LibTorch " << m.libtorch_version
            << std::endl;
  return 0;
}

// --- oml-search ------------------------------------------------------------------------------------

namespace {

// --rerank: the re-ranker and what it reads, checked before any query is embedded.
std::unique_ptr<SearchReranker> search_reranker(const cli::Invocation& inv, const LoadedIndex& loaded) {
  const std::string file = option(inv, "rerank");
  if (file.empty()) {
    OML_CHECK(inv.overrides.empty(), UsageError,
              "--set changes keys of the --rerank config; without --rerank oml-search has no config (the "
              "index folder keeps its own)");
    return nullptr;
  }
  auto reranker = std::make_unique<SearchReranker>(inv, file);
  if (reranker->takes_images()) {
    OML_CHECK(loaded.version.manifest.inputs == RowInput::images, UsageError, "--rerank ", file,
              ": its pairwise model '", reranker->model_name(), "' reads images, and ",
              loaded.version.dir.string(), " holds ", inputs_name(loaded.version.manifest.inputs),
              " (re-rank with a model that reads embeddings, such as linear_siamese)");
    OML_CHECK(
        option(inv, "embeddings").empty(), UsageError, "--rerank ", file, ": its pairwise model '",
        reranker->model_name(),
        "' reads the images of both sides, and --embeddings gives none for the queries: give the queries "
        "as --images FOLDER or --dataframe CSV (or re-rank with a model that reads embeddings, such as "
        "linear_siamese)");
    const IndexedItems& items = loaded.version.items;
    for (std::size_t i = 0; i < items.size(); ++i) {
      OML_CHECK(!items.paths[i].empty(), DataError, (loaded.version.version / "items.csv").string(),
                ": item ", items.ids[i], " has no path; --rerank's pairwise model '", reranker->model_name(),
                "' reads the gallery's images (an index built from --embeddings needs --items with a path "
                "column)");
    }
  }
  // The re-ranker learned to correct one extractor's rankings; another's are not what it saw.
  const IndexManifest& m = loaded.version.manifest;
  const std::string weights = reranker->extractor_weights();
  if (!weights.empty() && !m.weights_sha256.empty() && fs::is_regular_file(weights) &&
      sha256_file_hex(weights) != m.weights_sha256) {
    log::warn("--rerank " + file + " names the extractor weights " + weights +
              ", the index was embedded with " + m.weights +
              " (another file): the pairwise model was trained over another extractor's results");
  }
  return reranker;
}

// The index's gallery as the re-ranker's model reads it: position g's image or embedding.
PairInput gallery_inputs(const SearchReranker& reranker, const LoadedIndex& loaded) {
  if (!reranker.takes_images()) return SearchReranker::embedding_inputs(loaded.index->gallery().embeddings);
  data::DataSplit rows;
  rows.paths = loaded.version.items.paths;
  rows.lines.resize(rows.paths.size());
  std::iota(rows.lines.begin(), rows.lines.end(), int64_t{2});  // items.csv's lines, after its header
  return reranker.image_inputs(rows);
}

}  // namespace

int search_index(const cli::Invocation& inv) {
  const fs::path dir = required_path(inv, "index", "the index folder to search");
  const fs::path out_dir = required_path(inv, "out", "the folder to write the neighbours into");
  const int64_t k = inv.vars["top-k"].as<int64_t>();
  OML_CHECK(k >= 1, UsageError, "--top-k expects a number of neighbours >= 1, got ", k);
  const std::vector<std::string> outputs{"neighbours.csv", "answers.csv", "neighbours_ids.npy",
                                         "neighbours_distances.npy"};
  CommandOutput output(out_dir, "oml-search", outputs);
  output.check();
  const LoadedIndex loaded = load_index(inv, dir);
  // Results inside the index folder would be removed with the version they were written into.
  {
    std::error_code index_ec, out_ec;
    const fs::path index = fs::weakly_canonical(fs::absolute(dir), index_ec);
    const fs::path out = fs::weakly_canonical(fs::absolute(out_dir), out_ec);
    OML_CHECK(index_ec || out_ec || index.empty() || !is_within_folder(out, index), UsageError, "--out ",
              out_dir.string(), " is inside --index ", dir.string(),
              ", whose versions oml-index replaces and removes; write the neighbours elsewhere");
  }
  // --threshold T, else the calibrated one; `--threshold none`: every neighbour.
  std::optional<double> threshold;
  const nlohmann::json& calibration = loaded.version.manifest.calibration;
  const std::string threshold_text = option(inv, "threshold");
  if (threshold_text.empty() && calibration.is_object()) {
    threshold = calibration.at("threshold").get<double>();
    log::info(::oml::detail::concat("open set: neighbours within the calibrated threshold ", *threshold,
                                    " (fmr ", calibration.at("target_fmr").get<double>(), ", expected fnmr ",
                                    calibration.at("expected_fnmr").get<double>(),
                                    "); --threshold none for all"));
  } else if (!threshold_text.empty() && threshold_text != "none") {
    const std::optional<double> value = parse_double(threshold_text);
    // Under dot a distance is -q.g and may be negative; the other distances are not.
    const bool signed_distance = loaded.distance == DistanceKind::dot;
    OML_CHECK(value && std::isfinite(*value) && (*value >= 0 || signed_distance), UsageError,
              "--threshold expects a distance", signed_distance ? "" : " >= 0", " or 'none', got '",
              threshold_text, "'");
    threshold = value;
  }
  const std::unique_ptr<SearchReranker> reranker = search_reranker(inv, loaded);
  Items queries = input_items(inv, loaded.version);
  check_dimension(queries, loaded.version, "the query embeddings");
  const int64_t nq = queries.embeddings.size(0);
  // Queries are not gallery items: ids no gallery item has, so none is ignored.
  queries.records.ids.resize(static_cast<std::size_t>(nq));
  for (int64_t i = 0; i < nq; ++i) queries.records.ids[static_cast<std::size_t>(i)] = -1 - i;
  const retrieval::ItemSet query_set = queries.records.item_set(queries.embeddings);
  retrieval::validate_item_set(query_set, "queries");
  retrieval::KnnOptions options;
  options.top_k = reranker ? reranker->retrieve_k(k) : k;
  options.on_progress = progress_callback("searching", "query");
  const retrieval::RetrievalResults found = loaded.search(query_set, options);
  // The lists written: the index's, or re-ranked (scores in place of distances).
  retrieval::RetrievalResults listed;
  if (reranker) {
    // A model that reads embeddings reads the rows as the index holds them (embeddings.npy: unit
    // rows under cosine), the queries' likewise.
    const PairInput query_inputs =
        reranker->takes_images() ? reranker->image_inputs(queries.images)
                                 : SearchReranker::embedding_inputs(
                                       retrieval::to_engine_space(query_set, loaded.distance).embeddings);
    listed = reranker->rerank(found, query_inputs, gallery_inputs(*reranker, loaded));
    listed.check_consistent();
  }
  const retrieval::RetrievalResults& lists = reranker ? listed : found;
  // Open set: a query is unknown when its nearest item by embedding distance lies beyond the
  // threshold. Without re-ranking a list is cut at the threshold; a re-ranked list is written whole
  // (its scores are not distances the threshold was calibrated on).
  const auto unknown_query = [&](int64_t q) {
    return found.size(q) == 0 || (threshold && found.distances[found.begin(q)] > *threshold);
  };

  const IndexedItems& gallery = loaded.version.items;
  // The queries' and items' column: their paths, or a text index's texts.
  const RowInput inputs = loaded.version.manifest.inputs;
  const char* column = item_column(inputs);
  // A list holds at most the whole gallery: a --top-k beyond it adds no column (as torch.topk
  // and OML, which take min(k, gallery)); 10^8 once allocated Q x 10^8 entries of padding.
  const int64_t columns =
      std::max<int64_t>(1, std::min<int64_t>(k, static_cast<int64_t>(gallery.ids.size())));
  at::Tensor ids = at::full({nq, columns}, -1, at::kLong);
  at::Tensor distances = at::full({nq, columns}, std::numeric_limits<float>::infinity(), at::kFloat);
  auto id_rows = ids.accessor<int64_t, 2>();
  auto distance_rows = distances.accessor<float, 2>();
  output.claim(outputs);
  int64_t unknown = 0;
  io::write_stream_atomic(output.stage("neighbours.csv"), [&](std::ostream& csv) {
    csv << "query,query_" << column << ",rank,id," << column << ",label,category,distance\n";
    char distance[32];
    for (int64_t q = 0; q < nq; ++q) {
      if (unknown_query(q)) {
        ++unknown;
        continue;
      }
      for (int64_t i = 0; i < std::min(columns, lists.size(q)); ++i) {
        const float d = lists.distances[lists.begin(q) + i];
        if (!reranker && threshold && d > *threshold) break;
        const auto g = static_cast<std::size_t>(lists.retrieved[lists.begin(q) + i]);
        id_rows[q][i] = gallery.ids[g];
        distance_rows[q][i] = d;
        std::snprintf(distance, sizeof(distance), "%.9g", d);
        csv << q << ',' << data::csv_escape(queries.records.source(static_cast<std::size_t>(q), inputs))
            << ',' << i + 1 << ',' << gallery.ids[g] << ',' << data::csv_escape(gallery.source(g, inputs))
            << ',';
        if (gallery.labels[g]) csv << *gallery.labels[g];
        csv << ',' << data::csv_escape(gallery.categories[g]) << ',' << distance << '\n';
      }
    }
  });
  // One line per query: the first item listed, or "unknown".
  io::write_stream_atomic(output.stage("answers.csv"), [&](std::ostream& csv) {
    csv << "query,query_" << column << ",answer,id,label,distance\n";
    char distance[32];
    for (int64_t q = 0; q < nq; ++q) {
      csv << q << ',' << data::csv_escape(queries.records.source(static_cast<std::size_t>(q), inputs)) << ',';
      if (id_rows[q][0] < 0) {
        csv << "unknown,,,\n";
        continue;
      }
      const auto g = static_cast<std::size_t>(lists.retrieved[lists.begin(q)]);
      std::snprintf(distance, sizeof(distance), "%.9g", distance_rows[q][0]);
      csv << "known," << gallery.ids[g] << ',';
      if (gallery.labels[g]) csv << *gallery.labels[g];
      csv << ',' << distance << '\n';
    }
  });
  io::write_npy(output.stage("neighbours_ids.npy"), ids);
  io::write_npy(output.stage("neighbours_distances.npy"), distances);
  output.finish();
  std::cout << "oml-search: " << nq << " queries against " << loaded.index->size() << " items ("
            << loaded.index->describe() << ")";
  if (reranker) std::cout << ", re-ranked by " << reranker->model_name();
  std::cout << " -> " << out_dir.string();
  if (threshold) std::cout << "; " << unknown << " with no item within " << *threshold << " (unknown)";
  std::cout << std::endl;
  return 0;
}

}  // namespace oml::pipelines
