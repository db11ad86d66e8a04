#pragma once
// Pieces the tracker loggers share (W&B, Neptune, ClearML write a folder that the tracker's own
// tool uploads later; MLflow's file store and client take the clock): the clock, the host, random ids, and
// files copied into the run's folder without a copy on the training thread. Private to the report layer;
// needs nothing of LibTorch.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace oml::report::detail {

/// Seconds since the epoch, with the fraction.
double unix_time_s();

/// Milliseconds since the epoch (MLflow's and ClearML's timestamps).
int64_t unix_time_ms();

/// This machine's name ("" when the system does not say).
std::string host_name();

/// `length` characters drawn uniformly from `alphabet` (from std::random_device: two runs
/// started in the same second get different ids).
std::string random_token(std::size_t length, const std::string& alphabet);

/// A random (version 4) UUID as 32 lowercase hex digits, without dashes.
std::string uuid4_hex();

/// `to` becomes `from` as it is now: a hard link where it can (the run folder's files live on
/// the checkpoints' file system), O(1) on the training thread however large the checkpoint, and
/// safe because checkpoints and report.html are replaced by a rename, never rewritten in place;
/// a copy elsewhere. Creates `to`'s folder; std::filesystem::filesystem_error when neither works.
void link_or_copy(const std::filesystem::path& from, const std::filesystem::path& to);

/// The folder's files as one zip archive at `zip` (stored, not compressed: what goes in is PNG
/// and a little JSON), names relative to `folder` with '/' separators, written atomically
/// (io::write_stream_atomic; during an interrupt's cleanup, where a logger's finish() runs as an
/// io::InterruptHook, through a temporary and a rename without a PendingFile). RuntimeError naming the file
/// that cannot be read or written, or that is larger than a zip without ZIP64 holds (4 GiB).
void write_zip(const std::filesystem::path& folder, const std::filesystem::path& zip);

}  // namespace oml::report::detail
