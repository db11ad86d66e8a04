#pragma once
// The one place that touches LibTorch's c10d API (TCPStore, ProcessGroupGloo/NCCL, Work); the
// NCCL group itself is constructed in the CUDA module (cuda_module.h), which links libtorch_cuda.
//
// c10d changed between LibTorch 1.13 and 2.x (ProcessGroup vs Backend, Work moved out of
// ProcessGroup, new TCPStore options); everything else in oml::distributed talks to these small
// wrappers, so a port to another LibTorch touches c10d_adapter.cpp only. The wrappers forward
// c10d's exceptions unchanged; ProcessGroup turns them into DistributedError.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace at {
class Tensor;
}  // namespace at

namespace oml::distributed::detail {

enum class ReduceKind { sum, max, min };

/// A launched collective; wait() blocks until it finished and rethrows its failure.
class C10dWork {
 public:
  struct Impl;
  explicit C10dWork(std::shared_ptr<Impl> impl);
  C10dWork();
  void wait();
  bool valid() const { return impl_ != nullptr; }

 private:
  std::shared_ptr<Impl> impl_;
};

/// A key-value store shared by all ranks (c10d::TCPStore).
///
/// Every call returns or throws within the call bound (default: the `timeout` given at
/// creation; set_call_bound changes it). A TCPStore client waits for the server's answer
/// without a deadline of its own, and over a dead link (a cut cable, a machine that vanished)
/// TCP retransmits for ~15 minutes before the socket fails: so each call runs on a helper
/// thread, and when the bound passes the call is abandoned there (the thread keeps the
/// connection alive until the kernel gives up) and the store counts as lost (as it does when a
/// call fails: c10d does not reconnect): from then on
/// every call throws at once — the connection is still busy with the abandoned request and
/// c10d serialises requests on it. A lost store never comes back within a run.
class C10dStore {
 public:
  struct Impl;
  /// Starts the store server on `port` (0: any free port) and connects to it.
  static std::shared_ptr<C10dStore> host(int port, std::chrono::milliseconds timeout);
  /// Connects to a store at host:port, retrying until `timeout`.
  static std::shared_ptr<C10dStore> connect(const std::string& host, int port,
                                            std::chrono::milliseconds timeout);
  ~C10dStore();

  int port() const;
  void set(const std::string& key, const std::string& value);
  /// The value when the key exists (without waiting), nullopt otherwise.
  std::optional<std::string> try_get(const std::string& key);
  /// Sets `key` only when it does not exist yet; true when this call set it.
  bool set_if_absent(const std::string& key, const std::string& value);
  /// Adds `delta` to the integer at `key` (0 when missing) and returns the new value.
  int64_t add(const std::string& key, int64_t delta);

  /// The longest any later call may take before it gives up (see the class comment).
  void set_call_bound(std::chrono::milliseconds bound);
  /// True once a call went unanswered within its bound or failed (the connection broke).
  bool lost() const;

  Impl& impl() { return *impl_; }

 private:
  explicit C10dStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// A process group of one backend ("gloo", or "nccl" when LibTorch was built with it).
class C10dGroup {
 public:
  struct Impl;
  /// Rendezvous through `store`; `peer_host` selects the network interface for Gloo
  /// (loopback when the store is on 127.0.0.1/localhost).
  C10dGroup(C10dStore& store, int rank, int size, const std::string& backend, const std::string& peer_host,
            std::chrono::milliseconds timeout);
  ~C10dGroup();

  C10dWork broadcast(std::vector<at::Tensor>& tensors, int root);
  C10dWork all_reduce(std::vector<at::Tensor>& tensors, ReduceKind op);
  /// outputs[0][r] receives rank r's inputs[0]; all ranks' inputs must have the same shape.
  C10dWork all_gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs);
  /// Block s of `output` (dim 0 split into size equal blocks) receives rank s's block `rank` of
  /// `input`; equal shapes on every rank.
  C10dWork all_to_all(at::Tensor& output, at::Tensor& input);
  C10dWork barrier();

 private:
  std::unique_ptr<Impl> impl_;
};

/// True when this LibTorch has the named backend compiled in.
bool backend_available(const std::string& backend);

}  // namespace oml::distributed::detail
