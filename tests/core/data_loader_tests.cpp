// Datasets and the threaded loader: batch order for any worker count, augmentation
// determinism, error propagation with the file name, early stop, the byte cache.
#include <torch/torch.h>

#include "oml/common/error.h"
#include "oml/config/document.h"
#include "oml/config/reader.h"
#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/data/device_copy.h"
#include "oml/data/image.h"
#include "oml/data/loader.h"
#include "oml/data/transform.h"
#include "oml/registry/registries.h"
#include "shell/components.h"
#include "support/support.h"

namespace data_loader_tests {

using Catch::Matchers::Contains;
using oml::data::DataSplit;
using oml::data::ImageDataset;
using oml::data::Loader;
using oml::data::LoaderOptions;
using oml::data::RandomKey;
using oml::test::TempDir;

namespace {

// Output = the image scaled to [0, 1] plus a key-dependent offset, so batches reveal both the
// item and the RandomKey it was transformed with.
class KeyStamp : public oml::data::Transform {
 public:
  at::Tensor apply(const at::Tensor& image, const RandomKey& key) const override {
    oml::data::KeyedRandom rng(key);
    return image.permute({2, 0, 1}).to(torch::kFloat32) / 255.0 + static_cast<float>(rng.uniform());
  }
  std::string describe() const override { return "key_stamp"; }
};

// n images of 6x5 whose pixels all equal their index (mod 256), in a temp dir.
DataSplit write_images(const TempDir& dir, int n, const std::string& ext = ".png") {
  DataSplit split;
  for (int i = 0; i < n; ++i) {
    const auto path = dir / ("img_" + std::to_string(i) + ext);
    oml::test::write_file(
        path, oml::data::encode_image(torch::full({5, 6, 3}, i % 256, torch::kUInt8), path.string()));
    split.paths.push_back(path.string());
    split.labels.push_back(i % 4);
    split.original_labels.push_back(i % 4);
    split.categories.push_back(i % 2 ? "odd" : "even");
    split.lines.push_back(i + 2);
  }
  return split;
}

std::vector<std::vector<int64_t>> shuffled_batches(int n, int batch_size) {
  std::vector<int64_t> order(n);
  for (int i = 0; i < n; ++i) order[i] = (i * 7 + 3) % n;  // a fixed permutation (n coprime to 7)
  std::vector<std::vector<int64_t>> batches;
  for (int i = 0; i < n; i += batch_size) {
    batches.emplace_back(order.begin() + i, order.begin() + std::min(n, i + batch_size));
  }
  return batches;
}

std::vector<oml::data::LoadedBatch> drain(Loader& loader) {
  std::vector<oml::data::LoadedBatch> out;
  while (auto batch = loader.next()) out.push_back(std::move(*batch));
  return out;
}

}  // namespace

TEST_CASE("Batches come out in the sampler's order with identical contents for any worker count",
          "[data][loader]") {
  TempDir dir;
  const auto dataset = std::make_shared<ImageDataset>(write_images(dir, 30), std::make_shared<KeyStamp>());
  const auto batches = shuffled_batches(30, 4);
  LoaderOptions base;
  base.seed = 11;
  base.epoch = 3;
  base.num_workers = 0;
  Loader reference_loader(dataset, batches, base);
  const auto reference = drain(reference_loader);
  REQUIRE(reference.size() == batches.size());
  for (std::size_t b = 0; b < batches.size(); ++b) {
    CHECK(reference[b].indices.equal(torch::tensor(batches[b], torch::kInt64)));
    CHECK(reference[b].position == static_cast<int64_t>(b));
    for (std::size_t i = 0; i < batches[b].size(); ++i) {
      const int64_t index = batches[b][i];
      CHECK(reference[b].labels[i].item<int64_t>() == index % 4);
      CHECK(reference[b].categories[i] == (index % 2 ? "odd" : "even"));
      const float expected =
          index / 255.0f + static_cast<float>(oml::data::KeyedRandom({11, 3, index}).uniform());
      CHECK(reference[b].images[i][0][0][0].item<float>() == Approx(expected));
    }
  }
  CHECK(reference.back().images.sizes() == std::vector<int64_t>{2, 3, 5, 6});  // 30 = 7 * 4 + 2

  for (int workers : {1, 2, 5}) {
    for (int prefetch : {1, 3}) {
      LoaderOptions options = base;
      options.num_workers = workers;
      options.prefetch = prefetch;
      Loader loader(dataset, batches, options);
      const auto got = drain(loader);
      INFO("workers " << workers << ", prefetch " << prefetch);
      REQUIRE(got.size() == reference.size());
      for (std::size_t b = 0; b < got.size(); ++b) {
        CHECK(torch::equal(got[b].images, reference[b].images));
        CHECK(torch::equal(got[b].indices, reference[b].indices));
      }
      CHECK_FALSE(loader.next().has_value());
    }
  }
}

TEST_CASE("augs batches are identical for 0, 1 and 3 workers", "[data][loader][transforms]") {
  oml::cli::register_builtins();
  TempDir dir;
  DataSplit split = write_images(dir, 12, ".jpg");
  const auto doc = oml::config::Document::from_string("{name: augs, args: {im_size: 8}}");
  const auto augs = oml::registries().transforms.create(oml::config::parse_component(doc.root(), "t"));
  const auto dataset = std::make_shared<ImageDataset>(split, augs);
  std::vector<at::Tensor> results;
  for (int workers : {0, 1, 3}) {
    LoaderOptions options;
    options.num_workers = workers;
    options.seed = 5;
    Loader loader(dataset, shuffled_batches(12, 5), options);
    std::vector<at::Tensor> images;
    for (const auto& batch : drain(loader)) images.push_back(batch.images);
    results.push_back(torch::cat(images));
  }
  CHECK(torch::equal(results[0], results[1]));
  CHECK(torch::equal(results[0], results[2]));
}

TEST_CASE("A corrupt image fails the loader with the file name in the consumer", "[data][loader]") {
  TempDir dir;
  DataSplit split = write_images(dir, 20);
  oml::test::write_file(split.paths[13], "garbage");
  const auto dataset = std::make_shared<ImageDataset>(split, std::make_shared<KeyStamp>());
  for (int workers : {0, 2}) {
    LoaderOptions options;
    options.num_workers = workers;
    std::vector<std::vector<int64_t>> batches;
    for (int64_t i = 0; i < 20; i += 2) batches.push_back({i, i + 1});
    Loader loader(dataset, batches, options);
    int good = 0;
    try {
      while (loader.next()) ++good;
      FAIL("expected a DataError");
    } catch (const oml::DataError& e) {
      CHECK_THAT(e.what(), Contains("img_13.png"));
    }
    CHECK(good == 6);  // batches 0..5 hold items 0..11
    CHECK_FALSE(loader.next().has_value());
  }
}

TEST_CASE("Destroying a loader early joins its workers without deadlock", "[data][loader]") {
  TempDir dir;
  const auto dataset = std::make_shared<ImageDataset>(write_images(dir, 40), std::make_shared<KeyStamp>());
  for (int round = 0; round < 5; ++round) {
    LoaderOptions options;
    options.num_workers = 3;
    options.prefetch = 1;
    Loader loader(dataset, shuffled_batches(40, 2), options);
    CHECK(loader.next().has_value());
  }  // destructor with workers blocked on a full window
  LoaderOptions options;
  options.num_workers = 2;
  Loader never_read(dataset, shuffled_batches(40, 2), options);
  SUCCEED("no deadlock");
}

TEST_CASE("Batch indices outside the dataset are rejected before loading", "[data][loader]") {
  TempDir dir;
  const auto dataset = std::make_shared<ImageDataset>(write_images(dir, 3), std::make_shared<KeyStamp>());
  CHECK_THROWS_WITH((Loader(dataset, {{0, 3}})), Contains("dataset index 3") && Contains("[0, 3)"));
  CHECK_THROWS_WITH((Loader(dataset, {{}})), Contains("empty"));
  LoaderOptions too_many;
  too_many.num_workers = 100000;
  CHECK_THROWS_WITH((Loader(dataset, {{0}}, too_many)), Contains("num_workers must be in [0, 256]"));
}

TEST_CASE("The byte cache serves later epochs after the files are gone", "[data][loader]") {
  TempDir dir;
  const DataSplit split = write_images(dir, 6);
  const auto dataset = std::make_shared<ImageDataset>(split, std::make_shared<KeyStamp>());
  LoaderOptions options;
  options.cache_size = 4;
  {
    Loader first(dataset, {{0, 1, 2, 3}}, options);
    drain(first);
  }
  for (int i = 0; i < 4; ++i) std::filesystem::remove(split.paths[i]);
  Loader second(dataset, {{3, 2, 1, 0}}, options);
  CHECK(drain(second).size() == 1);
  Loader uncached(dataset, {{4}, {0}}, options);  // index 0 cached, index 4 read from disk
  CHECK(drain(uncached).size() == 2);
}

TEST_CASE("Bounding boxes crop items before their transform", "[data][loader]") {
  TempDir dir;
  DataSplit split = write_images(dir, 2);
  split.bboxes = {oml::data::BBox{1, 4, 0, 2}, std::nullopt};
  const ImageDataset dataset(split, std::make_shared<KeyStamp>());
  CHECK(dataset.load_image(0).sizes() == std::vector<int64_t>{2, 3, 3});
  CHECK(dataset.load_image(1).sizes() == std::vector<int64_t>{5, 6, 3});
}

TEST_CASE("Folder datasets list images in sorted path order and empty folders are errors",
          "[data][dataset]") {
  TempDir dir;
  for (const std::string name : {"b/2.png", "a/9.jpg", "a/10.PNG", "c.txt"}) {
    oml::test::write_file(dir / name,
                          oml::data::encode_image(torch::zeros({2, 2, 3}, torch::kUInt8), "x.png"));
  }
  // Every format the decoder reads is listed (WebP, TIFF and PNM were skipped without a word).
  for (const std::string name : {"d/4.webp", "d/5.tif", "d/6.ppm"}) {
    oml::test::write_file(dir / name, oml::data::encode_image(torch::zeros({2, 2, 3}, torch::kUInt8), name));
  }
  const auto all = ImageDataset::from_folder(dir.path(), std::make_shared<KeyStamp>());
  REQUIRE(all->size() == 6);
  CHECK(all->load_image(3).sizes() == std::vector<int64_t>{2, 2, 3});  // d/4.webp decodes
  std::filesystem::remove_all(dir / "d");
  const auto dataset = ImageDataset::from_folder(dir.path(), std::make_shared<KeyStamp>());
  REQUIRE(dataset->size() == 3);
  CHECK(dataset->meta().paths[0] == (dir / "a/10.PNG").string());
  CHECK(dataset->meta().paths[2] == (dir / "b/2.png").string());
  CHECK(dataset->info(0).label == -1);
  TempDir empty;
  CHECK_THROWS_WITH(ImageDataset::from_folder(empty.path(), std::make_shared<KeyStamp>()),
                    Contains("holds no images"));
  // A dangling link is skipped as any non-file; one that loops is named (it was a filesystem
  // exception: an internal error).
  std::filesystem::create_symlink(dir / "nowhere.png", dir / "dangling.png");
  CHECK(ImageDataset::from_folder(dir.path(), std::make_shared<KeyStamp>())->size() == 3);
  std::filesystem::create_symlink("self.png", dir / "self.png");
  CHECK_THROWS_AS(ImageDataset::from_folder(dir.path(), std::make_shared<KeyStamp>()), oml::DataError);
  CHECK_THROWS_WITH(ImageDataset::from_folder(dir.path(), std::make_shared<KeyStamp>()),
                    Contains("cannot read " + (dir / "self.png").string()) && Contains("symbolic links"));
}

TEST_CASE("Validation datasets expose query/gallery flags and sequences per item", "[data][dataset]") {
  TempDir dir;
  oml::test::write_file(dir / "a.png",
                        oml::data::encode_image(torch::zeros({2, 2, 3}, torch::kUInt8), "a.png"));
  oml::test::write_file(dir / "df.csv",
                        "label,path,split,is_query,is_gallery,category,sequence\n"
                        "4,a.png,validation,True,False,x,s\n4,a.png,validation,False,True,x,t\n");
  const auto df = oml::data::Dataframe::read(dir / "df.csv");
  const ImageDataset dataset(df.validation(), std::make_shared<KeyStamp>());
  const auto first = dataset.info(0), second = dataset.info(1);
  CHECK(first.label == 4);
  CHECK(first.is_query);
  CHECK_FALSE(first.is_gallery);
  CHECK(second.is_gallery);
  CHECK(first.sequence == "s");
  CHECK(second.category == "x");
}

TEST_CASE("Embeddings datasets batch precomputed rows with their metadata", "[data][dataset]") {
  DataSplit split;
  split.labels = {1, 2, 1};
  split.original_labels = split.labels;
  split.lines = {2, 3, 4};
  const auto embeddings = torch::arange(6, torch::kFloat32).view({3, 2});
  const auto dataset = std::make_shared<oml::data::EmbeddingsDataset>(embeddings, split, "e.pt");
  Loader loader(dataset, {{2, 0}}, LoaderOptions{});
  const auto batch = loader.next();
  REQUIRE(batch.has_value());
  CHECK(torch::equal(batch->images, embeddings.index_select(0, torch::tensor({2, 0}))));
  CHECK(torch::equal(batch->labels, torch::tensor({1, 1}, torch::kInt64)));
  CHECK_THROWS_WITH(oml::data::EmbeddingsDataset(torch::zeros({2, 2}), split, "e.pt"),
                    Contains("e.pt holds 2 embeddings") && Contains("3 rows"));
}

TEST_CASE("On the CPU the device copier leaves a batch where the loader put it", "[data][loader]") {
  DataSplit split;
  split.labels = {0, 1};
  split.original_labels = split.labels;
  split.lines = {2, 3};
  const auto embeddings = torch::arange(4, torch::kFloat32).view({2, 2});
  const auto dataset = std::make_shared<oml::data::EmbeddingsDataset>(embeddings, split, "e.pt");
  Loader loader(dataset, {{1, 0}}, LoaderOptions{});
  auto batch = loader.next();
  REQUIRE(batch.has_value());
  const void* before = batch->images.data_ptr();
  const oml::data::DeviceCopier copier(torch::kCPU);
  CHECK_FALSE(copier.side_stream());
  copier.to_device(*batch);
  CHECK(batch->images.data_ptr() == before);  // no copy
  CHECK(torch::equal(batch->images, embeddings.flip(0)));
}

}  // namespace data_loader_tests
