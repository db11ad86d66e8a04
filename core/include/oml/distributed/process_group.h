#pragma once
// Collectives between the ranks of a World: barrier, broadcast, all-reduce, all-gather of
// tensors whose first dimension differs per rank, and all-gather of byte strings.
//
//   auto group = ProcessGroup::connect(world, {/*timeout_s=*/30});
//   group->all_reduce(loss_sum);                         // in place, sum over ranks
//   std::vector<at::Tensor> parts = group->all_gather(embeddings);  // rank order
//
// Contract:
//  - Every rank must call the same collectives in the same order with compatible tensors
//    (same dtype; same shape except the first dimension for all_gather).
//  - World size 1 needs no connection: collectives return their input (all_gather returns a
//    one-element list) without touching the network.
//  - Every call finishes within `timeout_s` or throws DistributedError. When another rank
//    fails (throws, exits, is killed), the pending call throws DistributedError naming the
//    failed rank where it is known — from the failure record its launcher or the rank itself
//    left in the store — usually within a fraction of a second of the connection dropping.
//  - Tensors must live on the group's device (CPU for Gloo).

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "oml/distributed/world.h"

namespace at {
class Tensor;
}  // namespace at

namespace oml::distributed {

namespace detail {
class C10dStore;
class C10dGroup;
class C10dWork;
}  // namespace detail

/// `ddp:` options that concern the connection.
struct GroupOptions {
  double timeout_s = 300.0;      ///< rendezvous and per-collective timeout
  std::string backend = "gloo";  ///< gloo (CPU) | nccl (CUDA builds of LibTorch)
};

enum class ReduceOp { sum, max, min };

/// The process-group backends this LibTorch has compiled in: "gloo", and "nccl" in a CUDA build
/// (whether a GPU is present is a run-time question: torch::cuda::is_available()).
std::vector<std::string> available_backends();

class ProcessGroup;

/// An all-reduce in flight (gradient buckets); wait() finishes it or throws DistributedError.
class PendingCollective {
 public:
  PendingCollective();
  PendingCollective(PendingCollective&&) noexcept;
  PendingCollective& operator=(PendingCollective&&) noexcept;
  ~PendingCollective();
  void wait();

 private:
  friend class ProcessGroup;
  PendingCollective(const ProcessGroup* group, std::string what, std::unique_ptr<detail::C10dWork> work);
  const ProcessGroup* group_ = nullptr;
  std::string what_;
  std::unique_ptr<detail::C10dWork> work_;
};

class ProcessGroup {
 public:
  /// Rendezvous with the other ranks of `world` through the TCPStore at MASTER_ADDR:MASTER_PORT
  /// (hosted by rank 0, or by the launcher when world.launcher_hosts_store). Throws
  /// DistributedError when the store or a rank is not reachable within `timeout_s`.
  static std::shared_ptr<ProcessGroup> connect(const World& world, const GroupOptions& options = {});
  /// A group of one process, for world size 1.
  static std::shared_ptr<ProcessGroup> single();

  /// After a failed collective (fail()), leaves the backend undestroyed: its connections are
  /// broken, and the process is ending with that error (process_group.cpp says why).
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return world_.rank; }
  int size() const { return world_.world_size; }
  const World& world() const { return world_; }
  double timeout_s() const { return options_.timeout_s; }

  void barrier();
  /// Copies `root`'s tensor into every rank's `tensor` (in place; same shape and dtype).
  void broadcast(at::Tensor& tensor, int root = 0);
  /// Reduces `tensor` across ranks in place.
  void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::sum);
  /// Starts an in-place sum all-reduce; keep `tensor` alive and untouched until wait().
  PendingCollective all_reduce_async(at::Tensor& tensor);
  /// Every rank's `tensor` in rank order; first dimensions may differ (sizes are exchanged
  /// first), other dimensions and the dtype must agree (DistributedError naming the ranks).
  std::vector<at::Tensor> all_gather(const at::Tensor& tensor);
  /// Every rank's `tensor` concatenated along dim 0 in rank order, received straight into
  /// the result (one broadcast per rank, all in flight; no padding, no extra copy).
  at::Tensor all_gather_concat(const at::Tensor& tensor);
  /// Starts an equal-sized exchange, the first half of a reduce-scatter: `input` and `output`
  /// (contiguous) have the same shape and dtype on every rank, dim 0 divisible by size(); block
  /// s of `output` (dim 0 in size() equal blocks) receives rank s's block rank() of `input`.
  /// Keep both untouched until wait().
  PendingCollective all_to_all_async(at::Tensor& output, at::Tensor& input);
  /// Starts an equal-sized all-gather: block r of `output` (contiguous, dim 0 = size() x
  /// input's dim 0) receives rank r's `input`; same shape and dtype on every rank. Keep both
  /// untouched until wait().
  PendingCollective all_gather_into_async(at::Tensor& output, at::Tensor& input);
  /// Every rank's bytes in rank order; lengths may differ.
  std::vector<std::string> all_gather_bytes(const std::string& bytes);

  /// Leaves a note in the store that this rank failed, so that the others name it. Called
  /// automatically when the group is destroyed during stack unwinding; never throws.
  void record_failure(const std::string& message) noexcept;

  /// Turns a failure of collective `what` (c10d's message in `cause`) into a DistributedError
  /// that names the failed rank when the store knows it. Used by PendingCollective.
  [[noreturn]] void fail(const std::string& what, const std::string& cause) const;

 private:
  ProcessGroup(World world, GroupOptions options);
  void wait(detail::C10dWork& work, const std::string& what);
  /// Starts collective `what` with `launch`; a failure to start is reported like a failed wait.
  PendingCollective start(const std::string& what, const std::function<detail::C10dWork()>& launch);
  /// start(), then wait.
  void run_collective(const std::string& what, const std::function<detail::C10dWork()>& launch);
  struct Gathered;
  Gathered gather_rows(const at::Tensor& tensor);

  World world_;
  GroupOptions options_;
  std::shared_ptr<detail::C10dStore> store_;
  std::unique_ptr<detail::C10dGroup> group_;
  mutable bool peer_failed_ = false;
};

/// Store key holding the first failure record (detail::FailureRecord in
/// oml/distributed/detail/failure_record.h).
inline constexpr const char* kFailureKey = "oml/failure";

/// Store key a rank sets (kTimeoutKeyPrefix + its rank, value: a detail::FailureRecord naming
/// the collective) when a collective timed out and nobody had reported a failure: it waited for
/// others and is not the cause. The launcher names the local ranks that set no such key and still
/// run when it stops them: the stuck ones.
inline constexpr const char* kTimeoutKeyPrefix = "oml/timed_out/";

}  // namespace oml::distributed
