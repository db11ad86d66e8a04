#pragma once
// Concurrent requests gathered into one call: oml-serve's forward passes and searches.
//
//   MicroBatcher<at::Tensor, at::Tensor> embed(run_batch, {/*max_batch=*/32, /*max_wait=*/2ms});
//   at::Tensor out = embed.submit(image);   // from any thread; blocks until its batch ran
//
// A worker thread takes the first waiting item, waits at most `max_wait` from its arrival for
// more, and calls `run` on up to `max_batch` items that are `compatible` with the first (same
// image size), in arrival order. With max_wait 0 a lone request runs at once, and the requests
// that arrive while a batch runs make up the next one: batches grow with the load by themselves. `run`
// returns one output per input; an exception from it is rethrown to every caller of that batch. Destruction
// runs what is waiting, then stops.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace oml::pipelines {

struct BatchLimits {
  int64_t max_batch = 32;
  std::chrono::microseconds max_wait{0};
};

template <class In, class Out>
class MicroBatcher {
 public:
  using Run = std::function<std::vector<Out>(std::vector<In>& batch)>;
  using Compatible = std::function<bool(const In& first, const In& other)>;

  MicroBatcher(Run run, BatchLimits limits, Compatible compatible = nullptr)
      : run_(std::move(run)),
        limits_(limits),
        compatible_(std::move(compatible)),
        worker_([this] { work(); }) {}

  ~MicroBatcher() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    arrived_.notify_all();
    worker_.join();
  }

  MicroBatcher(const MicroBatcher&) = delete;
  MicroBatcher& operator=(const MicroBatcher&) = delete;

  Out submit(In in) {
    std::future<Out> result;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) throw std::runtime_error("the server is shutting down");
      waiting_.push_back(Pending{std::move(in), {}, std::chrono::steady_clock::now()});
      result = waiting_.back().promise.get_future();
    }
    arrived_.notify_one();
    return result.get();
  }

 private:
  struct Pending {
    In in;
    std::promise<Out> promise;
    std::chrono::steady_clock::time_point arrival;
  };

  void work() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      arrived_.wait(lock, [this] { return stopping_ || !waiting_.empty(); });
      if (waiting_.empty()) return;  // stopping, nothing left
      const auto deadline = waiting_.front().arrival + limits_.max_wait;
      arrived_.wait_until(lock, deadline, [this] {
        return stopping_ || static_cast<int64_t>(waiting_.size()) >= limits_.max_batch;
      });
      std::vector<Pending> batch;
      batch.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
      for (auto it = waiting_.begin();
           it != waiting_.end() && static_cast<int64_t>(batch.size()) < limits_.max_batch;) {
        if (!compatible_ || compatible_(batch.front().in, it->in)) {
          batch.push_back(std::move(*it));
          it = waiting_.erase(it);
        } else {
          ++it;
        }
      }
      lock.unlock();
      run_batch(batch);
      lock.lock();
    }
  }

  void run_batch(std::vector<Pending>& batch) {
    std::vector<In> inputs;
    inputs.reserve(batch.size());
    for (Pending& p : batch) inputs.push_back(std::move(p.in));
    try {
      std::vector<Out> outputs = run_(inputs);
      if (outputs.size() != batch.size())
        throw std::logic_error("a batch returned the wrong number of outputs");
      for (std::size_t i = 0; i < batch.size(); ++i) batch[i].promise.set_value(std::move(outputs[i]));
    } catch (...) {
      for (Pending& p : batch) p.promise.set_exception(std::current_exception());
    }
  }

  Run run_;
  BatchLimits limits_;
  Compatible compatible_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<Pending> waiting_;
  bool stopping_ = false;
  std::thread worker_;  // last: starts once the members above exist
};

}  // namespace oml::pipelines
