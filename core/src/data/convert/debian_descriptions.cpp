// debian-descriptions: the long package descriptions of an apt Translation-en file (or any file of
// apt stanzas with Description-en: / Description: fields) -> a text dataframe for retrieval:
// each description cut in two halves near its middle sentence end, the halves one label (the
// description), every validation half a query and a gallery item — find the other half of a
// description among all halves. With --val-fraction, a seeded random share of the labels goes
// to validation, unseen in training.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "convert_common.h"
#include "oml/common/error.h"
#include "oml/common/strings.h"
#include "oml/data/transform.h"

namespace oml::data::convert {

namespace {

// Each half keeps at least this many words; shorter descriptions are left out.
constexpr std::size_t kMinHalfWords = 12;

struct Description {
  std::string package;
  std::vector<std::string> words;  // the long description, paragraphs run together
  std::string first_paragraph;     // its words up to the first " ." line
};

std::string joined(const std::vector<std::string>& words, std::size_t from, std::size_t to) {
  std::string out;
  for (std::size_t i = from; i < to; ++i) {
    if (!out.empty()) out += ' ';
    out += words[i];
  }
  return out;
}

// The long descriptions of `file`, in file order. A continuation line starts with a space; " ."
// separates paragraphs (Debian Policy 5.6.13).
std::vector<Description> read_descriptions(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  OML_CHECK(in.good(), DataError, "--src ", file.string(),
            ": cannot be read (expected an apt Translation-en file, e.g. from "
            "`/usr/lib/apt/apt-helper cat-file /var/lib/apt/lists/*_i18n_Translation-en*`)");
  std::vector<Description> out;
  std::string package;
  Description* current = nullptr;
  std::string line;
  int64_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    OML_CHECK(is_valid_utf8(line), DataError, file.string(), ":", number, ": not valid UTF-8");
    if (line.empty()) {  // the end of a stanza
      current = nullptr;
      package.clear();
      continue;
    }
    if (line.front() == ' ' || line.front() == '\t') {
      if (current == nullptr) continue;  // a continuation of another field
      if (trim(line) == ".") {
        if (current->first_paragraph.empty())
          current->first_paragraph = joined(current->words, 0, current->words.size());
        continue;
      }
      std::istringstream words(line);
      for (std::string word; words >> word;) current->words.push_back(std::move(word));
      continue;
    }
    current = nullptr;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string field = line.substr(0, colon);
    if (field == "Package") package = trim(line.substr(colon + 1));
    if (field == "Description-en" || field == "Description") {
      OML_CHECK(!package.empty(), DataError, file.string(), ":", number, ": a ", field,
                " field before its stanza's Package field");
      out.push_back(Description{package, {}, {}});
      current = &out.back();
    }
  }
  OML_CHECK(!out.empty(), DataError, "--src ", file.string(),
            ": holds no Description-en or Description fields (expected apt stanzas: an i18n Translation-en "
            "file, or the output of `apt-cache dumpavail`)");
  return out;
}

// The word index to cut `words` at: after the sentence end nearest the middle with at least
// kMinHalfWords words on each side, else the middle itself.
std::size_t cut_point(const std::vector<std::string>& words) {
  const std::size_t n = words.size();
  std::size_t best = n / 2;
  std::size_t best_distance = n;
  for (std::size_t i = kMinHalfWords; i + kMinHalfWords <= n; ++i) {
    const std::string& previous = words[i - 1];
    const char last = previous.back();
    if (last != '.' && last != '!' && last != '?' && last != ':') continue;
    const std::size_t distance = i > n / 2 ? i - n / 2 : n / 2 - i;
    if (distance < best_distance) {
      best = i;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace

ConvertReport convert_debian_descriptions(const ConvertOptions& options) {
  OML_CHECK(options.val_fraction > 0 && options.val_fraction < 1, UsageError,
            "debian-descriptions needs --val-fraction F in (0, 1): the share of descriptions held out for "
            "validation (e.g. 0.2), got ",
            options.val_fraction);
  std::error_code ec;
  OML_CHECK(fs::is_regular_file(options.src, ec), DataError, "--src ", options.src.string(),
            " is not a file (expected an apt Translation-en file, uncompressed)");
  // One label per distinct description: a text shared by several packages (a library and its
  // -dev package often share their first paragraph and differ in the last), or a half another
  // description has too, would be a second right answer under another label.
  std::vector<std::pair<std::string, std::string>> halves;
  std::unordered_set<std::string> seen;      // halves kept
  std::unordered_set<std::string> openings;  // first paragraphs of the descriptions kept
  for (const Description& d : read_descriptions(options.src)) {
    if (d.words.size() < 2 * kMinHalfWords) continue;
    const std::string& opening =
        d.first_paragraph.empty() ? joined(d.words, 0, d.words.size()) : d.first_paragraph;
    if (!openings.insert(opening).second) continue;
    const std::size_t cut = cut_point(d.words);
    std::string first = joined(d.words, 0, cut);
    std::string second = joined(d.words, cut, d.words.size());
    if (seen.count(first) || seen.count(second)) continue;
    seen.insert(first);
    seen.insert(second);
    halves.emplace_back(std::move(first), std::move(second));
  }
  OML_CHECK(halves.size() >= 4, DataError, "--src ", options.src.string(), ": only ", halves.size(),
            " distinct descriptions of at least ", 2 * kMinHalfWords, " words; expected many more");

  // Validation labels: a seeded shuffle, the first round(fraction * L) of it (as image-folder).
  const auto n_val =
      static_cast<std::size_t>(std::lround(options.val_fraction * static_cast<double>(halves.size())));
  OML_CHECK(n_val >= 1 && n_val < halves.size(), UsageError, "--val-fraction ", options.val_fraction, " of ",
            halves.size(), " descriptions leaves ", n_val, " for validation; expected some in each split");
  std::vector<std::size_t> order(halves.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  KeyedRandom rng(RandomKey{options.seed, 0, 0});
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.next_u64() % i]);
  std::vector<bool> validation(halves.size(), false);
  for (std::size_t i = 0; i < n_val; ++i) validation[order[i]] = true;

  OutputFolder out(options);
  std::vector<Row> rows;
  for (std::size_t label = 0; label < halves.size(); ++label) {
    for (const std::string* text : {&halves[label].first, &halves[label].second}) {
      Row row;
      row.label = static_cast<int64_t>(label);
      row.text = *text;
      row.train = !validation[label];
      row.is_query = row.is_gallery = validation[label];
      rows.push_back(std::move(row));
    }
  }
  apply_limit(rows, options.limit);
  return out.commit(rows);
}

}  // namespace oml::data::convert
