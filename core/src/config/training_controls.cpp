#include "oml/config/training_controls.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <sstream>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/config/error_list.h"
#include "oml/config/node.h"
#include "oml/config/reader.h"

namespace oml::config {

namespace {

const char* const kExtraArgs = "lightning_trainer_extra_args";

// 0.25, 1e-05: as Python prints a float in Lightning's message.
std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

bool is_integer_literal(const std::string& text) {
  std::size_t i = text.size() > 1 && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  if (i == text.size()) return false;
  for (; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
  }
  return true;
}

// As Lightning's Trainer checks limit_*_batches: an int >= 0, or a float in [0, 1]. YAML `1` is
// an int (one batch) and `1.0` a float (all batches), as in Python.
BatchLimit parse_batch_limit(const Node& node) {
  if (!node.is_scalar())
    node.fail("expected a number of batches (an integer) or a fraction (a float in [0, 1])");
  BatchLimit limit;
  const std::string text = node.as<std::string>();
  limit.is_fraction = !detail::is_yaml_integer(text);
  limit.value = limit.is_fraction ? node.as<double>() : static_cast<double>(node.as<int64_t>());
  if (limit.is_fraction && !(limit.value >= 0.0 && limit.value <= 1.0)) {
    node.fail("expected a fraction in [0.0, 1.0] (or an integer number of batches), got " + text);
  }
  if (!limit.is_fraction && limit.value < 0) node.fail("expected a number of batches >= 0, got " + text);
  return limit;
}

EarlyStoppingOptions parse_early_stopping(const Node& node) {
  if (!node.is_map()) node.fail("expected {monitor: <metric>, patience: 3, mode: min|max, min_delta: 0.0}");
  EarlyStoppingOptions o;
  MapReader r(node, "early_stopping");
  r.required("monitor", o.monitor).optional("patience", o.patience).optional("min_delta", o.min_delta);
  const Node mode = r.take("mode");
  r.finish();
  if (!mode.is_null()) {
    const auto found = from_name<CheckpointMode>(mode.as<std::string>(), checkpoint_mode_names());
    if (!found)
      mode.fail("expected one of " + join(checkpoint_mode_names()) + ", got '" + mode.as<std::string>() +
                "'");
    o.mode = *found;
  }
  if (o.patience < 0) node["patience"].fail("expected 0 or a positive number of validations");
  if (!(o.min_delta >= 0) || !std::isfinite(o.min_delta)) {
    node["min_delta"].fail("expected a finite number >= 0 (Lightning takes its absolute value; write it so)");
  }
  return o;
}

// A duration as Lightning's max_time takes it: "DD:HH:MM:SS" (exactly four integers, as Lightning
// splits it) or the keyword arguments of Python's timedelta. Seconds, > 0. `key` names the
// setting in the message's example.
double parse_duration(const Node& node, const std::string& key) {
  double seconds = 0;
  if (node.is_map()) {
    static const std::map<std::string, double> units{
        {"weeks", 604800.0}, {"days", 86400.0},      {"hours", 3600.0},     {"minutes", 60.0},
        {"seconds", 1.0},    {"milliseconds", 1e-3}, {"microseconds", 1e-6}};
    for (const std::string& key : node.keys()) {
      const auto unit = units.find(key);
      if (unit == units.end()) {
        node.key_node(key).fail(
            "expected a timedelta argument (weeks, days, hours, minutes, seconds, "
            "milliseconds, microseconds), got '" +
            key + "'");
      }
      seconds += node[key].as<double>() * unit->second;
    }
  } else {
    const std::string text = node.as<std::string>();
    std::vector<int64_t> fields;
    bool ok = true;
    std::stringstream parts(text);
    for (std::string part; ok && std::getline(parts, part, ':');) {
      const std::string field = trim(part);
      ok = is_integer_literal(field) && field[0] != '-' && field.size() <= 9;
      if (ok) fields.push_back(std::stoll(field));
    }
    if (!ok || fields.size() != 4) {
      node.fail("expected \"DD:HH:MM:SS\" (as Lightning's " + key +
                ", e.g. \"00:12:00:00\" for 12 hours) or {days: ..., hours: ...}, got '" + text + "'");
    }
    seconds = static_cast<double>(fields[0]) * 86400 + static_cast<double>(fields[1]) * 3600 +
              static_cast<double>(fields[2]) * 60 + static_cast<double>(fields[3]);
  }
  if (!(seconds > 0) || !std::isfinite(seconds)) node.fail("expected a positive duration");
  return seconds;
}

using ControlReader = std::function<void(const Node&, TrainingControls&, int64_t& valid_period)>;

// Every control by its Lightning name. check_val_every_n_epoch is OML's valid_period.
const std::map<std::string, ControlReader>& control_readers() {
  static const std::map<std::string, ControlReader> readers{
      {"accumulate_grad_batches",
       [](const Node& n, TrainingControls& c, int64_t&) {
         c.accumulate_grad_batches = n.as<int64_t>();
         if (c.accumulate_grad_batches < 1)
           n.fail("expected a positive number of batches per optimizer step");
       }},
      {"gradient_clip_val",
       [](const Node& n, TrainingControls& c, int64_t&) {
         const double value = n.as<double>();
         if (!(value >= 0) || !std::isfinite(value))
           n.fail("expected a finite number >= 0 (0 or null: no clipping), got " + n.as<std::string>());
         c.gradient_clip_val = value > 0 ? std::optional<double>(value) : std::nullopt;
       }},
      {"gradient_clip_algorithm",
       [](const Node& n, TrainingControls& c, int64_t&) {
         const std::string value = n.as<std::string>();
         const auto found = from_name<GradientClipAlgorithm>(value, gradient_clip_algorithm_names());
         if (!found)
           n.fail("expected one of " + join(gradient_clip_algorithm_names()) + ", got '" + value + "'");
         c.gradient_clip_algorithm = *found;
       }},
      {"limit_train_batches",
       [](const Node& n, TrainingControls& c, int64_t&) {
         c.limit_train_batches = parse_batch_limit(n);
         if (c.limit_train_batches.value == 0)
           n.fail("expected a limit > 0: with 0 nothing would be trained");
       }},
      {"limit_val_batches",
       [](const Node& n, TrainingControls& c, int64_t&) { c.limit_val_batches = parse_batch_limit(n); }},
      {"max_time",
       [](const Node& n, TrainingControls& c, int64_t&) { c.max_time_s = parse_duration(n, "max_time"); }},
      {"deterministic",
       [](const Node& n, TrainingControls& c, int64_t&) {
         // Lightning's Optional[Union[bool, "warn"]]: YAML's true/false spellings, or "warn".
         static const std::map<std::string, Determinism> values{
             {"true", Determinism::on},   {"True", Determinism::on},   {"TRUE", Determinism::on},
             {"false", Determinism::off}, {"False", Determinism::off}, {"FALSE", Determinism::off},
             {"warn", Determinism::warn}};
         const auto found = n.is_scalar() ? values.find(n.as<std::string>()) : values.end();
         if (found == values.end()) {
           n.fail("expected true, false or warn (Lightning's Trainer(deterministic=...)), got " +
                  (n.is_scalar() ? "'" + n.as<std::string>() + "'" : std::string("a collection")));
         }
         c.deterministic = found->second;
       }},
      {"benchmark", [](const Node& n, TrainingControls& c, int64_t&) { c.benchmark = n.as<bool>(); }},
      {"check_val_every_n_epoch",
       [](const Node& n, TrainingControls&, int64_t& valid_period) {
         const auto period = n.as<int64_t>();
         if (period < 1) n.fail("expected a positive number of epochs");
         valid_period = period;
       }},
  };
  return readers;
}

using CheckpointReader = std::function<void(const Node&, CheckpointingOptions&)>;

// Lightning's ModelCheckpoint arguments by name, with its checks (its MisconfigurationException
// messages). monitor and mode are OML's metric_for_checkpointing / mode_for_checkpointing.
const std::map<std::string, CheckpointReader>& checkpoint_readers() {
  static const std::map<std::string, CheckpointReader> readers{
      {"save_top_k",
       [](const Node& n, CheckpointingOptions& o) {
         o.save_top_k = n.as<int64_t>();
         if (o.save_top_k < -1) {
           n.fail(
               "expected -1 (keep every checkpoint compared), 0 (none) or the number of best "
               "checkpoints to keep, got " +
               std::to_string(o.save_top_k));
         }
       }},
      {"save_last", [](const Node& n, CheckpointingOptions& o) { o.save_last = n.as<bool>(); }},
      {"every_n_epochs",
       [](const Node& n, CheckpointingOptions& o) {
         o.every_n_epochs = n.as<int64_t>();
         if (*o.every_n_epochs < 0) n.fail("expected a number of epochs >= 0 (0: not by epochs)");
       }},
      {"every_n_train_steps",
       [](const Node& n, CheckpointingOptions& o) {
         o.every_n_train_steps = n.as<int64_t>();
         if (*o.every_n_train_steps < 0)
           n.fail("expected a number of optimizer steps >= 0 (0: not by steps)");
       }},
      {"train_time_interval",
       [](const Node& n, CheckpointingOptions& o) {
         o.train_time_interval_s = parse_duration(n, "train_time_interval");
       }},
  };
  return readers;
}

void parse_checkpointing(MapReader& root, CheckpointingOptions& o, ErrorList& errors) {
  for (const auto& [key, read] : checkpoint_readers()) {
    const Node node = root.take(key);
    if (!node.is_null()) errors.check([&, read = read] { read(node, o); });
  }
  // As Lightning: one trigger at most (a 0 is no trigger).
  std::vector<std::string> triggers;
  if (o.every_n_train_steps.value_or(0) >= 1) triggers.push_back("every_n_train_steps");
  if (o.every_n_epochs.value_or(0) >= 1) triggers.push_back("every_n_epochs");
  if (o.train_time_interval_s) triggers.push_back("train_time_interval");
  if (triggers.size() > 1) {
    errors.check([&] {
      root.node()[triggers.back()].fail("Lightning's checkpoint triggers " + join(triggers) +
                                        " are mutually exclusive; keep one of them");
    });
  }
}

}  // namespace

const std::vector<std::string>& checkpoint_arg_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& kv : checkpoint_readers()) out.push_back(kv.first);
    return out;
  }();
  return names;
}

const std::vector<std::string>& gradient_clip_algorithm_names() {
  static const std::vector<std::string> names{"norm", "value"};
  return names;
}

const std::vector<std::string>& lightning_trainer_arg_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& kv : control_readers()) out.push_back(kv.first);
    return out;
  }();
  return names;
}

int64_t BatchLimit::apply(int64_t batches, const std::string& key) const {
  if (!is_fraction) return std::min(batches, static_cast<int64_t>(value));
  const auto limited = static_cast<int64_t>(static_cast<double>(batches) * value);  // int() truncates
  if (limited == 0 && value > 0 && batches > 0) {
    // Lightning's MisconfigurationException, with its advice.
    throw SettingError(key, format_number(value) + " x " + std::to_string(batches) +
                                " batches is less than one batch; use at least " +
                                format_number(1.0 / static_cast<double>(batches)) +
                                " or an integer number of batches");
  }
  return limited;
}

TrainingControls parse_training_controls(MapReader& root, int64_t& valid_period, ErrorList& errors) {
  TrainingControls c;
  // `valid_period` was read (under either name) by the caller; the block may not give it again.
  const bool period_at_top = root.has("valid_period") || root.has("check_val_every_n_epoch");
  for (const auto& [key, read] : control_readers()) {
    if (key == "check_val_every_n_epoch") continue;
    const Node node = root.take(key);
    if (!node.is_null()) errors.check([&, read = read] { read(node, c, valid_period); });
  }
  errors.check([&] {
    const Node node = root.take("early_stopping");
    if (!node.is_null()) c.early_stopping = parse_early_stopping(node);
  });
  parse_checkpointing(root, c.checkpointing, errors);

  const Node extra = root.take(kExtraArgs);
  if (extra.is_null()) return c;
  errors.check([&] {
    if (!extra.is_map()) extra.fail("expected a mapping of Lightning Trainer arguments");
  });
  if (!extra.is_map()) return c;
  for (const std::string& key : extra.keys()) {
    errors.check([&] {
      const auto found = control_readers().find(key);
      if (found == control_readers().end()) {
        const auto& checkpoint_keys = checkpoint_arg_names();
        const bool is_checkpoint_key =
            std::find(checkpoint_keys.begin(), checkpoint_keys.end(), key) != checkpoint_keys.end();
        const std::string hint =
            key == "early_stopping" ? " (early stopping is a Lightning callback, not a Trainer argument: "
                                      "give early_stopping: {...} at the top level)"
            : is_checkpoint_key     ? " ('" + key +
                                      "' is an argument of Lightning's ModelCheckpoint callback, not of the "
                                      "Trainer: give it at the top level)"
                                : did_you_mean(key, lightning_trainer_arg_names());
        extra.key_node(key).fail("'" + key + "' is not a Lightning Trainer argument oml-cpp supports; " +
                                 kExtraArgs + " accepts " + join(lightning_trainer_arg_names()) + hint);
      }
      const bool also_at_top = key == "check_val_every_n_epoch" ? period_at_top : root.has(key);
      if (also_at_top) {
        const std::string top =
            key == "check_val_every_n_epoch" && root.has("valid_period") ? "valid_period" : key;
        extra.key_node(key).fail("'" + key + "' is also given at " + root.node().key_node(top).where() +
                                 "; keep one of them");
      }
      found->second(extra[key], c, valid_period);
    });
  }
  return c;
}

}  // namespace oml::config
