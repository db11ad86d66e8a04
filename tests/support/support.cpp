#include "support/support.h"

#include <cmath>

#include <zlib.h>

#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "oml/common/sha256.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"

namespace oml::test {

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "oml-test-XXXXXX").string();
  std::vector<char> buffer(tmpl.begin(), tmpl.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = buffer.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

ScopedEnv::ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
  if (const char* before = std::getenv(name_.c_str())) saved_ = before;
  if (value) {
    ::setenv(name_.c_str(), value->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

void ScopedEnv::restore() {
  if (restored_) return;
  restored_ = true;
  if (saved_) {
    ::setenv(name_.c_str(), saved_->c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

void write_file(const fs::path& path, const std::string& text) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string command_path(const std::string& name) { return std::string(OML_BIN_DIR) + "/" + name; }
std::string fixture_path(const std::string& name) { return std::string(OML_FIXTURE_DIR) + "/" + name; }
std::string source_path(const std::string& relative) { return std::string(OML_SOURCE_DIR) + "/" + relative; }
std::string python() { return quote(OML_PYTHON); }

std::string quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

CommandResult run(const std::string& command_line, int timeout_s) {
  TempDir dir;
  const fs::path out = dir / "stdout", err = dir / "stderr";
  const std::string line = "timeout -k 5 " + std::to_string(timeout_s) + " bash -c " + quote(command_line) +
                           " >" + quote(out.string()) + " 2>" + quote(err.string()) + " </dev/null";
  const int status = std::system(line.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = read_file(out);
  result.err = read_file(err);
  return result;
}

CommandResult run_oml(const std::string& command, const std::string& args, int timeout_s) {
  return run(quote(command_path(command)) + " " + args, timeout_s);
}

namespace {

std::string reference_line(const std::string& script, const std::string& command, const fs::path& dir,
                           const std::vector<std::string>& args) {
  std::string line = python() + " " + quote(source_path("tests/python/" + script)) + " " + quote(command) +
                     " " + quote(dir.string());
  for (const auto& arg : args) line += " " + quote(arg);
  return line;
}

// The digest of what an export depends on besides its arguments: every file under tests/python/
// (a script may import another) and the pinned wheels (scripts/requirements*.txt). An export kept
// in OML_TEST_REFERENCES is made again once any of them changes.
const std::string& reference_sources_digest() {
  static const std::string digest = [] {
    const fs::path root = source_path("");
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(root / "tests" / "python")) {
      if (entry.is_regular_file() && entry.path().string().find("__pycache__") == std::string::npos)
        files.push_back(entry.path());
    }
    for (const auto& entry : fs::directory_iterator(root / "scripts")) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("requirements", 0) == 0 && entry.path().extension() == ".txt")
        files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    std::string all;
    for (const auto& file : files) all += fs::relative(file, root).string() + '\0' + read_file(file) + '\0';
    return oml::sha256_hex(all);
  }();
  return digest;
}

// A name that says what the export is (for a person looking into the folder), made of the
// characters a file name may safely hold.
std::string readable_name(const std::vector<std::string>& parts) {
  std::string name;
  for (const auto& part : parts) {
    if (!name.empty()) name += '.';
    for (char c : part) name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  }
  return name.substr(0, 80);
}

}  // namespace

CommandResult run_reference(const std::string& script, const std::string& command, const fs::path& dir,
                            const std::vector<std::string>& args, int timeout_s) {
  const std::string line = reference_line(script, command, dir, args);
  const auto result = run(line, timeout_s);
  INFO(line << "\nfailed (exit " << result.exit_code
            << "; the test references come from scripts/setup.sh --with-tests)"
            << "\nstdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  return result;
}

const fs::path& reference_export(const std::string& script, const std::string& command,
                                 const std::vector<std::string>& args) {
  // This process's exports, and the folders it made for them when no shared folder was given
  // (removed at exit).
  static std::map<std::string, fs::path> made;
  static std::vector<std::unique_ptr<TempDir>> owned;
  std::string key = script + '\0' + command;
  for (const auto& arg : args) key += '\0' + arg;
  if (const auto found = made.find(key); found != made.end()) return found->second;

  const char* shared = std::getenv("OML_TEST_REFERENCES");
  if (shared == nullptr || *shared == '\0') {
    owned.push_back(std::make_unique<TempDir>());
    run_reference(script, command, owned.back()->path(), args);
    return made[key] = owned.back()->path();
  }
  std::vector<std::string> parts{fs::path(script).stem().string(), command};
  parts.insert(parts.end(), args.begin(), args.end());
  const fs::path folder =
      fs::path(shared) /
      (readable_name(parts) + "." + oml::sha256_hex(reference_sources_digest() + '\0' + key).substr(0, 16));
  if (!fs::is_directory(folder)) {
    // Made in a folder of its own and renamed into place whole: a process that finds the folder
    // finds it complete, and of two processes making the same export at once, the second's
    // rename fails and it takes the first's.
    fs::create_directories(shared);
    std::string pattern = (fs::path(shared) / ".making-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr)
      FAIL("cannot make a folder in OML_TEST_REFERENCES=" << shared << ": " << std::strerror(errno));
    const fs::path making = pattern;
    struct Remove {
      fs::path path;
      ~Remove() {
        std::error_code ec;
        fs::remove_all(path, ec);
      }
    } remove{making};
    run_reference(script, command, making, args);
    std::error_code ec;
    fs::rename(making, folder, ec);
    if (ec && !fs::is_directory(folder))
      FAIL("cannot rename " << making << " to " << folder << ": " << ec.message());
  }
  return made[key] = folder;
}

void link_files(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const auto& entry : fs::directory_iterator(from)) {
    fs::create_symlink(fs::absolute(entry.path()), to / entry.path().filename());
  }
}

std::string error_text(const oml::Error& error) {
  std::string text = error.what();
  for (const auto& line : error.context()) text += "\n" + line;
  return text;
}

double max_abs_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

void write_state_dict_file(const fs::path& path, const torch::nn::Module& module) {
  c10::Dict<std::string, at::Tensor> weights;
  for (const auto& [name, tensor] : oml::io::state_dict(module)) weights.insert(name, tensor);
  oml::io::write_torch_file(path, weights);
}

ZipRecords read_zip_records(const std::string& archive) {
  std::istringstream in(archive);
  caffe2::serialize::PyTorchStreamReader reader(&in);
  ZipRecords records;
  for (const auto& name : reader.getAllRecords()) {
    if (name == "version" || name == ".data/version") continue;
    const auto [data, size] = reader.getRecord(name);
    records.emplace_back(name, std::string(static_cast<const char*>(data.get()), size));
  }
  return records;
}

std::string write_zip_records(const ZipRecords& records) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t size) {
    out.append(static_cast<const char*>(data), size);
    return size;
  });
  for (const auto& [name, data] : records) writer.writeRecord(name, data.data(), data.size());
  writer.writeEndOfFile();
  return out;
}

namespace {

// An exclusive flock on `path` (created if missing) for the holder's lifetime; waits for it.
class FileLock {
 public:
  explicit FileLock(const fs::path& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0) throw std::runtime_error("cannot open " + path.string() + ": " + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno != EINTR) {
        ::close(fd_);
        throw std::runtime_error("cannot lock " + path.string() + ": " + std::strerror(errno));
      }
    }
  }
  ~FileLock() { ::close(fd_); }  // closing releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

// Identifies the oml-convert binary: a subset it did not write is converted again.
std::string converter_stamp() {
  const fs::path converter = command_path("oml-convert");
  return std::to_string(fs::file_size(converter)) + " " +
         std::to_string(fs::last_write_time(converter).time_since_epoch().count()) + "\n";
}

}  // namespace

fs::path fashion_mnist_subset(int limit) {
  const fs::path data = fs::path(OML_BUILD_DIR) / "tests" / "data";
  fs::create_directories(data);
  const std::string name = "fashion_mnist_" + std::to_string(limit);
  const fs::path dst = data / name;
  const fs::path stamp = dst / "converted_by";
  const std::string expected = converter_stamp();
  const FileLock lock(data / (name + ".lock"));
  if (!fs::exists(stamp) || read_file(stamp) != expected) {
    // Converted aside and renamed: a killed conversion never leaves a subset that looks done.
    const fs::path staging = data / (name + ".partial");
    fs::remove_all(staging);
    const auto r = run_oml("oml-convert", "fashion-mnist --src /usr/share/datasets/fashion-mnist --dst " +
                                              quote(staging.string()) + " --limit " + std::to_string(limit) +
                                              " --progress quiet");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    write_file(staging / "converted_by", expected);
    fs::remove_all(dst);
    fs::rename(staging, dst);
  }
  return dst;
}

const fs::path& fashion_mnist_subset() {
  static const fs::path root = fashion_mnist_subset(300);
  return root;
}

namespace {

std::string big_endian(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

std::string png_chunk(const std::string& type, const std::string& data) {
  const std::string body = type + data;
  const auto crc = static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(body.data()), body.size()));
  return big_endian(static_cast<uint32_t>(data.size())) + body + big_endian(crc);
}

}  // namespace

std::string png_claiming(uint32_t width, uint32_t height) {
  const std::string ihdr = big_endian(width) + big_endian(height) + std::string("\x08\x00\x00\x00\x00", 5);
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) + png_chunk("IDAT", "") +
         png_chunk("IEND", "");
}

std::string png_bomb(uint32_t width, uint32_t height) {
  const std::string ihdr = big_endian(width) + big_endian(height) + std::string("\x08\x00\x00\x00\x00", 5);
  z_stream z{};
  if (deflateInit(&z, Z_BEST_COMPRESSION) != Z_OK) throw std::runtime_error("deflateInit failed");
  const std::string row(width + 1, '\0');  // filter byte 0 and the row
  std::string idat;
  std::vector<unsigned char> out(1 << 16);
  for (uint32_t r = 0; r < height; ++r) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(row.data()));
    z.avail_in = static_cast<uInt>(row.size());
    const int flush = r + 1 == height ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = out.data();
      z.avail_out = static_cast<uInt>(out.size());
      deflate(&z, flush);
      idat.append(reinterpret_cast<char*>(out.data()), out.size() - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) + png_chunk("IDAT", idat) +
         png_chunk("IEND", "");
}

std::string wav_bytes(const std::vector<float>& samples, int rate, int channels, int claimed_channels) {
  const auto u32 = [](std::string& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
  };
  const auto u16 = [](std::string& out, uint16_t v) {
    out += static_cast<char>(v & 0xFF);
    out += static_cast<char>(v >> 8);
  };
  const int header_channels = claimed_channels > 0 ? claimed_channels : channels;
  const auto data_bytes = static_cast<uint32_t>(samples.size() * 2);
  std::string out = "RIFF";
  u32(out, 36 + data_bytes);
  out += "WAVEfmt ";
  u32(out, 16);
  u16(out, 1);  // PCM
  u16(out, static_cast<uint16_t>(header_channels));
  u32(out, static_cast<uint32_t>(rate));
  u32(out, static_cast<uint32_t>(rate * header_channels * 2));
  u16(out, static_cast<uint16_t>(header_channels * 2));
  u16(out, 16);
  out += "data";
  u32(out, data_bytes);
  for (const float sample : samples) {
    const float clipped = std::fmax(-1.0F, std::fmin(1.0F, sample));
    u16(out, static_cast<uint16_t>(static_cast<int16_t>(std::lround(clipped * 32767.0F))));
  }
  return out;
}

}  // namespace oml::test
