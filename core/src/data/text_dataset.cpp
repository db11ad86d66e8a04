#include "oml/data/text_dataset.h"

#include <torch/torch.h>

#include <algorithm>
#include <fstream>
#include <utility>

#include "oml/common/error.h"
#include "oml/common/strings.h"

namespace oml::data {

void check_options(const TextDatasetOptions& options) {
  OML_CHECK(options.max_tokens >= 1, UsageError, "text dataset: max_tokens must be >= 1, got ",
            options.max_tokens);
  OML_CHECK(options.pad_id >= 0, UsageError, "text dataset: pad_id must be >= 0, got ", options.pad_id);
}

std::shared_ptr<const text::Tokenizer> prepare_tokenizer(text::Tokenizer tokenizer, int64_t max_tokens) {
  OML_CHECK(max_tokens >= 1, UsageError, "prepare_tokenizer: max_tokens must be >= 1, got ", max_tokens);
  const auto limit = static_cast<size_t>(max_tokens);
  text::TruncationOptions truncation = tokenizer.truncation().value_or(text::TruncationOptions{});
  // A length that leaves no place for the text beside the special tokens would embed every text
  // as the same [CLS] [SEP].
  const size_t special = tokenizer.num_special_tokens_to_add(/*pair=*/false);
  OML_CHECK(!tokenizer.truncation() || truncation.max_length > special, ConfigError, tokenizer.source(),
            ": truncation.max_length is ", truncation.max_length,
            ", which leaves no token of any text beside the ", special,
            " special tokens the post-processor adds; expected at least ", special + 1,
            ", or \"truncation\": null to cut texts at the model's ", max_tokens, " tokens");
  OML_CHECK(limit > special, ConfigError, tokenizer.source(), ": the model takes at most ", max_tokens,
            " tokens, which leaves no token of any text beside the ", special,
            " special tokens the post-processor adds");
  if (!tokenizer.truncation() || truncation.max_length > limit) truncation.max_length = limit;
  truncation.stride = 0;
  tokenizer.set_truncation(truncation);
  tokenizer.set_padding(std::nullopt);
  return std::make_shared<text::Tokenizer>(std::move(tokenizer));
}

TextDataset::TextDataset(DataSplit split, std::shared_ptr<const text::Tokenizer> tokenizer,
                         TextDatasetOptions options)
    : split_(std::move(split)), tokenizer_(std::move(tokenizer)), options_(std::move(options)) {
  check_options(options_);
  OML_CHECK(tokenizer_ != nullptr, UsageError, "TextDataset needs a tokenizer");
  const auto& truncation = tokenizer_->truncation();
  OML_CHECK(truncation && truncation->max_length >= 1 &&
                truncation->max_length <= static_cast<size_t>(options_.max_tokens) && !tokenizer_->padding(),
            UsageError, "TextDataset needs a tokenizer that truncates to at most ", options_.max_tokens,
            " tokens and does not pad (prepare_tokenizer makes one of ", tokenizer_->source(), ")");
  OML_CHECK(split_.texts.size() == split_.size(), DataError, options_.source,
            ": a text dataset needs a 'text' for every row (", split_.texts.size(), " texts for ",
            split_.size(), " rows)",
            split_.has_paths() ? "; these rows are images, which an image extractor reads" : "");
}

TextDataset::~TextDataset() = default;

ItemInfo TextDataset::info(int64_t index) const { return item_info(split_, index); }

std::string TextDataset::where(int64_t index) const {
  return options_.source + ":" + std::to_string(split_.lines[static_cast<std::size_t>(index)]) +
         ": column '" + columns::kText + "'";
}

DataSplit read_text_lines(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  OML_CHECK(in.good(), DataError, file, ": cannot be read (expected a text file, one text per line)");
  DataSplit out;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    OML_CHECK(is_valid_utf8(line), DataError, file, ":", number,
              ": not valid UTF-8 (texts are read as UTF-8, one per line)");
    OML_CHECK(!trim(line).empty(), DataError, file, ":", number,
              ": an empty or blank line; every line is a text to embed (remove it)");
    out.texts.push_back(std::move(line));
    out.lines.push_back(number);
  }
  OML_CHECK(in.eof(), DataError, file, ": reading failed");
  OML_CHECK(!out.texts.empty(), DataError, file, ": holds no text (expected one text per line)");
  return out;
}

at::Tensor encode_text(const text::Tokenizer& tokenizer, const std::string& text,
                       const TextDatasetOptions& options, const std::string& place) {
  const text::Encoding encoding = tokenizer.encode(text, place);
  const auto n = static_cast<int64_t>(encoding.size());
  OML_CHECK(n > 0, DataError, place, ": the text gives no token with the tokenizer ", tokenizer.source(),
            " (it has no special tokens to add and drops every character of this text)");
  const int64_t rows = options.token_types ? 3 : 2;
  at::Tensor item = torch::empty({rows, n}, torch::kInt64);
  int64_t* out = item.data_ptr<int64_t>();
  std::copy(encoding.ids.begin(), encoding.ids.end(), out);
  std::copy(encoding.attention_mask.begin(), encoding.attention_mask.end(), out + n);
  if (rows == 3) std::copy(encoding.type_ids.begin(), encoding.type_ids.end(), out + 2 * n);
  return item;
}

at::Tensor pad_text_items(const std::vector<at::Tensor>& items, const std::vector<int64_t>& indices,
                          const TextDatasetOptions& options) {
  OML_ASSERT(!items.empty() && items.size() == indices.size(), items.size(), " items for ", indices.size(),
             " indices");
  const int64_t rows = options.token_types ? 3 : 2;
  int64_t longest = 0;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const at::Tensor& item = items[i];
    OML_CHECK(item.dim() == 2 && item.size(0) == rows && item.size(1) >= 1 &&
                  item.scalar_type() == torch::kInt64 && item.is_contiguous(),
              DataError, "texts of ", options.source, ": item ", indices[i], " is ", item.sizes(), " ",
              item.scalar_type(), ", expected the int64 [", rows, ", n] tokens of one text");
    longest = std::max(longest, item.size(1));
  }
  const auto batch = static_cast<int64_t>(items.size());
  // Padding: ids pad_id, attention mask 0, token type ids 0.
  at::Tensor packed = torch::zeros({batch, rows, longest}, torch::kInt64);
  int64_t* out = packed.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const at::Tensor& item = items[static_cast<std::size_t>(b)];
    const int64_t n = item.size(1);
    const int64_t* in = item.data_ptr<int64_t>();
    for (int64_t r = 0; r < rows; ++r) {
      int64_t* row = out + (b * rows + r) * longest;
      std::copy(in + r * n, in + (r + 1) * n, row);
      if (r == 0) std::fill(row + n, row + longest, options.pad_id);
    }
  }
  return packed;
}

at::Tensor TextDataset::load(int64_t index, const RandomKey&) const {
  OML_CHECK(index >= 0 && index < size(), UsageError, "dataset index ", index, " is out of range [0, ",
            size(), ")");
  return encode_text(*tokenizer_, split_.texts[static_cast<std::size_t>(index)], options_, where(index));
}

int64_t TextDataset::token_count(int64_t index) const {
  OML_CHECK(index >= 0 && index < size(), UsageError, "dataset index ", index, " is out of range [0, ",
            size(), ")");
  return static_cast<int64_t>(
      tokenizer_->encode(split_.texts[static_cast<std::size_t>(index)], where(index)).size());
}

at::Tensor TextDataset::collate(const std::vector<at::Tensor>& items,
                                const std::vector<int64_t>& indices) const {
  return pad_text_items(items, indices, options_);
}

}  // namespace oml::data
