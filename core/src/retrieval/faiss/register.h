#pragma once
// Internal: registration of the Faiss backends (register.cpp). Without Faiss in the build the
// same names are registered with the same args, and their parse reports a ConfigError.

namespace oml {
struct Registries;
}  // namespace oml

namespace oml::retrieval::detail {

void register_faiss_backends(Registries& registries);

}  // namespace oml::retrieval::detail
