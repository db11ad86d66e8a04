#pragma once
// The input of text extractors (Extractor::input() == ExtractorInput::tokens): a tokenizer's
// output for a batch, packed into the one tensor that Extractor::forward takes.
//
//   packed[:, 0, :]  input ids
//   packed[:, 1, :]  attention mask (1: a token, 0: padding)
//   packed[:, 2, :]  token type ids (optional: [B, 2, L] means all zeros, as transformers assumes)
//
// One int64 tensor [B, 2 | 3, L] rather than a struct, so that the loader, the device moves,
// DDP's batches and oml-serve's micro-batches handle text exactly as they handle images.

#include <ATen/core/Tensor.h>

#include <string>

namespace oml::models {

struct TokenBatch {
  at::Tensor input_ids;       ///< int64 [B, L]
  at::Tensor attention_mask;  ///< int64 [B, L]: 1 for tokens, 0 for padding
  at::Tensor token_type_ids;  ///< int64 [B, L], or undefined: all zeros
};

/// [B, 2, L] or, with token type ids, [B, 3, L] int64. UsageError when the parts are not all
/// [B, L] (the same B and L) or not integers.
at::Tensor pack_tokens(const TokenBatch& batch);

/// The parts of a packed batch (views of it when it is int64, else converted). DataError naming
/// `who` (the extractor) when `packed` is not an integer tensor [B, 2 | 3, L], or its parts fail
/// check_token_batch.
TokenBatch unpack_tokens(const at::Tensor& packed, const std::string& who);

/// DataError naming `who` unless: the parts are int64 [B, L] with B, L >= 1 (token_type_ids may
/// be undefined), every mask value is 0 or 1, and every row has at least one token (a text of
/// only padding has no state to pool).
void check_token_batch(const TokenBatch& batch, const std::string& who);

}  // namespace oml::models
