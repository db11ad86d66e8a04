// Fuzzing the readers of PyTorch zip files: checkpoints, state dicts and tensors written by
// oml-cpp's own writers are damaged two ways:
//   - raw: bytes flipped, inserted, deleted anywhere in the file (records, local headers, the zip
//     directory), truncation; the CRC-32 check turns most damage inside records into a clean
//     rejection, so these mostly reach the zip layer;
//   - repacked: one record (data.pkl's pickle opcodes, a tensor's bytes) is mutated, dropped or
//     renamed and the archive written again with valid CRCs, so the damage reaches the
//     unpickler and what reads its result.
// Each input then goes through what the commands do with such a file: `oml-train --resume`
// (pipelines::restore_checkpoint into a model, criterion, optimizer and scheduler, then the
// sampler's position as the first epoch uses it), `weights:` (io::load_weights) and
// `embeddings: x.pt` (io::load_tensor as oml-validate reads it).
#include <torch/torch.h>

#include <cmath>
#include <cstring>
#include <set>

#include "fuzz/fuzz.h"
#include "oml/config/document.h"
#include "oml/data/sampler.h"
#include "oml/ddp/epoch_position.h"
#include "oml/io/checkpoint.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/losses/criterion.h"
#include "oml/optim/optimizer.h"
#include "oml/optim/resume.h"
#include "oml/optim/scheduler.h"
#include "oml/registry/registries.h"
#include "oml/samplers/builtin_samplers.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"
#include "training/trainer.h"

namespace checkpoint_fuzz_tests {

using namespace oml;
namespace fs = std::filesystem;

namespace {

// The config of the run whose checkpoints are fuzzed: --resume checks that the checkpoint's
// optimizer and scheduler kinds are these.
const char* const kRunConfig = R"(dataset_root: data
sampler: {name: sequential, args: {batch_size: 2}}
criterion: {name: arcface, args: {m: 0.4, s: 16}}
optimizer: {name: adam, args: {lr: 0.01}}
scheduling: {scheduler: {name: cosine_annealing, args: {warmup_steps: 2}}, scheduler_interval: step}
max_epochs: 3
)";

// What a training run owns, as oml-train builds it.
struct TrainingObjects {
  explicit TrainingObjects(const config::RunConfig& config) {
    auto& r = registries();
    model->push_back(torch::nn::Linear(4, 3));
    model->push_back(torch::nn::BatchNorm1d(3));
    criterion = r.losses.create(*config.criterion, {3, 5});
    optim::OptimizerContext context;
    context.model_parameters = model->parameters();
    context.loss_parameters = criterion->parameters();
    optimizer = r.optimizers.create(*config.optimizer, context);
    scheduler = r.schedulers.create(*config.scheduling.scheduler, {optimizer.get(), 15});
    data::SamplerContext labels;
    labels.labels = {0, 0, 1, 1, 2, 2, 3, 3, 4, 4};
    sampler = samplers::build_sampler(config.sampler, labels);
  }
  pipelines::TrainingParts parts() {
    pipelines::TrainingParts p;
    p.model = model.ptr().get();
    p.model_name = "extractor";
    p.criterion = criterion.get();
    p.optimizer = optimizer.get();
    p.sampler = sampler;
    return p;
  }

  torch::nn::Sequential model;
  std::shared_ptr<losses::Criterion> criterion;
  std::shared_ptr<torch::optim::Optimizer> optimizer;
  std::shared_ptr<optim::Scheduler> scheduler;
  std::shared_ptr<const data::Sampler> sampler;
};

// ---- seeds ---------------------------------------------------------------------------------------

std::vector<std::string> write_seeds(const config::RunConfig& config, const fs::path& dir) {
  torch::manual_seed(0);
  TrainingObjects run(config);
  // One optimizer and scheduler step, so that their states hold moments and counters.
  for (auto& group : run.optimizer->param_groups()) {
    for (auto& p : group.params()) p.mutable_grad() = torch::ones_like(p);
  }
  run.optimizer->step();
  run.scheduler->step();

  io::Checkpoint checkpoint;
  checkpoint.state_dict = io::state_dict(*run.model);
  checkpoint.config = kRunConfig;
  checkpoint.epoch = 1;
  checkpoint.step = 3;
  checkpoint.metrics = {{"OVERALL/cmc/1", 0.5}, {"best/OVERALL/cmc/1", 0.75}};
  io::ResumeState resume;
  resume.optimizer = optim::save_optimizer_state(*run.optimizer);
  resume.scheduler = run.scheduler->state();
  resume.criterion = io::state_dict(*run.criterion);
  resume.sampler_epoch = 1;
  resume.sampler_batch = 2;
  resume.sampler_consumed = 8;  // 2 steps of 2 ranks with batches of 2: 8 of the 10 indices
  resume.sampler_world_size = 2;
  resume.rng = optim::save_rng_state();
  checkpoint.resume = resume;
  io::save_checkpoint(dir / "last.ckpt", checkpoint);

  checkpoint.resume.reset();  // what best.ckpt and `weights:` files look like
  io::save_checkpoint(dir / "best.ckpt", checkpoint);

  // A plain state dict, as torch.save(model.module.state_dict()) would name it.
  c10::Dict<std::string, at::Tensor> state;
  for (const auto& [name, tensor] : io::state_dict(*run.model)) state.insert("module." + name, tensor);
  io::write_torch_file(dir / "state_dict.pt", state);

  io::save_tensor(dir / "embeddings.pt", torch::randn({6, 3}));

  // Every kind of value the unpickler knows, nested.
  c10::impl::GenericDict mixed(c10::StringType::get(), c10::AnyType::get());
  c10::impl::GenericList list(c10::AnyType::get());
  for (const c10::IValue& v :
       {c10::IValue(int64_t{1}), c10::IValue(-70000), c10::IValue(int64_t{1} << 40), c10::IValue(2.5),
        c10::IValue(std::string("x")), c10::IValue(), c10::IValue(true)})
    list.push_back(v);
  mixed.insert("list", list);
  mixed.insert("tuple", c10::ivalue::Tuple::create({torch::arange(4, torch::kLong), c10::IValue(3)}));
  mixed.insert("half", torch::ones({2}, torch::kHalf));
  mixed.insert("view", torch::arange(12, torch::kFloat).view({3, 4}).t());
  io::write_torch_file(dir / "mixed.pt", mixed);

  std::vector<std::string> seeds;
  for (const char* name : {"last.ckpt", "best.ckpt", "state_dict.pt", "embeddings.pt", "mixed.pt"})
    seeds.push_back(fuzz::read_bytes(dir / name));
  return seeds;
}

// ---- mutations ---------------------------------------------------------------------------------

// Pickle opcodes (alone and with arguments), and the zip layer's signatures.
std::vector<std::string> pickle_and_zip_tokens() {
  std::vector<std::string> tokens;
  for (const char* op :
       {"(",    "}",    "]",    ")",    "N",    "\x88",     "\x89", "J",   "K", "M",    "\x8a",
        "\x8b", "G",    "X",    "\x8c", "\x8d", "B",        "C",    "q",   "r", "\x94", "h",
        "j",    "c",    "\x93", "t",    "\x85", "\x86",     "\x87", "s",   "u", "a",    "e",
        "Q",    "R",    "\x81", "b",    ".",    "\x80\x02", "\x95", "P",   "S", "V",    "I",
        "L",    "d",    "l",    "0",    "1",    "2",        "p",    "g",   "i", "o",    "\x82",
        "\x8e", "\x8f", "\x90", "\x91", "\x92", "\x96",     "\x97", "\x98"})
    tokens.emplace_back(op);
  const std::vector<std::string> sequences{std::string("X\xff\xff\xff\xff", 5),
                                           std::string("X\x00\x00\x00\x80", 5),
                                           std::string("\x8d\xff\xff\xff\xff\xff\xff\xff\xff", 9),
                                           std::string("\x8d\x00\x00\x00\x00\x00\x00\x00\x80", 9),
                                           std::string("\x8a\x09\x01\x02\x03\x04\x05\x06\x07\x08\x09", 11),
                                           std::string("\x8a\x00", 2),
                                           std::string("\x8b\xff\xff\xff\xff", 5),
                                           std::string("\x95\xff\xff\xff\xff\xff\xff\xff\xff", 9),
                                           std::string("q\xff", 2),
                                           std::string("r\xff\xff\xff\xff", 5),
                                           std::string("h\x00", 2),
                                           std::string("j\xff\xff\xff\xff", 5),
                                           std::string("J\xff\xff\xff\xff", 5),
                                           std::string("J\x00\x00\x00\x80", 5),
                                           "ctorch._utils\n_rebuild_tensor_v2\n",
                                           "ctorch._utils\n_rebuild_parameter\n",
                                           "ccollections\nOrderedDict\n",
                                           "ctorch\nFloatStorage\n",
                                           "ctorch\nComplexFloatStorage\n",
                                           "c_codecs\nencode\n",
                                           "c\n\n",
                                           "\x8c\x07storage",
                                           "\x8c\x01"
                                           "0",
                                           "\x8c\x03"
                                           "cpu",
                                           "(K\x00K\x00t",
                                           "(J\xff\xff\xff\x7fK\x01t",
                                           std::string("PK\x03\x04", 4),
                                           std::string("PK\x01\x02", 4),
                                           std::string("PK\x05\x06", 4),
                                           std::string("PK\x06\x06", 4),
                                           std::string("PK\x06\x07", 4),
                                           std::string("\xff\xff\xff\xff", 4),
                                           std::string("\x00\x00\x00\x00", 4),
                                           "archive/",
                                           "data.pkl",
                                           "data/0",
                                           "version"};
  tokens.insert(tokens.end(), sequences.begin(), sequences.end());
  return tokens;
}

// The records of a zip our writer wrote; nullopt when the reader does not take the bytes.
std::optional<test::ZipRecords> read_records(const std::string& bytes) {
  try {
    return test::read_zip_records(bytes);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// One opcode of a pickle as the writers emit it (protocol 2): its offset and length.
struct PickleOp {
  std::size_t at;
  std::size_t size;
  unsigned char code;
};

// The opcodes of `pickle` up to the first one this walker does not know.
std::vector<PickleOp> pickle_ops(const std::string& pickle) {
  std::vector<PickleOp> ops;
  const auto byte = [&](std::size_t i) {
    return i < pickle.size() ? static_cast<unsigned char>(pickle[i]) : 0u;
  };
  for (std::size_t i = 0; i < pickle.size();) {
    const unsigned char code = byte(i);
    std::size_t size = 1;
    switch (code) {
      case 0x80:
      case 'K':
      case 'q':
      case 'h':
        size = 2;
        break;
      case 'M':
        size = 3;
        break;
      case 'J':
      case 'r':
      case 'j':
        size = 5;
        break;
      case 'G':
      case 0x95:
        size = 9;
        break;
      case 'X':
      case 'B':
        size = 5 + (byte(i + 1) | byte(i + 2) << 8 | byte(i + 3) << 16 |
                    static_cast<std::size_t>(byte(i + 4)) << 24);
        break;
      case 0x8c:
      case 'C':
      case 0x8a:
        size = 2 + byte(i + 1);
        break;
      case 'c': {
        const std::size_t module_end = pickle.find('\n', i);
        const std::size_t name_end =
            module_end == std::string::npos ? module_end : pickle.find('\n', module_end + 1);
        if (name_end == std::string::npos) return ops;
        size = name_end + 1 - i;
        break;
      }
      case '(':
      case 't':
      case ')':
      case '}':
      case ']':
      case 'u':
      case 's':
      case 'e':
      case 'a':
      case 'R':
      case 'Q':
      case 0x85:
      case 0x86:
      case 0x87:
      case 0x88:
      case 0x89:
      case 'N':
      case '.':
      case 'b':
      case 0x81:
      case 0x94:
      case 0x93:
        break;
      default:
        return ops;
    }
    if (i + size > pickle.size()) return ops;
    ops.push_back({i, size, code});
    i += size;
  }
  return ops;
}

std::string pickle_string(const std::string& text) {
  std::string out = "X";
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  return out + text;
}

std::string pickle_int(int64_t value) {
  const auto little_endian = [](uint64_t v, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return out;
  };
  if (value >= 0 && value < 256) return "K" + little_endian(static_cast<uint64_t>(value), 1);
  if (value >= 0 && value < 65536) return "M" + little_endian(static_cast<uint64_t>(value), 2);
  if (value >= INT32_MIN && value <= INT32_MAX) return "J" + little_endian(static_cast<uint64_t>(value), 4);
  return std::string("\x8a\x08", 2) + little_endian(static_cast<uint64_t>(value), 8);
}

std::string pickle_float(double value) {
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  std::string out = "G";
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));  // big-endian
  return out;
}

// One value or opcode of the pickle replaced: strings by keys, YAML and type names the readers
// look for, numbers by edge values, anything by another kind of value. The damage then reaches
// the checks on types, keys, positions and the embedded config.
std::string mutate_pickle(fuzz::Mutator& m, std::string pickle) {
  static const std::vector<std::string> strings{
      "",
      "x",
      "5",
      "[1, 2]",
      "optimizer: 3",
      "optimizer: {name: sgd}\nscheduling: {scheduler: {name: step}}\n",
      "scheduling: 5",
      "- a",
      "{",
      "oml-cpp-checkpoint",
      "storage",
      "cpu",
      "cuda:0",
      "FloatStorage",
      "ComplexFloatStorage",
      "0",
      "1",
      "99",
      "kind",
      "step",
      "epoch",
      "batch",
      "format",
      "format_version",
      "state_dict",
      "resume",
      "sampler",
      "rng",
      "optimizer",
      "scheduler",
      "criterion",
      "metrics",
      "config",
      "reduce_on_plateau",
      "cosine_annealing",
      "lrs",
      "base_lrs",
      "best",
      "Dict[str, Tensor]",
      "List[float]",
      "0.weight",
      "module.0.weight",
      "OVERALL/cmc/1",
      "best/OVERALL/cmc/1"};
  static const std::vector<int64_t> ints{-1,
                                         0,
                                         1,
                                         2,
                                         3,
                                         5,
                                         255,
                                         256,
                                         65535,
                                         65536,
                                         INT32_MAX,
                                         INT32_MIN,
                                         int64_t{1} << 32,
                                         int64_t{1} << 62,
                                         INT64_MAX,
                                         INT64_MIN};
  static const std::vector<double> floats{std::nan(""), HUGE_VAL, -HUGE_VAL, -1.0, 0.0, 1e308, 0.5};
  static const std::vector<std::string> others{"N",    ")",    "}",     "]",
                                               "\x88", "\x89", "K\x01", pickle_string("")};
  const std::vector<PickleOp> ops = pickle_ops(pickle);
  if (ops.empty()) return m.mutate(pickle, {});
  std::vector<PickleOp> values;
  for (const auto& op : ops)
    if (std::strchr("XKMJG\x8a", static_cast<char>(op.code)) != nullptr) values.push_back(op);
  const PickleOp op =
      !values.empty() && m.chance(0.7) ? values[m.below(values.size())] : ops[m.below(ops.size())];
  std::string replacement;
  if (m.chance(0.2)) {
    replacement = m.pick(others);
  } else if (op.code == 'X') {
    replacement = pickle_string(m.pick(strings));
  } else if (op.code == 'G') {
    replacement = pickle_float(floats[m.below(floats.size())]);
  } else if (std::strchr("KMJ\x8a", static_cast<char>(op.code)) != nullptr) {
    replacement = pickle_int(ints[m.below(ints.size())]);
  } else {
    replacement = m.pick(others);
  }
  return pickle.replace(op.at, op.size, replacement);
}

std::string mutate_checkpoint(fuzz::Mutator& m, const std::string& input,
                              const std::vector<std::string>& corpus) {
  if (m.chance(0.4)) return m.mutate(input, corpus);  // raw
  std::optional<test::ZipRecords> records = read_records(input);
  if (!records || records->empty()) return m.mutate(input, corpus);
  std::size_t chosen = m.below(records->size());
  if (m.chance(0.6)) {  // mostly the pickle
    for (std::size_t i = 0; i < records->size(); ++i)
      if ((*records)[i].first == "data.pkl") chosen = i;
  }
  auto& [name, data] = (*records)[chosen];
  switch (m.below(8)) {
    case 0: {  // a record dropped
      records->erase(records->begin() + static_cast<std::ptrdiff_t>(m.below(records->size())));
      break;
    }
    case 1:  // a record renamed (to a name no other record has)
      name = m.chance(0.5) ? "data/9" + std::to_string(m.below(100)) : name + "x";
      break;
    case 2: {  // a record's data cut short or made longer
      const std::size_t k = 1 + m.below(16);
      if (m.chance(0.5))
        data.resize(data.size() > k ? data.size() - k : 0);
      else
        data.append(k, '\x01');
      break;
    }
    default:  // the record's bytes mutated; in the pickle, often one value or opcode
      data = name == "data.pkl" && m.chance(0.6) ? mutate_pickle(m, data) : m.mutate(data, {});
  }
  std::set<std::string> names;
  for (const auto& record : *records)
    if (!names.insert(record.first).second) return m.mutate(input, corpus);  // the writer refuses twins
  return test::write_zip_records(*records);
}

// ---- entry points ------------------------------------------------------------------------------

class CheckpointFuzz {
 public:
  CheckpointFuzz() {
    config_ = config::parse_run_config(config::Document::from_string(kRunConfig, "fuzz.yaml").root());
    seeds_ = write_seeds(config_, dir_.path());
  }
  const std::vector<std::string>& seeds() const { return seeds_; }

  // oml-train --resume: the checkpoint restored into fresh training objects, then the position
  // where the first epoch starts, as Trainer::fit takes it.
  void resume(const std::string& bytes) {
    const auto path = write_file(bytes);
    TrainingObjects run(config_);
    const auto rng = optim::save_rng_state();
    const pipelines::RestoredState restored =
        pipelines::restore_checkpoint(path.string(), config_, run.parts(), run.scheduler.get());
    optim::load_rng_state(rng);  // the fuzzer's own sequence must not depend on the checkpoints
    // As a 2-rank run continues it (any world size: the position is one of the epoch's global order).
    if (restored.position.epoch < config_.max_epochs) {
      ddp::DDPSamplerWrapper(run.sampler, pipelines::ddp_sampler_options(config_), 1, 2, config_.seed)
          .batches_from(
              {restored.position.epoch, restored.position.consumed, restored.position.epoch_world_size});
    }
  }

  // `weights:` of an extractor (build_extractor_with_weights).
  void weights(const std::string& bytes) {
    torch::nn::Sequential model(torch::nn::Linear(4, 3), torch::nn::BatchNorm1d(3));
    io::load_weights(*model, write_file(bytes));
  }

  // oml-validate's `embeddings: x.pt`, as pipelines/training/extractor_validation.cpp reads it.
  void embeddings(const std::string& bytes) {
    const at::Tensor embeddings = io::load_tensor(write_file(bytes));
    if (embeddings.dim() == 2) embeddings.to(torch::kFloat).contiguous();
  }

 private:
  fs::path write_file(const std::string& bytes) {
    const fs::path path = dir_ / "checkpoints" / "last.ckpt";
    fuzz::write_bytes(path, bytes);
    return path;
  }

  fuzz::ScratchDir dir_;
  config::RunConfig config_;
  std::vector<std::string> seeds_;
};

}  // namespace

TEST_CASE("Damaged checkpoints and torch.save files end in exit 0 or 2", "[fuzz][checkpoint]") {
  cli::register_builtins();
  CheckpointFuzz fuzz;
  fuzz::Target target;
  target.name = "checkpoint";
  target.extension = ".ckpt";
  target.seeds = fuzz.seeds();
  target.dictionary = pickle_and_zip_tokens();
  target.mutate = mutate_checkpoint;
  target.max_input_size = 256 * 1024;
  target.entry_points = {
      {"restore_checkpoint (--resume)", [&](const std::string& bytes) { fuzz.resume(bytes); }},
      {"load_weights (weights:)", [&](const std::string& bytes) { fuzz.weights(bytes); }},
      {"load_tensor (embeddings: x.pt)", [&](const std::string& bytes) { fuzz.embeddings(bytes); }}};
  fuzz::check(target, 4.0);
}

}  // namespace checkpoint_fuzz_tests
