#pragma once
// Files that survive crashes (docs/contracts.md#crash-safe-files): content is written to a temporary file
// next to the destination, flushed, and renamed over it. A killed process leaves either the
// old file or the new one, never half of either.

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

namespace oml::io {

/// Writes `bytes` to `path` atomically (parent folders are created). Throws RuntimeError
/// naming the file on failure.
void write_file_atomic(const std::filesystem::path& path, const std::string& bytes);

/// Calls `write(stream)` on a temporary file and renames it to `path` when it returns
/// normally; on an exception the temporary file is removed and the destination untouched.
void write_stream_atomic(const std::filesystem::path& path, const std::function<void(std::ostream&)>& write);

/// For writers that take a file name rather than a stream (a library's save(path)): calls
/// `write(tmp)` with a temporary sibling of `path` (parent folders created; the temporary is
/// this process's pending output meanwhile), checks that it produced the file, and renames it
/// to `path`. On an exception, or when `write` made no file, the temporary is removed and the
/// destination untouched; RuntimeError names the file.
void write_path_atomic(const std::filesystem::path& path,
                       const std::function<void(const std::filesystem::path& tmp)>& write);

/// Replaces directory `dst` by directory `tmp` in one rename where possible (used by dataset
/// converters: write aside, then swap). An existing `dst` is moved away first and removed
/// only after the new one is in place.
void replace_directory(const std::filesystem::path& tmp, const std::filesystem::path& dst);

/// A sibling temporary path for `path` ("<path>.tmp-<pid>-<n>").
std::filesystem::path temporary_sibling(const std::filesystem::path& path);

/// What the entry at `path` is, as lstat sees it, for telling later whether it is still the file a
/// command wrote: "<size> <mtime in ns>" ("absent" when there is none). Replaced, rewritten or
/// turned into a link, it differs; copied with its times (cp -a, rsync -a) or moved, it does not.
std::string entry_fingerprint(const std::filesystem::path& path);

/// Removes what processes no longer running left behind in `folder`: temporaries named by
/// temporary_sibling ("<name>.tmp-<pid>-<n>", files or folders) whose pid is not a live process
/// of this machine — a checkpoint write or a conversion cut by SIGKILL. With `name`, only the
/// temporaries of that entry ("<name>.tmp-..."). Returns how many were removed.
int remove_stale_temporaries(const std::filesystem::path& folder, const std::string& name = "");

}  // namespace oml::io
