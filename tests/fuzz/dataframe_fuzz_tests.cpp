// Fuzzing the dataframe reader: mutated df.csv files go through what oml-train does with
// dataset_root/df.csv (pipelines::read_training_dataframe: the CSV reader and every dataframe
// rule, image files included) and then builds the train sampler over its labels and draws an
// epoch; and through the reader as oml-sampler and validation on precomputed embeddings use it
// (no `path` column required, no image files checked).
#include "fuzz/fuzz.h"
#include "oml/config/document.h"
#include "oml/data/dataframe.h"
#include "oml/data/sampler.h"
#include "oml/samplers/builtin_samplers.h"
#include "runtime/pipeline_setup.h"
#include "shell/cli.h"
#include "shell/components.h"
#include "support/support.h"

namespace dataframe_fuzz_tests {

using namespace oml;

namespace {

const char* const kSeeds[] = {
    "label,path,split,is_query,is_gallery\n"
    "0,img/0.png,train,,\n0,img/1.png,train,,\n1,img/2.png,train,,\n1,img/3.png,train,,\n"
    "2,img/4.png,validation,True,True\n2,img/5.png,validation,False,True\n3,img/6.png,validation,1,0\n"
    "3,img/7.png,validation,0,1\n",

    "label,path,split,is_query,is_gallery,category,x_1,x_2,y_1,y_2\n"
    "10,img/0.png,train,,,shoes,0,4,0,4\n10,img/1.png,train,,,shoes,,,,\n11,img/2.png,train,,,bags,1,3,2,5\n"
    "11,img/3.png,train,,,bags,0,1,0,1\n12,img/4.png,validation,true,true,shoes,0,2,0,2\n"
    "12,img/5.png,validation,true,false,shoes,,,,\n12,img/6.png,validation,false,true,bags,3,9,3,9\n",

    "\xEF\xBB\xBFlabel,path,split,is_query,is_gallery,sequence\r\n"
    "1.0,\"img/a,b.png\",train,,,s1\r\n1.0,img/0.png,train,,,s1\r\n2.0,\"img/q\"\"uote.png\",train,,,s2\r\n"
    "2.0,img/1.png,train,,,s2\r\n5,img/2.png,validation,1.0,1.0,s3\r\n5,img/3.png,validation,0.0,1.0,s3\r\n",

    "split,is_gallery,is_query,label,path,category\n"
    "train,,,7,img/0.png,\"multi\nline\"\ntrain,,,7,img/1.png,x\ntrain,,,8,img/2.png,x\ntrain,,,8,img/"
    "3.png,y\n"
    "train,,,9,img/4.png,y\ntrain,,,9,img/5.png,y\n",
};

const std::vector<std::string>& csv_dictionary() {
  static const std::vector<std::string> tokens{"\"",
                                               ",",
                                               "\r",
                                               "\n",
                                               "\r\n",
                                               ",,",
                                               "\"\"",
                                               ",\"\"",
                                               " ",
                                               "\t",
                                               "\xEF\xBB\xBF",
                                               "label",
                                               "path",
                                               "split",
                                               "is_query",
                                               "is_gallery",
                                               "category",
                                               "sequence",
                                               "x_1",
                                               "x_2",
                                               "y_1",
                                               "y_2",
                                               "train",
                                               "validation",
                                               "True",
                                               "False",
                                               "true",
                                               "0",
                                               "1",
                                               "1.0",
                                               "0.0",
                                               "nan",
                                               "NaN",
                                               "inf",
                                               "-1",
                                               "1e400",
                                               "1.5",
                                               "12.0",
                                               "-0",
                                               "9e15",
                                               "9223372036854775807",
                                               "9223372036854775808",
                                               "-9223372036854775809",
                                               "99999999999999999999",
                                               "img/",
                                               "/",
                                               "..",
                                               "../../etc/passwd",
                                               "img/0.png",
                                               "/abs/x.png",
                                               "\\",
                                               std::string("\0", 1),
                                               "\xff",
                                               "\xC3\x28",
                                               "label,path,split,is_query,is_gallery\n"};
  return tokens;
}

class DataframeFuzz {
 public:
  DataframeFuzz() {
    // The images the seeds name: empty files are enough, the readers only check they exist.
    for (const char* name : {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a,b", "q\"uote"})
      test::write_file(dir_ / "img" / (std::string(name) + ".png"), "");
    const std::string yaml = "dataset_root: " + dir_.path().string() +
                             "\nbs_train: 4\nsampler: {name: balance, args: {n_labels: 2, n_instances: 2}}\n";
    config_ = config::parse_run_config(config::Document::from_string(yaml, "fuzz.yaml").root());
  }

  // oml-train: read_training_dataframe, then the sampler over the train split and one epoch.
  void train(const std::string& csv) {
    fuzz::write_bytes(dir_ / "df.csv", csv);
    const data::Dataframe dataframe = pipelines::read_training_dataframe(config_);
    const auto sampler =
        samplers::build_sampler(config_.sampler, pipelines::sampler_context_for(config_, dataframe));
    data::epoch_batches(*sampler, 0);
  }

  // oml-sampler, oml-validate with `embeddings:`: no paths required, no files checked.
  void without_paths(const std::string& csv) {
    fuzz::write_bytes(dir_ / "df.csv", csv);
    pipelines::read_run_dataframe(config_, /*require_items=*/false);
  }

 private:
  fuzz::ScratchDir dir_;
  config::RunConfig config_;
};

}  // namespace

TEST_CASE("Mutated dataframe CSV files end in exit 0 or 2", "[fuzz][dataframe]") {
  cli::register_builtins();
  DataframeFuzz fuzz;
  fuzz::Target target;
  target.name = "dataframe";
  target.extension = ".csv";
  target.seeds.assign(std::begin(kSeeds), std::end(kSeeds));
  target.dictionary = csv_dictionary();
  target.entry_points = {
      {"read_training_dataframe + sampler", [&](const std::string& csv) { fuzz.train(csv); }},
      {"read_run_dataframe without paths", [&](const std::string& csv) { fuzz.without_paths(csv); }}};
  fuzz::check(target, 3.0);
}

}  // namespace dataframe_fuzz_tests
