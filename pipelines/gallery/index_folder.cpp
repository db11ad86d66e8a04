#include "gallery/index_folder.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/numbers.h"
#include "oml/data/csv.h"
#include "oml/io/atomic_file.h"
#include "oml/io/mapped_file.h"
#include "oml/io/npy.h"
#include "oml/io/pending_files.h"
#include "oml/retrieval/gallery_index.h"
#include "oml/version.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {

constexpr const char* kCurrent = "CURRENT";
constexpr const char* kManifest = "manifest.json";
constexpr const char* kConfig = "config.yaml";
constexpr const char* kEmbeddings = "embeddings.npy";
constexpr const char* kItems = "items.csv";
constexpr const char* kIndexFile = "faiss.index";
constexpr const char* kFormat = "oml-cpp gallery index";

std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError(file.string() + ": cannot be read (an index folder's file is missing)");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string version_name(int64_t version) {
  char name[24];  // "v" + up to 20 digits and a sign of any int64 + NUL
  std::snprintf(name, sizeof(name), "v%06lld", static_cast<long long>(version));
  return name;
}

// The number of a version folder's name ("v000003" -> 3), or -1.
int64_t version_number(const std::string& name) {
  if (name.size() != 7 || name[0] != 'v') return -1;
  int64_t out = 0;
  for (std::size_t i = 1; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    out = out * 10 + (name[i] - '0');
  }
  return out;
}

std::string utc_now() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

std::string items_csv(const IndexedItems& items, RowInput inputs) {
  std::ostringstream out;
  out << "id," << item_column(inputs) << ",label,category\n";
  for (std::size_t i = 0; i < items.size(); ++i) {
    out << items.ids[i] << ',' << data::csv_escape(items.source(i, inputs)) << ',';
    if (items.labels[i]) out << *items.labels[i];
    out << ',' << data::csv_escape(items.categories[i]) << '\n';
  }
  return out.str();
}

int64_t parse_integer(const std::string& text, const fs::path& file, int64_t line, const char* column) {
  const std::optional<int64_t> value = parse_int64(text);
  if (!value) {
    throw DataError(file.string() + ":" + std::to_string(line) + ": column '" + column +
                    "' must be an integer, got '" + text + "'");
  }
  return *value;
}

IndexedItems parse_items(const fs::path& file, RowInput inputs) {
  const std::vector<data::CsvRecord> records = data::parse_csv(read_text(file), file.string());
  const std::vector<std::string> header{"id", item_column(inputs), "label", "category"};
  if (records.empty() || records.front().fields != header) {
    throw DataError(file.string() + ":1: expected the header id," + item_column(inputs) + ",label,category");
  }
  IndexedItems items;
  for (std::size_t r = 1; r < records.size(); ++r) {
    const data::CsvRecord& record = records[r];
    if (record.fields.size() != header.size()) {
      throw DataError(file.string() + ":" + std::to_string(record.line) + ": expected 4 fields, got " +
                      std::to_string(record.fields.size()));
    }
    // oml-index numbers items from 0 in the order they are added: an id out of that order is an
    // edit, and a negative one would collide with the ids searches give their queries (-1 - q).
    const int64_t id = parse_integer(record.fields[0], file, record.line, "id");
    if (id < 0 || (!items.ids.empty() && id <= items.ids.back())) {
      throw DataError(file.string() + ":" + std::to_string(record.line) + ": id " + std::to_string(id) +
                      (id < 0 ? " is negative" : " does not follow " + std::to_string(items.ids.back())) +
                      "; oml-index numbers items 0, 1, 2, ... in the order they were added");
    }
    items.ids.push_back(id);
    items.paths.push_back(inputs != RowInput::texts ? record.fields[1] : std::string());
    items.texts.push_back(inputs == RowInput::texts ? record.fields[1] : std::string());
    items.labels.push_back(record.fields[2].empty() ? std::nullopt
                                                    : std::optional<int64_t>(parse_integer(
                                                          record.fields[2], file, record.line, "label")));
    items.categories.push_back(record.fields[3]);
  }
  return items;
}

// Writes the version folder `name` of `dir` through a temporary sibling renamed into place.
void write_version_folder(const fs::path& dir, const std::string& name, IndexContents& contents) {
  const retrieval::GalleryIndex& index = *contents.index;
  OML_ASSERT(static_cast<int64_t>(contents.items.size()) == index.size(),
             "index folder: ", contents.items.size(), " item records for ", index.size(), " embeddings");
  IndexManifest& manifest = contents.manifest;
  manifest.items = index.size();
  manifest.dimension = index.gallery().embeddings.size(1);
  manifest.backend = index.describe();
  manifest.search_parameters = index.search_parameters();
  manifest.created = utc_now();
  manifest.oml_cpp_version = OML_VERSION_STRING;
  manifest.libtorch_version = TORCH_VERSION;

  const fs::path target = dir / name;
  const fs::path tmp = io::temporary_sibling(target);
  const io::PendingFile pending(tmp);  // an interrupt removes the unfinished folder
  std::error_code ec;
  fs::create_directory(tmp, ec);
  if (ec) throw RuntimeError("cannot create " + tmp.string() + ": " + ec.message());
  try {
    io::write_npy(tmp / kEmbeddings, index.gallery().embeddings);
    io::write_file_atomic(tmp / kItems, items_csv(contents.items, manifest.inputs));
    io::write_file_atomic(tmp / kConfig, contents.config_yaml);
    manifest.index_file = index.write(tmp / kIndexFile);
    io::write_file_atomic(tmp / kManifest, manifest.to_json().dump(2) + "\n");
    io::publish([&] { fs::rename(tmp, target); });
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

// Version folders, their change logs and temporaries in `dir` other than `keep`'s: left by
// killed writers, or superseded. All of them are this index's own files.
void remove_other_versions(const fs::path& dir, const std::string& keep) {
  io::remove_stale_temporaries(dir);
  std::error_code ec;
  const std::string log_suffix = ".changes";
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != keep && version_number(name) >= 0 && entry.is_directory()) fs::remove_all(entry.path(), ec);
    const bool log = name.size() > log_suffix.size() &&
                     name.compare(name.size() - log_suffix.size(), log_suffix.size(), log_suffix) == 0;
    if (log && name != keep + log_suffix &&
        version_number(name.substr(0, name.size() - log_suffix.size())) >= 0)
      fs::remove(entry.path(), ec);
  }
}

}  // namespace

// --- items ------------------------------------------------------------------------------------

const char* item_column(RowInput inputs) { return inputs == RowInput::texts ? "text" : "path"; }

const char* inputs_name(RowInput inputs) {
  switch (inputs) {
    case RowInput::texts:
      return "texts";
    case RowInput::audio:
      return "audio";
    case RowInput::images:
      break;
  }
  return "images";
}

void IndexedItems::append(const IndexedItems& more) {
  ids.insert(ids.end(), more.ids.begin(), more.ids.end());
  paths.insert(paths.end(), more.paths.begin(), more.paths.end());
  texts.insert(texts.end(), more.texts.begin(), more.texts.end());
  labels.insert(labels.end(), more.labels.begin(), more.labels.end());
  categories.insert(categories.end(), more.categories.begin(), more.categories.end());
}

void IndexedItems::remove(const std::vector<int64_t>& removed) {
  // In place, moving rather than copying the strings: a large gallery loses one item cheaply.
  std::size_t write = 0;
  auto next = removed.begin();
  for (std::size_t i = 0; i < size(); ++i) {
    if (next != removed.end() && *next == static_cast<int64_t>(i)) {
      ++next;
      continue;
    }
    if (write != i) {
      ids[write] = ids[i];
      paths[write] = std::move(paths[i]);
      texts[write] = std::move(texts[i]);
      labels[write] = labels[i];
      categories[write] = std::move(categories[i]);
    }
    ++write;
  }
  ids.resize(write);
  paths.resize(write);
  texts.resize(write);
  labels.resize(write);
  categories.resize(write);
}

void IndexedItems::resize_records(std::size_t n) {
  paths.resize(n);
  texts.resize(n);
  labels.resize(n);
  categories.resize(n);
}

const std::string& IndexedItems::source(std::size_t i, RowInput inputs) const {
  return inputs == RowInput::texts ? texts[i] : paths[i];
}

retrieval::ItemSet IndexedItems::item_set(const at::Tensor& embeddings) const {
  retrieval::ItemSet set;
  set.embeddings = embeddings;
  set.ids = ids;
  set.labels.reserve(size());
  for (const auto& label : labels) set.labels.push_back(label.value_or(-1));
  return set;
}

// --- manifest ---------------------------------------------------------------------------------

nlohmann::json IndexManifest::to_json() const {
  nlohmann::json out;
  out["format"] = kFormat;
  // A text or audio index is format 2, which earlier readers refuse rather than embed its inputs
  // as images.
  const bool images = inputs == RowInput::images;
  out["format_version"] = images ? 1 : kFormatVersion;
  if (!images) out["inputs"] = inputs_name(inputs);
  out["items"] = items;
  out["dimension"] = dimension;
  out["next_id"] = next_id;
  out["backend"] = backend;
  out["search_parameters"] = search_parameters;
  out["tuned_for_k"] = tuned_for_k;
  if (tuned) {
    out["tuned_recall"] = {{"k", tuned->k}, {"queries", tuned->queries}, {"recall", tuned->recall}};
  } else {
    out["tuned_recall"] = nullptr;
  }
  out["index_file"] = index_file ? nlohmann::json(kIndexFile) : nlohmann::json(nullptr);
  if (!has_model) {
    out["model"] = nullptr;
  } else {
    out["model"] = {{"weights", weights}, {"sha256", weights_sha256}};
    if (!model_files.empty()) out["model"]["files"] = model_files;
  }
  out["calibration"] = calibration;
  out["created"] = created;
  out["oml_cpp_version"] = oml_cpp_version;
  out["libtorch_version"] = libtorch_version;
  return out;
}

IndexManifest IndexManifest::from_json(const nlohmann::json& json, const std::string& file) {
  IndexManifest m;
  try {
    if (json.value("format", std::string()) != kFormat) {
      throw DataError(file + ": not a manifest of an oml-cpp gallery index (\"format\" is not \"" + kFormat +
                      "\")");
    }
    const int version = json.at("format_version").get<int>();
    if (version > kFormatVersion) {
      throw DataError(file + ": format_version " + std::to_string(version) +
                      " is newer than this oml-cpp reads (" + std::to_string(kFormatVersion) +
                      "); use a newer oml-cpp or build the index again");
    }
    m.items = json.at("items").get<int64_t>();
    m.dimension = json.at("dimension").get<int64_t>();
    m.next_id = json.at("next_id").get<int64_t>();
    m.backend = json.at("backend").get<std::string>();
    m.search_parameters = json.at("search_parameters").get<std::map<std::string, int64_t>>();
    m.tuned_for_k = json.value("tuned_for_k", int64_t{0});
    if (json.contains("tuned_recall") && !json.at("tuned_recall").is_null()) {
      const auto& t = json.at("tuned_recall");
      m.tuned = retrieval::RecallEstimate{t.at("k").get<int64_t>(), t.at("queries").get<int64_t>(),
                                          t.at("recall").get<double>()};
    }
    m.index_file = json.contains("index_file") && !json.at("index_file").is_null();
    if (json.contains("model") && !json.at("model").is_null()) {
      m.has_model = true;
      m.weights = json.at("model").at("weights").get<std::string>();
      m.weights_sha256 = json.at("model").at("sha256").get<std::string>();
      m.model_files = json.at("model").value("files", std::map<std::string, std::string>());
    }
    const std::string inputs = json.value("inputs", std::string("images"));
    bool known = false;
    for (const RowInput kind : {RowInput::images, RowInput::texts, RowInput::audio}) {
      if (inputs != inputs_name(kind)) continue;
      m.inputs = kind;
      known = true;
    }
    if (!known) throw DataError(file + ": \"inputs\" is '" + inputs + "', expected images, texts or audio");
    if (m.inputs != RowInput::images && !m.has_model) {
      throw DataError(file + ": an index of " + inputs + " without a model (\"model\" is null)");
    }
    m.calibration = json.value("calibration", nlohmann::json(nullptr));
    if (m.calibration.is_object()) {  // checked here, so that searches read them without a failure
      for (const char* key : {"threshold", "target_fmr", "expected_fnmr"})
        (void)m.calibration.at(key).get<double>();
    }
    m.created = json.value("created", std::string());
    m.oml_cpp_version = json.value("oml_cpp_version", std::string());
    m.libtorch_version = json.value("libtorch_version", std::string());
  } catch (const nlohmann::json::exception& e) {
    throw DataError(file + ": malformed manifest (" + e.what() + ")");
  }
  return m;
}

// --- reading ----------------------------------------------------------------------------------

fs::path IndexVersion::index_file() const { return manifest.index_file ? version / kIndexFile : fs::path(); }

std::string current_version(const fs::path& dir) {
  const fs::path current = dir / kCurrent;
  if (!fs::is_regular_file(current)) {
    throw DataError(dir.string() + ": not an index folder (no " + kCurrent +
                    " file; oml-index build writes one)");
  }
  std::string name = read_text(current);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r' || name.back() == ' ')) name.pop_back();
  if (version_number(name) < 0 || !fs::is_directory(dir / name)) {
    throw DataError(current.string() + ": names '" + name + "', which is not a version folder of the index");
  }
  return name;
}

IndexVersion read_index_folder(const fs::path& dir) {
  IndexVersion out;
  out.dir = dir;
  out.version = dir / current_version(dir);
  const fs::path manifest_file = out.version / kManifest;
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(read_text(manifest_file));
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(manifest_file.string() + ": not JSON (" + e.what() + ")");
  }
  out.manifest = IndexManifest::from_json(json, manifest_file.string());
  out.items = parse_items(out.version / kItems, out.manifest.inputs);
  out.embeddings = io::map_npy_matrix(out.version / kEmbeddings);
  out.config_yaml = read_text(out.version / kConfig);
  const auto n = static_cast<int64_t>(out.items.size());
  OML_CHECK(out.embeddings.size(0) == n && out.manifest.items == n, DataError, out.version.string(), ": ",
            kEmbeddings, " has ", out.embeddings.size(0), " rows, ", kItems, " ", n, " items and ", kManifest,
            " says ", out.manifest.items);
  OML_CHECK(out.embeddings.dim() == 2 && out.embeddings.size(1) == out.manifest.dimension, DataError,
            (out.version / kEmbeddings).string(), ": rows of dimension ",
            out.embeddings.dim() == 2 ? out.embeddings.size(1) : -1, ", ", kManifest, " says ",
            out.manifest.dimension);
  OML_CHECK(out.items.ids.empty() || out.items.ids.back() < out.manifest.next_id, DataError,
            (out.version / kItems).string(), ": id ", out.items.ids.empty() ? 0 : out.items.ids.back(),
            " is not below the next id ", out.manifest.next_id, " of ", kManifest);
  OML_CHECK(!out.manifest.index_file || fs::is_regular_file(out.index_file()), DataError,
            out.version.string(), ": ", kManifest, " names ", kIndexFile, ", which is missing");
  return out;
}

// --- writing ----------------------------------------------------------------------------------

IndexWriteLock::IndexWriteLock(const fs::path& dir, bool new_folder) {
  if (!new_folder) {
    std::error_code ec;
    OML_CHECK(fs::is_directory(dir, ec), DataError, dir.string(), ": no such index folder");
    current_version(dir);  // not an index folder: said before a lock file is made in it
  }
  lock_ = io::LockFile::try_lock(dir / ".lock", "oml-index");
  if (!lock_.held()) {
    throw UsageError(
        dir.string() +
        ": another oml-index command is changing this index, or oml-serve is serving it (a served index is "
        "changed through the server: POST /items, DELETE /items/{id}); try again when it ends");
  }
}

namespace {

// Whether `dir` holds only what an oml-index build makes before CURRENT: its lock and version
// folders being written (v000001.tmp-PID-N). Anything else is the user's, and stays.
bool holds_only_a_build(const fs::path& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const bool version =
        name.size() > 12 && name.compare(7, 5, ".tmp-") == 0 && version_number(name.substr(0, 7)) >= 0;
    if (name != ".lock" && !version) return false;
  }
  return !ec;
}

}  // namespace

void check_new_index_folder(const fs::path& dir) {
  std::error_code ec;
  // What a killed oml-index build left (no CURRENT yet: its lock and temporaries of a dead
  // process) is removed, so that the build can simply run again — only in a folder holding
  // nothing else: another program's temporaries (oml-convert's `<dst>.tmp-PID-N` may be the only
  // copy of a dataset) are not an index's to remove.
  if (fs::is_directory(dir, ec) && !fs::exists(dir / kCurrent, ec) && holds_only_a_build(dir)) {
    io::remove_stale_temporaries(dir);
    if (fs::exists(dir / ".lock", ec) &&
        std::distance(fs::directory_iterator(dir, ec), fs::directory_iterator()) == 1) {
      fs::remove(dir / ".lock", ec);
    }
  }
  if (fs::exists(dir, ec) && !fs::is_empty(dir, ec)) {
    throw UsageError(dir.string() +
                     " exists and is not empty: oml-index build writes a new index folder and never writes "
                     "over files; choose another --out, or change an index with oml-index add / remove");
  }
}

void create_index_folder(const fs::path& dir, IndexContents contents) {
  check_new_index_folder(dir);
  std::error_code ec;
  // A folder this build creates is removed whole by an interrupt (exit 130: no index was made);
  // an empty one that was there keeps at most the lock, which the next build removes.
  std::optional<io::PendingFile> created;
  if (!fs::exists(dir, ec)) created.emplace(dir);
  fs::create_directories(dir, ec);
  if (ec) throw RuntimeError("cannot create " + dir.string() + ": " + ec.message());
  const IndexWriteLock lock(dir, /*new_folder=*/true);
  write_next_version(dir, std::move(contents));
}

std::string write_next_version(const fs::path& dir, IndexContents contents) {
  int64_t next = 1;
  if (fs::is_regular_file(dir / kCurrent)) next = version_number(current_version(dir)) + 1;
  const std::string name = version_name(next);
  std::error_code ec;
  fs::remove_all(dir / name, ec);             // a version a killed writer finished but never made current
  fs::remove(dir / (name + ".changes"), ec);  // and a log of it, which can only be stale
  write_version_folder(dir, name, contents);
  io::write_file_atomic(dir / kCurrent, name + "\n");
  remove_other_versions(dir, name);
  log::info("index " + dir.string() + ": version " + name + " with " + std::to_string(contents.items.size()) +
            " items (" + contents.index->describe() + ")");
  return name;
}

int64_t version_number_of(const fs::path& version_folder) {
  return version_number(version_folder.filename().string());
}

}  // namespace oml::pipelines
