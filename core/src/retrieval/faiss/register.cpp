// The Faiss backends' names: faiss_flat, faiss_ivf, faiss_hnsw, faiss_ivf_pq
// (docs/metrics.md#retrieval-backends-retrieval_backend), each with its options struct
// (options.h) and its backend (kinds.h).
//
// Their args are read and checked the same way with or without Faiss in the build, so a config
// is judged alike everywhere (then, without Faiss, the parse says so); only building a backend
// needs Faiss. This file is compiled in both builds and is the only one of the folder that sees
// OML_HAVE_FAISS (core/CMakeLists.txt); the files that build the indexes are compiled only with
// Faiss.
#include "register.h"

#include "kinds.h"
#include "oml/common/error.h"
#include "oml/config/args_reader.h"
#include "oml/registry/registries.h"
#include "oml/retrieval/backend.h"
#include "options.h"

#ifndef OML_HAVE_FAISS
#define OML_HAVE_FAISS 0
#endif

namespace oml::retrieval {

#if OML_HAVE_FAISS
bool built_with_faiss() { return true; }
#else
bool built_with_faiss() { return false; }
#endif

namespace detail {

namespace {

// Registers backend `name` whose args are read into Options and built by its kind's
// make_faiss_backend. Without Faiss the args are read alike and the parse then reports that the
// build has no Faiss.
template <class Options>
void add_kind(Registries& registries, const std::string& name) {
  registries.retrieval_backends.add(
      name,
      [](config::ArgsReader& reader) {
        Options options;
        options.read(reader, reader.component());
        if (!OML_HAVE_FAISS) {
          throw ConfigError(reader.component() +
                            ": this oml-cpp was built without Faiss; install libfaiss-dev (scripts/setup.sh) "
                            "and rebuild, or use retrieval_backend: {name: exact}");
        }
        return options;
      },
      [name](const Options& options, const BackendContext& context) -> std::shared_ptr<RetrievalBackend> {
#if OML_HAVE_FAISS
        return make_faiss_backend(name, options, context.seed, context.cuda_device);
#else
        (void)options;
        (void)context;
        throw InternalError("retrieval backend '" + name + "' built without Faiss: its parse refuses it");
#endif
      },
      Options::kHelp);
}

}  // namespace

void register_faiss_backends(Registries& registries) {
  add_kind<FlatOptions>(registries, "faiss_flat");
  add_kind<IvfOptions>(registries, "faiss_ivf");
  add_kind<HnswOptions>(registries, "faiss_hnsw");
  add_kind<IvfPqOptions>(registries, "faiss_ivf_pq");
}

}  // namespace detail

}  // namespace oml::retrieval
