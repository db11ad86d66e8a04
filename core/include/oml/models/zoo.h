#pragma once
// OML's model zoo by name (`weights: vits16_dino`): which arch a name is for, the file it is
// stored in and where OML publishes it. Files are looked up in a local weights folder and never
// downloaded at run time (docs/models.md#zoo-weights-by-name).

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace oml::models {

struct ZooEntry {
  std::string name;       ///< `vits16_dino`, `resnet50_imagenet1k_v1`, ...
  std::string extractor;  ///< registry name of the extractor it fits: vit | vit_clip | resnet | ...
  std::string arch;       ///< arch it was trained with
  std::string file;       ///< file name in the weights folder (OML's own name for it)
  std::string url;        ///< where to download it from
  std::string md5;        ///< md5 prefix as OML checks it ("" when OML has none)
  std::string fits;       ///< for errors, how to make a model fit it ("" = "set arch: <arch>")
};

/// Every known name, in the order docs/models.md lists them.
const std::vector<ZooEntry>& zoo_entries();
/// The entry called `name`, if any.
std::optional<ZooEntry> find_zoo_entry(const std::string& name);

/// Where zoo files are looked up: what set_weights_dir() set, else $OML_WEIGHTS_DIR, else
/// ~/.cache/oml.
std::filesystem::path weights_dir();
/// The config's `weights_dir` ("" = the default above); commands call it once at start.
void set_weights_dir(const std::filesystem::path& dir);

/// config::ArgumentError (key `weights`) when `weights` is a zoo name for another extractor or
/// arch; nothing for a zoo name that fits, a path or "". Reads no file.
void check_zoo_weights(const std::string& weights, const std::string& extractor, const std::string& arch);

/// `weights` as a file to read: "" and paths stay as they are; a zoo name for `extractor` becomes
/// <weights_dir>/<file> (also accepted: <weights_dir>/torch/checkpoints/<file>, where OML keeps its
/// downloads, and the file name of the download URL). ConfigError when the name is for another
/// extractor or arch (check_zoo_weights); DataError naming the expected path and the URL when the file is
/// missing.
std::string resolve_weights(const std::string& weights, const std::string& extractor,
                            const std::string& arch);

}  // namespace oml::models
