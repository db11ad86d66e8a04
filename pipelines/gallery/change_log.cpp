#include "gallery/change_log.h"

#include <ATen/ATen.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_set>

#include "oml/common/error.h"

namespace oml::pipelines {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[] = "OMLCHG01";
constexpr std::size_t kHeaderBytes = 16;        // magic + the version's number
constexpr uint32_t kMaxRecordBytes = 1u << 31;  // a length past this is damage, not a record
constexpr unsigned char kAdd = 1;
constexpr unsigned char kRemove = 2;
constexpr unsigned char kAddTexts = 3;  // kAdd with each item's text after its path

uint32_t crc(const std::string& bytes) {
  return static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

// Little-endian fields, written and read.
template <class T>
void put(std::string& out, T value) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86-64 and aarch64 are little-endian
  out.append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

void put_text(std::string& out, const std::string& text) {
  put<uint32_t>(out, static_cast<uint32_t>(text.size()));
  out += text;
}

// Reads one payload's fields; a field past its end is damage (its CRC matched, so it is a log
// written by something else, or a bug), reported with the record's offset.
class PayloadReader {
 public:
  PayloadReader(const std::string& payload, const fs::path& file, int64_t offset)
      : payload_(payload), file_(file), offset_(offset) {}

  template <class T>
  T get() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, payload_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::string text() {
    const auto length = get<uint32_t>();
    need(length);
    std::string out = payload_.substr(at_, length);
    at_ += length;
    return out;
  }
  void floats(float* out, std::size_t count) {
    need(count * sizeof(float));
    std::memcpy(out, payload_.data() + at_, count * sizeof(float));
    at_ += count * sizeof(float);
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw DataError(file_.string() + ": the change at byte " + std::to_string(offset_) + " " + what +
                    " (the log is damaged; remove the file to return the index to its last version)");
  }
  bool done() const { return at_ == payload_.size(); }

 private:
  void need(std::size_t bytes) const {
    if (bytes > payload_.size() - at_) fail("ends inside its fields");
  }
  const std::string& payload_;
  const fs::path& file_;
  int64_t offset_;
  std::size_t at_ = 0;
};

std::string header(int64_t version_number) {
  std::string out(kMagic, 8);
  put<uint64_t>(out, static_cast<uint64_t>(version_number));
  return out;
}

[[noreturn]] void io_failure(const std::string& what, const fs::path& file) {
  throw RuntimeError("cannot " + what + " " + file.string() + ": " + std::strerror(errno));
}

void write_all(int fd, const std::string& bytes, const fs::path& file) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io_failure("append to", file);
    done += static_cast<std::size_t>(n);
  }
}

}  // namespace

fs::path change_log_path(const fs::path& dir, const std::string& version_name) {
  return dir / (version_name + ".changes");
}

ChangeSummary read_change_log(const fs::path& file, int64_t version_number, int64_t dimension,
                              const IndexedItems& version_items) {
  ChangeSummary out;
  std::error_code ec;
  if (!fs::exists(file, ec)) return out;
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError(file.string() + ": cannot be read");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  out.file_bytes = static_cast<int64_t>(bytes.size());
  if (bytes.size() < kHeaderBytes) return out;  // its header was being written: no change yet
  if (bytes.compare(0, 8, kMagic, 8) != 0) throw DataError(file.string() + ": not an oml-cpp change log");
  uint64_t logged_version = 0;
  std::memcpy(&logged_version, bytes.data() + 8, 8);
  if (logged_version != static_cast<uint64_t>(version_number)) {
    throw DataError(file.string() + ": a log of version " + std::to_string(logged_version) +
                    ", not of the current version " + std::to_string(version_number));
  }

  std::unordered_set<int64_t> live(version_items.ids.begin(), version_items.ids.end());
  std::unordered_set<int64_t> ever(live);
  std::vector<at::Tensor> rows;
  std::size_t at = kHeaderBytes;
  out.valid_bytes = static_cast<int64_t>(at);
  while (at < bytes.size()) {
    if (bytes.size() - at < 8) break;  // a record header cut short: the last append was killed
    uint32_t length = 0, expected_crc = 0;
    std::memcpy(&length, bytes.data() + at, 4);
    std::memcpy(&expected_crc, bytes.data() + at + 4, 4);
    const bool runs_past_end = length > bytes.size() - at - 8;
    if (runs_past_end || length >= kMaxRecordBytes) {
      if (runs_past_end) break;  // cut short
      throw DataError(file.string() + ": the change at byte " + std::to_string(at) + " has a length of " +
                      std::to_string(length) + " (the log is damaged)");
    }
    const std::string payload = bytes.substr(at + 8, length);
    if (crc(payload) != expected_crc) {
      if (at + 8 + length == bytes.size()) break;  // the last record, written in part
      throw DataError(file.string() + ": the change at byte " + std::to_string(at) +
                      " fails its CRC check and changes follow it (the log is damaged; remove the file to "
                      "return the index to its last version)");
    }
    PayloadReader reader(payload, file, static_cast<int64_t>(at));
    const auto kind = reader.get<unsigned char>();
    const auto count = reader.get<uint64_t>();
    if (kind == kAdd || kind == kAddTexts) {
      const auto dim = reader.get<uint64_t>();
      if (static_cast<int64_t>(dim) != dimension)
        reader.fail("adds rows of dimension " + std::to_string(dim) + " to an index of " +
                    std::to_string(dimension));
      if (count == 0 || count > length / (dim * 4 + 8))
        reader.fail("claims " + std::to_string(count) + " rows");
      at::Tensor block = at::empty({static_cast<int64_t>(count), dimension}, at::kFloat);
      for (uint64_t i = 0; i < count; ++i) {
        const auto id = reader.get<int64_t>();
        if (id < 0) reader.fail("adds the negative id " + std::to_string(id));
        if (!ever.insert(id).second)
          reader.fail("adds the id " + std::to_string(id) + ", which the index had");
        live.insert(id);
        reader.floats(block.data_ptr<float>() + i * dim, dim);
        out.added.ids.push_back(id);
        out.added.paths.push_back(reader.text());
        out.added.texts.push_back(kind == kAddTexts ? reader.text() : std::string());
        const bool has_label = reader.get<unsigned char>() != 0;
        const auto label = reader.get<int64_t>();
        out.added.labels.push_back(has_label ? std::optional<int64_t>(label) : std::nullopt);
        out.added.categories.push_back(reader.text());
      }
      rows.push_back(block);
    } else if (kind == kRemove) {
      if (count == 0 || count > length / 8) reader.fail("claims " + std::to_string(count) + " ids");
      for (uint64_t i = 0; i < count; ++i) {
        const auto id = reader.get<int64_t>();
        if (live.erase(id) == 0)
          reader.fail("removes the id " + std::to_string(id) + ", which is not in the index");
        out.removed_ids.push_back(id);
      }
    } else {
      reader.fail("is of an unknown kind " + std::to_string(kind));
    }
    if (!reader.done()) reader.fail("has bytes after its fields");
    ++out.records;
    at += 8 + length;
    out.valid_bytes = static_cast<int64_t>(at);
  }
  if (!rows.empty()) out.added_rows = rows.size() == 1 ? rows.front() : at::cat(rows);
  return out;
}

ChangeLogWriter::ChangeLogWriter(fs::path file, int64_t version_number, int64_t valid_bytes)
    : file_(std::move(file)) {
  fd_ = ::open(file_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) io_failure("open", file_);
  struct stat info {};
  if (::fstat(fd_, &info) != 0) io_failure("inspect", file_);
  if (valid_bytes < static_cast<int64_t>(kHeaderBytes)) {
    // A new log (or one killed while its header was written): the header, synced with the
    // folder's entry for it, before any record.
    if (::ftruncate(fd_, 0) != 0) io_failure("truncate", file_);
    write_all(fd_, header(version_number), file_);
    if (::fsync(fd_) != 0) io_failure("sync", file_);
    const int dir = ::open(file_.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
    bytes_ = static_cast<int64_t>(kHeaderBytes);
  } else {
    bytes_ = valid_bytes;
    if (info.st_size > valid_bytes) {  // a record cut short by a killed writer: never acknowledged
      if (::ftruncate(fd_, valid_bytes) != 0) io_failure("truncate", file_);
      if (::fsync(fd_) != 0) io_failure("sync", file_);
    }
  }
  if (::lseek(fd_, bytes_, SEEK_SET) < 0) io_failure("seek in", file_);
}

ChangeLogWriter::~ChangeLogWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void ChangeLogWriter::append(const std::string& payload) {
  OML_ASSERT(payload.size() < kMaxRecordBytes, "a change of ", payload.size(), " bytes");
  std::string record;
  record.reserve(payload.size() + 8);
  put<uint32_t>(record, static_cast<uint32_t>(payload.size()));
  put<uint32_t>(record, crc(payload));
  record += payload;
  try {
    write_all(fd_, record, file_);
    if (::fdatasync(fd_) != 0) io_failure("sync", file_);
  } catch (...) {
    // What was written in part is cut off again, so that the next record follows a whole one.
    if (::ftruncate(fd_, bytes_) == 0) ::lseek(fd_, bytes_, SEEK_SET);
    throw;
  }
  bytes_ += static_cast<int64_t>(record.size());
}

void ChangeLogWriter::append_add(const IndexedItems& items, const at::Tensor& rows) {
  const at::Tensor r = rows.to(at::kFloat).contiguous();
  OML_ASSERT(r.dim() == 2 && r.size(0) == static_cast<int64_t>(items.size()), "append_add: ", r.sizes(),
             " rows for ", items.size(), " items");
  const auto dim = static_cast<uint64_t>(r.size(1));
  std::string payload;
  payload.reserve(items.size() * (dim * 4 + 32) + 17);
  // Items with texts (a text index) take the kind that carries them; the others keep kAdd's
  // layout, which logs of earlier versions hold.
  const bool texts = std::any_of(items.texts.begin(), items.texts.end(),
                                 [](const std::string& text) { return !text.empty(); });
  put<unsigned char>(payload, texts ? kAddTexts : kAdd);
  put<uint64_t>(payload, items.size());
  put<uint64_t>(payload, dim);
  const float* data = r.data_ptr<float>();
  for (std::size_t i = 0; i < items.size(); ++i) {
    put<int64_t>(payload, items.ids[i]);
    payload.append(reinterpret_cast<const char*>(data + i * dim), dim * sizeof(float));
    put_text(payload, items.paths[i]);
    if (texts) put_text(payload, items.texts[i]);
    put<unsigned char>(payload, items.labels[i] ? 1 : 0);
    put<int64_t>(payload, items.labels[i].value_or(0));
    put_text(payload, items.categories[i]);
  }
  append(payload);
}

void ChangeLogWriter::append_remove(const std::vector<int64_t>& ids) {
  std::string payload;
  put<unsigned char>(payload, kRemove);
  put<uint64_t>(payload, ids.size());
  for (const int64_t id : ids) put<int64_t>(payload, id);
  append(payload);
}

bool compaction_due(int64_t log_bytes, int64_t gallery_bytes, int64_t min_bytes) {
  return log_bytes > static_cast<int64_t>(kHeaderBytes) &&
         log_bytes >= std::max(min_bytes, gallery_bytes / 2);
}

}  // namespace oml::pipelines
