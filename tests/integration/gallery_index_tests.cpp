// oml-index and oml-search as a user runs them (docs/serving.md): a gallery of images built
// through a model into an index folder, searched with new images and with embeddings, changed
// by id, calibrated; bad input exits with 2 and changes nothing; a killed change leaves the
// index whole.
#include <torch/torch.h>

#include <csignal>
#include <limits>
#include <sstream>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "oml/io/npy.h"
#include "oml/models/conv_net.h"
#include "oml/retrieval/backend.h"
#include "oml/retrieval/knn.h"
#include "serving_fixtures.h"

namespace gallery_index_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

TEST_CASE("oml-index build and oml-search find the exact neighbours of new images",
          "[serving][integration]") {
  TempDir dir;
  const Model m = model(dir.path());
  const fs::path gallery = subset_rows(dir.path(), "gallery.csv", 0, 200);
  const fs::path queries = subset_rows(dir.path(), "queries.csv", 200, 40);
  const auto built = build_index(m, gallery, dir / "index");
  INFO(built.out << built.err);
  REQUIRE(built.exit_code == 0);
  CHECK_THAT(built.out, Contains("200 items of dimension 16"));
  const auto manifest = read_json(dir / "index" / "v000001" / "manifest.json");
  CHECK(manifest.at("items") == 200);
  CHECK(manifest.at("model").at("weights") == fs::absolute(m.weights).string());
  CHECK(manifest.at("model").at("sha256").get<std::string>().size() == 64);
  CHECK(read_file(dir / "index" / "CURRENT") == "v000001\n");

  // The queries' embeddings from oml-predict, searched as images and as embeddings.
  const auto predicted =
      run_oml("oml-predict",
              "--config " + quote(m.config.string()) + " --set dataset_root=" + quote(dir.path().string()) +
                  " --set dataframe_name=queries.csv --set save_dir=" + quote((dir / "pred").string()));
  REQUIRE(predicted.exit_code == 0);
  const auto by_images =
      run_oml("oml-search", "--index " + quote((dir / "index").string()) + " --dataframe " +
                                quote(queries.string()) + " --top-k 5 --out " + quote((dir / "s1").string()));
  INFO(by_images.err);
  REQUIRE(by_images.exit_code == 0);
  const auto by_embeddings =
      run_oml("oml-search", "--index " + quote((dir / "index").string()) + " --embeddings " +
                                quote((dir / "pred" / "embeddings.npy").string()) + " --top-k 5 --out " +
                                quote((dir / "s2").string()));
  REQUIRE(by_embeddings.exit_code == 0);
  const at::Tensor ids = oml::io::read_npy(dir / "s1" / "neighbours_ids.npy");
  CHECK(torch::equal(ids, oml::io::read_npy(dir / "s2" / "neighbours_ids.npy")));
  CHECK(torch::allclose(oml::io::read_npy(dir / "s1" / "neighbours_distances.npy"),
                        oml::io::read_npy(dir / "s2" / "neighbours_distances.npy")));

  // Equal to the exact k-NN of the query embeddings against the gallery's (ids = gallery rows).
  oml::retrieval::ItemSet q, g;
  q.embeddings = oml::io::read_npy(dir / "pred" / "embeddings.npy");
  g.embeddings = oml::io::read_npy(dir / "index" / "v000001" / "embeddings.npy");
  for (int64_t i = 0; i < 40; ++i) q.ids.push_back(-1 - i), q.labels.push_back(0);
  for (int64_t i = 0; i < 200; ++i) g.ids.push_back(i), g.labels.push_back(0);
  oml::retrieval::KnnOptions options;
  options.top_k = 5;
  const auto exact = oml::retrieval::retrieve_knn(q, g, options);
  for (int64_t i = 0; i < 40; ++i) {
    for (int64_t r = 0; r < 5; ++r) CHECK(ids[i][r].item<int64_t>() == exact.retrieved[exact.begin(i) + r]);
  }
  // neighbours.csv names the gallery items as items.csv does; answers.csv has every query.
  const auto rows = csv_rows(dir / "s1" / "neighbours.csv");
  REQUIRE(rows.size() == 1 + 40 * 5);
  CHECK(rows[0] == std::vector<std::string>{"query", "query_path", "rank", "id", "path", "label", "category",
                                            "distance"});
  const auto items = csv_rows(dir / "index" / "v000001" / "items.csv");
  const auto first = std::stoll(rows[1][3]);
  CHECK(rows[1][4] == items[static_cast<std::size_t>(first) + 1][1]);
  CHECK(rows[1][5] == items[static_cast<std::size_t>(first) + 1][2]);
  CHECK(csv_rows(dir / "s1" / "answers.csv").size() == 41);
}

TEST_CASE(
    "oml-index add and remove log changes that search as rebuilt, and compact and calibrate write versions",
    "[serving][integration][faiss]") {
  if (!oml::retrieval::built_with_faiss()) return;
  TempDir dir;
  // Every list probed: a changed IVF index must find the exact neighbours.
  const Model m = model(dir.path(), "{name: faiss_ivf, args: {nlist: 4, nprobe: 4}}");
  const fs::path gallery = subset_rows(dir.path(), "gallery.csv", 0, 200);
  const fs::path more = subset_rows(dir.path(), "more.csv", 200, 50);
  const fs::path queries = subset_rows(dir.path(), "queries.csv", 250, 30);
  const fs::path index = dir / "index";
  REQUIRE(build_index(m, gallery, index).exit_code == 0);
  const auto added =
      run_oml("oml-index", "add --index " + quote(index.string()) + " --dataframe " + quote(more.string()));
  INFO(added.out << added.err);
  REQUIRE(added.exit_code == 0);
  CHECK_THAT(added.out, Contains("added 50 items (ids 200..249)"));
  const auto removed = run_oml("oml-index", "remove --index " + quote(index.string()) + " --ids 0,7,210");
  INFO(removed.err);
  REQUIRE(removed.exit_code == 0);
  // The changes are logged beside the version, which stays as built.
  CHECK(read_file(index / "CURRENT") == "v000001\n");
  CHECK(fs::exists(index / "v000001.changes"));
  CHECK(csv_rows(index / "v000001" / "items.csv").size() == 1 + 200);
  const auto search = [&](const std::string& index_name, const std::string& out) {
    const auto r = run_oml("oml-search", "--index " + quote((dir / index_name).string()) + " --dataframe " +
                                             quote(queries.string()) + " --top-k 5 --out " +
                                             quote((dir / out).string()));
    REQUIRE(r.exit_code == 0);
    return csv_rows(dir / out / "neighbours.csv");
  };
  const auto logged = search("index", "s_logged");
  // Compacted: one version with the 247 items, the log gone with the version it belonged to.
  REQUIRE(run_oml("oml-index", "compact --index " + quote(index.string())).exit_code == 0);
  CHECK(read_file(index / "CURRENT") == "v000002\n");
  CHECK_FALSE(fs::exists(index / "v000001"));  // superseded versions are removed, with their logs
  CHECK_FALSE(fs::exists(index / "v000001.changes"));
  const auto items = csv_rows(index / "v000002" / "items.csv");
  REQUIRE(items.size() == 1 + 247);
  CHECK(items[1][0] == "1");
  CHECK(items.back()[0] == "249");

  // A fresh index of the same 247 images gives the same neighbours (as items.csv rows).
  write_file(dir / "same.csv", [&] {
    std::ostringstream out;
    out << "label,path,split,is_query,is_gallery\n";
    for (std::size_t r = 1; r < items.size(); ++r)
      out << items[r][2] << ',' << items[r][1] << ",validation,True,True\n";
    return out.str();
  }());
  REQUIRE(build_index(m, dir / "same.csv", dir / "fresh").exit_code == 0);
  const auto changed = search("index", "s_index");
  const auto fresh = search("fresh", "s_fresh");
  REQUIRE(changed.size() == fresh.size());
  REQUIRE(logged.size() == fresh.size());
  for (std::size_t i = 1; i < changed.size(); ++i) {
    CHECK(changed[i][4] == fresh[i][4]);  // the same gallery image at every rank
    CHECK(std::stod(changed[i][7]) == Approx(std::stod(fresh[i][7])).epsilon(1e-5));
    CHECK(logged[i][4] == fresh[i][4]);  // and so before compaction, the log replayed
    CHECK(std::stod(logged[i][7]) == Approx(std::stod(fresh[i][7])).epsilon(1e-5));
  }

  // Calibrated: the threshold is stored and applied; `--threshold none` lists everything again.
  const auto calibrated =
      run_oml("oml-index", "calibrate --index " + quote(index.string()) + " --dataframe " +
                               quote(gallery.string()) + " --target-fmr 0.01");
  INFO(calibrated.err);
  REQUIRE(calibrated.exit_code == 0);
  const auto manifest = read_json(index / "v000003" / "manifest.json");
  const double threshold = manifest.at("calibration").at("threshold").get<double>();
  CHECK(manifest.at("calibration").at("target_fmr").get<double>() == 0.01);
  const auto open =
      run_oml("oml-search", "--index " + quote(index.string()) + " --dataframe " + quote(queries.string()) +
                                " --top-k 5 --out " + quote((dir / "open").string()));
  REQUIRE(open.exit_code == 0);
  CHECK_THAT(open.err + open.out, Contains("calibrated threshold"));
  for (const auto& row : csv_rows(dir / "open" / "neighbours.csv")) {
    if (row[0] != "query") CHECK(std::stod(row[7]) <= threshold);
  }
  for (const auto& row : csv_rows(dir / "open" / "answers.csv")) {
    if (row[0] == "query") continue;
    CHECK((row[2] == "unknown") == (std::stod(changed[1 + 5 * std::stoul(row[0])][7]) > threshold));
  }
}

TEST_CASE("Bad oml-index and oml-search input exits with 2 and leaves the index as it was",
          "[serving][integration]") {
  TempDir dir;
  const Model m = model(dir.path());
  const fs::path gallery = subset_rows(dir.path(), "gallery.csv", 0, 60);
  const fs::path index = dir / "index";
  REQUIRE(build_index(m, gallery, index).exit_code == 0);
  const std::string before = read_file(index / "CURRENT");
  {  // never over an existing folder
    const auto r = build_index(m, gallery, index);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("exists and is not empty"));
  }
  {  // what a killed build leaves (its lock, a temporary of a dead process) does not block a rerun
    const fs::path left = dir / "killed_build";
    fs::create_directories(left / "v000001.tmp-999999-0");
    write_file(left / ".lock", "");
    const auto r = build_index(m, gallery, left);
    INFO(r.err);
    CHECK(r.exit_code == 0);
    CHECK_FALSE(fs::exists(left / "v000001.tmp-999999-0"));
    CHECK(read_file(left / "CURRENT") == "v000001\n");
  }
  {  // a .lock that is a link is refused, and what it points to is untouched
    const fs::path linked = dir / "linked";
    fs::copy(index, linked, fs::copy_options::recursive);
    write_file(dir / "passwd", "root:x:0:0\n");
    fs::remove(linked / ".lock");
    fs::create_symlink(dir / "passwd", linked / ".lock");
    const auto r = run_oml("oml-index", "remove --index " + quote(linked.string()) + " --ids 0");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(".lock' is a symbolic link, which oml-index never makes; remove it"));
    CHECK(read_file(dir / "passwd") == "root:x:0:0\n");
    CHECK(read_file(linked / "CURRENT") == before);
  }
  {  // a user's folder is refused with all it holds, another program's temporaries of dead
     // processes included (oml-convert leaves the only copy of a dataset in `<dst>.tmp-PID-N`)
    const fs::path mine = dir / "mine";
    fs::create_directories(mine / "photos.tmp-999999-1");
    write_file(mine / "photos.tmp-999999-1" / "a.jpg", "x");
    write_file(mine / "report.txt.tmp-999998-0", "draft");
    write_file(mine / "notes.txt", "notes");
    const auto r = build_index(m, gallery, mine);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("exists and is not empty"));
    CHECK(read_file(mine / "photos.tmp-999999-1" / "a.jpg") == "x");
    CHECK(read_file(mine / "report.txt.tmp-999998-0") == "draft");
    CHECK_FALSE(fs::exists(mine / "CURRENT"));
  }
  {  // wrong embedding size
    oml::io::write_npy(dir / "wide.npy", torch::randn({3, 20}));
    const auto r = run_oml("oml-search", "--index " + quote(index.string()) + " --embeddings " +
                                             quote((dir / "wide.npy").string()) + " --out " +
                                             quote((dir / "o").string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("dimension 20") && Contains("dimension 16"));
    CHECK_FALSE(fs::exists(dir / "o" / "neighbours.csv"));
    const auto a = run_oml("oml-index", "add --index " + quote(index.string()) + " --embeddings " +
                                            quote((dir / "wide.npy").string()));
    CHECK(a.exit_code == 2);
  }
  {  // --items headers: trimmed as a dataframe's (" label" was dropped silently), each once, and
     // a known name in another case named
    oml::io::write_npy(dir / "three.npy", torch::randn({3, 16}));
    const auto add = [&](const std::string& csv) {
      write_file(dir / "items.csv", csv);
      return run_oml("oml-index", "add --index " + quote(index.string()) + " --embeddings " +
                                      quote((dir / "three.npy").string()) + " --items " +
                                      quote((dir / "items.csv").string()));
    };
    const auto twice = add("label,path,label\n1,a,1\n2,b,2\n3,c,3\n");
    CHECK(twice.exit_code == 2);
    CHECK_THAT(twice.err, Contains("items.csv:1: column 'label' is given twice"));
    const auto cased = add("path,Label\na,1\nb,2\nc,3\n");
    CHECK(cased.exit_code == 2);
    CHECK_THAT(cased.err, Contains("column 'Label': did you mean 'label'?"));
    CHECK(read_file(index / "CURRENT") == before);
    write_file(dir / "items.csv", "index, path, label, category\n0,a,1,x\n1,b,2,y\n2,c,3,z\n");
    const auto spaced = run_oml("oml-index", "build --embeddings " + quote((dir / "three.npy").string()) +
                                                 " --items " + quote((dir / "items.csv").string()) +
                                                 " --out " + quote((dir / "spaced").string()));
    INFO(spaced.err);
    REQUIRE(spaced.exit_code == 0);
    const auto items = csv_rows(dir / "spaced" / "v000001" / "items.csv");
    REQUIRE(items.size() == 4);
    CHECK(items.back() == std::vector<std::string>{"2", "c", "3", "z"});
  }
  {  // unknown id
    const auto r = run_oml("oml-index", "remove --index " + quote(index.string()) + " --ids 5,999");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("item id 999 is not in") && Contains("nothing was removed"));
  }
  {  // not an index
    const auto r = run_oml("oml-search", "--index " + quote(dir.path().string()) +
                                             " --embeddings x.npy --out " + quote((dir / "o2").string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("not an index folder"));
  }
  {  // the model file changed since the build: images would not embed as the gallery did
    torch::manual_seed(99);
    oml::models::ConvNetOptions options;
    options.channels = {8, 16};
    options.feat_dim = 16;
    write_state_dict_file(m.weights, *oml::models::ConvNet(options));
    const auto r =
        run_oml("oml-search", "--index " + quote(index.string()) + " --dataframe " + quote(gallery.string()) +
                                  " --out " + quote((dir / "o3").string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("has changed since the index was built"));
  }
  {  // a calibration set without labels
    oml::io::write_npy(dir / "e.npy", torch::randn({10, 16}));
    const auto r = run_oml("oml-index", "calibrate --index " + quote(index.string()) + " --embeddings " +
                                            quote((dir / "e.npy").string()) + " --target-fmr 0.01");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("has no label"));
  }
  {  // a folder that is not an index gets no lock file; a missing one is named
    const fs::path plain = dir / "plain";
    write_file(plain / "a.txt", "mine");
    const auto r = run_oml("oml-index", "add --index " + quote(plain.string()) + " --embeddings " +
                                            quote((dir / "e.npy").string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("not an index folder"));
    CHECK_FALSE(fs::exists(plain / ".lock"));
    const auto missing = run_oml("oml-index", "add --index " + quote((dir / "nowhere").string()) +
                                                  " --embeddings " + quote((dir / "e.npy").string()));
    CHECK(missing.exit_code == 2);
    CHECK_THAT(missing.err, Contains("nowhere: no such index folder"));
    CHECK_FALSE(fs::exists(dir / "nowhere"));
  }
  {  // an edited items.csv whose id is negative (it hid the query's nearest item) or out of order
    const fs::path edited = dir / "edited";
    fs::copy(index, edited, fs::copy_options::recursive);
    const fs::path items = edited / read_file(index / "CURRENT").substr(0, 7) / "items.csv";
    const std::string text = read_file(items);
    const std::size_t row = text.find('\n') + 1;
    write_file(items, text.substr(0, row) + "-1" + text.substr(text.find(',', row)));
    const auto r =
        run_oml("oml-search", "--index " + quote(edited.string()) + " --embeddings " +
                                  quote((dir / "e.npy").string()) + " --out " + quote((dir / "o4").string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("items.csv:2: id -1 is negative"));
    write_file(items, text.substr(0, row) + "7" + text.substr(text.find(',', row)));
    const auto order =
        run_oml("oml-search", "--index " + quote(edited.string()) + " --embeddings " +
                                  quote((dir / "e.npy").string()) + " --out " + quote((dir / "o4").string()));
    CHECK(order.exit_code == 2);
    CHECK_THAT(order.err, Contains("items.csv:3: id 1 does not follow 7"));
    write_file(items, text);
    // A NaN in embeddings.npy silently dropped the item from every list.
    const fs::path embeddings = items.parent_path() / "embeddings.npy";
    const at::Tensor rows = oml::io::read_npy(embeddings);
    const at::Tensor damaged = rows.clone();
    damaged[5][3] = std::numeric_limits<float>::quiet_NaN();
    oml::io::write_npy(embeddings, damaged);
    const auto nan =
        run_oml("oml-search", "--index " + quote(edited.string()) + " --embeddings " +
                                  quote((dir / "e.npy").string()) + " --out " + quote((dir / "o4").string()));
    CHECK(nan.exit_code == 2);
    CHECK_THAT(nan.err, Contains("embeddings.npy embedding row 5") && Contains("NaN or infinity"));
    // Rows of another size than the manifest's dimension.
    oml::io::write_npy(embeddings, torch::cat({rows, rows}, 1));
    const auto wide = run_oml("oml-index", "info --index " + quote(edited.string()));
    CHECK(wide.exit_code == 2);
    CHECK_THAT(wide.err, Contains("embeddings.npy: rows of dimension 32, manifest.json says 16"));
  }
  {  // an output in the way is refused before the search; a --top-k past the gallery adds no
     // columns (10^8 once allocated 4 GB per 5 queries)
    const fs::path out = dir / "o5";
    fs::create_directories(out / "neighbours.csv");
    write_file(out / ".oml-search", "");
    const auto r =
        run_oml("oml-search", "--index " + quote(index.string()) + " --embeddings " +
                                  quote((dir / "e.npy").string()) + " --out " + quote(out.string()));
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("neighbours.csv is a folder where oml-search writes a file"));
    // Inside the index, the neighbours would go with the version oml-index removes next.
    const auto inside = run_oml("oml-search", "--index " + quote(index.string()) + " --embeddings " +
                                                  quote((dir / "e.npy").string()) + " --out " +
                                                  quote((index / "mine").string()));
    CHECK(inside.exit_code == 2);
    CHECK_THAT(inside.err, Contains("is inside --index"));
    CHECK_FALSE(fs::exists(index / "mine"));
    const auto slash = run_oml("oml-search", "--index " + quote(index.string() + "/") + " --embeddings " +
                                                 quote((dir / "e.npy").string()) + " --out " +
                                                 quote((index / "mine").string()));
    CHECK(slash.exit_code == 2);  // "index/" is the folder "index"
    CHECK_THAT(slash.err, Contains("is inside --index"));
    const auto file = run_oml("oml-search", "--index " + quote(index.string()) + " --embeddings " +
                                                quote((dir / "e.npy").string()) + " --out " +
                                                quote((dir / "e.npy").string()));
    CHECK(file.exit_code == 2);
    CHECK_THAT(file.err, Contains("e.npy is a file, not a folder"));
    const auto wide = run_oml("oml-search", "--index " + quote(index.string()) + " --embeddings " +
                                                quote((dir / "e.npy").string()) +
                                                " --top-k 100000000 --out " + quote((dir / "o6").string()));
    INFO(wide.err);
    REQUIRE(wide.exit_code == 0);
    CHECK(oml::io::read_npy(dir / "o6" / "neighbours_ids.npy").sizes() == at::IntArrayRef({10, 60}));
  }
  CHECK(read_file(index / "CURRENT") == before);
}

TEST_CASE("oml-search that a compaction overtakes reads the new version: no logged item is missed",
          "[serving][integration][faults]") {
  TempDir dir;
  const Model m = model(dir.path());
  const fs::path gallery = subset_rows(dir.path(), "gallery.csv", 0, 60);
  const fs::path index = dir / "index";
  REQUIRE(build_index(m, gallery, index).exit_code == 0);
  torch::manual_seed(5);
  oml::io::write_npy(dir / "added.npy", torch::randn({10, 16}) * 100);  // far from the gallery
  REQUIRE(run_oml("oml-index", "add --index " + quote(index.string()) + " --embeddings " +
                                   quote((dir / "added.npy").string()))
              .exit_code == 0);
  // The reader pauses between the version and its log; the compaction then makes v000002 current
  // and removes v000001's log. The reader used to find no log and answer without the 10 items.
  const std::string search = "OML_FAILPOINTS=index:before_log=pause:2 " + quote(command_path("oml-search")) +
                             " --index " + quote(index.string()) + " --embeddings " +
                             quote((dir / "added.npy").string()) + " --top-k 1 --threshold none --out " +
                             quote((dir / "s").string());
  const std::string err = quote((dir / "search.err").string());
  const std::string script =
      search + " 2> " + err + " & pid=$!; for i in $(seq 400); do grep -q 'failpoint index:before_log' " +
      err + " && break; sleep 0.05; done; " + quote(command_path("oml-index")) + " compact --index " +
      quote(index.string()) + " || echo compact-failed; wait $pid; echo status=$?";
  const auto r = run("bash -c " + quote(script), 120);
  INFO(r.out << read_file(dir / "search.err"));
  CHECK_THAT(r.out, Contains("status=0") && !Contains("compact-failed"));
  CHECK(read_file(index / "CURRENT") == "v000002\n");
  const auto rows = csv_rows(dir / "s" / "neighbours.csv");
  REQUIRE(rows.size() == 11);
  for (std::size_t q = 1; q < rows.size(); ++q) CHECK(rows[q][3] == std::to_string(60 + q - 1));
}

TEST_CASE("An oml-index add killed at any moment leaves the index whole", "[serving][integration][faults]") {
  TempDir dir;
  const Model m = model(dir.path());
  const fs::path index = dir / "index";
  oml::io::write_npy(dir / "g.npy", torch::randn({2000, 16}));
  oml::io::write_npy(dir / "more.npy", torch::randn({20000, 16}));
  const auto built =
      run_oml("oml-index", "build --config " + quote(m.config.string()) + " --embeddings " +
                               quote((dir / "g.npy").string()) + " --out " + quote(index.string()));
  REQUIRE(built.exit_code == 0);
  // SIGKILL at growing delays: each time the index must read back whole, at the old version or
  // the new one, and a later change must succeed.
  int64_t expected = 2000;
  for (const int delay_ms : {5, 30, 80, 150, 300}) {
    INFO("killed after " << delay_ms << " ms");
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      const std::string cmd = command_path("oml-index");
      ::execl(cmd.c_str(), cmd.c_str(), "add", "--index", index.c_str(), "--embeddings",
              (dir / "more.npy").c_str(), "--quiet", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const auto info = run_oml("oml-index", "info --index " + quote(index.string()));
    INFO(info.err);
    REQUIRE(info.exit_code == 0);
    const bool added =
        info.out.find("items:       " + std::to_string(expected + 20000) + " ") != std::string::npos;
    CHECK((added || info.out.find("items:       " + std::to_string(expected) + " ") != std::string::npos));
    if (added) expected += 20000;
  }
  const auto search = run_oml("oml-search", "--index " + quote(index.string()) + " --embeddings " +
                                                quote((dir / "g.npy").string()) + " --top-k 1 --out " +
                                                quote((dir / "s").string()));
  INFO(search.err);
  REQUIRE(search.exit_code == 0);
  // A later change cuts off what a killed append left, and a new version removes everything else:
  // one version folder and no log remain.
  REQUIRE(run_oml("oml-index", "remove --index " + quote(index.string()) + " --ids 0").exit_code == 0);
  REQUIRE(run_oml("oml-index", "compact --index " + quote(index.string())).exit_code == 0);
  int versions = 0;
  for (const auto& entry : fs::directory_iterator(index)) {
    const std::string name = entry.path().filename().string();
    if (name != "CURRENT" && name != ".lock") ++versions;
  }
  CHECK(versions == 1);
}

namespace {

// 300 clustered embeddings with labels, of varied norms (cosine ignores them; Euclidean and dot
// do not), written as a gallery (rows 0..149), rows to add (150..199), queries (200..239) and a
// labelled calibration set (200..299). Returns the rows.
at::Tensor write_distance_test_rows(const fs::path& dir) {
  torch::manual_seed(31);
  const int64_t n = 300, dim = 12;
  const auto labels = torch::randint(0, 20, {n});
  const auto centres = torch::randn({20, dim});
  const auto raw =
      ((centres.index_select(0, labels) + 0.4 * torch::randn({n, dim})) * torch::rand({n, 1}).mul(5).add(0.2))
          .contiguous();
  const auto rows = [&](int64_t first, int64_t count) { return raw.narrow(0, first, count).contiguous(); };
  oml::io::write_npy(dir / "gallery.npy", rows(0, 150));
  oml::io::write_npy(dir / "more.npy", rows(150, 50));
  oml::io::write_npy(dir / "queries.npy", rows(200, 40));
  oml::io::write_npy(dir / "calibration.npy", rows(200, 100));
  write_file(dir / "calibration.csv", [&] {
    std::ostringstream out;
    out << "label\n";
    for (int64_t i = 200; i < 300; ++i) out << labels[i].item<int64_t>() << '\n';
    return out.str();
  }());
  return raw;
}

// Builds `index` over gallery.npy with `set` (a --set of retrieval_backend), adds more.npy (logged),
// searches queries.npy, top 5, into dir/s (the version with its log applied), then compacts the
// log into version 2.
void build_add_and_search(const fs::path& dir, const fs::path& index, const std::string& set) {
  const auto built = run_oml("oml-index", "build --embeddings " + quote((dir / "gallery.npy").string()) +
                                              " --out " + quote(index.string()) + set);
  INFO(built.out << built.err);
  REQUIRE(built.exit_code == 0);
  const auto added = run_oml("oml-index", "add --index " + quote(index.string()) + " --embeddings " +
                                              quote((dir / "more.npy").string()));
  INFO(added.err);
  REQUIRE(added.exit_code == 0);
  const auto searched = run_oml("oml-search", "--index " + quote(index.string()) + " --embeddings " +
                                                  quote((dir / "queries.npy").string()) +
                                                  " --top-k 5 --out " + quote((dir / "s").string()));
  INFO(searched.err);
  REQUIRE(searched.exit_code == 0);
  REQUIRE(run_oml("oml-index", "compact --index " + quote(index.string())).exit_code == 0);
  REQUIRE(read_file(index / "CURRENT") == "v000002\n");
}

// Calibrates `index` (version 2 -> 3) on the calibration rows at fmr 0.05 and checks that a search
// of the queries answers "unknown" exactly for the queries whose nearest distance
// (`expected_distances[q][0]`, brute force) lies beyond the threshold, and not for all of them.
// Returns the threshold.
double calibrate_and_check_open_set(const fs::path& dir, const fs::path& index,
                                    const at::Tensor& expected_distances) {
  const auto calibrated =
      run_oml("oml-index", "calibrate --index " + quote(index.string()) + " --embeddings " +
                               quote((dir / "calibration.npy").string()) + " --items " +
                               quote((dir / "calibration.csv").string()) + " --target-fmr 0.05");
  INFO(calibrated.err);
  REQUIRE(calibrated.exit_code == 0);
  const double threshold =
      read_json(index / "v000003" / "manifest.json").at("calibration").at("threshold").get<double>();
  const auto open = run_oml("oml-search", "--index " + quote(index.string()) + " --embeddings " +
                                              quote((dir / "queries.npy").string()) + " --top-k 5 --out " +
                                              quote((dir / "open").string()));
  REQUIRE(open.exit_code == 0);
  int64_t unknown = 0;
  for (const auto& row : csv_rows(dir / "open" / "answers.csv")) {
    if (row[0] == "query") continue;
    const bool beyond = expected_distances[std::stoll(row[0])][0].item<double>() > threshold;
    CHECK((row[2] == "unknown") == beyond);
    unknown += beyond ? 1 : 0;
  }
  CHECK(unknown < 40);
  return threshold;
}

}  // namespace

TEST_CASE(
    "An index under the cosine distance answers cosine neighbours, also after add, and calibrates in its "
    "units",
    "[serving][integration][distance]") {
  TempDir dir;
  const at::Tensor raw = write_distance_test_rows(dir.path());
  const auto rows = [&](int64_t first, int64_t count) { return raw.narrow(0, first, count).contiguous(); };
  const fs::path index = dir / "index";
  const std::string cosine = " --set 'retrieval_backend={name: exact, distance: cosine}'";
  build_add_and_search(dir.path(), index, cosine);
  // The index keeps the rows as it searches them: unit rows.
  const at::Tensor stored = oml::io::read_npy(index / "v000002" / "embeddings.npy");
  CHECK(torch::allclose(stored.norm(2, {1}), torch::ones({200}), 1e-5, 1e-5));
  // Brute force in double: 1 - cos of the raw rows; ids are the gallery rows (0..199 in order).
  const auto q = rows(200, 40).to(torch::kDouble), g = rows(0, 200).to(torch::kDouble);
  const auto cos = torch::mm(q / q.norm(2, {1}, true), (g / g.norm(2, {1}, true)).t());
  const auto [expected_distances, expected_ids] = (1.0 - cos).topk(5, 1, /*largest=*/false);
  const at::Tensor ids = oml::io::read_npy(dir / "s" / "neighbours_ids.npy");
  const at::Tensor distances = oml::io::read_npy(dir / "s" / "neighbours_distances.npy");
  CHECK(torch::equal(ids, expected_ids));
  CHECK(torch::allclose(distances.to(torch::kDouble), expected_distances, 1e-5, 1e-6));

  // Calibrated in cosine distances: a threshold in [0, 2], and "unknown" exactly past it.
  const double threshold = calibrate_and_check_open_set(dir.path(), index, expected_distances);
  CHECK(threshold > 0.0);
  CHECK(threshold < 2.0);
}

TEST_CASE(
    "An index under dot answers by the inner product (a Faiss inner-product index), also after add, and "
    "calibrates a threshold in -q.g",
    "[serving][integration][distance][faiss]") {
  if (!oml::retrieval::built_with_faiss()) return;  // the exact engine's dot is tested in core
  TempDir dir;
  const at::Tensor raw = write_distance_test_rows(dir.path());
  const auto rows = [&](int64_t first, int64_t count) { return raw.narrow(0, first, count).contiguous(); };
  const fs::path index = dir / "index";
  // Every list probed: the IVF index must then equal brute force.
  const std::string dot =
      " --set 'retrieval_backend={name: faiss_ivf, args: {nlist: 3, nprobe: 3}, distance: dot}'";
  build_add_and_search(dir.path(), index, dot);
  // The rows are kept as they are (no normalising under dot).
  CHECK(torch::equal(oml::io::read_npy(index / "v000002" / "embeddings.npy"), rows(0, 200)));
  // Brute force in double: -q.g of the raw rows, smallest first.
  const auto q = rows(200, 40).to(torch::kDouble), g = rows(0, 200).to(torch::kDouble);
  const auto [expected_distances, expected_ids] = (-torch::mm(q, g.t())).topk(5, 1, /*largest=*/false);
  CHECK(torch::equal(oml::io::read_npy(dir / "s" / "neighbours_ids.npy"), expected_ids));
  CHECK(torch::allclose(oml::io::read_npy(dir / "s" / "neighbours_distances.npy").to(torch::kDouble),
                        expected_distances, 1e-5, 1e-5));

  calibrate_and_check_open_set(dir.path(), index, expected_distances);
  // A negative threshold is a distance under dot (it is refused under the others).
  const auto negative =
      run_oml("oml-search", "--index " + quote(index.string()) + " --embeddings " +
                                quote((dir / "queries.npy").string()) + " --top-k 5 --threshold -1.5 --out " +
                                quote((dir / "neg").string()));
  INFO(negative.err);
  CHECK(negative.exit_code == 0);
}

}  // namespace gallery_index_tests
