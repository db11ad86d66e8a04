#include "oml/registry/registries.h"

namespace oml {

Registries& registries() {
  static Registries instance;
  return instance;
}

namespace {
std::string& origin_slot() {
  static std::string origin = "built-in";
  return origin;
}
}  // namespace

const std::string& current_registration_origin() { return origin_slot(); }

void set_registration_origin(std::string origin) { origin_slot() = std::move(origin); }

}  // namespace oml
