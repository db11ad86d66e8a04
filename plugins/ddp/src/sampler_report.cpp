#include "oml/ddp/sampler_report.h"

#include <nlohmann/json.hpp>

#include <sstream>

#include "oml/common/error.h"

namespace oml::ddp {

void write_sampler_report(std::ostream& out, std::shared_ptr<const data::Sampler> sampler, int64_t world,
                          int64_t epochs, const DdpSamplerOptions& options, int64_t seed, int64_t rows) {
  // One wrapper per simulated rank is kept: 2e9 of them once ended in an allocation failure.
  OML_CHECK(world >= 1 && world <= kMaxReportedWorld, UsageError, "--world-size must be 1 to ",
            kMaxReportedWorld, ", got ", world);
  OML_CHECK(epochs >= 1, UsageError, "--epochs must be >= 1, got ", epochs);
  std::vector<std::unique_ptr<DDPSamplerWrapper>> ranks;
  for (int64_t r = 0; r < world; ++r)
    ranks.push_back(std::make_unique<DDPSamplerWrapper>(sampler, options, r, world, seed));

  out << "{\"epochs\":[";
  for (int64_t e = 0; e < epochs; ++e) {
    nlohmann::json epoch;
    epoch["epoch"] = e;
    epoch["ranks"] = nlohmann::json::array();
    for (int64_t r = 0; r < world; ++r) {
      const std::vector<data::Batch> batches = ranks[r]->batches(e);
      if (rows > 0) data::check_batches(*sampler, batches, e, rows);
      epoch["ranks"].push_back({{"rank", r}, {"batches", batches}});
    }
    out << (e > 0 ? "," : "") << epoch.dump();
    out.flush();
    OML_CHECK(out.good(), RuntimeError, "writing the sampler report failed at epoch ", e, " (disk full?)");
  }
  out << "],\"world_size\":" << world << "}\n";
  out.flush();
  OML_CHECK(out.good(), RuntimeError, "writing the sampler report failed (disk full?)");
}

nlohmann::json sampler_report(std::shared_ptr<const data::Sampler> sampler, int64_t world, int64_t epochs,
                              const DdpSamplerOptions& options, int64_t seed) {
  std::ostringstream text;
  write_sampler_report(text, std::move(sampler), world, epochs, options, seed);
  return nlohmann::json::parse(text.str());
}

}  // namespace oml::ddp
