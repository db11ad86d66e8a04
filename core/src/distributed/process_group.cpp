#include "oml/distributed/process_group.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <sstream>
#include <thread>

#ifdef __linux__
#include <sys/mman.h>
#endif

#include "c10d_adapter.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/distributed/detail/failure_record.h"
#include "store_keys.h"

namespace oml::distributed {

namespace {

using Clock = std::chrono::steady_clock;

// "3", "2.5": seconds as a user wrote them in ddp.timeout_s.
std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

// c10::Error messages carry a backtrace after the first line.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

bool looks_like_timeout(const std::string& cause) {
  return cause.find("imed out") != std::string::npos || cause.find("imeout") != std::string::npos;
}

// The header every rank sends before an all_gather: first dimension, dtype and trailing
// shape, so that mismatches are reported instead of corrupting memory.
constexpr int64_t kMaxDims = 8;
constexpr int64_t kHeaderLength = 3 + kMaxDims;

at::Tensor gather_header(const at::Tensor& t) {
  OML_CHECK(t.dim() >= 1 && t.dim() <= kMaxDims, DistributedError, "all_gather: tensors need 1 to ", kMaxDims,
            " dimensions, got ", t.dim());
  auto header = torch::zeros({kHeaderLength}, torch::kLong);
  auto h = header.accessor<int64_t, 1>();
  h[0] = t.size(0);
  h[1] = static_cast<int64_t>(t.scalar_type());
  h[2] = t.dim();
  for (int64_t d = 1; d < t.dim(); ++d) h[2 + d] = t.size(d);
  return header;
}

std::string describe_header(const at::Tensor& header) {
  auto h = header.accessor<int64_t, 1>();
  std::string text = std::string(c10::toString(static_cast<c10::ScalarType>(h[1]))) + "[*";
  for (int64_t d = 1; d < h[2]; ++d) text += "," + std::to_string(h[2 + d]);
  return text + "]";
}

}  // namespace

namespace {

// After a failure: how long any one store call may take.
std::chrono::milliseconds after_failure_bound(double timeout_s) {
  return std::min(std::chrono::milliseconds(detail::kAfterFailureBoundMs), to_ms(timeout_s));
}

// "node 1 (ranks 2, 3), rank 5": whole machines named as such where oml's launcher placed the
// ranks (machine n holds ranks n*L .. n*L+L-1, L = LOCAL_WORLD_SIZE).
std::string describe_ranks(const World& world, const std::vector<int>& ranks) {
  const int per_node = world.local_world_size;
  const bool by_node =
      world.launcher_hosts_store && per_node < world.world_size && world.world_size % per_node == 0;
  std::string text;
  std::size_t i = 0;
  while (i < ranks.size()) {
    std::string part;
    const int node = ranks[i] / per_node;
    std::size_t j = i;
    while (j < ranks.size() && ranks[j] / per_node == node) ++j;
    if (by_node && static_cast<int>(j - i) == per_node) {
      part = "node " + std::to_string(node) + " (rank" + (per_node > 1 ? "s " : " ");
      for (std::size_t k = i; k < j; ++k) part += (k > i ? ", " : "") + std::to_string(ranks[k]);
      part += ")";
      i = j;
    } else {
      part = "rank " + std::to_string(ranks[i]);
      ++i;
    }
    text += (text.empty() ? "" : ", ") + part;
  }
  return text;
}

// ": node 1 (ranks 2, 3) never arrived (...)" after a failed rendezvous, from the arrival notes.
std::string missing_ranks(detail::C10dStore& store, const World& world, double timeout_s) {
  std::vector<int> missing;
  try {
    store.set_call_bound(after_failure_bound(timeout_s));
    for (int r = 0; r < world.world_size; ++r) {
      if (!store.try_get(detail::kArrivedKeyPrefix + std::to_string(r))) missing.push_back(r);
    }
  } catch (const std::exception&) {
    return " (the rendezvous store stopped answering; did every rank start, with the same WORLD_SIZE?)";
  }
  if (missing.empty()) return " (did every rank start, with the same WORLD_SIZE?)";
  // A launcher that refused to start its ranks left the reason.
  std::optional<detail::FailureRecord> why;
  try {
    if (const auto record = store.try_get(kFailureKey)) why = detail::FailureRecord::decode(*record);
  } catch (const std::exception&) {
  }
  if (why) return ": " + describe_ranks(world, missing) + " never arrived: " + why->describe();
  return ": " + describe_ranks(world, missing) +
         " never arrived (not started, or cannot reach the store; did every rank start, with the same "
         "WORLD_SIZE?)";
}

// Each machine's launcher heartbeat counter, when every machine has one (only oml's launcher
// beats; torchrun's agent does not).
std::optional<std::vector<int64_t>> heartbeats(detail::C10dStore* store, const World& world) {
  const int per_node = world.local_world_size;
  if (!store || !world.launcher_hosts_store || per_node >= world.world_size ||
      world.world_size % per_node != 0) {
    return std::nullopt;
  }
  std::vector<int64_t> beats;
  try {
    for (int node = 0; node < world.world_size / per_node; ++node) {
      const auto value = store->try_get(detail::kHeartbeatKeyPrefix + std::to_string(node));
      if (!value) return std::nullopt;
      beats.push_back(std::stoll(*value));
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return beats;
}

// Leaves the note that this rank timed out waiting (kTimeoutKeyPrefix); best effort.
void record_timeout(detail::C10dStore* store, int rank, const std::string& timed_out) {
  try {
    if (store) {
      store->set_if_absent(kTimeoutKeyPrefix + std::to_string(rank),
                           detail::FailureRecord{rank, timed_out}.encode());
    }
  } catch (const std::exception&) {
    // Best effort: without it the launcher names this rank instead of the stuck one.
  }
}

}  // namespace

// The receive buffer of an all_gather: `whole` holds every rank's rows back to back in rank
// order (exactly, no padding); `parts[r]` are views of rank r's rows.
struct ProcessGroup::Gathered {
  at::Tensor whole;
  std::vector<at::Tensor> parts;
};

namespace {

// An uninitialised CPU tensor for a gather result. Large ones are mapped with transparent huge
// pages where the kernel offers them (madvise mode): filling 400 MB of fresh 4 KB pages costs
// ~100,000 page faults, several times the transfer itself on loopback (docs/benchmarks.md).
at::Tensor empty_receive_buffer(const std::vector<int64_t>& shape, const at::TensorOptions& options) {
#ifdef __linux__
  constexpr std::size_t kHugePage = std::size_t{1} << 21;
  constexpr std::size_t kMinBytes = std::size_t{16} << 20;
  int64_t numel = 1;
  for (const int64_t d : shape) numel *= d;
  const std::size_t bytes = static_cast<std::size_t>(numel) * options.dtype().itemsize();
  if (options.device().is_cpu() && bytes >= kMinBytes) {
    const std::size_t size = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    void* memory = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory != MAP_FAILED) {
      madvise(memory, size, MADV_HUGEPAGE);  // advice only: fine if THP is off
      return torch::from_blob(
          memory, shape, [size](void* p) { munmap(p, size); }, options);
    }
  }
#endif
  return torch::empty(shape, options);
}

}  // namespace

// ---- PendingCollective ------------------------------------------------------------------
PendingCollective::PendingCollective() = default;
PendingCollective::PendingCollective(PendingCollective&&) noexcept = default;
PendingCollective& PendingCollective::operator=(PendingCollective&&) noexcept = default;
PendingCollective::~PendingCollective() = default;

PendingCollective::PendingCollective(const ProcessGroup* group, std::string what,
                                     std::unique_ptr<detail::C10dWork> work)
    : group_(group), what_(std::move(what)), work_(std::move(work)) {}

void PendingCollective::wait() {
  if (!work_) return;
  auto work = std::move(work_);
  try {
    work->wait();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    group_->fail(what_, e.what());
  }
}

// ---- ProcessGroup -----------------------------------------------------------------------
std::vector<std::string> available_backends() {
  std::vector<std::string> out;
  for (const char* name : {"gloo", "nccl"}) {
    if (detail::backend_available(name)) out.emplace_back(name);
  }
  return out;
}

ProcessGroup::ProcessGroup(World world, GroupOptions options)
    : world_(std::move(world)), options_(std::move(options)) {}

std::shared_ptr<ProcessGroup> ProcessGroup::single() {
  return std::shared_ptr<ProcessGroup>(new ProcessGroup(World{}, GroupOptions{}));
}

std::shared_ptr<ProcessGroup> ProcessGroup::connect(const World& world, const GroupOptions& options) {
  OML_CHECK(options.timeout_s > 0, ConfigError, "ddp.timeout_s must be > 0, got ", options.timeout_s);
  if (!world.is_distributed()) return single();
  OML_CHECK(detail::backend_available(options.backend), DistributedError, "backend '", options.backend,
            "' is not available in this LibTorch build (gloo is; nccl needs a CUDA build of LibTorch)");
  std::shared_ptr<ProcessGroup> group(new ProcessGroup(world, options));
  const auto timeout = to_ms(options.timeout_s);
  const std::string where = world.master_addr + ":" + std::to_string(world.master_port);
  try {
    if (world.rank == 0 && !world.launcher_hosts_store) {
      group->store_ = detail::C10dStore::host(world.master_port, timeout);
    } else {
      group->store_ = detail::C10dStore::connect(world.master_addr, world.master_port, timeout);
    }
  } catch (const std::exception& e) {
    throw DistributedError("rank " + std::to_string(world.rank) + ": cannot reach the rendezvous store at " +
                           where + " within " + seconds_text(options.timeout_s) +
                           " s: " + first_line(e.what()));
  }
  try {
    // Arrival notes: when the rendezvous fails they tell which ranks never came.
    group->store_->set(detail::kArrivedKeyPrefix + std::to_string(world.rank), "1");
    group->group_ = std::make_unique<detail::C10dGroup>(*group->store_, world.rank, world.world_size,
                                                        options.backend, world.master_addr, timeout);
  } catch (const std::exception& e) {
    throw DistributedError("rank " + std::to_string(world.rank) + ": rendezvous of " +
                           std::to_string(world.world_size) + " ranks through " + where + " failed: " +
                           first_line(e.what()) + missing_ranks(*group->store_, world, options.timeout_s));
  }
  log::debug("connected: " + describe(world));
  return group;
}

ProcessGroup::~ProcessGroup() {
  // Destroyed while an exception propagates: this rank is failing on its own (a peer's
  // failure sets peer_failed_), so leave a record for the others to name it.
  if (std::uncaught_exceptions() > 0 && !peer_failed_) record_failure("stopped with an error");
}

void ProcessGroup::record_failure(const std::string& message) noexcept {
  if (!store_) return;
  try {
    store_->set_call_bound(after_failure_bound(options_.timeout_s));
    store_->set_if_absent(kFailureKey, detail::FailureRecord{world_.rank, message}.encode());
  } catch (...) {
    // Best effort: the store may already be gone.
  }
}

void ProcessGroup::fail(const std::string& what, const std::string& cause) const {
  peer_failed_ = true;
  const std::string me = "rank " + std::to_string(world_.rank);
  // Every store call from here on is bounded: over a cut link an unbounded one never returns.
  if (store_) store_->set_call_bound(after_failure_bound(options_.timeout_s));
  const auto beats_before = heartbeats(store_.get(), world_);
  // The launcher (or the failing rank) writes its record right after the failure; the
  // connection drop usually reaches us first, so wait for the record a little while.
  std::optional<std::string> record;
  bool store_reachable = true;
  if (store_) {
    const auto deadline = Clock::now() + after_failure_bound(options_.timeout_s);
    try {
      while (!(record = store_->try_get(kFailureKey)) && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    } catch (const std::exception&) {
      store_reachable = false;
    }
  }
  // Machines whose launcher stopped beating while we waited: cut off, or gone.
  std::vector<int> silent_ranks;
  if (!record && store_reachable && beats_before) {
    if (const auto beats_after = heartbeats(store_.get(), world_);
        beats_after && beats_after->size() == beats_before->size()) {
      for (std::size_t node = 0; node < beats_after->size(); ++node) {
        if ((*beats_after)[node] != (*beats_before)[node]) continue;
        for (int local = 0; local < world_.local_world_size; ++local) {
          silent_ranks.push_back(static_cast<int>(node) * world_.local_world_size + local);
        }
      }
    }
  }
  const std::string timed_out = what + " timed out after " + seconds_text(options_.timeout_s) + " s";
  const std::string failed = looks_like_timeout(cause) ? timed_out + " (ddp.timeout_s)" : what + " failed";
  std::string message;
  if (record) {
    const auto failure = detail::FailureRecord::decode(*record);
    message = me + ": " + what + " failed because " +
              (failure ? failure->describe() : "another rank failed (its failure record is unreadable)");
  } else if (!store_reachable && !world_.launcher_hosts_store) {
    message = me + ": " + what + " failed and the rendezvous store hosted by rank 0 is gone: rank 0 failed";
  } else if (!store_reachable) {
    message =
        me + ": " + failed + " and the rendezvous store at " + world_.master_addr + ":" +
        std::to_string(world_.master_port) +
        " (hosted by node 0's launcher) does not answer: node 0 is down or unreachable from this machine";
  } else if (!silent_ranks.empty()) {
    record_timeout(store_.get(), world_.rank, timed_out);
    message = me + ": " + failed + ": " + describe_ranks(world_, silent_ranks) +
              " stopped answering: the launcher there no longer reaches the rendezvous store (network cut or "
              "machine down)";
  } else if (looks_like_timeout(cause)) {
    record_timeout(store_.get(), world_.rank, timed_out);
    message = me + ": " + timed_out +
              " (ddp.timeout_s); no rank reported a failure, so a rank is stuck or much slower";
  } else {
    message = me + ": " + what + " failed: another rank stopped without leaving a failure record";
  }
  DistributedError error(message);
  error.add_context("(c10d: " + first_line(cause) + ")");
  throw error;
}

void ProcessGroup::wait(detail::C10dWork& work, const std::string& what) {
  try {
    work.wait();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
}

void ProcessGroup::barrier() {
  if (!group_) return;
  run_collective("barrier", [&] { return group_->barrier(); });
}

void ProcessGroup::run_collective(const std::string& what, const std::function<detail::C10dWork()>& launch) {
  detail::C10dWork work;
  try {
    work = launch();
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
  wait(work, what);
}

void ProcessGroup::broadcast(at::Tensor& tensor, int root) {
  if (!group_) return;
  OML_CHECK(root >= 0 && root < size(), DistributedError, "broadcast: root rank ", root, " outside [0, ",
            size(), ")");
  std::vector<at::Tensor> tensors{tensor};
  run_collective("broadcast", [&] { return group_->broadcast(tensors, root); });
}

void ProcessGroup::all_reduce(at::Tensor& tensor, ReduceOp op) {
  if (!group_) return;
  std::vector<at::Tensor> tensors{tensor};
  const auto kind = op == ReduceOp::sum   ? detail::ReduceKind::sum
                    : op == ReduceOp::max ? detail::ReduceKind::max
                                          : detail::ReduceKind::min;
  run_collective("all_reduce", [&] { return group_->all_reduce(tensors, kind); });
}

PendingCollective ProcessGroup::all_reduce_async(at::Tensor& tensor) {
  if (!group_) return PendingCollective();
  std::vector<at::Tensor> tensors{tensor};
  auto work = std::make_unique<detail::C10dWork>();
  try {
    *work = group_->all_reduce(tensors, detail::ReduceKind::sum);
  } catch (const std::exception& e) {
    fail("all_reduce", e.what());
  }
  return PendingCollective(this, "all_reduce", std::move(work));
}

PendingCollective ProcessGroup::all_to_all_async(at::Tensor& output, at::Tensor& input) {
  OML_CHECK(
      output.sizes() == input.sizes() && output.scalar_type() == input.scalar_type() &&
          output.is_contiguous() && input.is_contiguous() && input.dim() >= 1 && input.size(0) % size() == 0,
      InternalError, "all_to_all: output and input must agree, be contiguous and dim 0 divide by ", size());
  if (!group_) {
    output.copy_(input);
    return PendingCollective();
  }
  auto work = std::make_unique<detail::C10dWork>();
  try {
    *work = group_->all_to_all(output, input);
  } catch (const std::exception& e) {
    fail("all_to_all", e.what());
  }
  return PendingCollective(this, "all_to_all", std::move(work));
}

PendingCollective ProcessGroup::all_gather_into_async(at::Tensor& output, at::Tensor& input) {
  OML_CHECK(input.dim() >= 1 && output.dim() == input.dim() && output.size(0) == input.size(0) * size() &&
                output.scalar_type() == input.scalar_type() && output.is_contiguous() &&
                input.is_contiguous(),
            InternalError, "all_gather_into: output must hold ", size(), " blocks shaped like the input");
  if (!group_) {
    output.copy_(input);
    return PendingCollective();
  }
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < size(); ++r) outputs[0].push_back(output.narrow(0, r * input.size(0), input.size(0)));
  std::vector<at::Tensor> inputs{input};
  auto work = std::make_unique<detail::C10dWork>();
  try {
    *work = group_->all_gather(outputs, inputs);
  } catch (const std::exception& e) {
    fail("all_gather", e.what());
  }
  return PendingCollective(this, "all_gather", std::move(work));
}

std::vector<at::Tensor> ProcessGroup::all_gather(const at::Tensor& tensor) {
  if (!group_) return {tensor};
  return gather_rows(tensor).parts;
}

at::Tensor ProcessGroup::all_gather_concat(const at::Tensor& tensor) {
  if (!group_) return tensor;
  return gather_rows(tensor).whole;
}

ProcessGroup::Gathered ProcessGroup::gather_rows(const at::Tensor& tensor) {
  const int n = size();
  // 1. Exchange shapes and dtypes.
  std::vector<at::Tensor> headers(n);
  {
    std::vector<std::vector<at::Tensor>> out(1);
    for (auto& h : headers) h = torch::empty({kHeaderLength}, torch::kLong);
    out[0] = headers;
    std::vector<at::Tensor> in{gather_header(tensor)};
    run_collective("all_gather", [&] { return group_->all_gather(out, in); });
  }
  std::vector<int64_t> rows(n), first_row(n + 1, 0);
  for (int r = 0; r < n; ++r) {
    const at::Tensor& h = headers[r];
    if (!torch::equal(h.narrow(0, 1, kHeaderLength - 1), headers[0].narrow(0, 1, kHeaderLength - 1))) {
      throw DistributedError("all_gather: rank " + std::to_string(r) + " sent " + describe_header(h) +
                             " but rank 0 sent " + describe_header(headers[0]) +
                             " (dtype and all but the first dimension must agree)");
    }
    rows[r] = h[0].item<int64_t>();
    first_row[r + 1] = first_row[r] + rows[r];
  }
  // 2. One broadcast per rank, each straight into that rank's rows of the result, all in
  //    flight at once (Gloo runs them on its worker threads, so both directions of a link
  //    carry data at the same time). Unlike Gloo's all_gather this needs no padding to the
  //    largest rank, no staging buffer and no copy out of it.
  Gathered result;
  std::vector<int64_t> shape = tensor.sizes().vec();
  shape[0] = first_row[n];
  result.whole = empty_receive_buffer(shape, tensor.options());
  for (int r = 0; r < n; ++r) result.parts.push_back(result.whole.narrow(0, first_row[r], rows[r]));
  const at::Tensor input = tensor.contiguous();
  std::vector<PendingCollective> pending;
  for (int r = 0; r < n; ++r) {
    if (result.parts[r].numel() == 0) continue;  // the same decision on every rank
    // The root sends from its input (Gloo only reads it), so that copying the input into the
    // result overlaps the transfers.
    std::vector<at::Tensor> tensors{r == rank() ? input : result.parts[r]};
    auto work = std::make_unique<detail::C10dWork>();
    try {
      *work = group_->broadcast(tensors, r);
    } catch (const std::exception& e) {
      fail("all_gather", e.what());
    }
    pending.push_back(PendingCollective(this, "all_gather", std::move(work)));
  }
  if (input.numel() > 0) result.parts[rank()].copy_(input);
  for (auto& p : pending) p.wait();
  return result;
}

std::vector<std::string> ProcessGroup::all_gather_bytes(const std::string& bytes) {
  if (!group_) return {bytes};
  at::Tensor local = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  if (!bytes.empty()) std::memcpy(local.data_ptr(), bytes.data(), bytes.size());
  const auto parts = all_gather(local);
  std::vector<std::string> result;
  result.reserve(parts.size());
  for (const auto& part : parts) {
    if (part.numel() == 0) {
      result.emplace_back();
      continue;
    }
    const at::Tensor bytes_r = part.contiguous();
    const auto* data = static_cast<const char*>(bytes_r.data_ptr());
    result.emplace_back(data, data + bytes_r.numel());
  }
  return result;
}

}  // namespace oml::distributed
