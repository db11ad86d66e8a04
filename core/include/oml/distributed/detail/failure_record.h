#pragma once
// Internal (not part of the public API). The failure record: which rank failed first and how,
// left in the rendezvous store (key kFailureKey, set once) by the failing rank itself or by the
// launcher that reaped it, and read by the other ranks (to name it in their errors) and by the
// launcher (to report it).
//
//   store.set_if_absent(kFailureKey, FailureRecord{2, "stopped with an error"}.encode());
//   if (auto record = FailureRecord::decode(bytes)) message += record->describe();
//
// It crosses process boundaries (ranks and launchers of one build, possibly on several
// machines), so it has an explicit wire form with a version tag:
//   "oml-failure 1\n<rank>\n<what>"   e.g. "oml-failure 1\n2\nstopped with an error"

#include <optional>
#include <string>

namespace oml::distributed::detail {

struct FailureRecord {
  int rank = -1;
  std::string what;  ///< "stopped with an error", "was killed by signal 9 (SIGKILL)"

  /// "rank 2 stopped with an error": how every message names the failure.
  std::string describe() const;

  std::string encode() const;
  /// The record `bytes` hold, or nullopt when they are not one this build can read.
  static std::optional<FailureRecord> decode(const std::string& bytes);
};

}  // namespace oml::distributed::detail
