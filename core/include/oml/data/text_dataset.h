#pragma once
// Text datasets: the texts of a text dataframe (a `text` column, docs/data.md#text-dataframes)
// tokenized for a text extractor (Extractor::input() == tokens), as OML's TextLabeledDataset and
// TextQueryGalleryLabeledDataset do with a Hugging Face tokenizer — except that a batch is padded
// to its own longest text (dynamic padding), not every text to a fixed max_length.
//
//   auto tokenizer = prepare_tokenizer(text::Tokenizer::from_file(dir / "tokenizer.json"), 512);
//   auto texts = std::make_shared<TextDataset>(dataframe.train(), tokenizer, TextDatasetOptions{});
//   Loader loader(texts, batches);   // batch->images: packed tokens [B, 3, L]
//
// Items and batches (the packed layout of oml/models/token_batch.h, which the text encoders take):
//   load(i)      row i's encoding, unpadded: int64 [R, n_i] — input ids, attention mask (all 1)
//                and, when options.token_types, token type ids (R = 3; else R = 2);
//   collate(...) the batch padded on the right to its longest text: [B, R, L], L = max n_i, the
//                ids of the padding options.pad_id, its mask and type ids 0.
// Padding goes on the right whatever the tokenizer.json says: the first token stays the text's
// own, which `cls` pooling reads (as OML's HFWrapper does).
//
// Truncation is the tokenizer's (it keeps the post-processor's special tokens, [CLS] ... [SEP]):
// prepare_tokenizer() sets it to the model's length. Metadata (labels, categories, query/gallery
// flags) is the split's, as for images, so samplers, the DDP wrapper and validation handle text
// batches unchanged.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "oml/data/dataframe.h"
#include "oml/data/dataset.h"
#include "oml/text/tokenizer.h"

namespace oml::data {

struct TextDatasetOptions {
  /// The most tokens a text may have, special tokens included: what the model's positions hold.
  /// The tokenizer must truncate to it (prepare_tokenizer).
  int64_t max_tokens = 512;
  /// The id padding carries: the model's pad_token_id (RoBERTa counts its positions by it).
  int64_t pad_id = 0;
  /// Pack the token type ids as a third row ([B, 3, L]); false: [B, 2, L], for models without
  /// token types (DistilBERT).
  bool token_types = true;
  /// Names the texts' file in messages ("data/df.csv").
  std::string source = "the dataframe";
};

/// UsageError naming the field unless max_tokens >= 1 and pad_id >= 0.
void check_options(const TextDatasetOptions& options);

/// `tokenizer` as a TextDataset uses it for a model of `max_tokens` positions: truncation as its
/// tokenizer.json says (strategy, direction) with max_length capped at max_tokens, or, when the
/// file has none, LongestFirst from the right at max_tokens; stride 0 (overflowing windows are
/// not used); padding off (collate() pads each batch). UsageError for max_tokens < 1.
std::shared_ptr<const text::Tokenizer> prepare_tokenizer(text::Tokenizer tokenizer, int64_t max_tokens);

/// The texts of a file of lines (UTF-8, one text per line, '\n' or "\r\n" endings, no header): a
/// DataSplit with `texts` and their 1-based `lines`, no labels — what oml-predict and oml-search
/// embed from a text file. DataError naming the file and the line for a line that is not valid
/// UTF-8 or is empty or blank (nothing to embed), and for a file without any text.
DataSplit read_text_lines(const std::string& file);

/// One text's tokens as a TextDataset item: int64 [R, n] (input ids, attention mask and, with
/// options.token_types, token type ids), through `tokenizer` (prepare_tokenizer's). `place` names
/// the text in messages ("data/df.csv:17: column 'text'", "the request's \"text\""): DataError
/// when the text is not UTF-8 (the tokenizer's) or gives no token at all.
at::Tensor encode_text(const text::Tokenizer& tokenizer, const std::string& text,
                       const TextDatasetOptions& options, const std::string& place);

/// encode_text()'s items padded on the right to the longest: [B, R, L] int64, padding ids
/// options.pad_id, mask and type ids 0. DataError naming `source` and the item's index in
/// `indices` when an item is not int64 [R, n].
at::Tensor pad_text_items(const std::vector<at::Tensor>& items, const std::vector<int64_t>& indices,
                          const TextDatasetOptions& options);

class TextDataset : public Dataset {
 public:
  /// Items are the rows of `split`, which must have texts (DataError naming options.source
  /// otherwise). `tokenizer` must truncate to at most options.max_tokens and not pad
  /// (prepare_tokenizer; UsageError otherwise).
  TextDataset(DataSplit split, std::shared_ptr<const text::Tokenizer> tokenizer, TextDatasetOptions options);
  ~TextDataset() override;

  int64_t size() const override { return static_cast<int64_t>(split_.size()); }
  ItemInfo info(int64_t index) const override;
  /// Row `index`'s encoding, int64 [R, n] (tokenizing is deterministic: `key` is not used).
  /// DataError naming the file, the line and the column when the text gives no token at all (a
  /// tokenizer without special tokens on a text it drops entirely).
  at::Tensor load(int64_t index, const RandomKey& key) const override;
  /// The number of tokens of row `index`'s encoding (what load() gives, before padding): it
  /// tokenizes the text. DataError as load().
  int64_t token_count(int64_t index) const;
  /// load()'s items padded to the longest: [B, R, L] int64. DataError when an item is not
  /// int64 [R, n] (not one of this dataset's).
  at::Tensor collate(const std::vector<at::Tensor>& items,
                     const std::vector<int64_t>& indices) const override;
  const DataSplit& meta() const override { return split_; }

  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  const TextDatasetOptions& options() const { return options_; }
  /// Rows per item: 3 with token type ids, else 2.
  int64_t rows() const { return options_.token_types ? 3 : 2; }

 private:
  /// "data/df.csv:17: column 'text'" — where row `index`'s text comes from, for messages.
  std::string where(int64_t index) const;

  DataSplit split_;
  std::shared_ptr<const text::Tokenizer> tokenizer_;
  TextDatasetOptions options_;
};

}  // namespace oml::data
