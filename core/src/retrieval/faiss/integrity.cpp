// check_index_structure (integrity.h): the invariants Faiss 1.7's searches and adds rely on,
// checked once after read_index.
#include "integrity.h"

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/invlists/InvertedLists.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "oml/common/error.h"

namespace oml::retrieval::detail {

namespace {

class Checker {
 public:
  explicit Checker(std::string file) : file_(std::move(file)) {}

  template <class... Parts>
  void require(bool ok, const Parts&... what) const {
    if (!ok) throw DataError(file_ + ": corrupt Faiss index: " + ::oml::detail::concat(what...));
  }

  void index(const faiss::Index& index, const char* role) const {
    require(index.d > 0 && index.ntotal >= 0, role, " has dimension ", index.d, " and ", index.ntotal,
            " vectors");
    if (const auto* flat = dynamic_cast<const faiss::IndexFlatCodes*>(&index)) {
      flat_codes(*flat, role);
    } else if (const auto* ivf = dynamic_cast<const faiss::IndexIVF*>(&index)) {
      this->ivf(*ivf);
    } else if (const auto* hnsw = dynamic_cast<const faiss::IndexHNSW*>(&index)) {
      this->hnsw(*hnsw);
    } else {
      require(false, role, " is of a kind oml-index does not write");
    }
  }

 private:
  void flat_codes(const faiss::IndexFlatCodes& flat, const char* role) const {
    require(flat.code_size == static_cast<std::size_t>(flat.d) * sizeof(float), role, " stores ",
            flat.code_size, " bytes per vector of dimension ", flat.d);
    require(flat.codes.size() == static_cast<std::size_t>(flat.ntotal) * flat.code_size, role, " holds ",
            flat.codes.size(), " bytes of vectors for ", flat.ntotal, " vectors");
  }

  void ivf(const faiss::IndexIVF& ivf) const {
    require(ivf.quantizer != nullptr && ivf.invlists != nullptr,
            "an IVF index without its quantizer or lists");
    require(ivf.nlist >= 1 && ivf.nprobe >= 1, "an IVF index with ", ivf.nlist, " lists, probing ",
            ivf.nprobe);
    index(*ivf.quantizer, "the coarse quantizer");
    require(ivf.quantizer->d == ivf.d && static_cast<std::size_t>(ivf.quantizer->ntotal) == ivf.nlist,
            "the coarse quantizer holds ", ivf.quantizer->ntotal, " centroids of dimension ",
            ivf.quantizer->d, " for ", ivf.nlist, " lists of dimension ", ivf.d);
    if (const auto* pq = dynamic_cast<const faiss::IndexIVFPQ*>(&ivf)) {
      const faiss::ProductQuantizer& q = pq->pq;
      require(q.d == static_cast<std::size_t>(ivf.d) && q.M >= 1 && q.dsub * q.M == q.d &&
                  q.ksub == (std::size_t{1} << q.nbits) && q.centroids.size() == q.M * q.ksub * q.dsub &&
                  q.code_size == ivf.code_size,
              "the product quantizer (d ", q.d, ", M ", q.M, ", nbits ", q.nbits, ", ", q.centroids.size(),
              " centroid values, ", q.code_size, "-byte codes) does not fit the index");
    } else {
      require(ivf.code_size == static_cast<std::size_t>(ivf.d) * sizeof(float), "IVF-Flat codes of ",
              ivf.code_size, " bytes for dimension ", ivf.d);
    }
    const auto* lists = dynamic_cast<const faiss::ArrayInvertedLists*>(ivf.invlists);
    require(lists != nullptr, "inverted lists of a kind oml-index does not write");
    require(lists->nlist == ivf.nlist && lists->code_size == ivf.code_size &&
                lists->codes.size() == ivf.nlist && lists->ids.size() == ivf.nlist,
            lists->nlist, " inverted lists of ", lists->code_size, "-byte codes for ", ivf.nlist,
            " lists of ", ivf.code_size);
    // Every id is a gallery position, present once: an id out of range is read past the
    // gallery; a repeated one hides the item whose id is missing.
    std::vector<bool> seen(static_cast<std::size_t>(ivf.ntotal), false);
    std::size_t total = 0;
    for (std::size_t l = 0; l < ivf.nlist; ++l) {
      const std::vector<faiss::Index::idx_t>& ids = lists->ids[l];
      require(lists->codes[l].size() == ids.size() * ivf.code_size, "list ", l, " holds ", ids.size(),
              " ids and ", lists->codes[l].size(), " bytes of codes");
      for (const faiss::Index::idx_t id : ids) {
        require(id >= 0 && id < ivf.ntotal, "list ", l, " holds id ", id, ", outside 0..", ivf.ntotal - 1);
        require(!seen[static_cast<std::size_t>(id)], "id ", id, " is in the lists twice");
        seen[static_cast<std::size_t>(id)] = true;
      }
      total += ids.size();
    }
    require(total == static_cast<std::size_t>(ivf.ntotal), "the lists hold ", total, " ids for ", ivf.ntotal,
            " vectors");
  }

  void hnsw(const faiss::IndexHNSW& index) const {
    const faiss::HNSW& g = index.hnsw;
    require(index.storage != nullptr, "an HNSW index without its vectors");
    this->index(*index.storage, "the HNSW index's vectors");
    require(index.storage->d == index.d && index.storage->ntotal == index.ntotal, "the HNSW graph has ",
            index.ntotal, " nodes of dimension ", index.d, ", its vectors ", index.storage->ntotal, " of ",
            index.storage->d);
    const std::vector<int>& cum = g.cum_nneighbor_per_level;
    require(cum.size() >= 2 && cum.size() == g.assign_probas.size() + 1 && cum.front() == 0,
            "the HNSW graph has ", cum.size(), " neighbour counts for ", g.assign_probas.size(), " levels");
    for (std::size_t l = 1; l < cum.size(); ++l) {
      require(cum[l] > cum[l - 1], "the HNSW graph has no neighbours at level ", l - 1);
    }
    for (const double p : g.assign_probas) {
      require(std::isfinite(p) && p >= 0 && p <= 1, "an HNSW level probability of ", p);
    }
    const auto n = static_cast<std::size_t>(index.ntotal);
    require(g.levels.size() == n && g.offsets.size() == n + 1 && g.offsets.front() == 0,
            "the HNSW graph has ", g.levels.size(), " levels and ", g.offsets.size(), " offsets for ", n,
            " nodes");
    int top = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const int level = g.levels[i];
      require(level >= 1 && static_cast<std::size_t>(level) < cum.size(), "node ", i, " has level ", level,
              ", outside 1..", cum.size() - 1);
      top = std::max(top, level);
      // A node's neighbours for all its levels lie at offsets[i], cum[level] of them.
      require(g.offsets[i + 1] >= g.offsets[i] &&
                  g.offsets[i + 1] - g.offsets[i] ==
                      static_cast<std::size_t>(cum[static_cast<std::size_t>(level)]),
              "node ", i, " has offsets ", g.offsets[i], "..", g.offsets[i + 1], " for ", cum[level],
              " neighbours");
    }
    require(g.neighbors.size() == g.offsets.back(), "the HNSW graph has ", g.neighbors.size(),
            " neighbour slots for offsets up to ", g.offsets.back());
    for (const int neighbour : g.neighbors) {
      require(neighbour >= -1 && neighbour < index.ntotal, "an HNSW neighbour ", neighbour, " outside 0..",
              index.ntotal - 1);
    }
    if (n == 0) {
      require(g.entry_point == -1, "an empty HNSW graph with entry point ", g.entry_point);
    } else {
      require(g.entry_point >= 0 && g.entry_point < index.ntotal, "the HNSW entry point ", g.entry_point,
              " is outside 0..", n - 1);
      require(g.max_level == top - 1 && g.levels[static_cast<std::size_t>(g.entry_point)] == top,
              "the HNSW graph's top level is ", g.max_level, ", its nodes reach ", top - 1,
              " and its entry point ", g.levels[static_cast<std::size_t>(g.entry_point)] - 1);
    }
    require(g.efConstruction >= 1 && g.efSearch >= 1 && g.upper_beam >= 1,
            "HNSW search settings ef_construction ", g.efConstruction, ", ef_search ", g.efSearch,
            ", upper_beam ", g.upper_beam);
  }

  std::string file_;
};

}  // namespace

void check_index_structure(const faiss::Index& index, const std::string& file) {
  Checker(file).index(index, "the index");
}

}  // namespace oml::retrieval::detail
