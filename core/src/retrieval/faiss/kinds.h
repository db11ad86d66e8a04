#pragma once
// Internal: the backend of each Faiss index kind, made from its parsed args (options.h). One file
// per kind defines its factory — flat.cpp, ivf.cpp, hnsw.cpp, ivf_pq.cpp — compiled only with
// Faiss; register.cpp calls them only then.

#include <cstdint>
#include <memory>
#include <string>

#include "options.h"

namespace oml::retrieval {
class RetrievalBackend;
}  // namespace oml::retrieval

namespace oml::retrieval::detail {

/// Backend `name` over an index of the options' kind; `seed` seeds its training and tuning
/// samples, `cuda_device` (-1: the CPU) is where GPU Faiss searches (BackendContext).
std::shared_ptr<RetrievalBackend> make_faiss_backend(const std::string& name, const FlatOptions& options,
                                                     uint64_t seed, int cuda_device);
std::shared_ptr<RetrievalBackend> make_faiss_backend(const std::string& name, const IvfOptions& options,
                                                     uint64_t seed, int cuda_device);
std::shared_ptr<RetrievalBackend> make_faiss_backend(const std::string& name, const HnswOptions& options,
                                                     uint64_t seed, int cuda_device);
std::shared_ptr<RetrievalBackend> make_faiss_backend(const std::string& name, const IvfPqOptions& options,
                                                     uint64_t seed, int cuda_device);

}  // namespace oml::retrieval::detail
