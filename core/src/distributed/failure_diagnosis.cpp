#include "failure_diagnosis.h"

#include <algorithm>
#include <optional>
#include <sstream>
#include <thread>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/distributed/detail/failure_record.h"
#include "oml/distributed/process_group.h"
#include "store_keys.h"

namespace oml::distributed {

namespace detail {

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out << seconds;
  return out.str();
}

std::chrono::milliseconds to_ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

std::chrono::milliseconds after_failure_bound(double timeout_s) {
  return std::min(std::chrono::milliseconds(kAfterFailureBoundMs), to_ms(timeout_s));
}

}  // namespace detail

namespace {

using Clock = std::chrono::steady_clock;
using detail::after_failure_bound;
using detail::seconds_text;

bool looks_like_timeout(const std::string& cause) {
  return cause.find("imed out") != std::string::npos || cause.find("imeout") != std::string::npos;
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

namespace detail {

// ": node 1 (ranks 2, 3) never arrived (...)" after a failed rendezvous, from the arrival notes.
std::string missing_ranks(C10dStore& store, const World& world, double timeout_s) {
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

}  // namespace detail

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
  error.add_context("(c10d: " + oml::first_line(cause) + ")");
  throw error;
}

}  // namespace oml::distributed
