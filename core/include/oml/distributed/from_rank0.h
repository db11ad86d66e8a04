#pragma once
// Rank 0's decisions and numbers on every rank, as typed tensors (never as text): what every rank
// must agree on after rank 0 alone decided or computed it.
//
//   const bool stop = distributed::decision_from_rank0(group, device, elapsed >= limit);
//   metrics = distributed::values_from_rank0(group, device, metrics);   // rank 0's, bit for bit
//
// Both are collectives (every rank calls them, in the same order); what ranks other than 0 pass
// is ignored. `device` is where the group's tensors live (the rank's device: CUDA under NCCL);
// results come back on the CPU side. A group of one returns its input without communicating.

#include <map>
#include <string>

#include <c10/core/Device.h>

namespace oml::distributed {

class ProcessGroup;

/// Rank 0's `decision`, in one one-byte broadcast.
bool decision_from_rank0(ProcessGroup& group, const c10::Device& device, bool decision);

/// Rank 0's named values: its names (length-prefixed bytes, so any name travels) and its values in
/// one float64 tensor, so every rank gets the same doubles bit for bit (NaN and infinities
/// included). Four broadcasts; none carries an empty tensor.
std::map<std::string, double> values_from_rank0(ProcessGroup& group, const c10::Device& device,
                                                const std::map<std::string, double>& values);

}  // namespace oml::distributed
