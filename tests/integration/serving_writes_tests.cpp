// What changing a saved index costs and survives (docs/serving.md#changing-an-index): adds and
// removals append to the version's change log (the version's files are not touched), are
// replayed by every reader, are folded into a new version by `oml-index compact` or in the
// background past the threshold, and no acknowledged change is lost to a SIGKILL.
#include <torch/torch.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <set>
#include <thread>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serving_fixtures.h"

namespace serving_writes_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

// An index over `n` random rows of dimension `dim` (seeded), built from embeddings.
fs::path random_index(const fs::path& dir, int64_t n, int64_t dim, const std::string& backend = "") {
  torch::manual_seed(5);
  oml::io::write_npy(dir / "g.npy", torch::randn({n, dim}));
  const auto r =
      run_oml("oml-index", "build --embeddings " + quote((dir / "g.npy").string()) + " --out " +
                               quote((dir / "index").string()) +
                               (backend.empty() ? "" : " --set 'retrieval_backend=" + backend + "'"));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return dir / "index";
}

std::string current_version(const fs::path& index) {
  std::string name = read_file(index / "CURRENT");
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return name;
}

int64_t log_size(const fs::path& index) {
  const fs::path log = index / (current_version(index) + ".changes");
  return fs::exists(log) ? static_cast<int64_t>(fs::file_size(log)) : 0;
}

std::string embedding_json(const at::Tensor& row) {
  const at::Tensor r = row.contiguous();
  return nlohmann::json(std::vector<float>(r.data_ptr<float>(), r.data_ptr<float>() + r.numel())).dump();
}

// oml-search of `rows` against `index`: each row's nearest id and distance.
std::vector<std::pair<int64_t, double>> nearest(const fs::path& dir, const fs::path& index,
                                                const at::Tensor& rows, const std::string& name) {
  oml::io::write_npy(dir / (name + ".npy"), rows.contiguous());
  const auto r = run_oml("oml-search", "--index " + quote(index.string()) + " --embeddings " +
                                           quote((dir / (name + ".npy")).string()) + " --top-k 1 --out " +
                                           quote((dir / name).string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<std::pair<int64_t, double>> out;
  const auto rows_csv = csv_rows(dir / name / "answers.csv");
  for (std::size_t i = 1; i < rows_csv.size(); ++i)
    out.emplace_back(std::stoll(rows_csv[i][3]), std::stod(rows_csv[i][5]));
  return out;
}

struct FileStamp {
  int64_t inode = 0;
  int64_t size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileStamp& o) const {
    return inode == o.inode && size == o.size && mtime_ns == o.mtime_ns;
  }
};

FileStamp stamp(const fs::path& file) {
  struct stat s {};
  REQUIRE(::stat(file.c_str(), &s) == 0);
  return {static_cast<int64_t>(s.st_ino), static_cast<int64_t>(s.st_size),
          static_cast<int64_t>(s.st_mtim.tv_sec) * 1000000000 + s.st_mtim.tv_nsec};
}

}  // namespace

TEST_CASE("A change through oml-serve appends its own records and leaves the version's files untouched",
          "[serving][integration][writes]") {
  TempDir dir;
  const fs::path index = random_index(dir.path(), 2000, 16);
  const std::string version = current_version(index);
  const FileStamp embeddings = stamp(index / version / "embeddings.npy");
  const FileStamp items = stamp(index / version / "items.csv");
  torch::manual_seed(9);
  const at::Tensor added = torch::randn({1001, 16}) + 10.0;  // far from the gallery: their own nearest
  std::vector<int64_t> added_ids;
  {
    Server server(index, dir.path());
    const std::string url = server.url();
    // One item: its record is its row, its id and fields, and the record's frame.
    const int64_t before = log_size(index);
    Reply r = call("-X POST -d '{\"embedding\": " + embedding_json(added[0]) +
                   ", \"label\": 7, \"path\": \"a.jpg\"}' " + url + "/items");
    REQUIRE(r.status == 201);
    added_ids.push_back(r.body["ids"][0].get<int64_t>());
    const int64_t one = log_size(index) - before;
    CHECK(one >= 16 * 4);
    CHECK(one < 16 * 4 + 100);
    // A thousand items in one request: a thousand records' worth, not the gallery.
    std::string body = "{\"items\": [";
    for (int64_t i = 1; i < 1001; ++i)
      body += (i > 1 ? ", " : "") + std::string("{\"embedding\": ") + embedding_json(added[i]) + "}";
    write_file(dir / "many.json", body + "]}");
    const int64_t before_many = log_size(index);
    r = call("-X POST --data-binary @" + quote((dir / "many.json").string()) + " " + url + "/items");
    REQUIRE(r.status == 201);
    for (const auto& id : r.body["ids"]) added_ids.push_back(id.get<int64_t>());
    const int64_t many = log_size(index) - before_many;
    CHECK(many < 1000 * (16 * 4 + 40));
    // A removal: the id, framed.
    const int64_t before_remove = log_size(index);
    CHECK(call("-X DELETE " + url + "/items/17").status == 200);
    CHECK(log_size(index) - before_remove < 64);
    CHECK(server.stop(SIGTERM) == 0);
  }
  // The version's files are as the build wrote them.
  CHECK(current_version(index) == version);
  CHECK(stamp(index / version / "embeddings.npy") == embeddings);
  CHECK(stamp(index / version / "items.csv") == items);
  // Every reader applies the log: oml-index info, oml-search, a restarted server.
  auto info = run_oml("oml-index", "info --index " + quote(index.string()));
  CHECK_THAT(info.out, Contains("items:       3000 of dimension 16 (next id 3001)") &&
                           Contains("changes:     3 logged"));
  const auto found = nearest(dir.path(), index, added, "s1");
  REQUIRE(found.size() == 1001);
  for (std::size_t i = 0; i < found.size(); ++i) {
    CHECK(found[i].first == added_ids[i]);
    CHECK(found[i].second == Approx(0.0).margin(1e-3));
  }
  {
    Server server(index, dir.path());
    CHECK(call(server.url() + "/health").body["items"] == 3000);
    const Reply r = call("-X POST -d '{\"embedding\": " + embedding_json(added[5]) + ", \"k\": 1}' " +
                         server.url() + "/search");
    CHECK(r.body["neighbours"][0]["id"] == added_ids[5]);
  }
  // oml-index compact folds the log into the next version; the answers stay.
  auto compacted = run_oml("oml-index", "compact --index " + quote(index.string()));
  CHECK(compacted.exit_code == 0);
  CHECK(current_version(index) != version);
  CHECK_FALSE(fs::exists(index / version));
  CHECK_FALSE(fs::exists(index / (version + ".changes")));
  info = run_oml("oml-index", "info --index " + quote(index.string()));
  CHECK_THAT(info.out, Contains("items:       3000 of dimension 16 (next id 3001)") &&
                           Contains("changes:     0 logged"));
  CHECK(nearest(dir.path(), index, added, "s2") == found);
  CHECK_THAT(run_oml("oml-index", "compact --index " + quote(index.string())).out,
             Contains("nothing to compact"));
}

TEST_CASE("oml-index add and remove log their changes: a cut-off record is dropped, a damaged one refused",
          "[serving][integration][writes]") {
  TempDir dir;
  const fs::path index = random_index(dir.path(), 300, 8);
  torch::manual_seed(11);
  oml::io::write_npy(dir / "more.npy", torch::randn({10, 8}) + 20.0);
  REQUIRE(run_oml("oml-index", "add --index " + quote(index.string()) + " --embeddings " +
                                   quote((dir / "more.npy").string()))
              .exit_code == 0);
  REQUIRE(run_oml("oml-index", "remove --index " + quote(index.string()) + " --ids 3,305").exit_code == 0);
  const fs::path log = index / (current_version(index) + ".changes");
  REQUIRE(fs::exists(log));
  const int64_t whole = static_cast<int64_t>(fs::file_size(log));
  // A killed writer's half record at the end: readers ignore it, the next writer cuts it off.
  { std::ofstream(log, std::ios::binary | std::ios::app) << std::string("\x40\x00\x00\x00\x12\x34", 6); }
  auto info = run_oml("oml-index", "info --index " + quote(index.string()));
  CHECK(info.exit_code == 0);
  CHECK_THAT(info.out, Contains("items:       308 of dimension 8") && Contains("changes:     2 logged"));
  REQUIRE(run_oml("oml-index", "remove --index " + quote(index.string()) + " --ids 4").exit_code == 0);
  CHECK(static_cast<int64_t>(fs::file_size(log)) == whole + 8 + 1 + 8 + 8);  // the cut, then one id's record
  // A byte flipped inside the first record, with records after it: damage, named with its byte.
  {
    std::fstream f(log, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(16 + 8 + 30);
    f.put('\x7f');
  }
  info = run_oml("oml-index", "info --index " + quote(index.string()));
  CHECK(info.exit_code == 2);
  CHECK_THAT(info.err, Contains(log.string()) && Contains("byte 16") && Contains("CRC"));
  // Searching and serving refuse it the same way (exit 2), and nothing is written.
  CHECK(run_oml("oml-search", "--index " + quote(index.string()) + " --embeddings " +
                                  quote((dir / "more.npy").string()) + " --out " +
                                  quote((dir / "s").string()))
            .exit_code == 2);
  const auto served =
      run(quote(command_path("oml-serve")) + " --index " + quote(index.string()) + " --port 0");
  CHECK(served.exit_code == 2);
  CHECK_THAT(served.err, Contains("damaged"));
}

TEST_CASE("oml-serve killed during a stream of single-item POSTs loses no acknowledged item",
          "[serving][integration][writes][faults]") {
  TempDir dir;
  // 200 x 32 floats: the log is due for compaction every hundred records or so, so that the kill
  // also meets compactions under way.
  const fs::path index = random_index(dir.path(), 200, 32);
  torch::manual_seed(13);
  const int64_t attempts = 1500;
  const at::Tensor rows = torch::randn({attempts, 32}) * 3.0 + 8.0;
  for (int64_t i = 0; i < attempts; ++i) {
    write_file(dir / ("add" + std::to_string(i) + ".json"),
               "{\"embedding\": " + embedding_json(rows[i]) + "}");
  }
  Server server(index, dir.path(), "--compact-min-mb 0.001");
  // One request after another, each answer kept: what the server acknowledged.
  const std::string loop = "for i in $(seq 0 " + std::to_string(attempts - 1) + "); do curl -s -m 5 -o " +
                           quote((dir / "ack").string()) +
                           "$i.json -w '%{http_code}' -X POST --data-binary @" +
                           quote((dir / "add").string()) + "$i.json " + server.url() + "/items > " +
                           quote((dir / "code").string()) + "$i; done";
  const pid_t client = ::fork();
  REQUIRE(client >= 0);
  if (client == 0) {
    ::execl("/bin/bash", "bash", "-c", loop.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  CHECK(server.stop(SIGKILL) == 128 + SIGKILL);
  ::waitpid(client, nullptr, 0);
  std::vector<std::pair<int64_t, int64_t>> acknowledged;  // (row, id)
  for (int64_t i = 0; i < attempts; ++i) {
    const fs::path code = dir / ("code" + std::to_string(i));
    if (!fs::exists(code) || read_file(code) != "201") continue;
    const auto body = nlohmann::json::parse(read_file(dir / ("ack" + std::to_string(i) + ".json")));
    acknowledged.emplace_back(i, body["ids"][0].get<int64_t>());
  }
  INFO(acknowledged.size() << " of " << attempts << " acknowledged before the kill");
  REQUIRE(acknowledged.size() >= 5);
  REQUIRE(acknowledged.size() < static_cast<std::size_t>(attempts));
  // The folder reads back whole, and every acknowledged row is its own nearest item.
  const auto info = run_oml("oml-index", "info --index " + quote(index.string()));
  REQUIRE(info.exit_code == 0);
  const auto found = nearest(dir.path(), index, rows, "after");
  for (const auto& [row, id] : acknowledged) {
    INFO("row " << row);
    CHECK(found[static_cast<std::size_t>(row)].first == id);
    CHECK(found[static_cast<std::size_t>(row)].second == Approx(0.0).margin(1e-3));
  }
  // And the server starts on it again.
  Server again(index, dir.path());
  CHECK(call(again.url() + "/health").status == 200);
}

TEST_CASE("Past the threshold the log becomes a new version in the background, searches going on",
          "[serving][integration][writes]") {
  TempDir dir;
  const fs::path index = random_index(dir.path(), 100, 8);
  const std::string first_version = current_version(index);
  torch::manual_seed(17);
  const at::Tensor rows = torch::randn({120, 8}) + 30.0;
  std::vector<int64_t> ids;
  {
    // 100 x 8 floats = 3.2 KB: a log of 1.6 KB (about 20 single-item records) is due.
    Server server(index, dir.path(), "--compact-min-mb 0.001");
    for (int64_t i = 0; i < rows.size(0); ++i) {
      const Reply r =
          call("-X POST -d '{\"embedding\": " + embedding_json(rows[i]) + "}' " + server.url() + "/items");
      REQUIRE(r.status == 201);
      ids.push_back(r.body["ids"][0].get<int64_t>());
      const Reply s = call("-X POST -d '{\"embedding\": " + embedding_json(rows[i / 2]) + ", \"k\": 1}' " +
                           server.url() + "/search");
      REQUIRE(s.status == 200);
      CHECK(s.body["neighbours"][0]["id"] == ids[static_cast<std::size_t>(i / 2)]);
    }
    CHECK(server.stop(SIGTERM) == 0);
  }
  CHECK(current_version(index) != first_version);
  CHECK_FALSE(fs::exists(index / first_version));
  CHECK_THAT(read_file(dir / "serve.err"), Contains("writing the gallery as a new version"));
  // Only the current version and its log remain.
  int versions = 0;
  for (const auto& entry : fs::directory_iterator(index)) versions += entry.is_directory();
  CHECK(versions == 1);
  const auto found = nearest(dir.path(), index, rows, "s");
  for (std::size_t i = 0; i < ids.size(); ++i) CHECK(found[i].first == ids[i]);
}

TEST_CASE("Faiss indexes replay logged changes in place: an IVF index finds items added through the server",
          "[serving][integration][writes][faiss]") {
  TempDir dir;
  const fs::path index =
      random_index(dir.path(), 3000, 16, "{name: faiss_ivf, args: {nlist: 16, nprobe: 16}}");
  torch::manual_seed(19);
  const at::Tensor rows = torch::randn({20, 16}) * 0.1;
  std::vector<int64_t> ids;
  {
    Server server(index, dir.path());
    for (int64_t i = 0; i < rows.size(0); ++i) {
      const Reply r =
          call("-X POST -d '{\"embedding\": " + embedding_json(rows[i]) + "}' " + server.url() + "/items");
      REQUIRE(r.status == 201);
      ids.push_back(r.body["ids"][0].get<int64_t>());
    }
    CHECK(call("-X DELETE " + server.url() + "/items/" + std::to_string(ids[3])).status == 200);
  }
  const auto found = nearest(dir.path(), index, rows, "s");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    INFO(i);
    if (i == 3) {
      CHECK(found[i].first != ids[i]);
    } else {
      CHECK(found[i].first == ids[i]);
    }
  }
}

}  // namespace serving_writes_tests
