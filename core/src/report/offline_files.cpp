#include "offline_files.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <functional>
#include <random>
#include <vector>

#include "little_endian.h"
#include "oml/common/error.h"
#include "oml/io/atomic_file.h"
#include "oml/io/pending_files.h"

namespace oml::report::detail {

namespace fs = std::filesystem;

double unix_time_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int64_t unix_time_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string host_name() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof(buffer) - 1) != 0) return {};
  return buffer;
}

std::string random_token(std::size_t length, const std::string& alphabet) {
  std::random_device device;
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  std::string out;
  for (std::size_t i = 0; i < length; ++i) out.push_back(alphabet[pick(device)]);
  return out;
}

std::string uuid4_hex() {
  std::string id = random_token(32, "0123456789abcdef");
  id[12] = '4';                                            // the version
  id[16] = "89ab"[random_token(1, "0123").front() - '0'];  // RFC 4122's variant
  return id;
}

void link_or_copy(const fs::path& from, const fs::path& to) {
  std::error_code same_error;
  // Already a link to this very file: rename() would do nothing and leave the temporary behind.
  if (fs::exists(to, same_error) && fs::equivalent(from, to, same_error)) return;
  fs::create_directories(to.parent_path());
  const fs::path tmp = to.string() + ".tmp";
  std::error_code ignored;
  fs::remove(tmp, ignored);  // a killed process's leftover
  std::error_code error;
  fs::create_hard_link(from, tmp, error);
  if (error) fs::copy_file(from, tmp, fs::copy_options::overwrite_existing);
  fs::rename(tmp, to);
}

namespace {

constexpr uint64_t kZipLimit = 0xffffffffu;  // sizes and offsets without ZIP64

struct ZipEntry {
  std::string name;
  uint32_t crc = 0;
  uint64_t size = 0;
  uint64_t offset = 0;
};

// MS-DOS date and time of now, as zip headers hold them.
std::pair<uint16_t, uint16_t> dos_date_time() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::localtime_r(&now, &tm);
  const auto time = static_cast<uint16_t>((tm.tm_hour << 11) | (tm.tm_min << 5) | (tm.tm_sec / 2));
  const auto date =
      static_cast<uint16_t>(((std::max(tm.tm_year, 80) - 80) << 9) | ((tm.tm_mon + 1) << 5) | tm.tm_mday);
  return {date, time};
}

std::string read_all(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  OML_CHECK(in, RuntimeError, "cannot read '", file.string(), "' for its zip archive");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  OML_CHECK(!in.bad(), RuntimeError, "cannot read '", file.string(), "' for its zip archive");
  return bytes;
}

// A logger's finish() of an interrupted run runs as an interrupt hook, which must not create a
// PendingFile or publish() (io/pending_files.h): the cleanup holds their lock and would wait for
// itself, and the command would hang instead of ending (ClearML's zip did, on Ctrl-C or SIGTERM).
// The file goes through a temporary and a rename of its own; the rename cannot be cut in half by
// the cleanup, which is this very thread.
void write_during_interrupt(const fs::path& path, const std::function<void(std::ostream&)>& write) {
  const fs::path tmp = io::temporary_sibling(path);
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      OML_CHECK(out, RuntimeError, "cannot write '", tmp.string(), "'");
      write(out);
      out.flush();
      OML_CHECK(out, RuntimeError, "writing '", path.string(), "' failed (disk full?)");
    }
    fs::rename(tmp, path);
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
}

}  // namespace

void write_zip(const fs::path& folder, const fs::path& zip) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(folder))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  OML_CHECK(files.size() < 0xffff, RuntimeError, "too many files in '", folder.string(),
            "' for a zip archive");
  const auto [dos_date, dos_time] = dos_date_time();
  const uint16_t date = dos_date, time_of_day = dos_time;
  std::vector<ZipEntry> entries;
  uint64_t offset = 0;
  // The fields a local header and a central directory record share, from "version needed" on.
  const auto common_fields = [&](const ZipEntry& e) {
    std::string out_bytes;
    put_le(out_bytes, 20, 2);      // version needed: 2.0
    put_le(out_bytes, 0x0800, 2);  // flags: names are UTF-8
    put_le(out_bytes, 0, 2);       // method: stored
    put_le(out_bytes, time_of_day, 2);
    put_le(out_bytes, date, 2);
    put_le(out_bytes, e.crc, 4);
    put_le(out_bytes, e.size, 4);  // compressed size
    put_le(out_bytes, e.size, 4);
    put_le(out_bytes, e.name.size(), 2);
    put_le(out_bytes, 0, 2);  // extra field length
    return out_bytes;
  };
  const auto write_archive = [&](std::ostream& out) {
    for (const auto& file : files) {
      const std::string data = read_all(file);
      ZipEntry entry;
      entry.name = fs::relative(file, folder).generic_string();
      entry.size = data.size();
      entry.offset = offset;
      entry.crc =
          static_cast<uint32_t>(::crc32(::crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(data.data()),
                                        static_cast<uInt>(data.size())));
      OML_CHECK(entry.size < kZipLimit && offset < kZipLimit, RuntimeError, "'", file.string(),
                "' does not fit a zip archive without ZIP64 (4 GiB)");
      std::string header;
      put_le(header, 0x04034b50, 4);
      header += common_fields(entry) + entry.name;
      out.write(header.data(), static_cast<std::streamsize>(header.size()));
      out.write(data.data(), static_cast<std::streamsize>(data.size()));
      offset += header.size() + data.size();
      entries.push_back(std::move(entry));
    }
    std::string directory;
    for (const auto& entry : entries) {
      put_le(directory, 0x02014b50, 4);
      put_le(directory, 20, 2);  // made by: 2.0
      directory += common_fields(entry);
      put_le(directory, 0, 2);  // comment length
      put_le(directory, 0, 2);  // disk number
      put_le(directory, 0, 2);  // internal attributes
      put_le(directory, 0, 4);  // external attributes
      put_le(directory, entry.offset, 4);
      directory += entry.name;
    }
    OML_CHECK(offset < kZipLimit, RuntimeError, "'", folder.string(),
              "' does not fit a zip archive without ZIP64 (4 GiB)");
    std::string end;
    put_le(end, 0x06054b50, 4);
    put_le(end, 0, 2);  // this disk
    put_le(end, 0, 2);  // the directory's disk
    put_le(end, entries.size(), 2);
    put_le(end, entries.size(), 2);
    put_le(end, directory.size(), 4);
    put_le(end, offset, 4);
    put_le(end, 0, 2);  // comment length
    out.write(directory.data(), static_cast<std::streamsize>(directory.size()));
    out.write(end.data(), static_cast<std::streamsize>(end.size()));
  };
  if (io::interrupt_signal() != 0) {
    write_during_interrupt(zip, write_archive);
    return;
  }
  io::write_stream_atomic(zip, write_archive);
}

}  // namespace oml::report::detail
