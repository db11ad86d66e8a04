// Audio through oml-index, oml-search and oml-serve, as a user runs them over an ECAPA-TDNN
// checkpoint trained on the synthesised speakers of audio_run_fixtures.h: an index that says it
// holds audio, queries as a folder of files, requests with "audio" (base64) or an audio body whose
// embeddings equal oml-predict's, items added by their audio, and the mistakes and hostile bytes a
// server meets (images or texts sent to an audio index, bytes that are not audio, a clip over
// --max-audio-mb).
#include <string>
#include <vector>

#include "integration/audio_run_fixtures.h"
#include "integration/serving_fixtures.h"
#include "oml/io/npy.h"

namespace audio_serving_tests {

using Catch::Matchers::Contains;
using namespace oml::test;
namespace fs = std::filesystem;

namespace {

// The run folder trained (2 steps), with its index of the validation speakers (4 and 5) built
// through best.ckpt by oml-index: <dir>/index. Returns the predict config over best.ckpt.
fs::path build_audio_index(const TempDir& dir) {
  write_audio_run(dir);
  const auto train = run_oml("oml-train", "--config " + quote((dir / "train.yaml").string()), 900);
  INFO(train.err);
  REQUIRE(train.exit_code == 0);
  std::string gallery = "label,path,split,is_query,is_gallery,category\n";
  for (int speaker = 4; speaker < 6; ++speaker) {
    for (int item = 0; item < 3; ++item) {
      const bool stereo = (speaker + item) % 3 == 0;
      gallery += std::to_string(speaker) + ",speaker" + std::to_string(speaker) + "/take" +
                 std::to_string(item) + (stereo ? "_22k.wav" : ".wav") + ",validation,True,True,voice\n";
    }
  }
  write_file(dir / "data" / "gallery.csv", gallery);
  const fs::path config = dir / "predict.yaml";
  write_file(config, audio_validate_config(dir, dir / "logs" / "run" / "checkpoints" / "best.ckpt") +
                         "save_dir: " + (dir / "pred").string() + "\nretrieval_backend: {name: exact}\n");
  const auto build = run_oml("oml-index",
                             "build --config " + quote(config.string()) +
                                 " --set dataframe_name=gallery.csv --out " + quote((dir / "index").string()),
                             600);
  INFO(build.err);
  REQUIRE(build.exit_code == 0);
  return config;
}

std::string base64_of(const fs::path& file) { return run("base64 -w0 " + quote(file.string())).out; }

at::Tensor embedding_of(const nlohmann::json& reply) {
  return torch::tensor(reply.at("embedding").get<std::vector<float>>());
}

}  // namespace

TEST_CASE("An index of audio: built, searched with a folder of clips, served with \"audio\"",
          "[serving][integration][audio]") {
  TempDir dir;
  const fs::path config = build_audio_index(dir);
  const fs::path index = dir / "index";
  const std::string version = [&] {
    std::string name = read_file(index / "CURRENT");
    while (!name.empty() && name.back() == '\n') name.pop_back();
    return name;
  }();
  const auto manifest = read_json(index / version / "manifest.json");
  CHECK(manifest.at("inputs") == "audio");
  CHECK(manifest.at("format_version") == 2);
  CHECK(manifest.at("items") == 6);
  const auto items = csv_rows(index / version / "items.csv");
  REQUIRE(items.size() == 7);
  CHECK(items[0] == std::vector<std::string>{"id", "path", "label", "category"});
  const auto info = run_oml("oml-index", "info --index " + quote(index.string()));
  CHECK_THAT(info.out, Contains("items are:   audio"));

  // The same files as queries: each finds itself first, at distance ~0.
  fs::create_directories(dir / "queries");
  fs::copy_file(dir / "data" / "speaker4" / "take1.wav", dir / "queries" / "a.wav");
  fs::copy_file(dir / "data" / "speaker5" / "take1_22k.wav", dir / "queries" / "b.wav");
  const auto search =
      run_oml("oml-search",
              "--index " + quote(index.string()) + " --audio " + quote((dir / "queries").string()) +
                  " --top-k 2 --out " + quote((dir / "found").string()),
              600);
  INFO(search.err);
  REQUIRE(search.exit_code == 0);
  const auto found = csv_rows(dir / "found" / "neighbours.csv");
  REQUIRE(found.size() == 5);
  CHECK(found[0][1] == "query_path");
  CHECK(found[0][4] == "path");
  CHECK_THAT(found[1][4], Contains("speaker4/take1.wav"));
  CHECK_THAT(found[3][4], Contains("speaker5/take1_22k.wav"));

  SECTION("other kinds of queries are refused, naming what the index holds") {
    const auto images = run_oml("oml-search", "--index " + quote(index.string()) + " --images " +
                                                  quote((dir / "queries").string()) + " --out " +
                                                  quote((dir / "x").string()));
    CHECK(images.exit_code == 2);
    CHECK_THAT(images.err, Contains("holds audio") && Contains("give --audio FOLDER"));
    write_file(dir / "q.txt", "hello\n");
    const auto texts =
        run_oml("oml-search", "--index " + quote(index.string()) + " --texts " +
                                  quote((dir / "q.txt").string()) + " --out " + quote((dir / "y").string()));
    CHECK(texts.exit_code == 2);
    CHECK_THAT(texts.err, Contains("holds audio"));
  }

  SECTION("oml-index add --audio appends a folder's clips, found by the same clips") {
    const auto add = run_oml(
        "oml-index", "add --index " + quote(index.string()) + " --audio " + quote((dir / "queries").string()),
        600);
    INFO(add.err);
    REQUIRE(add.exit_code == 0);
    CHECK_THAT(add.out, Contains("added 2 items") && Contains(": 8 items"));
    const auto again =
        run_oml("oml-search",
                "--index " + quote(index.string()) + " --audio " + quote((dir / "queries").string()) +
                    " --top-k 1 --out " + quote((dir / "again").string()),
                600);
    REQUIRE(again.exit_code == 0);
    const auto top = csv_rows(dir / "again" / "neighbours.csv");
    REQUIRE(top.size() == 3);
    CHECK(std::stof(top[1].back()) < 1e-3F);  // each clip finds an item at distance ~0
  }

  SECTION("oml-serve embeds and searches clips as oml-predict and oml-search do") {
    // oml-predict over the query folder: the reference embeddings.
    const auto predict = run_oml(
        "oml-predict",
        "--config " + quote(config.string()) + " --set data_dir=" + quote((dir / "queries").string()), 600);
    INFO(predict.err);
    REQUIRE(predict.exit_code == 0);
    const at::Tensor expected = oml::io::read_npy_matrix(dir / "pred" / "embeddings.npy");

    Server server(index, dir.path(), "--max-audio-mb 0.5");
    const auto health = call(server.url() + "/health");
    CHECK(health.body.at("inputs") == "audio");
    write_file(dir / "a.json", "{\"audio\": \"" + base64_of(dir / "queries" / "a.wav") + "\"}");
    const auto a = call("-H 'Content-Type: application/json' --data-binary @" +
                        quote((dir / "a.json").string()) + " " + server.url() + "/embed");
    INFO(a.text);
    REQUIRE(a.status == 200);
    CHECK(max_abs_diff(embedding_of(a.body), expected[0]) < 1e-4);
    // The file itself as the body.
    const auto b = call("-H 'Content-Type: audio/wav' --data-binary @" +
                        quote((dir / "queries" / "b.wav").string()) + " " + server.url() + "/embed");
    INFO(b.text);
    REQUIRE(b.status == 200);
    CHECK(max_abs_diff(embedding_of(b.body), expected[1]) < 1e-4);
    const auto near =
        call("-H 'Content-Type: audio/wav' --data-binary @" + quote((dir / "queries" / "b.wav").string()) +
             " '" + server.url() + "/search?k=1'");
    REQUIRE(near.status == 200);
    CHECK_THAT(near.body.at("neighbours")[0].at("path").get<std::string>(),
               Contains("speaker5/take1_22k.wav"));

    // An item added by its audio, found by the same clip.
    write_file(dir / "item.json", "{\"audio\": \"" + base64_of(dir / "data" / "speaker0" / "take0_22k.wav") +
                                      "\", \"path\": \"new/take.wav\", \"label\": 0}");
    const auto added = call("-H 'Content-Type: application/json' --data-binary @" +
                            quote((dir / "item.json").string()) + " " + server.url() + "/items");
    INFO(added.text);
    REQUIRE(added.status == 201);
    const auto again = call("-H 'Content-Type: audio/wav' --data-binary @" +
                            quote((dir / "data" / "speaker0" / "take0_22k.wav").string()) + " '" +
                            server.url() + "/search?k=1'");
    REQUIRE(again.status == 200);
    CHECK(again.body.at("neighbours")[0].at("path") == "new/take.wav");

    // Mistakes and hostile bytes: 400 for the wrong kind, 422 for bytes that are not audio, 413 for
    // a clip that decodes past --max-audio-mb (0.5 MiB: 131072 samples; 10 s at 16 kHz is 160000).
    write_file(dir / "text.json", "{\"text\": \"hello\"}");
    CHECK(call("-H 'Content-Type: application/json' --data-binary @" + quote((dir / "text.json").string()) +
               " " + server.url() + "/embed")
              .status == 400);
    write_file(dir / "image.json", "{\"image\": \"" + base64_of(dir / "a.json") + "\"}");
    const auto image = call("-H 'Content-Type: application/json' --data-binary @" +
                            quote((dir / "image.json").string()) + " " + server.url() + "/embed");
    CHECK(image.status == 400);
    CHECK_THAT(image.text, Contains("holds audio"));
    write_file(dir / "junk.json", "{\"audio\": \"" + base64_of(dir / "a.json") + "\"}");
    const auto junk = call("-H 'Content-Type: application/json' --data-binary @" +
                           quote((dir / "junk.json").string()) + " " + server.url() + "/embed");
    CHECK(junk.status == 422);
    CHECK_THAT(junk.text, Contains("not an audio file"));
    write_wav(dir / "long.wav", utterance(1, 0, 10.0, 16000), 16000, 1);
    const auto long_clip = call("-H 'Content-Type: audio/wav' --data-binary @" +
                                quote((dir / "long.wav").string()) + " " + server.url() + "/embed");
    CHECK(long_clip.status == 413);
    CHECK_THAT(long_clip.text, Contains("--max-audio-mb"));
    // 100 samples that claim 1 Hz: 1.6 million at 16 kHz, refused before they are made.
    write_wav(dir / "slow.wav", std::vector<float>(100, 0.5F), 1, 1);
    const auto slow = call("-H 'Content-Type: audio/wav' --data-binary @" +
                           quote((dir / "slow.wav").string()) + " " + server.url() + "/embed");
    CHECK(slow.status == 413);
    CHECK_THAT(slow.text, Contains("resampled from 1 Hz to 16000 Hz") && Contains("--max-audio-mb"));
    // 4001 Hz needs a filter of ~3 GB to reach 16 kHz: refused from the header, before decoding.
    write_wav(dir / "odd.wav", std::vector<float>(400, 0.5F), 4001, 1);
    const auto odd = call("-H 'Content-Type: audio/wav' --data-binary @" + quote((dir / "odd.wav").string()) +
                          " " + server.url() + "/embed");
    CHECK(odd.status == 413);
    CHECK_THAT(odd.text, Contains("resampling from 4001 Hz to 16000 Hz needs a filter of about") &&
                             Contains("--decode-memory-mb"));
    write_file(dir / "bad64.json", "{\"audio\": \"@@@\"}");
    const auto bad64 = call("-H 'Content-Type: application/json' --data-binary @" +
                            quote((dir / "bad64.json").string()) + " " + server.url() + "/embed");
    CHECK(bad64.status == 400);
    CHECK_THAT(bad64.body.at("error").get<std::string>(), Contains("\"audio\" is not base64"));
    CHECK(server.alive());
  }

  SECTION("oml-serve starts only with a decode budget that serves every common rate") {
    // 4 x 509 MiB and 11.025 kHz's filter (~16 MiB) are more than the default 2048 MiB.
    const auto refused =
        run_oml("oml-serve", "--index " + quote(index.string()) + " --port 0 --max-audio-mb 509");
    CHECK(refused.exit_code == 2);
    CHECK_THAT(refused.err,
               Contains("--decode-memory-mb (2048 MiB) must hold 4 x --max-audio-mb (509 MiB) and 15 "
                        "MiB to resample a common rate to 16000 Hz"));
    // A size that would overflow the budget's arithmetic is refused, not wrapped.
    const auto huge =
        run_oml("oml-serve", "--index " + quote(index.string()) + " --port 0 --max-audio-mb 2.5e12");
    CHECK(huge.exit_code == 2);
    CHECK_THAT(huge.err, Contains("--max-audio-mb must be between 0.001 and 1e+09, got 2.5e+12"));
    // The largest setting the default budget allows still resamples a 22.05 kHz clip.
    Server server(index, dir.path(), "--max-audio-mb 508");
    const auto clip =
        call("-H 'Content-Type: audio/wav' --data-binary @" +
             quote((dir / "data" / "speaker0" / "take0_22k.wav").string()) + " " + server.url() + "/embed");
    INFO(clip.text);
    CHECK(clip.status == 200);
  }
}

}  // namespace audio_serving_tests
