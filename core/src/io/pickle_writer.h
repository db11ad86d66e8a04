#pragma once
// Serialises an IValue the way Python's `torch.save` does (pickle protocol 2 in PyTorch's zip
// container), so that PyTorch 2.6+'s default `torch.load(f)` — `weights_only=True` — opens every
// file oml-cpp writes.
//
// LibTorch's own torch::pickle_save tags every typed dict and list with
// `torch.jit._pickle.restore_type_tag`, a global that the weights-only unpickler refuses. This
// writer emits only what torch.save emits for plain data: dicts, lists, tuples, None, bools,
// ints, floats, strings, and tensors as `torch._utils._rebuild_tensor_v2` over persistent
// storages (`torch.FloatStorage`, ...), each in its own `data/<n>` record. It depends on no
// LibTorch version.

#include <ATen/core/ivalue.h>

#include <string>

namespace oml::io::detail {

/// The bytes of a torch.save zip file holding `value`. InternalError for an IValue kind that
/// torch.save's plain-data subset has no form for (objects, futures, ...) or a dict key that is
/// neither a string nor an integer.
std::string pickle_to_zip(const c10::IValue& value);

}  // namespace oml::io::detail
