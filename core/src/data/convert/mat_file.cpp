// MAT v5 files read by libmatio (matio.h). libmatio parses the file; this file turns its variables
// into MatValue and checks what libmatio leaves to its caller: it reports most problems only
// through a log function and may hand back arrays whose data it could not read (a missing
// struct field, a char array shorter than its dimensions), so every array is checked before it
// is used, and a problem becomes a DataError naming the file and the variable.
#include "mat_file.h"

#include <matio.h>

#include <fstream>
#include <memory>
#include <mutex>

#include "oml/common/error.h"

namespace oml::data::convert {

namespace {

// ---- libmatio's messages -----------------------------------------------------------------

// libmatio has one process-wide log function; it is set once to keep the messages of the
// calling thread until the read that caused them is judged.
thread_local std::string matio_messages;
thread_local bool matio_failed = false;

void keep_matio_message(int level, char* message) {
  if ((level & (MATIO_LOG_LEVEL_ERROR | MATIO_LOG_LEVEL_CRITICAL | MATIO_LOG_LEVEL_WARNING)) == 0) return;
  if ((level & (MATIO_LOG_LEVEL_ERROR | MATIO_LOG_LEVEL_CRITICAL)) != 0) matio_failed = true;
  if (!matio_messages.empty()) matio_messages += "; ";
  matio_messages += message != nullptr ? message : "(no message)";
}

// Starts collecting libmatio's messages for one read.
void start_matio_log() {
  static std::once_flag once;
  std::call_once(once, [] { Mat_LogInitFunc("oml", keep_matio_message); });
  matio_messages.clear();
  matio_failed = false;
}

// " (libmatio: ...)" when libmatio said something, else "".
std::string matio_said() { return matio_messages.empty() ? "" : " (libmatio: " + matio_messages + ")"; }

struct MatClose {
  void operator()(mat_t* mat) const { Mat_Close(mat); }
};
struct VarFree {
  void operator()(matvar_t* var) const { Mat_VarFree(var); }
};

// ---- One variable ----------------------------------------------------------------------------

// Where a problem is: the file and the variable's path in it ("annotations(3).bbox_x1").
class Place {
 public:
  Place(const std::string& file, std::string path, int depth = 0)
      : file_(file), path_(std::move(path)), depth_(depth) {}
  Place element(int64_t i) const { return {file_, path_ + "(" + std::to_string(i + 1) + ")", depth_ + 1}; }
  Place field(const std::string& name) const { return {file_, path_ + "." + name, depth_ + 1}; }
  Place cell(int64_t i) const { return {file_, path_ + "{" + std::to_string(i + 1) + "}", depth_ + 1}; }
  /// Steps (elements, fields, cells) from the variable to here.
  int depth() const { return depth_; }

  template <class... Args>
  [[noreturn]] void fail(const Args&... what) const {
    throw DataError(::oml::detail::concat(file_, ": variable '", path_, "': ", what..., matio_said()));
  }

 private:
  const std::string& file_;
  std::string path_;
  int depth_;
};

int64_t element_count(const matvar_t& var) {
  if (var.rank <= 0 || var.dims == nullptr) return 0;
  int64_t n = 1;
  for (int d = 0; d < var.rank; ++d) n *= static_cast<int64_t>(var.dims[d]);
  return n;
}

// The child arrays of a struct (count x fields, element-major) or a cell array: libmatio keeps
// them as an array of matvar_t pointers, any of which may be null where it could not read one.
matvar_t* const* children(const matvar_t& var, int64_t n, const Place& place) {
  if (n == 0) return nullptr;
  if (var.data == nullptr || var.data_size != static_cast<int>(sizeof(matvar_t*)) ||
      var.nbytes < static_cast<std::size_t>(n) * sizeof(matvar_t*)) {
    place.fail("the MAT file is corrupt (", n, " arrays expected, their data could not be read)");
  }
  return static_cast<matvar_t* const*>(var.data);
}

// The real part of a numeric array's data (a complex array keeps its parts apart).
const void* real_data(const matvar_t& var) {
  if (var.isComplex) {
    const auto* parts = static_cast<const mat_complex_split_t*>(var.data);
    return parts != nullptr ? parts->Re : nullptr;
  }
  return var.data;
}

template <class T>
void append_as_double(const void* data, int64_t n, std::vector<double>& out) {
  const T* values = static_cast<const T*>(data);
  out.reserve(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<double>(values[i]));
}

std::vector<double> numbers_of(const matvar_t& var, int64_t n, const Place& place) {
  std::vector<double> out;
  if (n == 0) return out;
  const void* data = real_data(var);
  if (data == nullptr || var.data_size <= 0 || var.nbytes != static_cast<std::size_t>(n) * var.data_size) {
    place.fail("the MAT file is corrupt (the data of ", n, " numbers could not be read)");
  }
  switch (var.class_type) {
    case MAT_C_DOUBLE:
      append_as_double<double>(data, n, out);
      break;
    case MAT_C_SINGLE:
      append_as_double<float>(data, n, out);
      break;
    case MAT_C_INT8:
      append_as_double<int8_t>(data, n, out);
      break;
    case MAT_C_UINT8:
      append_as_double<uint8_t>(data, n, out);
      break;
    case MAT_C_INT16:
      append_as_double<int16_t>(data, n, out);
      break;
    case MAT_C_UINT16:
      append_as_double<uint16_t>(data, n, out);
      break;
    case MAT_C_INT32:
      append_as_double<int32_t>(data, n, out);
      break;
    case MAT_C_UINT32:
      append_as_double<uint32_t>(data, n, out);
      break;
    case MAT_C_INT64:
      append_as_double<int64_t>(data, n, out);
      break;
    case MAT_C_UINT64:
      append_as_double<uint64_t>(data, n, out);
      break;
    default:
      place.fail("MAT array class ", static_cast<int>(var.class_type), " is not numeric");
  }
  return out;
}

void append_utf8(uint32_t code_point, std::string& out) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

// A char array's characters in storage order, as UTF-8: MATLAB writes UTF-16 code units (ASCII
// text comes out byte for byte), other writers UTF-8 or bytes.
std::string text_of(const matvar_t& var, int64_t n, const Place& place) {
  if (n == 0) return {};
  const bool bytes = var.data_type == MAT_T_UTF8 || var.data_type == MAT_T_UINT8;
  const bool units = var.data_type == MAT_T_UINT16 || var.data_type == MAT_T_UTF16;
  if (!bytes && !units)
    place.fail("character data of MAT type ", static_cast<int>(var.data_type), " is not supported");
  // libmatio leaves the data unread (zeros) when it is shorter than the dimensions say.
  const std::size_t unit = units ? 2 : 1;
  if (var.data == nullptr || var.nbytes < static_cast<std::size_t>(n) * unit) {
    place.fail("the MAT file is corrupt (", n, " characters expected, ", var.nbytes, " bytes of them found)");
  }
  if (bytes) return std::string(static_cast<const char*>(var.data), var.nbytes);
  const auto* code_units = static_cast<const uint16_t*>(var.data);
  const std::size_t count = var.nbytes / 2;
  std::string out;
  for (std::size_t i = 0; i < count; ++i) {
    uint32_t c = code_units[i];
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < count && code_units[i + 1] >= 0xDC00 &&
        code_units[i + 1] <= 0xDFFF) {
      c = 0x10000 + ((c - 0xD800) << 10) + (code_units[i + 1] - 0xDC00);
      ++i;
    } else if (c >= 0xD800 && c <= 0xDFFF) {
      place.fail("the characters are not valid UTF-16 (a lone surrogate at character ", i + 1, ")");
    }
    append_utf8(c, out);
  }
  return out;
}

const char* unsupported_class_name(matio_classes cls) {
  switch (cls) {
    case MAT_C_SPARSE:
      return " (sparse)";
    case MAT_C_OBJECT:
      return " (object)";
    case MAT_C_FUNCTION:
      return " (function handle)";
    case MAT_C_OPAQUE:
      return " (opaque)";
    default:
      return "";
  }
}

// The datasets' annotation files nest a few levels (a struct array of fields); values are
// converted by recursion, which a crafted file nested thousands deep would take past the stack.
constexpr int kMaxMatNesting = 64;

MatValue to_value(const matvar_t* var, const Place& place) {
  if (var == nullptr) place.fail("the MAT file is corrupt (the array could not be read)");
  if (place.depth() > kMaxMatNesting) {
    place.fail("structs and cells nested more than ", kMaxMatNesting,
               " levels deep, which no dataset's annotations are");
  }
  MatValue value;
  const int64_t n = element_count(*var);
  if (var->class_type == MAT_C_EMPTY) return value;  // an empty [] field
  for (int d = 0; d < var->rank && var->dims != nullptr; ++d)
    value.dims.push_back(static_cast<int64_t>(var->dims[d]));
  switch (var->class_type) {
    case MAT_C_STRUCT: {
      value.kind = MatValue::Kind::structure;
      const unsigned fields = Mat_VarGetNumberOfFields(const_cast<matvar_t*>(var));
      char* const* names = Mat_VarGetStructFieldnames(var);
      if (fields > 0 && names == nullptr)
        place.fail("the MAT file is corrupt (the struct has no field names)");
      for (unsigned f = 0; f < fields; ++f)
        value.field_names.emplace_back(names[f] != nullptr ? names[f] : "");
      matvar_t* const* arrays = children(*var, n * fields, place);
      for (int64_t i = 0; i < n; ++i) {
        for (unsigned f = 0; f < fields; ++f) {
          value.elements.push_back(
              to_value(arrays[i * fields + f], place.element(i).field(value.field_names[f])));
        }
      }
      break;
    }
    case MAT_C_CELL: {
      value.kind = MatValue::Kind::cell;
      matvar_t* const* arrays = children(*var, n, place);
      for (int64_t i = 0; i < n; ++i) value.elements.push_back(to_value(arrays[i], place.cell(i)));
      break;
    }
    case MAT_C_CHAR:
      value.kind = MatValue::Kind::text;
      value.text = text_of(*var, n, place);
      break;
    case MAT_C_DOUBLE:
    case MAT_C_SINGLE:
    case MAT_C_INT8:
    case MAT_C_UINT8:
    case MAT_C_INT16:
    case MAT_C_UINT16:
    case MAT_C_INT32:
    case MAT_C_UINT32:
    case MAT_C_INT64:
    case MAT_C_UINT64:
      value.kind = MatValue::Kind::numeric;
      value.numbers = numbers_of(*var, n, place);
      break;
    default:
      place.fail("MAT array class ", static_cast<int>(var->class_type),
                 unsupported_class_name(var->class_type), " is not supported");
  }
  return value;
}

// MATLAB 5 MAT files begin with a 116-byte text "MATLAB 5.0 MAT-file...", 8 bytes of subsystem
// offset, the version 0x0100 and the endian indicator "IM" (little-endian). libmatio also opens
// MATLAB 4, 7.3 (HDF5) and big-endian files; the converters take what the datasets ship.
void check_header(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  OML_CHECK(static_cast<bool>(in), DataError, "cannot open ", file);
  char header[128];
  in.read(header, sizeof(header));
  OML_CHECK(in.gcount() == static_cast<std::streamsize>(sizeof(header)), DataError, file,
            " is too short to be a MAT file");
  OML_CHECK(std::string(header, 10) == "MATLAB 5.0" && header[126] == 'I' && header[127] == 'M', DataError,
            file,
            " is not a little-endian MATLAB 5 MAT file (MATLAB 7.3 / HDF5 files are not supported: save with "
            "-v7)");
}

}  // namespace

int64_t MatValue::count() const {
  int64_t n = dims.empty() ? 0 : 1;
  for (int64_t d : dims) n *= d;
  return n;
}

const MatValue& MatValue::field(int64_t i, const std::string& name, const std::string& file) const {
  OML_CHECK(kind == Kind::structure, DataError, file, ": expected a struct array with field '", name, "'");
  for (std::size_t f = 0; f < field_names.size(); ++f) {
    if (field_names[f] == name) return elements.at(i * field_names.size() + f);
  }
  std::string known;
  for (const auto& field : field_names) known += (known.empty() ? "" : ", ") + field;
  throw DataError(file + ": the struct has no field '" + name + "' (fields: " + known + ")");
}

double MatValue::scalar(const std::string& what) const {
  OML_CHECK(kind == Kind::numeric && numbers.size() == 1, DataError, what, ": expected one number");
  return numbers[0];
}

std::map<std::string, MatValue> read_mat_file(const std::filesystem::path& path) {
  const std::string file = path.string();
  check_header(file);
  start_matio_log();
  const std::unique_ptr<mat_t, MatClose> mat(Mat_Open(file.c_str(), MAT_ACC_RDONLY));
  OML_CHECK(mat != nullptr, DataError, "cannot open ", file, " as a MAT file", matio_said());
  std::size_t count = 0;
  char* const* names = Mat_GetDir(mat.get(), &count);
  OML_CHECK(!matio_failed && (count == 0 || names != nullptr), DataError, file,
            ": the MAT file is corrupt (its variables cannot be listed)", matio_said());
  std::map<std::string, MatValue> variables;
  for (std::size_t i = 0; i < count; ++i) {
    const std::string name = names[i] != nullptr ? names[i] : "";
    if (variables.count(name) > 0) continue;  // the first of two variables with one name, as Mat_VarRead
    const Place place(file, name);
    const std::unique_ptr<matvar_t, VarFree> var(Mat_VarRead(mat.get(), name.c_str()));
    if (var == nullptr || matio_failed) place.fail("the MAT file is corrupt (the variable cannot be read)");
    variables.emplace(name, to_value(var.get(), place));
  }
  return variables;
}

}  // namespace oml::data::convert
