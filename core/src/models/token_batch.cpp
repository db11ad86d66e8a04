#include "oml/models/token_batch.h"

#include <torch/torch.h>

#include <sstream>

#include "oml/common/error.h"

namespace oml::models {
namespace {

std::string shape(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

}  // namespace

at::Tensor pack_tokens(const TokenBatch& batch) {
  std::vector<at::Tensor> parts = {batch.input_ids, batch.attention_mask};
  if (batch.token_type_ids.defined()) parts.push_back(batch.token_type_ids);
  for (const auto& part : parts) {
    OML_CHECK(part.defined() && part.dim() == 2 && part.sizes() == batch.input_ids.sizes(), UsageError,
              "pack_tokens: input ids, attention mask and token type ids must all be [B, L] alike, got ",
              part.defined() ? shape(part) : std::string("none"), " next to input ids ",
              shape(batch.input_ids));
    OML_CHECK(!at::isFloatingType(part.scalar_type()) && part.scalar_type() != at::kBool, UsageError,
              "pack_tokens: token tensors must be integers, got ", part.scalar_type());
  }
  return torch::stack(parts, 1).to(at::kLong);
}

void check_token_batch(const TokenBatch& b, const std::string& who) {
  OML_CHECK(
      b.input_ids.defined() && b.input_ids.dim() == 2 && b.input_ids.size(0) >= 1 && b.input_ids.size(1) >= 1,
      DataError, who, ": expected input ids [B, L] with B, L >= 1, got ",
      b.input_ids.defined() ? shape(b.input_ids) : std::string("none"));
  std::vector<std::pair<const char*, at::Tensor>> parts = {{"input ids", b.input_ids},
                                                           {"attention mask", b.attention_mask}};
  if (b.token_type_ids.defined()) parts.emplace_back("token type ids", b.token_type_ids);
  for (const auto& [what, part] : parts) {
    OML_CHECK(part.defined() && part.sizes() == b.input_ids.sizes(), DataError, who, ": the ", what, " are ",
              part.defined() ? shape(part) : std::string("missing"), ", the input ids ", shape(b.input_ids));
    OML_CHECK(part.scalar_type() == at::kLong, DataError, who, ": the ", what, " must be int64, got ",
              part.scalar_type());
  }
  const auto mask = b.attention_mask;
  const auto bad = mask.ne(0).logical_and(mask.ne(1));
  if (bad.any().item<bool>()) {
    const auto where = bad.nonzero()[0];
    throw DataError(::oml::detail::concat(who, ": attention mask values must be 0 or 1, got ",
                                          mask.index({where[0], where[1]}).item<int64_t>(), " in row ",
                                          where[0].item<int64_t>()));
  }
  const auto empty = mask.sum(1).eq(0);
  if (empty.any().item<bool>()) {
    throw DataError(
        ::oml::detail::concat(who, ": row ", empty.nonzero()[0][0].item<int64_t>(),
                              " of the attention mask has no token (a text must have at least one, e.g. "
                              "the tokenizer's [CLS])"));
  }
}

TokenBatch unpack_tokens(const at::Tensor& packed, const std::string& who) {
  // A float batch is what the image pipelines feed: say so rather than only that its shape is off.
  const bool images = packed.defined() && at::isFloatingType(packed.scalar_type());
  OML_CHECK(
      packed.defined() && packed.dim() == 3 && (packed.size(1) == 2 || packed.size(1) == 3), DataError, who,
      ": expected packed tokens [B, 2 | 3, L] (input ids, attention mask, optionally token type ids), got ",
      packed.defined() ? shape(packed) : std::string("none"),
      images ? std::string(" floats (an image batch: a text extractor takes tokenised texts)")
             : std::string());
  OML_CHECK(!at::isFloatingType(packed.scalar_type()) && packed.scalar_type() != at::kBool, DataError, who,
            ": expected integer token ids, got a ", packed.scalar_type(),
            " tensor (is an image extractor's input going to a text extractor?)");
  const auto ids = packed.to(at::kLong);
  TokenBatch batch;
  batch.input_ids = ids.select(1, 0);
  batch.attention_mask = ids.select(1, 1);
  if (ids.size(1) == 3) batch.token_type_ids = ids.select(1, 2);
  check_token_batch(batch, who);
  return batch;
}

}  // namespace oml::models
