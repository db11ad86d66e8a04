#pragma once
// Config values written as Python's client libraries write them. The offline formats of Neptune
// and ClearML keep a value the tracker does not type (a list, None, NaN) as the text Python made
// of it: Neptune's stringify_unsupported stores str(value), ClearML's Task.connect stores
// json.dumps(value) for lists and dicts and str(value) for scalars. A user comparing a run logged
// by OML's Python pipeline with one logged by oml-cpp sees the same text. Private to the report
// layer; needs nothing of LibTorch.

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace oml::report::detail {

/// repr(x) of a Python float: the shortest digits that read back as `x`, in fixed notation for
/// decimal exponents -4..15 ("0.0001", "100.0") and scientific otherwise ("1e-05", "1e+16");
/// "nan", "inf", "-inf".
std::string python_float_repr(double x);

/// repr() of the Python value that `value` loads as (dict, list, str, int, float, bool, None):
/// "{'a': [1, 0.5]}", "'it\\'s'" quoted as Python quotes it, "None", "True".
std::string python_repr(const nlohmann::json& value);

/// str(): a string as it is, anything else as python_repr().
std::string python_str(const nlohmann::json& value);

/// json.dumps(value) with Python's defaults: ", " and ": " separators, every non-ASCII
/// character escaped (\uXXXX, surrogate pairs above U+FFFF), floats as repr() and NaN, Infinity,
/// -Infinity for the non-finite ones.
std::string python_json_dumps(const nlohmann::json& value);

}  // namespace oml::report::detail
