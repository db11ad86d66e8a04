#pragma once
// Failure diagnosis for the process group (inside oml_core, not installed): after a collective
// or the rendezvous fails, which rank or machine is to blame -- failure records in the store,
// the launchers' heartbeats, ranks that never arrived -- and how long store calls may still take.

#include <chrono>
#include <string>
#include <vector>

#include "c10d_adapter.h"
#include "oml/distributed/world.h"

namespace oml::distributed::detail {

/// "3", "2.5": seconds as a user wrote them in ddp.timeout_s.
std::string seconds_text(double seconds);

std::chrono::milliseconds to_ms(double seconds);

/// After a failure: how long any one store call may take.
std::chrono::milliseconds after_failure_bound(double timeout_s);

/// ": node 1 (ranks 2, 3) never arrived (...)" after a failed rendezvous, from the arrival notes.
std::string missing_ranks(C10dStore& store, const World& world, double timeout_s);

}  // namespace oml::distributed::detail
