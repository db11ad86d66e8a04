// oml-convert: converts public datasets into the OML format (images + df.csv).
#include <boost/program_options.hpp>

#include <chrono>
#include <iostream>

#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/data/convert.h"
#include "runtime/progress.h"
#include "shell/cli.h"

namespace po = boost::program_options;

namespace {

int run_convert(const oml::cli::Invocation& inv) {
  const auto& vars = inv.vars;
  OML_CHECK(vars.count("format"), UsageError,
            "the dataset FORMAT is required; expected one of: ", oml::join(oml::data::convert_formats()));
  OML_CHECK(vars.count("src"), UsageError, "--src DIR is required (the dataset as downloaded)");
  OML_CHECK(vars.count("dst"), UsageError, "--dst DIR is required (the output folder)");
  oml::data::ConvertOptions options;
  options.src = vars["src"].as<std::string>();
  options.dst = vars["dst"].as<std::string>();
  options.val_fraction = vars["val-fraction"].as<double>();
  options.seed = vars["seed"].as<uint64_t>();
  options.limit = vars["limit"].as<int64_t>();
  options.num_threads = vars["threads"].as<int>();
  options.on_progress = oml::pipelines::progress_callback("converting", "img");
  const std::string format = vars["format"].as<std::string>();
  OML_CHECK(format != "debian-descriptions" || vars["threads"].defaulted(), UsageError,
            "--threads applies to the image datasets (debian-descriptions copies no files)");
  OML_CHECK(options.val_fraction == 0 || format == "image-folder" || format == "debian-descriptions",
            UsageError, "--val-fraction applies to image-folder and debian-descriptions only (", format,
            " has an official split)");

  const auto start = std::chrono::steady_clock::now();
  const auto report = oml::data::convert_dataset(format, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "oml-convert: " << format << ": " << report.train_rows << " train rows, "
            << report.validation_rows << " validation rows, " << report.labels << " labels -> "
            << report.dataframe.string() << " (" << static_cast<int64_t>(seconds * 10) / 10.0 << " s)"
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  oml::cli::CommandSpec spec;
  spec.name = "oml-convert";
  spec.summary = "convert a dataset into the OML format (images + df.csv, or a text df.csv)";
  spec.usage =
      "  oml-convert FORMAT --src DIR --dst DIR [--val-fraction F --seed S] [--limit N]\n"
      "  FORMAT: fashion-mnist | image-folder | cub | sop | cars | inshop | debian-descriptions (see "
      "docs/data.md)";
  spec.needs_config = false;
  spec.add_options = [](po::options_description& o) {
    // clang-format off
    o.add_options()
      ("format", po::value<std::string>(), "fashion-mnist | image-folder | cub | sop | cars | inshop | debian-descriptions")
      ("src", po::value<std::string>(), "the dataset as downloaded (debian-descriptions: an apt Translation-en file)")
      ("dst", po::value<std::string>(), "output folder (images + df.csv); replaced atomically if it exists")
      ("val-fraction", po::value<double>()->default_value(0.0),
       "image-folder, debian-descriptions: fraction of the labels (sub-folders, descriptions) used for validation, unseen in training")
      ("seed", po::value<uint64_t>()->default_value(0), "image-folder, debian-descriptions: seed choosing the validation labels")
      ("limit", po::value<int64_t>()->default_value(-1), "keep at most N rows per split (quick tests)")
      ("threads", po::value<int>()->default_value(0), "threads encoding/copying images (0 = all cores)");
    // clang-format on
  };
  spec.add_positional = [](po::positional_options_description& p) { p.add("format", 1); };
  spec.run = run_convert;
  return oml::cli::run_command(argc, argv, spec);
}
