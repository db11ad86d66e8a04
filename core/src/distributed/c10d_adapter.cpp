#include "c10d_adapter.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <future>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "distributed/cuda_module.h"
#include "oml/common/error.h"
#include "torch_compat.h"

namespace oml::distributed::detail {

// ---- work -------------------------------------------------------------------------------
struct C10dWork::Impl {
  // Deduced in wrap() below: ProcessGroup::Work (1.13) or c10d::Work (2.x).
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

std::string seconds(std::chrono::milliseconds duration) {
  std::ostringstream text;
  text << static_cast<double>(duration.count()) / 1000.0;
  return text.str();
}
}  // namespace

// ---- store ------------------------------------------------------------------------------
struct C10dStore::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  std::string where;  // "192.0.2.1:29500", for messages
  std::atomic<int64_t> bound_ms{0};
  std::atomic<bool> lost{false};

  // Runs `call` on a helper thread and waits for it at most the call bound (see the header).
  template <class T>
  T bounded(const char* what, std::function<T(c10d::TCPStore&)> call) {
    if (lost) {
      throw std::runtime_error(std::string("store ") + what + ": the rendezvous store at " + where +
                               " did not answer an earlier request");
    }
    auto result = std::make_shared<std::promise<T>>();
    std::future<T> answer = result->get_future();
    // The thread owns what it uses: an abandoned call may outlive this object.
    std::thread([store = store, result, call = std::move(call)]() mutable {
      try {
        result->set_value(call(*store));
      } catch (...) {
        result->set_exception(std::current_exception());
      }
    }).detach();
    const auto bound = std::chrono::milliseconds(bound_ms.load());
    if (answer.wait_for(bound) != std::future_status::ready) {
      lost = true;
      throw std::runtime_error(std::string("store ") + what + ": no answer from the rendezvous store at " +
                               where + " within " + seconds(bound) + " s");
    }
    try {
      return answer.get();
    } catch (...) {
      lost = true;  // the connection failed (reset, closed): c10d does not reconnect
      throw;
    }
  }
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
  impl->where = "port " + std::to_string(impl->store->getPort());
  impl->bound_ms = timeout.count();
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
  impl->where = host + ":" + std::to_string(port);
  impl->bound_ms = timeout.count();
  return std::shared_ptr<C10dStore>(new C10dStore(std::move(impl)));
}

int C10dStore::port() const { return impl_->store->getPort(); }

void C10dStore::set_call_bound(std::chrono::milliseconds bound) { impl_->bound_ms = bound.count(); }

bool C10dStore::lost() const { return impl_->lost; }

void C10dStore::set(const std::string& key, const std::string& value) {
  impl_->bounded<bool>("set", [key, value = bytes(value)](c10d::TCPStore& store) {
    store.set(key, value);
    return true;
  });
}

std::optional<std::string> C10dStore::try_get(const std::string& key) {
  return impl_->bounded<std::optional<std::string>>(
      "get", [key](c10d::TCPStore& store) -> std::optional<std::string> {
        if (!store.check({key})) return std::nullopt;
        const auto value = store.get(key);
        return std::string(value.begin(), value.end());
      });
}

bool C10dStore::set_if_absent(const std::string& key, const std::string& value) {
  // compareSet with an empty expected value creates the key only when it is missing and
  // returns the value the key holds afterwards.
  return impl_->bounded<bool>("compare_set", [key, value](c10d::TCPStore& store) {
    const auto after = store.compareSet(key, {}, bytes(value));
    return std::string(after.begin(), after.end()) == value && !value.empty();
  });
}

int64_t C10dStore::add(const std::string& key, int64_t delta) {
  return impl_->bounded<int64_t>("add",
                                 [key, delta](c10d::TCPStore& store) { return store.add(key, delta); });
}

// ---- group ------------------------------------------------------------------------------
struct C10dGroup::Impl {
  c10::intrusive_ptr<torch_compat::C10dBackend> group;
  bool gloo = false;

  // LibTorch 2.x records every Gloo collective in a process-wide flight recorder
  // (FlightRecorder<c10::Event>, on unless TORCH_FR_BUFFER_SIZE=0) whose first record for a
  // group inserts into a std::map outside the recorder's own lock: two Gloo groups in one
  // process launching at once (ranks as threads, as the tests run them) corrupt that map and
  // crash. So Gloo launches take one process-wide lock. Only the enqueue is serialised (the
  // collective runs on Gloo's own threads and is waited for after the lock is released), and
  // NCCL launches are left alone: NCCL's first collective may block in communicator setup until
  // the other ranks arrive, which under a shared lock would deadlock ranks-as-threads.
  template <class Launch>
  auto launch(Launch&& launch_on_group) {
    if (!gloo) return launch_on_group(*group);
    static std::mutex gloo_launches;
    const std::lock_guard<std::mutex> held(gloo_launches);
    return launch_on_group(*group);
  }
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
    impl_->gloo = true;
    return;
  }
  if (backend == "nccl" && cuda_module::built()) {
    // In the CUDA module, with the rest of LibTorch's CUDA half (cuda_module.h).
    cuda_module::nccl_group_factory()(base, rank, size, timeout.count(), impl_->group);
    return;
  }
  throw DistributedError("backend '" + backend + "' is not available in this LibTorch build");
}

C10dGroup::~C10dGroup() = default;

C10dWork C10dGroup::broadcast(std::vector<at::Tensor>& tensors, int root) {
  c10d::BroadcastOptions options;
  options.rootRank = root;
  return wrap(impl_->launch([&](auto& group) { return group.broadcast(tensors, options); }));
}

C10dWork C10dGroup::all_reduce(std::vector<at::Tensor>& tensors, ReduceKind op) {
  c10d::AllreduceOptions options;
  options.reduceOp = op == ReduceKind::sum   ? c10d::ReduceOp::SUM
                     : op == ReduceKind::max ? c10d::ReduceOp::MAX
                                             : c10d::ReduceOp::MIN;
  return wrap(impl_->launch([&](auto& group) { return group.allreduce(tensors, options); }));
}

C10dWork C10dGroup::all_gather(std::vector<std::vector<at::Tensor>>& outputs,
                               std::vector<at::Tensor>& inputs) {
  return wrap(impl_->launch([&](auto& group) { return group.allgather(outputs, inputs); }));
}

C10dWork C10dGroup::all_to_all(at::Tensor& output, at::Tensor& input) {
  std::vector<int64_t> equal_splits;  // empty: dim 0 split evenly
  return wrap(impl_->launch(
      [&](auto& group) { return group.alltoall_base(output, input, equal_splits, equal_splits); }));
}

C10dWork C10dGroup::barrier() {
  return wrap(impl_->launch([](auto& group) { return group.barrier(); }));
}

bool backend_available(const std::string& backend) {
  if (backend == "gloo") return true;
  return backend == "nccl" && cuda_module::built();
}

}  // namespace oml::distributed::detail
