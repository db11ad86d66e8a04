#pragma once
// Internal: the inverted lists' parameters, shared by faiss_ivf (ivf.cpp) and faiss_ivf_pq
// (ivf_pq.cpp): nlist, nprobe and the training sample resolved for a gallery, and nprobe as a
// target_recall knob.

#include <faiss/Index.h>

#include <cstdint>
#include <string>
#include <vector>

#include "options.h"
#include "tuning.h"

namespace oml::retrieval::detail {

/// The IVF parameters of one gallery (or, unresolved, as the args give them: 0 = auto).
struct IvfLists {
  int64_t nlist = 0;
  int64_t nprobe = 0;  // as given (0: auto), or as resolved: where target_recall starts from
  int64_t train_size = 0;
  bool nprobe_tuned = false;  // target_recall chooses nprobe

  /// " nlist=... nprobe=... train_size=..." (describe(), the log line of a search).
  std::string describe() const;
};

/// Whether target_recall chooses nprobe.
bool tunes_nprobe(const IvfOptions& o);

/// nlist / 16, at most 16: nprobe without target_recall, and where target_recall starts.
int64_t fixed_default_nprobe(int64_t nlist);

/// The lists for a gallery of `g` items: nlist and train_size from the gallery size where the
/// args leave them at 0; SettingError (naming `who`) for args that do not fit the gallery.
IvfLists resolve_ivf(const IvfOptions& o, const std::string& who, int64_t g);

/// IVF's nprobe where target_recall chooses it: from the fixed default to every list; none where
/// the args set nprobe.
std::vector<Knob> nprobe_knob(faiss::Index& index, const IvfOptions& o);

}  // namespace oml::retrieval::detail
