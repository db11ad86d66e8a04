#pragma once
// Paths read from a user's files and configs, judged before anything is written through them.

#include <filesystem>

namespace oml {

/// True when `path`, taken relative to a folder, names a place inside it: not absolute, no root,
/// and no ".." part (which could climb out of it). "" and "." name the folder itself.
inline bool stays_inside_folder(const std::filesystem::path& path) {
  if (path.is_absolute() || path.has_root_name() || path.has_root_directory()) return false;
  for (const auto& part : path) {
    if (part == "..") return false;
  }
  return true;
}

/// Whether `inner` is `outer` or lies below it, part by part as written (normalise both first,
/// e.g. with weakly_canonical); a trailing separator of `outer` ("idx/") is no part.
inline bool is_within_folder(const std::filesystem::path& inner, const std::filesystem::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

}  // namespace oml
