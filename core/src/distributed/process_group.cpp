#include "oml/distributed/process_group.h"

#include <torch/torch.h>

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <thread>

#include "c10d_adapter.h"
#include "failure_diagnosis.h"
#include "oml/common/error.h"
#include "oml/common/logging.h"
#include "oml/common/strings.h"
#include "oml/distributed/detail/failure_record.h"
#include "receive_buffer.h"
#include "store_keys.h"

namespace oml::distributed {

namespace {

using detail::seconds_text;
using detail::to_ms;

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

// The receive buffer of an all_gather: `whole` holds every rank's rows back to back in rank
// order (exactly, no padding); `parts[r]` are views of rank r's rows.
struct ProcessGroup::Gathered {
  at::Tensor whole;
  std::vector<at::Tensor> parts;
};

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

namespace {

// "host:pid", naming a process in messages.
std::string this_process() {
  char host[256] = {0};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "?");
  return std::string(host) + ":" + std::to_string(::getpid());
}

// The store half of the rendezvous, before the backend's: each rank claims its rank (a second
// process started with the same RANK or --node-rank is refused at once, not left to fail later
// in a way that blames another machine), compares its world size with the first rank's, and
// waits until every rank of the world has done so — or until a rank's failure is recorded, or
// timeout_s passes. Gloo's own rendezvous, entered only then, never waits on a rank that is gone
// (it retried for about five times its timeout).
void arrive(detail::C10dStore& store, const World& world, double timeout_s) {
  const std::string where = world.master_addr + ":" + std::to_string(world.master_port);
  const std::string me = "rank " + std::to_string(world.rank);
  const std::string process = this_process();
  // Arrival notes: when the rendezvous fails they tell which ranks never came.
  if (!store.set_if_absent(detail::kArrivedKeyPrefix + std::to_string(world.rank), process)) {
    const auto holder = store.try_get(detail::kArrivedKeyPrefix + std::to_string(world.rank));
    throw UsageError(me + " (" + process + ") is already taken by " + holder.value_or("another process") +
                     " in the rendezvous at " + where +
                     ": two processes were started with the same rank (RANK, or the launcher's --node-rank)");
  }
  const std::string size = std::to_string(world.world_size);
  if (!store.set_if_absent(detail::kWorldSizeKey, size)) {
    const std::string first = store.try_get(detail::kWorldSizeKey).value_or("?");
    if (first != size) {
      const std::string why = "was started for a world size of " + size +
                              " (WORLD_SIZE, or --nnodes x --nproc-per-node) but the ranks before it for " +
                              first + "; every rank must be started for the same world size";
      store.set_if_absent(kFailureKey,
                          detail::FailureRecord{world.rank, why}.encode());  // the others stop too
      throw ConfigError(me + " " + why);
    }
  }
  store.add(detail::kArrivalsKey, 1);
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + to_ms(timeout_s);
  auto pause = std::chrono::milliseconds(10);
  while (store.add(detail::kArrivalsKey, 0) < world.world_size) {
    if (const auto record = store.try_get(kFailureKey)) {
      // Named as a timed-out rendezvous names it: the ranks that never came, then why.
      const std::string missing = detail::missing_ranks(store, world, timeout_s);
      const auto why = detail::FailureRecord::decode(*record);
      throw DistributedError(me + ": rendezvous of " + size + " ranks through " + where + " failed" +
                             (missing.rfind(": ", 0) == 0
                                  ? missing
                                  : ": " + (why ? why->describe() : std::string("a rank failed"))));
    }
    if (Clock::now() >= deadline) {
      throw DistributedError(me + ": rendezvous of " + size + " ranks through " + where +
                             " failed: not every " + "rank arrived within " + seconds_text(timeout_s) +
                             " s (ddp.timeout_s)" + detail::missing_ranks(store, world, timeout_s));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(200));
  }
}

}  // namespace

std::shared_ptr<ProcessGroup> ProcessGroup::connect(const World& world, const GroupOptions& options) {
  OML_CHECK(options.timeout_s > 0, UsageError, "GroupOptions::timeout_s must be > 0, got ",
            options.timeout_s);
  if (!world.is_distributed()) return single();
  OML_CHECK(detail::backend_available(options.backend), DistributedError, "backend '", options.backend,
            "' is not available in this LibTorch build (gloo is; nccl needs a CUDA build of LibTorch)");
  std::shared_ptr<ProcessGroup> group(new ProcessGroup(world, options));
  const auto timeout = to_ms(options.timeout_s);
  const std::string where = world.master_addr + ":" + std::to_string(world.master_port);
  std::shared_ptr<detail::C10dStore> store;
  try {
    if (world.rank == 0 && !world.launcher_hosts_store) {
      store = detail::C10dStore::host(world.master_port, timeout);
    } else {
      store = detail::C10dStore::connect(world.master_addr, world.master_port, timeout);
    }
  } catch (const std::exception& e) {
    throw DistributedError("rank " + std::to_string(world.rank) + ": cannot reach the rendezvous store at " +
                           where + " within " + seconds_text(options.timeout_s) +
                           " s: " + oml::first_line(e.what()));
  }
  // Before the group holds the store: a process refused here (a rank taken twice) leaves no
  // failure record that would stop the ranks of the run it does not belong to.
  arrive(*store, world, options.timeout_s);
  group->store_ = std::move(store);
  try {
    group->group_ = std::make_unique<detail::C10dGroup>(*group->store_, world.rank, world.world_size,
                                                        options.backend, world.master_addr, timeout);
  } catch (const std::exception& e) {
    throw DistributedError("rank " + std::to_string(world.rank) + ": rendezvous of " +
                           std::to_string(world.world_size) + " ranks through " + where +
                           " failed: " + oml::first_line(e.what()) +
                           missing_ranks(*group->store_, world, options.timeout_s));
  }
  log::debug("connected: " + describe(world));
  return group;
}

ProcessGroup::~ProcessGroup() {
  // Destroyed while an exception propagates: this rank is failing on its own (a peer's
  // failure sets peer_failed_), so leave a record for the others to name it.
  if (std::uncaught_exceptions() > 0 && !peer_failed_) record_failure("stopped with an error");
  // After a failed collective the backend's connections are broken mid-operation. Tearing it
  // down runs the library's error paths (Gloo's pairs enforce their states and abort the process
  // on a violation; NCCL's destroy can wait on the dead peer), and runs before the error reaches
  // the command's edge to be printed. The process is ending with that error: leave the backend
  // to it, so that the diagnosis is printed and the exit is prompt.
  if (peer_failed_) static_cast<void>(group_.release());
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

PendingCollective ProcessGroup::start(const std::string& what,
                                      const std::function<detail::C10dWork()>& launch) {
  auto work = std::make_unique<detail::C10dWork>();
  try {
    *work = launch();
  } catch (const std::exception& e) {
    fail(what, e.what());  // a failure to start is reported like a failed wait
  }
  return PendingCollective(this, what, std::move(work));
}

void ProcessGroup::run_collective(const std::string& what, const std::function<detail::C10dWork()>& launch) {
  start(what, launch).wait();
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
  return start("all_reduce", [&] { return group_->all_reduce(tensors, detail::ReduceKind::sum); });
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
  return start("all_to_all", [&] { return group_->all_to_all(output, input); });
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
  return start("all_gather", [&] { return group_->all_gather(outputs, inputs); });
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
  result.whole = detail::empty_receive_buffer(shape, tensor.options());
  for (int r = 0; r < n; ++r) result.parts.push_back(result.whole.narrow(0, first_row[r], rows[r]));
  const at::Tensor input = tensor.contiguous();
  std::vector<PendingCollective> pending;
  for (int r = 0; r < n; ++r) {
    if (result.parts[r].numel() == 0) continue;  // the same decision on every rank
    // The root sends from its input (Gloo only reads it), so that copying the input into the
    // result overlaps the transfers.
    std::vector<at::Tensor> tensors{r == rank() ? input : result.parts[r]};
    pending.push_back(start("all_gather", [&] { return group_->broadcast(tensors, r); }));
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
