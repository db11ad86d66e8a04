#include "oml/data/sampler.h"

#include <algorithm>

#include "oml/common/error.h"

namespace oml::data {

// Out-of-line destructors anchor the vtables and type information in liboml_core, so that
// plugin samplers (built with hidden visibility) share them with the host.
Sampler::~Sampler() = default;
IndexSampler::~IndexSampler() = default;
BatchSampler::~BatchSampler() = default;

int64_t SamplerContext::label_value(int64_t label) const {
  if (label >= 0 && label < static_cast<int64_t>(label_values.size())) return label_values[label];
  return label;
}

int64_t batch_count(int64_t n, int64_t batch_size, bool drop_last) {
  OML_ASSERT(batch_size > 0 && n >= 0, "batch_size ", batch_size, ", n ", n);
  // Not (n + batch_size - 1) / batch_size: that overflows for a batch_size near INT64_MAX.
  return n / batch_size + (!drop_last && n % batch_size != 0 ? 1 : 0);
}

std::vector<Batch> make_batches(const std::vector<int64_t>& indices, int64_t batch_size, bool drop_last) {
  const auto n = static_cast<int64_t>(indices.size());
  const int64_t count = batch_count(n, batch_size, drop_last);
  std::vector<Batch> out;
  out.reserve(count);
  for (int64_t b = 0; b < count; ++b) {
    const int64_t begin = b * batch_size;
    const int64_t end = std::min(n, begin + batch_size);
    out.emplace_back(indices.begin() + begin, indices.begin() + end);
  }
  return out;
}

namespace {

// The sampler's epoch, its own failures named as the sampler's: an exception that is not an oml
// error (a plugin's std::runtime_error) would otherwise read as an internal error of oml-cpp.
template <typename Draw>
auto drawn(const Sampler& sampler, int64_t epoch, Draw draw) {
  try {
    return draw();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw PluginError("sampler '" + sampler.name() + "' failed to draw epoch " + std::to_string(epoch) +
                      ": " + e.what());
  } catch (...) {
    throw PluginError("sampler '" + sampler.name() + "' failed to draw epoch " + std::to_string(epoch) +
                      ": it threw something that is not a std::exception");
  }
}

}  // namespace

std::vector<Batch> epoch_batches(const Sampler& sampler, int64_t epoch) {
  // A sampler whose epoch disagrees with its size() would give ranks different step counts
  // (a hang under DDP) or a wrong progress bar; catch it here, naming the sampler.
  const int64_t size = sampler.size();  // once: a size() that changes would contradict itself below
  if (sampler.kind() == SamplerKind::batch) {
    std::vector<Batch> batches =
        drawn(sampler, epoch, [&] { return static_cast<const BatchSampler&>(sampler).batches(epoch); });
    OML_CHECK(static_cast<int64_t>(batches.size()) == size, PluginError, "sampler '", sampler.name(),
              "' produced ", batches.size(), " batches for epoch ", epoch, ", but its size() says ", size);
    return batches;
  }
  std::vector<int64_t> indices =
      drawn(sampler, epoch, [&] { return static_cast<const IndexSampler&>(sampler).indices(epoch); });
  OML_CHECK(static_cast<int64_t>(indices.size()) == size, PluginError, "sampler '", sampler.name(),
            "' produced ", indices.size(), " indices for epoch ", epoch, ", but its size() says ", size);
  return make_batches(indices, sampler.batch_size(), sampler.drop_last());
}

std::vector<int64_t> epoch_indices(const IndexSampler& sampler, int64_t epoch) {
  const int64_t size = sampler.size();
  std::vector<int64_t> indices = drawn(sampler, epoch, [&] { return sampler.indices(epoch); });
  OML_CHECK(static_cast<int64_t>(indices.size()) == size, PluginError, "sampler '", sampler.name(),
            "' produced ", indices.size(), " indices for epoch ", epoch, ", but its size() says ", size);
  return indices;
}

void check_batches(const Sampler& sampler, const std::vector<Batch>& batches, int64_t epoch, int64_t rows) {
  for (std::size_t b = 0; b < batches.size(); ++b) {
    OML_CHECK(!batches[b].empty(), PluginError, "sampler '", sampler.name(), "' gave an empty batch (batch ",
              b, " of epoch ", epoch, "); every batch holds at least one row");
    for (const int64_t index : batches[b]) {
      OML_CHECK(index >= 0 && index < rows, PluginError, "sampler '", sampler.name(), "' put row ", index,
                " in batch ", b, " of epoch ", epoch, ", outside the ", rows, " rows it samples from [0, ",
                rows, ")");
    }
  }
}

int64_t batches_per_epoch(const Sampler& sampler) {
  if (sampler.kind() == SamplerKind::batch) return sampler.size();
  return batch_count(sampler.size(), sampler.batch_size(), sampler.drop_last());
}

}  // namespace oml::data
