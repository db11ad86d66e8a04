#pragma once
// The report `oml-sampler` prints (docs/contracts.md#sampler-report): what every rank receives in
// every epoch.

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <memory>
#include <ostream>

#include "oml/ddp/ddp_sampler_wrapper.h"

namespace oml::ddp {

/// The most ranks a report simulates (each is a sampler wrapper in memory).
inline constexpr int64_t kMaxReportedWorld = 65536;

/// {"world_size": W, "epochs": [{"epoch": e, "ranks": [{"rank": r, "batches": [[i, ...], ...]}]}]}
/// for epochs 0..epochs-1, exactly as the pipelines would run them (DDPSamplerWrapper). Indices are
/// rows of the sampled split in dataframe order. Throws UsageError for world outside
/// 1..kMaxReportedWorld or epochs < 1.
nlohmann::json sampler_report(std::shared_ptr<const data::Sampler> sampler, int64_t world, int64_t epochs,
                              const DdpSamplerOptions& options, int64_t seed);

/// The same report as one line of compact JSON (keys in alphabetical order, as nlohmann::json
/// dumps them), written to `out` epoch by epoch and flushed after each: memory stays that of one
/// epoch however many are asked for. Throws RuntimeError when `out` fails (a full disk). With
/// `rows` (the sampled split's, > 0) every batch is checked as training checks it
/// (data::check_batches), so the report never shows batches a run would refuse.
void write_sampler_report(std::ostream& out, std::shared_ptr<const data::Sampler> sampler, int64_t world,
                          int64_t epochs, const DdpSamplerOptions& options, int64_t seed, int64_t rows = 0);

}  // namespace oml::ddp
