#include "oml/common/precision.h"

namespace oml {

std::string precision_name(Precision precision) {
  switch (precision) {
    case Precision::fp32:
      return "32";
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "16";
  }
  return "32";
}

}  // namespace oml
