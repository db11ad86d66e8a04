#pragma once
// Failpoints: named places where a test makes this process pause, so that a fault (a cut link, a
// SIGKILL) lands inside a window that is otherwise milliseconds long, deterministically — or
// fail there, as a full disk would, or throw a std::runtime_error, as a bug would.
//
//   OML_FAILPOINTS="before_rename:last.ckpt=pause:5"      (entries separated by ',')
//   OML_FAILPOINTS="before_rename:last.ckpt=fail"         (throws RuntimeError there)
//   OML_FAILPOINTS="serve:search=throw"                   (throws std::runtime_error there)
//
// With the variable unset — every user's run — failpoint() returns at once. A paused failpoint
// first prints "failpoint <name>: pausing <s> s" on stderr (what tests wait for), a failing one
// "failpoint <name>: failing". A malformed variable is a ConfigError naming it, at the first
// failpoint reached.
//
// Failpoints in the code: `before_rename:<file name>` — an atomic write's temporary file is
// complete and flushed, and not yet renamed over <file name> (io/atomic_file.h); `serve:search` —
// oml-serve's batched search, before it searches (a failure of the server's own code);
// `sync_dicts` — a rank about to merge its dictionary with the others' (sync_dicts.h), before its
// first all_gather (a link cut there lands in the merge); `index:before_log` — a reader of an
// index folder (oml-search) has read the version and not yet its change log.

#include <string>

namespace oml {

void failpoint(const std::string& name);

}  // namespace oml
