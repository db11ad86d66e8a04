#pragma once
// Internal: a Faiss index read from a file checked before anything searches it. Faiss's reader
// trusts the file: a graph entry point, an offset or a list id out of range is read as it is
// and dereferenced by the first search (SIGSEGV), and duplicate ids silently hide items. An
// index folder's faiss.index is written by oml-index, so a damaged one is disk damage or an edit.

#include <faiss/Index.h>

#include <string>

namespace oml::retrieval::detail {

/// Checks what Faiss's searches and adds index by: a flat index's codes (ntotal × code_size),
/// an IVF index's quantizer (nlist centroids of dimension d), its lists (codes and ids of equal
/// length, every id in [0, ntotal) exactly once) and its product quantizer, an HNSW index's
/// levels, offsets, neighbours, entry point and storage. DataError "`file`: corrupt Faiss index:
/// <what>" on the first problem; kinds other than those oml-index writes are refused.
void check_index_structure(const faiss::Index& index, const std::string& file);

}  // namespace oml::retrieval::detail
