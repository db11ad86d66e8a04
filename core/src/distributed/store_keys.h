#pragma once
// Internal to oml::distributed: store keys and bounds shared by the launcher and the ranks,
// beside kFailureKey and kTimeoutKeyPrefix (oml/distributed/process_group.h).

namespace oml::distributed::detail {

/// Every rank sets kArrivedKeyPrefix + its rank before the Gloo rendezvous, so that a rendezvous
/// that times out names the ranks that never arrived.
inline constexpr const char* kArrivedKeyPrefix = "oml/arrived/";

/// The world size the first arriving rank was started for; every later one compares its own
/// with it before it counts itself in kArrivalsKey.
inline constexpr const char* kWorldSizeKey = "oml/rank_world_size";  // not the launchers' "oml/world_size"

/// How many ranks arrived with the world size of kWorldSizeKey. The ranks enter the backend's
/// rendezvous (Gloo's connectFullMesh, whose retries take several times its timeout when a peer
/// is gone) only once it reaches the world size.
inline constexpr const char* kArrivalsKey = "oml/arrivals";

/// kHeartbeatKeyPrefix + the machine's --node-rank: a counter oml's launcher increments every
/// kHeartbeatPeriodMs while its ranks run. A rank whose collective failed without a failure record
/// watches the counters for a few seconds; machines whose counter stands still no longer reach
/// the store (network cut, machine down) and are named as the cause.
inline constexpr const char* kHeartbeatKeyPrefix = "oml/heartbeat/node";
inline constexpr int kHeartbeatPeriodMs = 500;

/// After a failure (and in the launcher while its ranks run), every store call gives up after
/// this long, or after ddp.timeout_s when that is shorter: the store may sit behind a dead link.
inline constexpr int kAfterFailureBoundMs = 3000;

}  // namespace oml::distributed::detail
