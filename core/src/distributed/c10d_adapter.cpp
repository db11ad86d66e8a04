#include "c10d_adapter.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <cstdlib>
#include <functional>

#include "oml/common/error.h"

namespace oml::distributed::detail {

// ---- work -------------------------------------------------------------------------------
struct C10dWork::Impl {
  // `auto`-deduced in the factories below: ProcessGroup::Work (1.13) or c10d::Work (2.x).
  std::function<void()> wait;
};

C10dWork::C10dWork() = default;
C10dWork::C10dWork(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

void C10dWork::wait() {
  if (impl_) impl_->wait();
}

namespace {
template <class WorkPtr>
C10dWork wrap(WorkPtr work) {
  auto impl = std::make_shared<C10dWork::Impl>();
  impl->wait = [work]() mutable { work->wait(); };
  return C10dWork(std::move(impl));
}

std::vector<uint8_t> bytes(const std::string& text) { return {text.begin(), text.end()}; }
}  // namespace

// ---- store ------------------------------------------------------------------------------
struct C10dStore::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

C10dStore::C10dStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
C10dStore::~C10dStore() = default;

std::shared_ptr<C10dStore> C10dStore::host(int port, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = timeout;
  auto impl = std::make_unique<Impl>();
  impl->store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  return std::shared_ptr<C10dStore>(new C10dStore(std::move(impl)));
}

std::shared_ptr<C10dStore> C10dStore::connect(const std::string& host, int port,
                                              std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = timeout;
  auto impl = std::make_unique<Impl>();
  impl->store = c10::make_intrusive<c10d::TCPStore>(host, options);
  return std::shared_ptr<C10dStore>(new C10dStore(std::move(impl)));
}

int C10dStore::port() const { return impl_->store->getPort(); }

void C10dStore::set(const std::string& key, const std::string& value) {
  impl_->store->set(key, bytes(value));
}

std::optional<std::string> C10dStore::try_get(const std::string& key) {
  if (!impl_->store->check({key})) return std::nullopt;
  const auto value = impl_->store->get(key);
  return std::string(value.begin(), value.end());
}

bool C10dStore::set_if_absent(const std::string& key, const std::string& value) {
  // compareSet with an empty expected value creates the key only when it is missing and
  // returns the value the key holds afterwards.
  const auto after = impl_->store->compareSet(key, {}, bytes(value));
  return std::string(after.begin(), after.end()) == value && !value.empty();
}

// ---- group ------------------------------------------------------------------------------
struct C10dGroup::Impl {
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

namespace {
bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& peer_host) {
  if (is_loopback(peer_host)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}
}  // namespace

C10dGroup::C10dGroup(C10dStore& store, int rank, int size, const std::string& backend,
                     const std::string& peer_host, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  c10::intrusive_ptr<c10d::Store> base = store.impl().store;
  if (backend == "gloo") {
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(gloo_device(peer_host));
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(base, rank, size, options);
    return;
  }
#ifdef USE_C10D_NCCL
  if (backend == "nccl") {
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    impl_->group = c10::make_intrusive<c10d::ProcessGroupNCCL>(base, rank, size, options);
    return;
  }
#endif
  throw DistributedError("backend '" + backend + "' is not available in this LibTorch build");
}

C10dGroup::~C10dGroup() = default;

C10dWork C10dGroup::broadcast(std::vector<at::Tensor>& tensors, int root) {
  c10d::BroadcastOptions options;
  options.rootRank = root;
  return wrap(impl_->group->broadcast(tensors, options));
}

C10dWork C10dGroup::all_reduce(std::vector<at::Tensor>& tensors, ReduceKind op) {
  c10d::AllreduceOptions options;
  options.reduceOp = op == ReduceKind::sum   ? c10d::ReduceOp::SUM
                     : op == ReduceKind::max ? c10d::ReduceOp::MAX
                                             : c10d::ReduceOp::MIN;
  return wrap(impl_->group->allreduce(tensors, options));
}

C10dWork C10dGroup::all_gather(std::vector<std::vector<at::Tensor>>& outputs,
                               std::vector<at::Tensor>& inputs) {
  return wrap(impl_->group->allgather(outputs, inputs));
}

C10dWork C10dGroup::barrier() { return wrap(impl_->group->barrier()); }

bool backend_available(const std::string& backend) {
  if (backend == "gloo") return true;
#ifdef USE_C10D_NCCL
  if (backend == "nccl") return true;
#endif
  return false;
}

}  // namespace oml::distributed::detail
