#include "oml/distributed/cuda_graph.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>

#include "distributed/cuda_module.h"
#include "oml/common/error.h"

namespace oml::distributed {
namespace {

// `device` with its index (cuda means cuda:0), checked to be one a graph can be made on.
c10::Device graph_device(c10::Device device) {
  OML_ASSERT(cuda_graph_unavailable(device).empty(), "a CUDA graph on ", device.str(), ": ",
             cuda_graph_unavailable(device));
  return device.has_index() ? device : c10::Device(device.type(), 0);
}

c10::Stream graph_stream(c10::Device device) {
  cuda_module::load();  // loaded by placement_for already; a no-op then
  // c10's device-generic interface, registered by libtorch_cuda: no CUDA header here.
  const c10::impl::VirtualGuardImpl guard(device.type());
  return guard.getStreamFromGlobalPool(device, /*isHighPriority=*/false);
}

// `work` on `stream`, after what `caller` has queued so far and before what it queues next.
void on_stream(const c10::Stream& stream, const c10::Stream& caller, const std::function<void()>& work) {
  c10::Event queued(caller.device_type());
  queued.record(caller);
  queued.block(stream);
  // The caller's stream waits for `work` whether it finished or threw half-way.
  struct Join {
    const c10::Stream& stream;
    const c10::Stream& caller;
    ~Join() {
      try {
        c10::Event done(stream.device_type());
        done.record(stream);
        done.block(caller);
      } catch (...) {
        // Only a broken CUDA context fails here; the next CUDA call reports it.
      }
    }
  } join{stream, caller};
  const c10::StreamGuard guard(stream);
  work();
}

c10::Stream current_stream(c10::Device device) {
  const c10::impl::VirtualGuardImpl guard(device.type());
  return guard.getStream(device);
}

void call_work(void* context) { (*static_cast<const std::function<void()>*>(context))(); }

}  // namespace

std::string cuda_graph_unavailable(c10::Device device) {
  if (!device.is_cuda()) return "CUDA graphs need a CUDA device, and this run computes on " + device.str();
  if (!cuda_module::built()) return "this build of oml-cpp has no CUDA module (LibTorch without CUDA)";
  return "";
}

CudaGraph::CudaGraph(c10::Device device) : device_(graph_device(device)), stream_(graph_stream(device_)) {}

CudaGraph::~CudaGraph() { release(); }

void CudaGraph::release() {
  if (graph_ == nullptr) return;
  cuda_module::graph_functions().destroy(graph_);
  graph_ = nullptr;
}

void CudaGraph::run(const std::function<void()>& work) {
  const c10::DeviceGuard device(device_);
  on_stream(stream_, current_stream(device_), work);
}

void CudaGraph::capture(const std::function<void()>& work) {
  const c10::DeviceGuard device(device_);
  release();
  const auto& functions = cuda_module::graph_functions();
  void* graph = functions.create();
  try {
    on_stream(stream_, current_stream(device_), [&] {
      functions.capture(graph, &call_work, const_cast<void*>(static_cast<const void*>(&work)));
    });
  } catch (...) {
    functions.destroy(graph);
    throw;
  }
  graph_ = graph;
}

void CudaGraph::replay() {
  OML_ASSERT(graph_ != nullptr, "CudaGraph::replay() before a capture");
  const c10::DeviceGuard device(device_);
  cuda_module::graph_functions().replay(graph_);
}

}  // namespace oml::distributed
