// oml-search --rerank (docs/serving.md#re-ranking-with-a-pairwise-model): the index's top results
// re-ranked by a pairwise model equal the library's pairwise_reranker over exact retrieval of the
// same queries; an image re-ranker reads both sides' images; the documented command runs; bad
// input exits with 2 and leaves the index as it was.
#include <torch/torch.h>

#include <map>
#include <regex>
#include <sstream>
#include <tuple>

#include "oml/io/npy.h"
#include "oml/models/conv_net.h"
#include "oml/models/pairwise_model.h"
#include "oml/retrieval/knn.h"
#include "oml/retrieval/postprocessor.h"
#include "serving_fixtures.h"

namespace search_rerank_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

// The queries' embeddings as oml-predict writes them (what oml-search embeds them to).
at::Tensor predicted_embeddings(const Model& m, const fs::path& queries, const fs::path& out) {
  const auto r = run_oml("oml-predict", "--config " + quote(m.config.string()) +
                                            " --set dataset_root=" + quote(queries.parent_path().string()) +
                                            " --set dataframe_name=" + quote(queries.filename().string()) +
                                            " --set save_dir=" + quote(out.string()));
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return oml::io::read_npy(out / "embeddings.npy");
}

oml::retrieval::ItemSet item_set(const at::Tensor& embeddings, bool queries) {
  oml::retrieval::ItemSet set;
  set.embeddings = embeddings.contiguous();
  for (int64_t i = 0; i < embeddings.size(0); ++i) {
    set.ids.push_back(queries ? -1 - i : i);
    set.labels.push_back(0);
  }
  return set;
}

// Every file of the folder (relative path -> bytes).
std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) files[fs::relative(entry.path(), dir).string()] = read_file(entry.path());
  }
  return files;
}

// A neighbours.csv row: query, rank, id, distance.
struct Row {
  int64_t query, rank, id;
  double distance;
};
std::vector<Row> neighbours(const fs::path& file) {
  std::vector<Row> out;
  const auto rows = csv_rows(file);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    out.push_back(
        {std::stoll(rows[i][0]), std::stoll(rows[i][2]), std::stoll(rows[i][3]), std::stod(rows[i][7])});
  }
  return out;
}

// An index folder `dir/index` of the subset's first `gallery_rows` rows through the fixtures'
// model, and the next `query_rows` rows as the queries' dataframe.
struct IndexedSubset {
  TempDir dir;
  Model m;
  fs::path queries;

  IndexedSubset(std::size_t gallery_rows, std::size_t query_rows)
      : m(model(dir.path())), queries(subset_rows(dir.path(), "queries.csv", gallery_rows, query_rows)) {
    const auto built = build_index(m, subset_rows(dir.path(), "gallery.csv", 0, gallery_rows), dir / "index");
    INFO(built.err);
    REQUIRE(built.exit_code == 0);
  }
};

}  // namespace

TEST_CASE("oml-search --rerank lists what pairwise_reranker makes of exact retrieval",
          "[serving][pairwise][integration]") {
  const IndexedSubset indexed(150, 30);
  const TempDir& dir = indexed.dir;
  const fs::path& queries = indexed.queries;

  // A linear_siamese that is not the identity (so re-ranking changes the lists), saved as a
  // pairwise checkpoint.
  torch::manual_seed(5);
  oml::models::LinearSiamese siamese(16, /*identity_init=*/true);
  {
    const torch::NoGradGuard no_grad;
    for (auto& p : siamese->parameters()) p.add_(0.5 * torch::randn_like(p));
  }
  siamese->eval();
  write_state_dict_file(dir / "pairwise.pth", *siamese);
  write_file(dir / "rerank.yaml",
             "num_threads: 1\npairwise_model: {name: linear_siamese, args: {feat_dim: 16, "
             "weights: " +
                 (dir / "pairwise.pth").string() +
                 "}}\npostprocessor: {name: pairwise_reranker, args: {top_n: 5, "
                 "batch_size: 7}}\n");
  const std::string index = " --index " + quote((dir / "index").string());
  // k = 3 < top_n: the search retrieves 5, re-ranks them and writes the first 3.
  const auto reranked = run_oml(
      "oml-search", index + " --dataframe " + quote(queries.string()) + " --top-k 3 --rerank " +
                        quote((dir / "rerank.yaml").string()) + " --out " + quote((dir / "s").string()));
  INFO(reranked.out << reranked.err);
  REQUIRE(reranked.exit_code == 0);
  CHECK_THAT(reranked.out, Contains("re-ranked by linear_siamese"));
  const auto plain = run_oml("oml-search", index + " --dataframe " + quote(queries.string()) +
                                               " --top-k 3 --out " + quote((dir / "plain").string()));
  REQUIRE(plain.exit_code == 0);

  // The library: exact top 5 of the query embeddings, re-ranked by the same model.
  const auto q = item_set(predicted_embeddings(indexed.m, queries, dir / "pred"), true);
  const auto g = item_set(oml::io::read_npy(dir / "index" / "v000001" / "embeddings.npy"), false);
  oml::retrieval::KnnOptions options;
  options.top_k = 5;
  oml::retrieval::PairwiseRerankerOptions rerank;
  rerank.top_n = 5;
  rerank.batch_size = 7;
  const auto scorer = [&](const std::vector<int64_t>& query_ids, const std::vector<int64_t>& gallery_ids) {
    std::vector<int64_t> query_rows;
    for (const int64_t id : query_ids) query_rows.push_back(-1 - id);
    const torch::NoGradGuard no_grad;
    const at::Tensor scores = siamese
                                  ->predict(q.embeddings.index_select(0, torch::tensor(query_rows)),
                                            g.embeddings.index_select(0, torch::tensor(gallery_ids)))
                                  .contiguous();
    return std::vector<float>(scores.data_ptr<float>(), scores.data_ptr<float>() + scores.numel());
  };
  const auto expected = oml::retrieval::make_pairwise_reranker(rerank, scorer)
                            ->process(oml::retrieval::retrieve_knn(q, g, options));

  const auto rows = neighbours(dir / "s" / "neighbours.csv");
  REQUIRE(rows.size() == 30 * 3);
  const auto plain_rows = neighbours(dir / "plain" / "neighbours.csv");
  REQUIRE(plain_rows.size() == rows.size());
  const at::Tensor ids = oml::io::read_npy(dir / "s" / "neighbours_ids.npy");
  const at::Tensor scores = oml::io::read_npy(dir / "s" / "neighbours_distances.npy");
  int changed = 0;
  for (const Row& row : rows) {
    INFO("query " << row.query << " rank " << row.rank);
    const int64_t at = expected.begin(row.query) + row.rank - 1;
    CHECK(row.id == expected.retrieved[at]);  // items.csv ids are the gallery rows here
    CHECK(row.distance == Approx(expected.distances[at]).margin(1e-5));
    CHECK(ids[row.query][row.rank - 1].item<int64_t>() == row.id);
    CHECK(scores[row.query][row.rank - 1].item<double>() == Approx(row.distance).margin(1e-6));
    changed += plain_rows[static_cast<std::size_t>(row.query * 3 + row.rank - 1)].id != row.id ? 1 : 0;
  }
  CHECK(changed > 0);  // the re-ranker did re-rank
  // answers.csv: the re-ranked first item, with its score.
  const auto answers = csv_rows(dir / "s" / "answers.csv");
  REQUIRE(answers.size() == 31);
  CHECK(answers[1][2] == "known");
  CHECK(std::stoll(answers[1][3]) == rows[0].id);

  // Query embeddings re-rank the same way: this model reads embeddings, not images.
  oml::io::write_npy(dir / "q.npy", q.embeddings);
  const auto by_embeddings = run_oml(
      "oml-search", index + " --embeddings " + quote((dir / "q.npy").string()) + " --top-k 3 --rerank " +
                        quote((dir / "rerank.yaml").string()) + " --out " + quote((dir / "e").string()));
  REQUIRE(by_embeddings.exit_code == 0);
  CHECK(torch::equal(oml::io::read_npy(dir / "e" / "neighbours_ids.npy"), ids));

  // A threshold decides known/unknown on the nearest embedding distance, before re-ranking; a
  // known query's re-ranked list is written whole.
  const auto plain_distances = oml::io::read_npy(dir / "plain" / "neighbours_distances.npy");
  // Halfway between two queries' nearest distances: no query lies at the threshold.
  const at::Tensor nearest = std::get<0>(plain_distances.select(1, 0).to(torch::kDouble).sort());
  const double threshold = (nearest[14].item<double>() + nearest[15].item<double>()) / 2;
  std::ostringstream threshold_text;
  threshold_text.precision(17);
  threshold_text << threshold;
  const auto cut =
      run_oml("oml-search", index + " --dataframe " + quote(queries.string()) + " --top-k 3 --threshold " +
                                threshold_text.str() + " --rerank " + quote((dir / "rerank.yaml").string()) +
                                " --out " + quote((dir / "t").string()));
  REQUIRE(cut.exit_code == 0);
  CHECK_THAT(cut.out, Contains("15 with no item within"));
  const at::Tensor cut_ids = oml::io::read_npy(dir / "t" / "neighbours_ids.npy");
  for (int64_t i = 0; i < 30; ++i) {
    INFO("query " << i);
    if (plain_distances[i][0].item<double>() > threshold) {
      CHECK(cut_ids[i][0].item<int64_t>() == -1);
    } else {
      CHECK(torch::equal(cut_ids[i], ids[i]));
    }
  }
}

TEST_CASE("oml-search --rerank with an image pairwise model reads the queries' and the gallery's images",
          "[serving][pairwise][integration]") {
  const IndexedSubset indexed(100, 12);
  const TempDir& dir = indexed.dir;
  // trivial_distance_siamese over the index's own extractor and transform: its score of a pair is
  // the embedding distance of the two images, so the re-ranked scores are the search's distances
  // — read back through every image path on both sides.
  write_file(dir / "rerank.yaml",
             "num_threads: 1\ntransforms_val: {name: norm}\n"
             "pairwise_model: {name: trivial_distance_siamese, args: {extractor: {name: conv_net, args: "
             "{channels: [8, 16], feat_dim: 16, weights: " +
                 indexed.m.weights.string() +
                 "}}}}\npostprocessor: {name: pairwise_reranker, args: {top_n: 4, batch_size: 16}}\n");
  const std::string common = " --index " + quote((dir / "index").string()) + " --dataframe " +
                             quote(indexed.queries.string()) + " --top-k 4 --out ";
  const auto reranked = run_oml("oml-search", common + quote((dir / "s").string()) + " --rerank " +
                                                  quote((dir / "rerank.yaml").string()));
  INFO(reranked.out << reranked.err);
  REQUIRE(reranked.exit_code == 0);
  REQUIRE(run_oml("oml-search", common + quote((dir / "plain").string())).exit_code == 0);
  std::map<std::pair<int64_t, int64_t>, double> distance;  // (query, id) -> distance
  for (const Row& row : neighbours(dir / "plain" / "neighbours.csv"))
    distance[{row.query, row.id}] = row.distance;
  const auto rows = neighbours(dir / "s" / "neighbours.csv");
  REQUIRE(rows.size() == 12 * 4);
  for (const Row& row : rows) {
    INFO("query " << row.query << " id " << row.id);
    REQUIRE(distance.count({row.query, row.id}) == 1);  // the same items, perhaps swapped within a tie
    CHECK(row.distance == Approx(distance[{row.query, row.id}]).margin(1e-4));
  }
}

TEST_CASE("The re-ranking command of docs/serving.md runs as written", "[serving][pairwise][integration]") {
  // The documented command re-ranks with configs/fashion_mnist/validate_pairwise.yaml: a 128-d
  // conv_net index and a linear_siamese(128) checkpoint stand in for the trained ones.
  TempDir dir;
  torch::manual_seed(23);
  oml::models::ConvNetOptions net_options;
  net_options.channels = {8, 16};
  net_options.feat_dim = 128;
  write_state_dict_file(dir / "model.pth", *oml::models::ConvNet(net_options));
  const Model m{dir / "model.pth", dir / "predict.yaml"};
  write_file(m.config, "num_threads: 1\nnum_workers: 0\nweights: " + m.weights.string() +
                           "\ntransforms_predict: {name: norm}\n"
                           "extractor: {name: conv_net, args: {channels: [8, 16], feat_dim: 128}}\n");
  REQUIRE(build_index(m, subset_rows(dir.path(), "gallery.csv", 0, 60), dir / "gallery_index").exit_code ==
          0);
  fs::create_directories(dir / "new_photos");
  const auto query_rows = csv_rows(subset_rows(dir.path(), "queries.csv", 60, 5));
  for (std::size_t i = 1; i < query_rows.size(); ++i) {
    fs::copy_file(query_rows[i][1], dir / "new_photos" / fs::path(query_rows[i][1]).filename());
  }
  write_state_dict_file(dir / "best.ckpt", *oml::models::LinearSiamese(128, true));

  const std::string doc = read_file(source_path("docs/serving.md"));
  const std::regex block(R"(```sh\n(\$B/oml-search [^`]*--rerank configs/[^`]*)```)");
  std::smatch found;
  REQUIRE(std::regex_search(doc, found, block));
  std::string command = std::regex_replace(found[1].str(), std::regex(R"(\\\n\s*)"), "");
  const std::map<std::string, std::string> replaced = {
      {"$B/", std::string(OML_BIN_DIR) + "/"},
      {"logs/fashion_mnist/<pairwise run>/checkpoints/best.ckpt", (dir / "best.ckpt").string()},
      {"configs/", source_path("configs") + "/"},
      {"gallery_index", (dir / "gallery_index").string()},
      {"new_photos/", (dir / "new_photos").string() + "/"},
      {"--out reranked", "--out " + (dir / "reranked").string()}};
  for (const auto& [from, to] : replaced) {
    INFO(command);
    const auto at = command.find(from);
    REQUIRE(at != std::string::npos);
    command.replace(at, from.size(), to);
  }
  INFO(command);
  const auto r = run(command);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(csv_rows(dir / "reranked" / "neighbours.csv").size() == 1 + 5 * 5);
}

TEST_CASE("Bad oml-search --rerank input exits with 2 and leaves the index as it was",
          "[serving][pairwise][integration]") {
  const IndexedSubset indexed(80, 5);
  const TempDir& dir = indexed.dir;
  const auto before = snapshot(dir / "index");
  oml::io::write_npy(dir / "q.npy", torch::randn({5, 16}));
  write_file(
      dir / "image.yaml",
      "num_threads: 1\ntransforms_val: {name: norm}\n"
      "pairwise_model: {name: trivial_distance_siamese, args: {extractor: {name: conv_net, args: "
      "{channels: [8, 16], feat_dim: 16}}}}\npostprocessor: {name: pairwise_reranker, args: {top_n: 3}}\n");
  write_file(dir / "missing.yaml",
             "num_threads: 1\npairwise_model: {name: linear_siamese, args: {feat_dim: 16, "
             "weights: " +
                 (dir / "nowhere.ckpt").string() +
                 "}}\npostprocessor: {name: pairwise_reranker, args: {top_n: 3}}\n");
  write_file(dir / "top1.yaml",
             "num_threads: 1\npairwise_model: {name: linear_siamese, args: {feat_dim: 16}}\n"
             "postprocessor: {name: pairwise_reranker, args: {top_n: 1}}\n");
  const std::string index = " --index " + quote((dir / "index").string());
  const std::string embeddings = " --embeddings " + quote((dir / "q.npy").string());
  const std::string images = " --dataframe " + quote(indexed.queries.string());
  const std::vector<std::pair<std::string, std::string>> cases = {
      // An image model with query embeddings: the message names the flags to use.
      {embeddings + " --rerank " + quote((dir / "image.yaml").string()), "--embeddings gives none"},
      {embeddings + " --rerank " + quote((dir / "image.yaml").string()),
       "--images FOLDER or --dataframe CSV"},
      // A pairwise checkpoint that is not there.
      {images + " --rerank " + quote((dir / "missing.yaml").string()), "nowhere.ckpt"},
      {images + " --rerank " + quote((dir / "nowhere.yaml").string()), "nowhere.yaml: no such file"},
      {images + " --rerank " + quote((dir / "top1.yaml").string()), "top_n"},
      {images + " --set pairwise_model.args.feat_dim=8", "without --rerank"},
  };
  for (const auto& [args, message] : cases) {
    INFO(args);
    const auto r = run_oml("oml-search", index + args + " --out " + quote((dir / "out").string()));
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(message));
    CHECK_FALSE(fs::exists(dir / "out"));
  }
  CHECK(snapshot(dir / "index") == before);
}

}  // namespace search_rerank_tests
