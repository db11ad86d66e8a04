// torch.save-compatible files written and read without Python.
#include <torch/torch.h>

#include <optional>

#include <sys/stat.h>
#include <unistd.h>

#include "io/zip_checksums.h"  // white box: the zip directory's checks
#include "oml/common/error.h"
#include "oml/common/numbers.h"
#include "oml/common/sha256.h"
#include "oml/io/atomic_file.h"
#include "oml/io/checkpoint.h"
#include "oml/io/lock_file.h"
#include "oml/io/pending_files.h"
#include "oml/io/state_dict.h"
#include "oml/io/torch_file.h"
#include "oml/models/conv_net.h"
#include "support/support.h"

namespace io_tests {

using Catch::Matchers::Contains;

TEST_CASE("Tensors saved in PyTorch's format read back identically", "[io]") {
  oml::test::TempDir dir;
  const auto embeddings = torch::randn({5, 3});
  oml::io::save_tensor(dir / "e.pt", embeddings);
  CHECK(torch::equal(oml::io::load_tensor(dir / "e.pt"), embeddings));
  const auto ids = torch::arange(7, torch::kLong).view({7, 1}).t();  // non-contiguous view
  oml::io::save_tensor(dir / "i.pt", ids);
  CHECK(torch::equal(oml::io::load_tensor(dir / "i.pt"), ids));
}

TEST_CASE("A checkpoint keeps its state dict, config, counters and metrics", "[io]") {
  oml::test::TempDir dir;
  oml::io::Checkpoint ckpt;
  ckpt.state_dict["a.weight"] = torch::randn({2, 2});
  ckpt.state_dict["bn.num_batches_tracked"] = torch::tensor(3, torch::kLong);
  ckpt.config = "seed: 1\n";
  ckpt.epoch = 4;
  ckpt.step = 100;
  ckpt.metrics["OVERALL/cmc/1"] = 0.75;
  oml::io::save_checkpoint(dir / "c.ckpt", ckpt);
  const auto back = oml::io::load_checkpoint(dir / "c.ckpt");
  CHECK(back.format_version == oml::io::kCheckpointVersion);
  CHECK(back.config == "seed: 1\n");
  CHECK(back.epoch == 4);
  CHECK(back.step == 100);
  CHECK(back.metrics.at("OVERALL/cmc/1") == 0.75);
  CHECK(torch::equal(back.state_dict.at("a.weight"), ckpt.state_dict.at("a.weight")));
  CHECK(back.state_dict.at("bn.num_batches_tracked").item<int64_t>() == 3);
  CHECK_FALSE(back.resume.has_value());
}

TEST_CASE(
    "A checkpoint's sampler position keeps the items consumed and the world size, older ones have neither",
    "[io][resume]") {
  oml::test::TempDir dir;
  oml::io::Checkpoint ckpt;
  ckpt.state_dict["a.weight"] = torch::zeros({1});
  oml::io::ResumeState resume;
  resume.sampler_epoch = 3;
  resume.sampler_batch = 2;
  resume.sampler_consumed = 4;
  resume.sampler_world_size = 2;
  ckpt.resume = resume;
  oml::io::save_checkpoint(dir / "c.ckpt", ckpt);
  const auto back = oml::io::load_checkpoint(dir / "c.ckpt").resume.value();
  CHECK(back.sampler_epoch == 3);
  CHECK(back.sampler_batch == 2);
  CHECK(back.sampler_consumed == 4);
  CHECK(back.sampler_world_size == 2);

  // As an earlier build wrote it: epoch and batch only.
  auto content = oml::io::read_torch_file(dir / "c.ckpt");
  auto sampler = content.toGenericDict().at("resume").toGenericDict().at("sampler").toGenericDict();
  REQUIRE(sampler.erase("consumed") == 1);
  REQUIRE(sampler.erase("world_size") == 1);
  oml::io::write_torch_file(dir / "old.ckpt", content);
  const auto old = oml::io::load_checkpoint(dir / "old.ckpt").resume.value();
  CHECK(old.sampler_batch == 2);
  CHECK_FALSE(old.sampler_consumed.has_value());
  CHECK_FALSE(old.sampler_world_size.has_value());

  // One without the other is a damaged position.
  sampler.insert("consumed", int64_t{4});
  oml::io::write_torch_file(dir / "half.ckpt", content);
  CHECK_THROWS_WITH(oml::io::load_checkpoint(dir / "half.ckpt"),
                    Contains("half.ckpt: resume.sampler: missing entry 'world_size'"));
}

TEST_CASE("Files that are not checkpoints give errors naming the file", "[io]") {
  oml::test::TempDir dir;
  oml::io::save_tensor(dir / "t.pt", torch::zeros({2}));
  CHECK_THROWS_WITH(oml::io::load_checkpoint(dir / "t.pt"),
                    Contains("t.pt") && Contains("not an oml-cpp checkpoint"));
  oml::test::write_file(dir / "legacy.pt", std::string("\x80\x02\x8a\x0a", 4) + "junk");
  CHECK_THROWS_WITH(oml::io::read_torch_file(dir / "legacy.pt"), Contains("not a PyTorch zip file"));
  CHECK_THROWS_WITH(oml::io::read_torch_file(dir / "missing.pt"), Contains("no such file"));
  oml::test::write_file(dir / "broken.pt", "PK\x03\x04 truncated");
  CHECK_THROWS_AS(oml::io::read_torch_file(dir / "broken.pt"), oml::DataError);
}

TEST_CASE("A state dict with an entry that is not a dense tensor names the entry", "[io]") {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("proj.bias", torch::zeros({2}));
  dict.insert("proj.weight", c10::IValue(std::string("a sparse tensor's pieces")));
  CHECK_THROWS_WITH(oml::io::find_state_dict(c10::IValue(dict), "w.pt"),
                    Contains("w.pt: a state dict whose entry 'proj.weight' is not a dense tensor"));
  c10::impl::GenericDict other(c10::StringType::get(), c10::AnyType::get());
  other.insert("epoch", c10::IValue(int64_t{3}));
  CHECK_THROWS_WITH(oml::io::find_state_dict(c10::IValue(other), "w.pt"), Contains("expected a state dict"));
}

TEST_CASE("A checkpoint damaged after it was written is refused, naming the damaged record", "[io]") {
  oml::test::TempDir dir;
  oml::io::Checkpoint ckpt;
  ckpt.state_dict["w"] = torch::arange(1000, torch::kFloat);
  oml::io::save_checkpoint(dir / "c.ckpt", ckpt);
  std::string bytes = oml::test::read_file(dir / "c.ckpt");
  // 40 flipped bytes inside the tensor's data: LibTorch's zip reader alone returns them as data.
  const at::Tensor w = ckpt.state_dict["w"];
  const std::string pattern(static_cast<const char*>(w.data_ptr()) + 400, 64);
  const std::size_t at = bytes.find(pattern);
  REQUIRE(at != std::string::npos);
  for (std::size_t i = 0; i < 40; ++i) bytes[at + i] = static_cast<char>(~bytes[at + i]);
  oml::test::write_file(dir / "flipped.ckpt", bytes);
  CHECK_THROWS_AS(oml::io::load_checkpoint(dir / "flipped.ckpt"), oml::DataError);
  CHECK_THROWS_WITH(oml::io::load_checkpoint(dir / "flipped.ckpt"),
                    Contains("flipped.ckpt") && Contains("record 'data/") && Contains("is damaged"));
  // Cut off: no directory at the end.
  oml::test::write_file(dir / "cut.ckpt", oml::test::read_file(dir / "c.ckpt").substr(0, bytes.size() / 2));
  CHECK_THROWS_AS(oml::io::load_checkpoint(dir / "cut.ckpt"), oml::DataError);
  // The intact file still loads.
  CHECK(torch::equal(oml::io::load_checkpoint(dir / "c.ckpt").state_dict.at("w"), w));
}

TEST_CASE("Damage inside a well-formed archive is a DataError naming the file and the record", "[io]") {
  // Archives written again with valid CRCs, as the fuzz tests make them (tests/fuzz): the damage
  // reaches the unpickler.
  oml::test::TempDir dir;
  oml::io::save_tensor(dir / "t.pt", torch::zeros({6}));
  const auto records = oml::test::read_zip_records(oml::test::read_file(dir / "t.pt"));
  const auto with_record = [&](const std::string& file, const std::string& name, const std::string& data) {
    auto edited = records;
    for (auto& record : edited)
      if (record.first == name) record.second = data;
    oml::test::write_file(dir / file, oml::test::write_zip_records(edited));
    return dir / file;
  };
  // 27 bytes of float data: the copy into a storage of 6 floats used to write past its end.
  const auto odd = with_record("odd.pt", "data/0", std::string(27, '\0'));
  CHECK_THROWS_AS(oml::io::load_tensor(odd), oml::DataError);
  CHECK_THROWS_WITH(oml::io::load_tensor(odd), Contains("odd.pt") && Contains("'data/0' holds 27 bytes") &&
                                                   Contains("its storage is 6 FloatStorage elements"));
  // A record larger than its storage declares (as torch.load refuses it): the reader allocates
  // what the zip directory declares, which a compressed record can make gigabytes.
  const auto longer = with_record("longer.pt", "data/0", std::string(28, '\0'));
  CHECK_THROWS_WITH(oml::io::load_tensor(longer), Contains("'data/0' holds 28 bytes"));
  // A string whose 8-byte length is near 2^64: the bounds check used to wrap around.
  const std::string huge_string = std::string("\x80\x02\x8d", 3) + std::string(8, '\xff') + ".";
  const auto huge = with_record("huge.pt", "data.pkl", huge_string);
  CHECK_THROWS_AS(oml::io::read_torch_file(huge), oml::DataError);
  CHECK_THROWS_WITH(oml::io::read_torch_file(huge), Contains("huge.pt") && Contains("truncated pickle data"));
  // A dict whose key is None: c10 cannot hash it (was a std::runtime_error, exit 1).
  const auto none_key = with_record("none_key.pt", "data.pkl", "\x80\x02}(NK\x01u.");
  CHECK_THROWS_AS(oml::io::read_torch_file(none_key), oml::DataError);
  CHECK_THROWS_WITH(oml::io::read_torch_file(none_key), Contains("a dict key of type None"));

  // The tensor's sizes and strides: (6,) and (1,) as LibTorch's pickler writes them.
  const std::string pickle = [&] {
    for (const auto& record : records)
      if (record.first == "data.pkl") return record.second;
    return std::string();
  }();
  const std::string shape = "(K\x06t(K\x01t";
  REQUIRE(pickle.find(shape) != std::string::npos);
  const auto with_shape = [&](const std::string& file, const std::string& replacement) {
    std::string edited = pickle;
    edited.replace(edited.find(shape), shape.size(), replacement);
    return with_record(file, "data.pkl", edited);
  };
  // No strides for one size: read past the end of the strides (a crash).
  const auto no_strides = with_shape("no_strides.pt", "(K\x06t(t");
  CHECK_THROWS_AS(oml::io::load_tensor(no_strides), oml::DataError);
  CHECK_THROWS_WITH(oml::io::load_tensor(no_strides), Contains("1 sizes but 0 strides"));
  // A size of 2^62 with stride 4: the bounds check overflowed and let a view past the storage
  // through.
  const auto overflow = with_shape("overflow.pt", std::string("(\x8a\x08\0\0\0\0\0\0\0\x40t(K\x04t", 16));
  CHECK_THROWS_WITH(oml::io::load_tensor(overflow), Contains("tensor view exceeds its storage"));
  CHECK_THROWS_WITH(oml::io::load_tensor(with_shape("negative.pt", "(K\x06t(J\xff\xff\xff\xfft")),
                    Contains("stride -1"));
  CHECK(oml::io::load_tensor(with_shape("same.pt", shape)).numel() == 6);
}

namespace {

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xFF);
}

// A one-record zip archive ("top/NAME") whose central directory declares `declared` bytes for
// the record and `compressed` bytes in the file, written in the entry or, with `zip64`, in its
// zip64 extra field (the entry's 4-byte fields then read 0xFFFFFFFF). Only the directory and its
// end record are what ZipChecksums reads.
std::string one_record_zip(const std::string& name, const std::string& data, uint64_t method,
                           uint64_t declared, uint64_t compressed, bool zip64) {
  const std::string path = "top/" + name;
  std::string out;
  put_le(out, 0x04034b50, 4);  // the local header: signature, then fields ZipChecksums skips
  out += std::string(22, '\0');
  put_le(out, path.size(), 2);
  put_le(out, 0, 2);
  out += path + data;
  const uint64_t directory_offset = out.size();
  std::string extra;
  if (zip64) {
    put_le(extra, 1, 2);
    put_le(extra, 16, 2);
    put_le(extra, declared, 8);
    put_le(extra, compressed, 8);
  }
  std::string entry;
  put_le(entry, 0x02014b50, 4);
  put_le(entry, 0, 6);  // versions, flags
  put_le(entry, method, 2);
  put_le(entry, 0, 4);  // time, date
  put_le(entry, 0, 4);  // CRC-32 (not checked here)
  put_le(entry, zip64 ? 0xFFFFFFFF : compressed, 4);
  put_le(entry, zip64 ? 0xFFFFFFFF : declared, 4);
  put_le(entry, path.size(), 2);
  put_le(entry, extra.size(), 2);
  put_le(entry, 0, 14);  // comment length, disk, attributes, local header offset 0
  entry += path + extra;
  out += entry;
  put_le(out, 0x06054b50, 4);
  put_le(out, 0, 4);
  put_le(out, 1, 2);
  put_le(out, 1, 2);
  put_le(out, entry.size(), 4);
  put_le(out, directory_offset, 4);
  put_le(out, 0, 2);
  return out;
}

}  // namespace

TEST_CASE("A record declaring more bytes than its file can hold is refused before it is allocated", "[io]") {
  // LibTorch's zip reader allocates the size the directory declares before reading: 100 bytes
  // declaring 2^40 were an allocation of a terabyte.
  const std::string data(24, 'x');
  const auto directory_of = [&](uint64_t method, uint64_t declared, uint64_t compressed, bool zip64) {
    const std::string zip = one_record_zip("data/0", data, method, declared, compressed, zip64);
    return oml::io::ZipChecksums("archive.zip", zip.data(), zip.size());
  };
  for (const bool zip64 : {false, true}) {
    INFO("zip64 " << zip64);
    CHECK(directory_of(0, 24, 24, zip64).size("data/0") == 24);
    CHECK(directory_of(8, 24 * 1000, 24, zip64).size("data/0") == 24 * 1000);  // deflated zeros
    const uint64_t huge = zip64 ? uint64_t{1} << 40 : 0xF0000000;              // as many as the fields hold
    CHECK_THROWS_WITH(directory_of(0, huge, 24, zip64),
                      Contains("archive.zip: damaged zip container: record 'top/data/0' declares " +
                               std::to_string(huge) + " bytes, but it is stored uncompressed in 24"));
    CHECK_THROWS_WITH(directory_of(8, huge, 24, zip64),
                      Contains("more than deflate can expand its 24 compressed bytes to"));
    CHECK_THROWS_WITH(directory_of(0, huge, huge, zip64),
                      Contains("stored in " + std::to_string(huge) + ", but the file is only"));
  }
  CHECK_THROWS_WITH(directory_of(0, 0xFFFFFFFF, 24, false), Contains("no size for 'top/data/0'"));

  // The same damage in a torch.save file and in an optimizer state's archive: refused naming the
  // file, before LibTorch's reader allocates anything.
  oml::test::TempDir dir;
  oml::io::save_tensor(dir / "t.pt", torch::zeros({6}));
  std::string bytes = oml::test::read_file(dir / "t.pt");
  // The directory entry of the tensor's record ("<top folder>/data/0"): its 4-byte size at +24.
  std::size_t at = 0;
  std::string name;
  do {
    at = bytes.find(std::string("PK\x01\x02", 4), at + 1);
    REQUIRE(at != std::string::npos);
    name = bytes.substr(at + 46, static_cast<unsigned char>(bytes[at + 28]));
  } while (name.size() < 7 || name.compare(name.size() - 7, 7, "/data/0") != 0);
  bytes.replace(at + 24, 4, "\xff\xff\xff\x7f", 4);  // 2^31 - 1
  oml::test::write_file(dir / "declared.pt", bytes);
  CHECK_THROWS_AS(oml::io::load_tensor(dir / "declared.pt"), oml::DataError);
  CHECK_THROWS_WITH(
      oml::io::load_tensor(dir / "declared.pt"),
      Contains("declared.pt: damaged zip container: record '" + name + "' declares 2147483647 bytes"));
  CHECK_THROWS_WITH(oml::io::check_torch_archive("optimizer state", bytes.data(), bytes.size()),
                    Contains("optimizer state: damaged zip container: record '" + name + "' declares"));
}

TEST_CASE("Values nested past Python's recursion limit are refused before they overflow the stack", "[io]") {
  oml::test::TempDir dir;
  oml::io::save_tensor(dir / "t.pt", torch::zeros({1}));
  const auto records = oml::test::read_zip_records(oml::test::read_file(dir / "t.pt"));
  const auto with_pickle = [&](const std::string& file, const std::string& pickle) {
    auto edited = records;
    for (auto& record : edited)
      if (record.first == "data.pkl") record.second = pickle;
    oml::test::write_file(dir / file, oml::test::write_zip_records(edited));
    return dir / file;
  };
  // 100,000 nested 1-tuples in 100 KB: freeing them recursed 100,000 deep (a segfault).
  const auto tuples = with_pickle("tuples.pt", "\x80\x02)" + std::string(100000, '\x85') + ".");
  CHECK_THROWS_WITH(oml::io::read_torch_file(tuples),
                    Contains("tuples.pt") && Contains("nested more than 1000 deep"));
  // 1000 levels are Python's limit and load.
  const auto limit = with_pickle("limit.pt", "\x80\x02)" + std::string(999, '\x85') + ".");
  CHECK(oml::io::read_torch_file(limit).isTuple());
  // Lists filled through memo references in reverse, so that no list is deeper than 2 when it is
  // filled: memoize 3 empty lists, then list 2 gets list 1, then list 1 gets list 0.
  std::string reverse = "\x80\x02";
  for (int i = 0; i < 3; ++i) reverse += "]q" + std::string(1, static_cast<char>(i));
  reverse += std::string(
      "h\x02h\x01"
      "ah\x01h\x00"
      "a.",
      10);
  CHECK_THROWS_WITH(oml::io::read_torch_file(with_pickle("reverse.pt", reverse)),
                    Contains("filled after it was put in another"));
  // The same deep pickle inside an optimizer's state archive (read by LibTorch's unpickler next).
  auto archive = records;
  for (auto& record : archive)
    if (record.first == "data.pkl") record.second = "\x80\x02)" + std::string(100000, '\x85') + ".";
  const std::string bytes = oml::test::write_zip_records(archive);
  CHECK_THROWS_WITH(oml::io::check_torch_archive("optimizer state", bytes.data(), bytes.size()),
                    Contains("optimizer state (data.pkl)") && Contains("nested more than 1000 deep"));
  const std::string fine = oml::test::read_file(dir / "t.pt");
  CHECK_NOTHROW(oml::io::check_torch_archive("optimizer state", fine.data(), fine.size()));
}

TEST_CASE("An oml-cpp checkpoint is accepted as `weights:` of an extractor", "[io][models]") {
  oml::test::TempDir dir;
  oml::models::ConvNetOptions options;
  options.channels = {4, 8};
  oml::models::ConvNet trained(options);
  oml::io::Checkpoint ckpt;
  ckpt.state_dict = oml::io::state_dict(*trained);
  oml::io::save_checkpoint(dir / "best.ckpt", ckpt);
  options.weights = (dir / "best.ckpt").string();
  oml::models::ConvNet loaded(options);
  for (const auto& kv : oml::io::state_dict(*loaded)) {
    INFO(kv.first);
    CHECK(torch::equal(kv.second, ckpt.state_dict.at(kv.first)));
  }
}

TEST_CASE("Pending files are removed by the interrupt cleanup until they are finished", "[io]") {
  oml::test::TempDir dir;
  oml::test::write_file(dir / "file.tmp-1-0", "half a checkpoint");
  oml::test::write_file(dir / "staging" / "images" / "a.png", "x");
  oml::test::write_file(dir / "done", "published");
  {
    const oml::io::PendingFile file(dir / "file.tmp-1-0"), folder(dir / "staging"), none(dir / "never-made");
    std::optional<oml::io::PendingFile> finished;
    finished.emplace(dir / "done");
    finished.reset();  // published: no longer ours to remove
    CHECK(oml::io::remove_pending_files() == 2);
  }
  CHECK(!std::filesystem::exists(dir / "file.tmp-1-0"));
  CHECK(!std::filesystem::exists(dir / "staging"));
  CHECK(std::filesystem::exists(dir / "done"));
  // An atomic write leaves nothing pending behind it.
  oml::io::write_file_atomic(dir / "out.txt", "text");
  CHECK(oml::io::remove_pending_files() == 0);
  CHECK(oml::test::read_file(dir / "out.txt") == "text");
}

TEST_CASE("A lock file is held by one holder at a time and never taken through a link", "[io][lock]") {
  namespace fs = std::filesystem;
  using oml::io::LockFile;
  oml::test::TempDir dir;
  const fs::path file = dir / ".lock";
  LockFile first = LockFile::try_lock(file, "oml-test");
  REQUIRE(first.held());
  first.write_pid();
  {  // flock holds per open file: a second open, even in this process, is refused
    const LockFile second = LockFile::try_lock(file, "oml-test");
    CHECK_FALSE(second.held());
    CHECK(second.holder() == std::to_string(::getpid()));
  }
  LockFile moved = std::move(first);
  CHECK(moved.held());
  CHECK_FALSE(LockFile::try_lock(file, "oml-test").held());
  moved = LockFile();  // released; the file stays
  CHECK(fs::exists(file));
  LockFile again = LockFile::try_lock(file, "oml-test");
  CHECK(again.held());
  again.remove_and_release();
  CHECK_FALSE(again.held());
  CHECK_FALSE(fs::exists(file));

  oml::test::write_file(dir / "passwd", "root:x:0:0\n");
  fs::create_symlink(dir / "passwd", file);
  CHECK_THROWS_MATCHES(
      LockFile::try_lock(file, "oml-test"), oml::UsageError,
      Catch::Matchers::Message("'" + file.string() +
                               "' is a symbolic link, which oml-test never makes; remove it"));
  CHECK(oml::test::read_file(dir / "passwd") == "root:x:0:0\n");
  fs::remove(file);
  fs::create_directory(file);
  CHECK_THROWS_WITH(LockFile::try_lock(file, "oml-test"), Contains("is a folder"));
  fs::remove(file);
  REQUIRE(::mkfifo(file.c_str(), 0644) == 0);  // must not block the open
  CHECK_THROWS_WITH(LockFile::try_lock(file, "oml-test"),
                    Contains("is not a file, which oml-test never makes"));
}

TEST_CASE("sha256 gives sha256sum's digests", "[io][sha256]") {
  CHECK(oml::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(oml::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Two blocks: the padding spills into a second one.
  CHECK(oml::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  oml::test::TempDir dir;
  std::string big(3 * 1024 * 1024 + 17, 'a');  // more than one read block
  oml::test::write_file(dir / "big.bin", big);
  CHECK(oml::sha256_file_hex(dir / "big.bin") == oml::sha256_hex(big));
  CHECK_THROWS_AS(oml::sha256_file_hex(dir / "missing.bin"), oml::RuntimeError);
}

TEST_CASE("Numbers are read from the whole text or not at all", "[numbers]") {
  CHECK(oml::parse_int64("42") == 42);
  CHECK(oml::parse_int64("-7") == -7);
  CHECK_FALSE(oml::parse_int64("").has_value());
  CHECK_FALSE(oml::parse_int64("4x").has_value());
  CHECK_FALSE(oml::parse_int64("3.5").has_value());
  CHECK_FALSE(oml::parse_int64("99999999999999999999").has_value());  // out of range
  CHECK(oml::parse_double("0.25") == 0.25);
  CHECK(oml::parse_double("1e-3") == 0.001);
  CHECK_FALSE(oml::parse_double("0.5 ").has_value());
  CHECK_FALSE(oml::parse_double("none").has_value());
}

}  // namespace io_tests
