#include "oml/data/convert.h"

#include <map>

#include "convert_common.h"
#include "oml/common/error.h"
#include "oml/common/strings.h"

namespace oml::data {

namespace {
using Converter = ConvertReport (*)(const ConvertOptions&);

const std::map<std::string, Converter>& converters() {
  static const std::map<std::string, Converter> table{
      {"fashion-mnist", convert::convert_fashion_mnist},
      {"image-folder", convert::convert_image_folder},
      {"cub", convert::convert_cub},
      {"sop", convert::convert_sop},
      {"cars", convert::convert_cars},
      {"inshop", convert::convert_inshop},
      {"debian-descriptions", convert::convert_debian_descriptions}};
  return table;
}
}  // namespace

const std::vector<std::string>& convert_formats() {
  static const std::vector<std::string> names{"fashion-mnist", "image-folder",       "cub", "sop", "cars",
                                              "inshop",        "debian-descriptions"};
  return names;
}

ConvertReport convert_dataset(const std::string& format, const ConvertOptions& options) {
  const auto found = converters().find(format);
  OML_CHECK(found != converters().end(), UsageError, "unknown dataset format '", format, "'",
            did_you_mean(format, convert_formats()), "; expected one of: ", join(convert_formats()));
  OML_CHECK(!options.src.empty(), UsageError, "--src is required (the dataset as downloaded)");
  OML_CHECK(!options.dst.empty(), UsageError, "--dst is required (the output folder)");
  return found->second(options);
}

}  // namespace oml::data
