#include "oml/distributed/detail/failure_record.h"

#include <charconv>

namespace oml::distributed::detail {

namespace {

constexpr const char* kTag = "oml-failure 1\n";

}  // namespace

std::string FailureRecord::describe() const { return "rank " + std::to_string(rank) + " " + what; }

std::string FailureRecord::encode() const { return kTag + std::to_string(rank) + "\n" + what; }

std::optional<FailureRecord> FailureRecord::decode(const std::string& bytes) {
  const std::string tag = kTag;
  if (bytes.compare(0, tag.size(), tag) != 0) return std::nullopt;
  const std::size_t rank_begin = tag.size();
  const std::size_t rank_end = bytes.find('\n', rank_begin);
  if (rank_end == std::string::npos) return std::nullopt;
  FailureRecord record;
  const char* first = bytes.data() + rank_begin;
  const char* last = bytes.data() + rank_end;
  const auto [end, error] = std::from_chars(first, last, record.rank);
  if (error != std::errc() || end != last || first == last || record.rank < 0) return std::nullopt;
  record.what = bytes.substr(rank_end + 1);
  return record;
}

}  // namespace oml::distributed::detail
