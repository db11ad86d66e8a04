#include "oml/distributed/gradient_sync.h"

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/distributed/process_group.h"

namespace oml::distributed {

namespace {

std::string describe(const std::string& name, const at::Tensor& t) {
  std::string shape;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d) shape += ',';  // appended apart: GCC 12 warns falsely on "literal" + std::string
    shape += std::to_string(t.size(d));
  }
  return name + " " + c10::toString(t.scalar_type()) + "[" + shape + "]";
}

// Every rank must pass the same list: compare the descriptions and name the first difference.
void check_same_tensors(ProcessGroup& group, const NamedTensors& tensors, const std::string& what) {
  if (group.size() == 1) return;
  std::string mine;
  for (const auto& [name, t] : tensors) mine += describe(name, t) + "\n";
  const auto all = group.all_gather_bytes(mine);
  const auto reference = split(all[0], '\n');
  for (int r = 1; r < group.size(); ++r) {
    if (all[r] == all[0]) continue;
    const auto lines = split(all[r], '\n');
    std::size_t i = 0;
    while (i < lines.size() && i < reference.size() && lines[i] == reference[i]) ++i;
    const std::string theirs = i < lines.size() && !lines[i].empty() ? lines[i] : "(nothing)";
    const std::string ours = i < reference.size() && !reference[i].empty() ? reference[i] : "(nothing)";
    throw DistributedError(what + ": ranks registered different tensors: entry " + std::to_string(i) +
                           " is '" + ours + "' on rank 0 but '" + theirs + "' on rank " + std::to_string(r));
  }
}

uint64_t fnv1a(const at::Tensor& tensor) {
  const at::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
  const auto* bytes = static_cast<const unsigned char*>(t.data_ptr());
  uint64_t hash = 1469598103934665603ull;
  for (int64_t i = 0, n = t.numel() * t.element_size(); i < n; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

c10::ScalarType wire_type(GradientCompression compression) {
  return compression == GradientCompression::bf16 ? torch::kBFloat16 : torch::kHalf;
}

}  // namespace

void all_reduce_mean(ProcessGroup& group, at::Tensor& tensor, GradientCompression compression) {
  OML_CHECK(tensor.is_contiguous(), InternalError, "all_reduce_mean: the tensor must be contiguous");
  torch::NoGradGuard no_grad;
  const int world = group.size();
  if (world == 1) return;
  if (compression == GradientCompression::none || tensor.scalar_type() != torch::kFloat) {
    group.all_reduce(tensor);
    tensor.div_(world);
    return;
  }
  // The tensor goes in pieces, each reduced on its own (the result is the same elementwise),
  // so that the link never waits for the CPU: while one piece is cast or summed, the
  // exchanges of others are in flight, and Gloo's threads keep several messages on the wire.
  // (One all-to-all of a whole 25 MB bucket moved at about half the link's rate over a
  // rate-limited link: bench/slow_link.sh.)
  struct Piece {
    int64_t start = 0, numel = 0, block = 0;
    at::Tensor send, received, sent_bytes, received_bytes, mine, mine_bytes;
    PendingCollective exchange, gather;
  };
  const int64_t numel = tensor.numel();
  at::Tensor flat = tensor.view({-1});
  std::vector<Piece> pieces;
  for (int64_t start = 0; start < numel; start += kCompressedPieceElements) {
    Piece p;
    p.start = start;
    p.numel = std::min(kCompressedPieceElements, numel - start);
    p.block = (p.numel + world - 1) / world;  // padded so that W blocks cover the piece
    // Dividing before the cast, as PyTorch's hooks do, keeps fp16 further from its overflow.
    p.send = torch::zeros({p.block * world}, tensor.options().dtype(wire_type(compression)));
    p.send.narrow(0, 0, p.numel).copy_(flat.narrow(0, start, p.numel) / world);
    p.received = torch::empty_like(p.send);
    // Gloo's all-to-all and all-gather move bytes of any type: 16-bit values travel as bytes.
    p.sent_bytes = p.send.view(torch::kUInt8);
    p.received_bytes = p.received.view(torch::kUInt8);
    p.exchange = group.all_to_all_async(p.received_bytes, p.sent_bytes);
    pieces.push_back(std::move(p));
  }
  // Every rank starts the all-gathers in the same order, each once its piece's exchange is done.
  for (Piece& p : pieces) {
    p.exchange.wait();
    // Block r of `received` is rank r's share of this rank's block: summed in float32 in rank
    // order, so every rank's block is summed the same way, then rounded once.
    at::Tensor sum = p.received.narrow(0, 0, p.block).to(torch::kFloat);
    for (int r = 1; r < world; ++r) sum.add_(p.received.narrow(0, r * p.block, p.block));
    p.mine = sum.to(p.send.scalar_type());
    p.mine_bytes = p.mine.view(torch::kUInt8);
    p.gather = group.all_gather_into_async(p.sent_bytes, p.mine_bytes);  // `send` is free again
  }
  for (Piece& p : pieces) {
    p.gather.wait();
    flat.narrow(0, p.start, p.numel).copy_(p.send.narrow(0, 0, p.numel));
  }
}

NamedTensors named_trainable_parameters(const torch::nn::Module& module, const std::string& prefix) {
  NamedTensors result;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (item.value().requires_grad()) result.emplace_back(prefix + item.key(), item.value());
  }
  return result;
}

NamedTensors named_state(const torch::nn::Module& module, const std::string& prefix) {
  NamedTensors result;
  for (const auto& item : module.named_parameters(true))
    result.emplace_back(prefix + item.key(), item.value());
  for (const auto& item : module.named_buffers(true)) result.emplace_back(prefix + item.key(), item.value());
  return result;
}

void broadcast_from_rank0(ProcessGroup& group, const NamedTensors& tensors) {
  if (group.size() == 1 || tensors.empty()) return;
  check_same_tensors(group, tensors, "broadcast_from_rank0");
  torch::NoGradGuard no_grad;
  // One flat broadcast per (dtype, device) keeps the number of collectives small.
  std::map<std::pair<int, std::string>, std::vector<at::Tensor>> groups;
  for (const auto& [name, t] : tensors) {
    groups[{static_cast<int>(t.scalar_type()), t.device().str()}].push_back(t);
  }
  for (auto& [key, list] : groups) {
    std::vector<at::Tensor> flat_parts;
    for (const auto& t : list) flat_parts.push_back(t.detach().reshape(-1));
    at::Tensor flat = torch::cat(flat_parts);
    group.broadcast(flat, 0);
    int64_t offset = 0;
    for (auto& t : list) {
      t.detach().copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

void check_identical_across_ranks(ProcessGroup& group, const NamedTensors& tensors) {
  if (group.size() == 1) return;
  at::Tensor hashes = torch::empty({static_cast<int64_t>(tensors.size())}, torch::kLong);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    hashes[i] = static_cast<int64_t>(fnv1a(tensors[i].second));
  }
  const auto all = group.all_gather(hashes);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    std::vector<std::string> differing;
    for (int r = 1; r < group.size(); ++r) {
      if (all[r][i].item<int64_t>() != all[0][i].item<int64_t>()) differing.push_back(std::to_string(r));
    }
    if (!differing.empty()) {
      throw DistributedError("parameter check (ddp.check_params_every): '" + tensors[i].first +
                             "' differs between rank 0 and rank(s) " + join(differing) +
                             " — the ranks' models have diverged");
    }
  }
}

// ---- GradientSync -------------------------------------------------------------------------
struct GradientSync::State {
  struct Slot {
    std::string name;
    at::Tensor param;
    int64_t bucket = 0;
    int64_t offset = 0;
    int64_t hook = -1;
  };
  struct Bucket {
    at::Tensor flat;
    std::vector<int64_t> members;  // slot ids
    int64_t missing = 0;           // members without a gradient yet in this step
    bool launched = false;
    PendingCollective pending;
  };

  std::shared_ptr<ProcessGroup> group;
  GradientSyncOptions options;
  double wait_seconds = 0;
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  std::vector<char> has_grad;  // per slot, this step
  std::size_t next_launch = 0;
  int64_t steps = 0;
  std::string late_gradient;  // a gradient that arrived after its bucket was sent
  // Gradient accumulation: while `local`, hooks leave gradients to autograd (no bucket); the
  // local sums are then moved into `stash` (per slot, undefined for none) and sent with the
  // next backward's gradients.
  std::atomic<bool> local{false};
  std::vector<at::Tensor> stash;
  std::mutex mutex;

  void reset_step() {
    std::fill(has_grad.begin(), has_grad.end(), 0);
    for (auto& b : buckets) {
      b.missing = static_cast<int64_t>(b.members.size());
      b.launched = false;
    }
    next_launch = 0;
  }

  // With compression, buckets are reduced on this thread, one after another in launch order
  // (a bucket's all-to-all and all-gather depend on each other, and Gloo pairs collectives by
  // the order in which each rank starts them, so only one thread may start them).
  struct Communicator {
    std::thread thread;
    std::mutex mutex;
    std::condition_variable wake, idle;
    std::deque<std::size_t> queue;
    std::size_t done = 0;  // buckets reduced this step
    std::exception_ptr error;
    bool stop = false;
  };
  std::unique_ptr<Communicator> comm;

  void communicate() {
    Communicator& c = *comm;
    for (;;) {
      std::size_t index = 0;
      bool skip = false;
      {
        std::unique_lock<std::mutex> lock(c.mutex);
        c.wake.wait(lock, [&] { return c.stop || !c.queue.empty(); });
        if (c.queue.empty()) return;
        index = c.queue.front();
        c.queue.pop_front();
        skip = c.error != nullptr;  // a failed collective: the rest is not sent, finish() throws
      }
      std::exception_ptr error;
      if (!skip) {
        try {
          all_reduce_mean(*group, buckets[index].flat, options.compression);
        } catch (...) {
          error = std::current_exception();
        }
      }
      {
        std::lock_guard<std::mutex> lock(c.mutex);
        if (error && !c.error) c.error = error;
        ++c.done;
      }
      c.idle.notify_all();
    }
  }

  // Buckets go out strictly in index order so every rank pairs the same buckets.
  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].missing == 0) {
      const std::size_t index = next_launch++;
      Bucket& b = buckets[index];
      b.launched = true;
      if (comm) {
        {
          std::lock_guard<std::mutex> lock(comm->mutex);
          comm->queue.push_back(index);
        }
        comm->wake.notify_one();
      } else {
        b.pending = group->all_reduce_async(b.flat);
      }
    }
  }

  // Waits for every launched bucket; rethrows the first failure. Afterwards every bucket holds
  // the mean over ranks.
  void wait_buckets() {
    if (!comm) {
      for (auto& b : buckets) b.pending.wait();
      const double world = group->size();
      for (auto& b : buckets) b.flat.div_(world);
      return;
    }
    std::unique_lock<std::mutex> lock(comm->mutex);
    comm->idle.wait(lock, [&] { return comm->done == buckets.size(); });
    comm->done = 0;
    if (comm->error) {
      const std::exception_ptr error = comm->error;
      comm->error = nullptr;
      std::rethrow_exception(error);
    }
  }

  at::Tensor slice(const Slot& s) { return buckets[s.bucket].flat.narrow(0, s.offset, s.param.numel()); }

  void on_gradient(int64_t id, const at::Tensor& grad) {
    std::lock_guard<std::mutex> lock(mutex);
    Slot& s = slots[id];
    Bucket& b = buckets[s.bucket];
    if (b.launched) {
      late_gradient = s.name;
      return;
    }
    at::Tensor target = slice(s).view(s.param.sizes());
    if (has_grad[id]) {
      target.add_(grad);  // a second gradient for the same tensor in one backward
      return;
    }
    target.copy_(grad);
    if (stash[id].defined()) target.add_(stash[id]);
    has_grad[id] = 1;
    if (--b.missing == 0) launch_ready();
  }
};

GradientSync::GradientSync(std::shared_ptr<ProcessGroup> group, NamedTensors parameters,
                           GradientSyncOptions options)
    : state_(std::make_shared<State>()) {
  OML_CHECK(options.bucket_mb > 0, UsageError, "GradientSyncOptions::bucket_mb must be > 0, got ",
            options.bucket_mb);
  OML_CHECK(options.check_params_every >= 0, UsageError,
            "GradientSyncOptions::check_params_every must be >= 0, got ", options.check_params_every);
  State& st = *state_;
  st.group = std::move(group);
  st.options = options;
  for (auto& [name, param] : parameters) {
    OML_CHECK(param.defined() && param.requires_grad(), InternalError, "GradientSync: '", name,
              "' is not a trainable tensor");
    st.slots.push_back({name, param, 0, 0, -1});
  }
  if (st.group->size() == 1) return;
  check_same_tensors(*st.group, parameters, "GradientSync");

  // Reverse registration order approximates the order in which backward produces gradients.
  const auto capacity = static_cast<int64_t>(options.bucket_mb * 1024.0 * 1024.0);
  std::vector<std::vector<int64_t>> members;
  int64_t bytes = 0;
  for (int64_t id = static_cast<int64_t>(st.slots.size()) - 1; id >= 0; --id) {
    const at::Tensor& p = st.slots[id].param;
    const int64_t size = p.numel() * p.element_size();
    const bool same_kind = !members.empty() &&
                           st.slots[members.back().front()].param.scalar_type() == p.scalar_type() &&
                           st.slots[members.back().front()].param.device() == p.device();
    if (members.empty() || !same_kind || bytes + size > capacity) {
      members.emplace_back();
      bytes = 0;
    }
    members.back().push_back(id);
    bytes += size;
  }
  for (auto& list : members) {
    State::Bucket b;
    int64_t numel = 0;
    for (int64_t id : list) {
      st.slots[id].bucket = static_cast<int64_t>(st.buckets.size());
      st.slots[id].offset = numel;
      numel += st.slots[id].param.numel();
    }
    b.flat = torch::zeros({numel}, st.slots[list.front()].param.options().requires_grad(false));
    b.members = std::move(list);
    st.buckets.push_back(std::move(b));
  }
  st.has_grad.assign(st.slots.size(), 0);
  st.stash.resize(st.slots.size());
  st.reset_step();
  if (options.compression != GradientCompression::none) {
    st.comm = std::make_unique<State::Communicator>();
    // The thread holds only a raw pointer: the State outlives it (the destructor joins it).
    State* state = state_.get();
    st.comm->thread = std::thread([state] { state->communicate(); });
  }

  std::weak_ptr<State> weak = state_;
  for (int64_t id = 0; id < static_cast<int64_t>(st.slots.size()); ++id) {
    at::Tensor& p = st.slots[id].param;
    st.slots[id].hook = p.register_hook([weak, id](const at::Tensor& grad) -> at::Tensor {
      const auto state = weak.lock();
      if (!state || state->local) return grad;
      state->on_gradient(id, grad);
      // The averaged gradient is added in finish(); AccumulateGrad must not add the local one.
      return torch::zeros({}, grad.options()).expand(grad.sizes());
    });
  }
  log::debug("GradientSync: " + std::to_string(st.slots.size()) + " tensors in " +
             std::to_string(st.buckets.size()) + " buckets");
}

GradientSync::~GradientSync() {
  for (auto& s : state_->slots) {
    if (s.hook >= 0) s.param.remove_hook(static_cast<unsigned>(s.hook));
  }
  if (auto& comm = state_->comm) {
    {
      std::lock_guard<std::mutex> lock(comm->mutex);
      comm->stop = true;
    }
    comm->wake.notify_one();
    // A collective in flight ends within the group's timeout, or at once when a peer is gone.
    comm->thread.join();
  }
}

void GradientSync::finish() {
  State& st = *state_;
  if (st.group->size() == 1) return;
  std::lock_guard<std::mutex> lock(st.mutex);
  OML_CHECK(st.late_gradient.empty(), InternalError, "GradientSync: the gradient of '", st.late_gradient,
            "' arrived after its bucket was sent — call finish() after every backward()");
  // Parameters without a gradient on this rank contribute zeros, so every rank sends every
  // bucket in the same order.
  for (std::size_t b = st.next_launch; b < st.buckets.size(); ++b) {
    for (int64_t id : st.buckets[b].members) {
      if (st.has_grad[id]) continue;
      // Only an accumulated gradient (none in this backward) is sent as it is.
      if (st.stash[id].defined()) {
        st.slice(st.slots[id]).view(st.slots[id].param.sizes()).copy_(st.stash[id]);
        st.has_grad[id] = 1;
      } else {
        st.slice(st.slots[id]).zero_();
      }
    }
    st.buckets[b].missing = 0;
  }
  st.launch_ready();
  torch::NoGradGuard no_grad;
  const auto wait_start = std::chrono::steady_clock::now();
  st.wait_buckets();
  st.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
  // Which parameters got a gradient anywhere: those untouched on every rank keep `.grad`. (After
  // the buckets: with compression their collectives come from another thread, and every rank
  // must start collectives in the same order.)
  at::Tensor used = torch::empty({static_cast<int64_t>(st.slots.size())}, torch::kFloat);
  for (std::size_t i = 0; i < st.slots.size(); ++i) used[i] = static_cast<float>(st.has_grad[i]);
  st.group->all_reduce(used);

  const auto* used_any = used.data_ptr<float>();
  for (std::size_t i = 0; i < st.slots.size(); ++i) {
    if (used_any[i] == 0.0f) continue;
    State::Slot& s = st.slots[i];
    at::Tensor mean = st.slice(s).view(s.param.sizes());
    at::Tensor& grad = s.param.mutable_grad();
    if (grad.defined()) {
      grad.add_(mean);
    } else {
      // In the parameter's layout, as autograd makes gradients (a channels_last weight's is
      // channels_last): fused optimizer kernels want a parameter and its gradient alike.
      grad = at::empty_like(s.param).copy_(mean);
    }
  }
  st.reset_step();
  for (auto& t : st.stash) t = at::Tensor();
  ++st.steps;
  if (st.options.check_params_every > 0 && st.steps % st.options.check_params_every == 0) {
    NamedTensors params;
    for (const auto& s : st.slots) params.emplace_back(s.name, s.param);
    check_identical_across_ranks(*st.group, params);
  }
}

void GradientSync::accumulate_locally(bool local) {
  State& st = *state_;
  if (st.group->size() == 1) return;  // no hooks: backward always accumulates locally
  std::lock_guard<std::mutex> lock(st.mutex);
  const bool was_local = st.local.exchange(local);
  if (local || !was_local) return;
  // The local sums leave `.grad` for the stash; finish() writes the mean of the sums back.
  for (std::size_t i = 0; i < st.slots.size(); ++i) {
    at::Tensor& grad = st.slots[i].param.mutable_grad();
    if (!grad.defined()) continue;
    st.stash[i] = grad.detach();
    grad = at::Tensor();
  }
}

void GradientSync::broadcast_from_rank0(const NamedTensors& extra) {
  NamedTensors all;
  for (const auto& s : state_->slots) all.emplace_back(s.name, s.param);
  all.insert(all.end(), extra.begin(), extra.end());
  distributed::broadcast_from_rank0(*state_->group, all);
}

int64_t GradientSync::bucket_count() const { return static_cast<int64_t>(state_->buckets.size()); }
int64_t GradientSync::steps() const { return state_->steps; }

std::vector<int64_t> GradientSync::bucket_numels() const {
  std::vector<int64_t> numels;
  for (const auto& b : state_->buckets) numels.push_back(b.flat.numel());
  return numels;
}

double GradientSync::wait_seconds() const { return state_->wait_seconds; }

}  // namespace oml::distributed
