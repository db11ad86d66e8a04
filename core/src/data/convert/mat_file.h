#pragma once
// MATLAB level-5 MAT files read through libmatio (internal to the converters: CARS196 ships its
// annotations as cars_annos.mat). Gives what dataset annotations use as plain values: numeric
// arrays, char arrays (as UTF-8), struct arrays and cell arrays, zlib-compressed or not,
// little-endian. Sparse, object and function-handle arrays are reported as unsupported.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace oml::data::convert {

struct MatValue {
  enum class Kind { numeric, text, structure, cell, empty };
  Kind kind = Kind::empty;
  std::vector<int64_t> dims;
  std::vector<double> numbers;           ///< numeric: column-major values (real part)
  std::string text;                      ///< text: the characters, UTF-8 (MATLAB's UTF-16 converted)
  std::vector<std::string> field_names;  ///< structure
  std::vector<MatValue> elements;        ///< structure: element-major, field-minor; cell: elements

  int64_t count() const;  ///< number of elements (product of dims)
  /// Field `name` of struct element `i`; throws DataError naming `file` when absent.
  const MatValue& field(int64_t i, const std::string& name, const std::string& file) const;
  /// The single number of a 1x1 numeric value; throws DataError naming `what` otherwise.
  double scalar(const std::string& what) const;
};

/// Reads every variable of a little-endian MAT v5 file. Throws DataError naming the file (and
/// the variable, "annotations(3).bbox_x1", where one is at fault) for anything else: MAT v4 and
/// v7.3 (HDF5) files, truncated or corrupt data, unsupported array classes.
std::map<std::string, MatValue> read_mat_file(const std::filesystem::path& path);

}  // namespace oml::data::convert
