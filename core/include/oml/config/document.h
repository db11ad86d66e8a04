#pragma once
// Loading a YAML config: parse (with line/column errors), apply `--set key.path=value`
// overrides, resolve `${other.key}` interpolation, and dump the resolved result.

#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oml/config/node.h"

namespace oml::config {

class Document {
 public:
  /// Reads and resolves a config file. Malformed YAML -> ConfigError "file:line:col: ...".
  static Document from_file(const std::string& path, const std::vector<std::string>& overrides = {});
  /// Same from text; `name` stands for the file name in messages.
  static Document from_string(const std::string& text, const std::string& name = "<string>",
                              const std::vector<std::string>& overrides = {});

  /// The resolved root (a mapping; an empty file gives an empty mapping).
  Node root() const;
  /// The resolved config as YAML text; loading it again gives the same tree.
  std::string dump() const;
  const std::string& file() const { return origin_->file; }

 private:
  Document(YAML::Node root, std::shared_ptr<Origin> origin);

  YAML::Node root_;
  std::shared_ptr<Origin> origin_;
};

/// Applies one `key.path=value` override to `root` (value parsed as YAML, so `3`, `true`,
/// `[1, 2]` and `{name: x}` keep their types). Intermediate maps are created as needed.
/// Returns the key path; records in `created_by` each mapping it created (key path -> the
/// override's path, for messages). Throws UsageError for a malformed override.
std::string apply_override(YAML::Node& root, const std::string& assignment,
                           std::map<std::string, std::string>& created_by);

/// The time `${now:FORMAT}` formats (strftime, local time, as Hydra's `now` resolver): the run's
/// start, the same on every rank. The launcher gives its ranks its own value in
/// kRunStartTimeVariable (seconds since the epoch); without it, the time of the first call.
std::time_t run_start_time();
inline constexpr const char* kRunStartTimeVariable = "OML_RUN_START_TIME";

/// Replaces `${a.b.c}` references by the referenced values. A scalar that is exactly one
/// reference takes the referenced node whole (typed, may be a mapping); otherwise the
/// referenced scalars are spliced into the text. Unknown keys and cycles are ConfigErrors.
void resolve_interpolations(YAML::Node& root, const std::shared_ptr<const Origin>& origin);

/// Looks up a dotted key path ("a.b.0.c"); undefined node when absent.
YAML::Node find_path(const YAML::Node& root, const std::string& path);

std::string dump_yaml(const YAML::Node& node);

}  // namespace oml::config
