#pragma once
// Failpoints: named places where a test makes this process pause, so that a fault (a cut link, a
// SIGKILL) lands inside a window that is otherwise milliseconds long, deterministically — or
// fail there, as a full disk would.
//
//   OML_FAILPOINTS="before_rename:last.ckpt=pause:5"      (entries separated by ',')
//   OML_FAILPOINTS="before_rename:last.ckpt=fail"         (throws RuntimeError there)
//
// With the variable unset — every user's run — failpoint() returns at once. A paused failpoint
// first prints "failpoint <name>: pausing <s> s" on stderr (what tests wait for), a failing one
// "failpoint <name>: failing". A malformed variable is a ConfigError naming it, at the first
// failpoint reached.
//
// Failpoints in the code: `before_rename:<file name>` — an atomic write's temporary file is
// complete and flushed, and not yet renamed over <file name> (io/atomic_file.h).

#include <string>

namespace oml {

void failpoint(const std::string& name);

}  // namespace oml
