#pragma once
// The legacy storage classes (torch.FloatStorage, ...) by which torch.save's pickle names a
// tensor's dtype: read by the unpickler (torch_file.cpp), written by pickle_writer.cpp. All of
// them are on PyTorch's weights-only list of allowed globals.

#include <c10/core/ScalarType.h>

#include <array>
#include <optional>
#include <string_view>
#include <utility>

namespace oml::io::detail {

inline constexpr std::array<std::pair<std::string_view, c10::ScalarType>, 10> kStorageClasses{{
    {"FloatStorage", c10::kFloat},
    {"DoubleStorage", c10::kDouble},
    {"HalfStorage", c10::kHalf},
    {"BFloat16Storage", c10::kBFloat16},
    {"LongStorage", c10::kLong},
    {"IntStorage", c10::kInt},
    {"ShortStorage", c10::kShort},
    {"CharStorage", c10::kChar},
    {"ByteStorage", c10::kByte},
    {"BoolStorage", c10::kBool},
}};

/// The dtype of `torch.<name>`, or nullopt for a storage class oml-cpp does not read.
inline std::optional<c10::ScalarType> storage_dtype(std::string_view name) {
  for (const auto& [storage, dtype] : kStorageClasses) {
    if (storage == name) return dtype;
  }
  return std::nullopt;
}

/// The storage class torch.save names for `dtype`, or nullopt for a dtype it has none for here.
inline std::optional<std::string_view> storage_class(c10::ScalarType dtype) {
  for (const auto& [storage, type] : kStorageClasses) {
    if (type == dtype) return storage;
  }
  return std::nullopt;
}

}  // namespace oml::io::detail
